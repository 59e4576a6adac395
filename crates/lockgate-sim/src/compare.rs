//! What-if on real history: the recorded run and its replays side by side
//! (`lockgate simulate --from-server`, `lockgate policy apply --dry-run`).
//!
//! A server's finished jobs become a workload ([`WorkloadJob`]: arrivals at their submit
//! times, prepare and run stages as measured) and a [`Run`] of what really happened
//! ([`recorded_run`]); the workload is then simulated under each policy, and every result
//! summarised the same way ([`Summary`]) with the jobs that miss a deadline ([`missed`]).
//!
//! # Invariants
//! - A recorded run's scope peaks are counted the way the picture counts occupancy
//!   (`gantt::occupancy`): from the scopes the engine says a job takes
//!   ([`Policy::scopes_of`]) over its admitted span, so the recorded and the simulated
//!   columns name the same scopes.
//! - Times are milliseconds from the workload's start (the earliest submit); the caller
//!   maps them to wall-clock times.

use crate::gantt::{occupancy, shorten};
use crate::input::{NodeSpec, WorkloadJob};
use crate::report::{secs, ScopePeak, Summary};
use crate::sim::{JobRecord, NodeSlots, Run};
use lockgate_core::Policy;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One column of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Column {
    /// `recorded`, `active`, `candidate`.
    pub name: String,
    /// The run's summary.
    #[serde(flatten)]
    pub summary: Summary,
    /// Jobs that end after the deadline or never (only with a deadline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_deadline: Option<usize>,
}

impl Column {
    /// A column for `run`, counting misses against `deadline_ms` when given.
    pub fn of(name: &str, run: &Run, deadline_ms: Option<u64>) -> Column {
        Column {
            name: name.to_string(),
            summary: Summary::from_run(run),
            missed_deadline: deadline_ms.map(|d| missed(run, d)),
        }
    }
}

/// Jobs of `run` that end after `deadline_ms`, or never end.
pub fn missed(run: &Run, deadline_ms: u64) -> usize {
    run.jobs
        .iter()
        .filter(|r| r.finished_ms.is_none_or(|f| f > deadline_ms))
        .count()
}

/// What really happened, as a [`Run`]: the records as given, every node with the slots
/// `policy` gives it, and the peak of every scope `policy` limits.
pub fn recorded_run(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    records: Vec<JobRecord>,
) -> Run {
    let mut run = Run {
        jobs: records,
        scopes: Vec::new(),
        nodes: nodes
            .iter()
            .map(|n| NodeSlots {
                name: n.name.clone(),
                slots: policy.node_number(&n.labels).0,
            })
            .collect(),
    };
    run.scopes = occupancy(policy, jobs, &run)
        .into_iter()
        .map(|(scope, limit, series)| ScopePeak {
            scope,
            limit: Some(limit),
            peak: series.iter().map(|s| s.1).max().unwrap_or(0),
        })
        .collect();
    run
}

/// The columns as a table for people: counts, makespan, waits, deadline misses, then
/// every limited scope's peak against its limit (conflict keys are left out: their limit
/// is always 1).
pub fn table(columns: &[Column]) -> String {
    let mut out = String::new();
    let longest = columns
        .iter()
        .flat_map(|c| c.summary.scopes.iter().map(|s| s.scope.chars().count() + 4))
        .max()
        .unwrap_or(0);
    let width = longest.clamp(22, 64);
    let head: String = columns.iter().map(|c| format!("{:>14}", c.name)).collect();
    let _ = writeln!(out, "{:<width$}{head}", "");
    let row = |out: &mut String, label: &str, f: &dyn Fn(&Column) -> String| {
        let cells: String = columns.iter().map(|c| format!("{:>14}", f(c))).collect();
        let _ = writeln!(out, "{:<width$}{cells}", shorten(label, width - 1));
    };
    row(&mut out, "jobs", &|c| c.summary.jobs.to_string());
    row(&mut out, "unfinished", &|c| {
        c.summary.unfinished.to_string()
    });
    row(&mut out, "makespan", &|c| dur(c.summary.makespan_s));
    row(&mut out, "wait p50", &|c| dur(c.summary.wait_s.p50));
    row(&mut out, "wait p95", &|c| dur(c.summary.wait_s.p95));
    row(&mut out, "wait max", &|c| dur(c.summary.wait_s.max));
    if columns.iter().any(|c| c.missed_deadline.is_some()) {
        row(&mut out, "missed the deadline", &|c| {
            c.missed_deadline.map_or("-".into(), |m| m.to_string())
        });
    }
    let mut scopes: BTreeMap<&str, ()> = BTreeMap::new();
    for c in columns {
        for s in &c.summary.scopes {
            if s.limit.is_some() && !s.scope.starts_with("conflict") {
                scopes.insert(&s.scope, ());
            }
        }
    }
    if !scopes.is_empty() {
        let _ = writeln!(out, "peak/limit");
    }
    for scope in scopes.keys() {
        row(&mut out, &format!("  {scope}"), &|c| match c
            .summary
            .scopes
            .iter()
            .find(|s| s.scope == *scope)
        {
            Some(s) => format!(
                "{}/{}",
                s.peak,
                s.limit.map_or("-".into(), |l| l.to_string())
            ),
            None => "-".into(),
        });
    }
    out
}

/// The makespan of `b` against `a` in words (`candidate: makespan 0.52x active's`).
pub fn ratio_line(a: &Column, b: &Column) -> Option<String> {
    (a.summary.makespan_s > 0.0).then(|| {
        format!(
            "{}: makespan {:.2}x {}'s ({} vs {})",
            b.name,
            b.summary.makespan_s / a.summary.makespan_s,
            a.name,
            dur(b.summary.makespan_s),
            dur(a.summary.makespan_s)
        )
    })
}

/// Milliseconds shown under a minute (a replay of a short history differs from the
/// recorded run by milliseconds), else as the simulate table writes times.
fn dur(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.3}s")
    } else {
        secs(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_core::JobState;

    fn rec(sub: u64, adm: u64, fin: u64) -> JobRecord {
        JobRecord {
            submitted_ms: sub,
            admitted_ms: Some(adm),
            started_ms: Some(adm),
            finished_ms: Some(fin),
            node: None,
            outcome: Some(JobState::Succeeded),
            run_alone_ms: None,
        }
    }

    #[test]
    fn recorded_peaks_and_deadline_misses() {
        let policy = Policy::from_toml("[global]\nmax_running = 2\n", None).unwrap();
        let jobs: Vec<WorkloadJob> = (0..3)
            .map(|_| serde_json::from_str(r#"{"at": 0, "kind": "b", "run_s": 1}"#).unwrap())
            .collect();
        let records = vec![rec(0, 0, 1000), rec(0, 0, 1000), rec(0, 1000, 2000)];
        let run = recorded_run(&policy, &[], &jobs, records);
        assert_eq!(
            run.scopes,
            vec![ScopePeak {
                scope: "global".into(),
                limit: Some(2),
                peak: 2
            }]
        );
        assert_eq!(missed(&run, 1500), 1);
        let col = Column::of("recorded", &run, Some(1500));
        let text = table(&[col.clone(), col]);
        assert!(text.contains("missed the deadline"), "{text}");
        assert!(text.contains("  global"), "{text}");
        assert!(text.contains("2/2"), "{text}");
    }
}
