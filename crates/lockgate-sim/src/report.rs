//! The summary `lockgate simulate` prints: as JSON (`-o json`, api.md "File formats") and
//! as a table for people.
//!
//! JSON keys, in this order: `jobs`, `makespan_s`, `wait_s` `{p50, p95, max}`, `scopes`
//! `[{scope, limit, peak}]` (the contract of api.md), then the additive keys `nodes`
//! `[{node, slots, jobs, run_s, busy}]`, `unfinished`, `lower_bound_s`, `lower_bound_by`
//! and, with `--compare`, `compare: {<baseline>: {jobs, makespan_s, wait_s, scopes, nodes,
//! unfinished}}`.
//!
//! Definitions:
//! - `makespan_s`: from time 0 of the workload to the last job's end;
//! - wait: admission (prepare start of a two-stage job, else start) minus submit;
//!   percentiles by nearest rank over the jobs that were admitted;
//! - `busy`: a node's run-slot utilisation, `sum of run time / (slots * makespan)`; for an
//!   unlimited node, the fraction of the makespan with at least one job running;
//! - `unfinished`: jobs never admitted or that did not succeed.

use crate::bound::LowerBound;
use crate::input::ms_to_secs;
use crate::sim::Run;
use lockgate_core::JobState;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A scope's peak count against its limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopePeak {
    /// Scope name (policy.md, "Scope names").
    pub scope: String,
    /// Limit; `None` (JSON `null`) when unlimited.
    pub limit: Option<u64>,
    /// Highest count reached.
    pub peak: u64,
}

/// Wait percentiles in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Waits {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Longest wait.
    pub max: f64,
}

/// How busy a node's run slots were.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeBusy {
    /// Node name.
    pub node: String,
    /// Run slots; `None` (JSON `null`) when unlimited.
    pub slots: Option<u32>,
    /// Jobs that ran on it.
    pub jobs: usize,
    /// Total run time of those jobs, seconds.
    pub run_s: f64,
    /// Run-slot utilisation over the makespan, 0..=1 (see the module docs).
    pub busy: f64,
}

/// One scheduler's result on a workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Jobs in the workload.
    pub jobs: usize,
    /// Time of the last end, seconds from 0.
    pub makespan_s: f64,
    /// Waits for admission.
    pub wait_s: Waits,
    /// Every scope a job touched, with its peak.
    pub scopes: Vec<ScopePeak>,
    /// Per-node run-slot utilisation.
    pub nodes: Vec<NodeBusy>,
    /// Jobs that did not succeed (never admitted, or ended otherwise).
    pub unfinished: usize,
    /// Run time over run time alone, for the jobs that ran under the contention model
    /// (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<Slowdown>,
}

/// Per-job slowdown (actual run / run alone) percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slowdown {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Largest.
    pub max: f64,
}

impl Slowdown {
    /// Over the succeeded jobs of `run` that have a run time alone; `None` when none has.
    pub fn of(run: &Run) -> Option<Slowdown> {
        let mut v: Vec<u64> = run
            .jobs
            .iter()
            .filter(|r| r.outcome == Some(JobState::Succeeded))
            .filter_map(|r| match (r.started_ms, r.finished_ms, r.run_alone_ms) {
                // In ten-thousandths, so the nearest-rank percentile works on integers.
                (Some(s), Some(f), Some(a)) if a > 0 => {
                    Some(((f - s) as f64 / a as f64 * 10_000.0).round() as u64)
                }
                _ => None,
            })
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let x = |q: f64| percentile(&v, q) as f64 / 10_000.0;
        Some(Slowdown {
            p50: x(0.5),
            p95: x(0.95),
            max: x(1.0),
        })
    }
}

/// What `lockgate simulate` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// lockgate's result.
    #[serde(flatten)]
    pub lockgate: Summary,
    /// The lower bound on the makespan ([`crate::bound`]).
    pub lower_bound_s: f64,
    /// The constraint that sets the bound.
    pub lower_bound_by: String,
    /// Baselines by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub compare: BTreeMap<String, Summary>,
}

/// Nearest-rank percentile of sorted values (`q` in 0..=1).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    lockgate_core::durations::quantile(sorted, q)
}

/// Rounds to 4 decimals (fractions) so the JSON stays readable and stable.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Length of the union of intervals.
fn union_len(spans: &[(u64, u64)]) -> u64 {
    let mut spans = spans.to_vec();
    spans.sort_unstable();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (a, b) in spans {
        cur = match cur {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

impl Summary {
    /// Summarises a run.
    pub fn from_run(run: &Run) -> Summary {
        let makespan = run
            .jobs
            .iter()
            .filter_map(|r| r.finished_ms)
            .max()
            .unwrap_or(0);
        let mut waits: Vec<u64> = run
            .jobs
            .iter()
            .filter_map(|r| r.admitted_ms.map(|a| a.saturating_sub(r.submitted_ms)))
            .collect();
        waits.sort_unstable();
        let unfinished = run
            .jobs
            .iter()
            .filter(|r| r.outcome != Some(JobState::Succeeded))
            .count();
        let mut spans_of: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        for r in &run.jobs {
            if let (Some(node), Some(s), Some(f)) = (&r.node, r.started_ms, r.finished_ms) {
                spans_of.entry(node.as_str()).or_default().push((s, f));
            }
        }
        let nodes = run
            .nodes
            .iter()
            .map(|n| {
                let spans = spans_of.remove(n.name.as_str()).unwrap_or_default();
                let run_ms: u64 = spans.iter().map(|(a, b)| b - a).sum();
                let busy = match n.slots {
                    _ if makespan == 0 => 0.0,
                    Some(0) => 0.0,
                    Some(s) => run_ms as f64 / (f64::from(s) * makespan as f64),
                    None => union_len(&spans) as f64 / makespan as f64,
                };
                NodeBusy {
                    node: n.name.clone(),
                    slots: n.slots,
                    jobs: spans.len(),
                    run_s: ms_to_secs(run_ms),
                    busy: round4(busy),
                }
            })
            .collect();
        Summary {
            jobs: run.jobs.len(),
            makespan_s: ms_to_secs(makespan),
            wait_s: Waits {
                p50: ms_to_secs(percentile(&waits, 0.50)),
                p95: ms_to_secs(percentile(&waits, 0.95)),
                max: ms_to_secs(waits.last().copied().unwrap_or(0)),
            },
            scopes: run.scopes.clone(),
            nodes,
            unfinished,
            slowdown: Slowdown::of(run),
        }
    }
}

impl Report {
    /// Puts lockgate's summary, the bound and the baselines together.
    pub fn new(
        lockgate: Summary,
        bound: &LowerBound,
        compare: BTreeMap<String, Summary>,
    ) -> Report {
        Report {
            lockgate,
            lower_bound_s: ms_to_secs(bound.ms),
            lower_bound_by: bound.by.clone(),
            compare,
        }
    }

    /// lockgate's makespan over the lower bound (1.0 = provably optimal).
    pub fn bound_ratio(&self) -> f64 {
        if self.lower_bound_s > 0.0 {
            self.lockgate.makespan_s / self.lower_bound_s
        } else {
            1.0
        }
    }

    /// The report as a table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let mut columns: Vec<(&str, &Summary)> = vec![("lockgate", &self.lockgate)];
        columns.extend(self.compare.iter().map(|(k, v)| (k.as_str(), v)));
        write_summaries(&mut out, &columns);
        self.write_bound(&mut out);
        for (name, s) in &columns {
            write_nodes(&mut out, name, s);
            write_scopes(&mut out, name, s);
        }
        out
    }

    /// The bound, what sets it, and every makespan against it and against lockgate's.
    fn write_bound(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nlower bound: {} ({}); lockgate's makespan is {:.2}x the bound",
            secs(self.lower_bound_s),
            self.lower_bound_by,
            self.bound_ratio()
        );
        for (name, s) in &self.compare {
            if s.makespan_s > 0.0 {
                let _ = writeln!(
                    out,
                    "{name}: makespan {:.2}x lockgate's",
                    s.makespan_s / self.lockgate.makespan_s.max(1e-9)
                );
            }
        }
    }
}

/// One column per scheduler: job counts, makespan and waits.
fn write_summaries(out: &mut String, columns: &[(&str, &Summary)]) {
    let _ = writeln!(
        out,
        "{:<22}{}",
        "",
        columns
            .iter()
            .map(|(n, _)| format!("{n:>12}"))
            .collect::<String>()
    );
    let row = |out: &mut String, label: &str, f: &dyn Fn(&Summary) -> String| {
        let cells: String = columns
            .iter()
            .map(|(_, s)| format!("{:>12}", f(s)))
            .collect();
        let _ = writeln!(out, "{label:<22}{cells}");
    };
    row(out, "jobs", &|s| s.jobs.to_string());
    row(out, "unfinished", &|s| s.unfinished.to_string());
    row(out, "makespan", &|s| secs(s.makespan_s));
    row(out, "wait p50", &|s| secs(s.wait_s.p50));
    row(out, "wait p95", &|s| secs(s.wait_s.p95));
    row(out, "wait max", &|s| secs(s.wait_s.max));
    if columns.iter().any(|(_, s)| s.slowdown.is_some()) {
        let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        row(out, "slowdown p50", &|s| x(s.slowdown.map(|d| d.p50)));
        row(out, "slowdown p95", &|s| x(s.slowdown.map(|d| d.p95)));
    }
}

/// One scheduler's nodes: slots, jobs, run time and how busy each was.
fn write_nodes(out: &mut String, name: &str, s: &Summary) {
    let _ = writeln!(out, "\n{name}: nodes");
    let _ = writeln!(
        out,
        "  {:<28}{:>7}{:>7}{:>12}{:>7}",
        "NODE", "SLOTS", "JOBS", "RUN", "BUSY"
    );
    for n in &s.nodes {
        let slots = n.slots.map_or("-".to_string(), |s| s.to_string());
        let _ = writeln!(
            out,
            "  {:<28}{slots:>7}{:>7}{:>12}{:>6.0}%",
            n.node,
            n.jobs,
            secs(n.run_s),
            n.busy * 100.0
        );
    }
}

/// One scheduler's scope peaks against their limits; conflict keys as one line (how many,
/// and the highest peak).
fn write_scopes(out: &mut String, name: &str, s: &Summary) {
    let _ = writeln!(out, "{name}: scopes (peak/limit)");
    let (conflicts, others): (Vec<&ScopePeak>, Vec<&ScopePeak>) = s
        .scopes
        .iter()
        .partition(|p| p.scope.starts_with("conflict:"));
    for p in others {
        let limit = p.limit.map_or("-".to_string(), |l| l.to_string());
        let flag = if p.limit.is_some_and(|l| p.peak > l) {
            "  OVER LIMIT"
        } else {
            ""
        };
        let _ = writeln!(out, "  {:<48}{:>6}/{limit}{flag}", p.scope, p.peak);
    }
    if !conflicts.is_empty() {
        let max = conflicts.iter().map(|p| p.peak).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "  {:<48}{:>6}",
            format!("conflict keys: {} (highest peak)", conflicts.len()),
            max
        );
    }
}

/// `750s`, `12m30s`, `1h02m`, with a decimal for short times.
pub(crate) fn secs(s: f64) -> String {
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let t = s.round() as u64;
    match t {
        t if t < 3600 => format!("{}m{:02}s", t / 60, t % 60),
        t => format!("{}h{:02}m{:02}s", t / 3600, t % 3600 / 60, t % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(
            (
                percentile(&v, 0.5),
                percentile(&v, 0.95),
                percentile(&v, 1.0)
            ),
            (50, 95, 100)
        );
        assert_eq!(percentile(&[7], 0.5), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn union_of_spans() {
        assert_eq!(union_len(&[(0, 10), (5, 15), (20, 25)]), 20);
        assert_eq!(union_len(&[]), 0);
    }

    #[test]
    fn durations_for_people() {
        assert_eq!(secs(12.345), "12.3s");
        assert_eq!(secs(750.0), "12m30s");
        assert_eq!(secs(3725.0), "1h02m05s");
    }
}
