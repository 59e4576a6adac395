//! Live usage of admitted jobs, and the samples of the nodes they run on (`nodes.rs`): each usage report the engine took (`lockgate_core::usage`,
//! sent by the holder with its renewals) is kept in a short history per job, from which a
//! job's view gets its recent rates and `/metrics` the throughput per node and per scope.
//!
//! # Invariants
//! - **Bounded**: a job keeps its last `HISTORY` reports, and only while it is admitted:
//!   its history is dropped once an event shows it in another state
//!   (`Meters::forget`, called from the loop's `drain_events`).
//! - **Only what the engine took**: the loop records a report after
//!   [`lockgate_core::Engine::record_usage`] accepted it, and records the job's totals as
//!   the engine merged them, so a view never shows totals the job's record does not hold.
//! - **Bounded cardinality**: `/metrics` has one series per node and per scope, never one
//!   per job, and at most [`MAX_SERIES_PER_RULE`] scopes of one rule (the busiest; the
//!   rest summed into `<rule>:other`, as the other scope series).

mod history;
mod nodes;

pub use history::History;
pub use nodes::NodeMeters;

use crate::metrics::{esc, header, MAX_SERIES_PER_RULE};
use lockgate_api::UsageView;
use lockgate_core::job::JobId;
use lockgate_core::{Engine, Usage};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;

/// Reports kept per admitted job.
pub(crate) const HISTORY: usize = 64;

/// The usage histories of admitted jobs.
#[derive(Debug, Default)]
pub struct Meters {
    jobs: HashMap<JobId, VecDeque<Usage>>,
    /// Bytes moved by the jobs of each scope, summed from their reports as they come
    /// (each job's larger direction: a copy counts once): the automatic limits read their
    /// rate over an interval from it.
    scope_bytes: HashMap<String, u64>,
}

/// The shortest span, on a holder's clock, a job's recent rate is counted over: its
/// processes write in bursts (a blocked write is counted when it returns), so two reports
/// a renewal apart say little.
pub(crate) const RATE_WINDOW_MS: u64 = 5_000;

/// Bytes per second read and written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rates {
    pub read: u64,
    pub written: u64,
}

impl Meters {
    /// Keeps job `id`'s totals after a report the engine took, and adds what it moved
    /// since its last report to the `scopes` it holds.
    pub(crate) fn record(&mut self, id: JobId, totals: Usage, scopes: &[String]) {
        let history = self.jobs.entry(id).or_default();
        if let Some(last) = history.back() {
            let read = totals.read_bytes.saturating_sub(last.read_bytes);
            let written = totals.written_bytes.saturating_sub(last.written_bytes);
            for scope in scopes {
                let moved = self.scope_bytes.entry(scope.clone()).or_default();
                *moved = moved.saturating_add(read.max(written));
            }
        }
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back(totals);
    }

    /// Bytes the jobs of `scope` moved so far (see [`Meters::record`]).
    pub(crate) fn scope_bytes(&self, scope: &str) -> u64 {
        self.scope_bytes.get(scope).copied().unwrap_or(0)
    }

    /// Forgets the byte counts of scopes no job holds any more.
    pub(crate) fn prune_scopes(&mut self, keep: impl Fn(&str) -> bool) {
        self.scope_bytes.retain(|s, _| keep(s));
    }

    /// Drops the history of a job that is no longer admitted.
    pub(crate) fn forget(&mut self, id: JobId) {
        self.jobs.remove(&id);
    }

    /// The view of a job's `totals`, with the rates since the report before them where
    /// the job is admitted and has reported more than once.
    pub(crate) fn view(&self, id: JobId, totals: &Usage) -> UsageView {
        let view = UsageView::of(totals);
        match self.before(id, totals) {
            Some(earlier) => view.since(earlier),
            None => view,
        }
    }

    /// The latest report of `id` earlier than `totals` on the holder's clock.
    /// The report the recent rate is counted from: the latest at least
    /// [`RATE_WINDOW_MS`] before `totals`, else the oldest earlier one.
    fn before(&self, id: JobId, totals: &Usage) -> Option<&Usage> {
        let history = self.jobs.get(&id)?;
        let earlier = |u: &&Usage| u.elapsed_ms < totals.elapsed_ms;
        history
            .iter()
            .rev()
            .find(|u| u.elapsed_ms + RATE_WINDOW_MS <= totals.elapsed_ms)
            .or_else(|| history.iter().find(earlier))
    }

    /// The admitted jobs with reports.
    pub(crate) fn job_ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.jobs.keys().copied()
    }

    /// The recent rates of admitted job `id` (over about [`RATE_WINDOW_MS`]).
    pub(crate) fn recent(&self, id: JobId) -> Option<Rates> {
        let last = self.jobs.get(&id)?.back()?;
        let view = self.view(id, last);
        Some(Rates {
            read: view.read_per_s?,
            written: view.written_per_s?,
        })
    }

    /// The recent rates summed per node and per scope over the admitted jobs that have
    /// them (a job without a node counts in no node).
    pub(crate) fn throughput(&self, engine: &Engine) -> Throughput {
        let mut t = Throughput::default();
        for &id in self.jobs.keys() {
            let (Some(rates), Some(job)) = (self.recent(id), engine.job(id)) else {
                continue;
            };
            if let Some(node) = job.node() {
                t.nodes.entry(node.to_string()).or_default().add(rates);
            }
            for (rule, scope) in engine.held_scopes(id) {
                t.scopes
                    .entry(rule)
                    .or_default()
                    .entry(scope)
                    .or_default()
                    .add(rates);
            }
        }
        t
    }
}

impl Rates {
    fn add(&mut self, r: Rates) {
        self.read = self.read.saturating_add(r.read);
        self.written = self.written.saturating_add(r.written);
    }

    fn total(&self) -> u64 {
        self.read.saturating_add(self.written)
    }

    /// The larger direction: what a job moves, counting a copy once (as
    /// `lockgate_core::durations::moved` counts its totals).
    pub(crate) fn moved(&self) -> u64 {
        self.read.max(self.written)
    }
}

/// Throughput of the admitted jobs now, per node and per scope (by rule).
#[derive(Debug, Default)]
pub(crate) struct Throughput {
    pub nodes: BTreeMap<String, Rates>,
    pub scopes: BTreeMap<String, BTreeMap<String, Rates>>,
}

impl Throughput {
    /// The scopes to show: per rule the busiest [`MAX_SERIES_PER_RULE`], the rest summed
    /// into `<rule>:other`.
    fn bounded_scopes(&self) -> BTreeMap<String, Rates> {
        let mut out = BTreeMap::new();
        for (rule, scopes) in &self.scopes {
            let mut busiest: Vec<(&String, &Rates)> = scopes.iter().collect();
            busiest.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(b.0)));
            let rest = busiest.split_off(busiest.len().min(MAX_SERIES_PER_RULE));
            out.extend(busiest.into_iter().map(|(s, r)| (s.clone(), *r)));
            if !rest.is_empty() {
                let other: &mut Rates = out.entry(format!("{rule}:other")).or_default();
                for (_, r) in rest {
                    other.add(*r);
                }
            }
        }
        out
    }

    /// The `/metrics` series: bytes per second per node and per scope, both directions.
    pub(crate) fn render(&self, out: &mut String) {
        let scopes = self.bounded_scopes();
        let series = [
            ("node", &self.nodes, "lockgate_node"),
            ("scope", &scopes, "lockgate_scope"),
        ];
        for (label, map, prefix) in series {
            for (dir, pick) in [("read", read as fn(&Rates) -> u64), ("written", written)] {
                let name = format!("{prefix}_{dir}_bytes_per_second");
                header(
                    out,
                    &name,
                    "gauge",
                    &format!(
                        "Bytes per second its admitted jobs' processes {dir}, as their holders measured them (the sum of each job's rate between its last two reports)."
                    ),
                );
                for (key, rates) in map {
                    let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {}", esc(key), pick(rates));
                }
            }
        }
    }
}

fn read(r: &Rates) -> u64 {
    r.read
}

fn written(r: &Rates) -> u64 {
    r.written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_series_are_bounded_per_rule() {
        let mut t = Throughput::default();
        let many = t.scopes.entry("limit:per-vm".into()).or_default();
        for i in 0..(MAX_SERIES_PER_RULE as u64 + 5) {
            let rates = Rates {
                read: 0,
                written: 1_000 + i,
            };
            many.insert(format!("limit:per-vm[vm={i}]"), rates);
        }
        let shown = t.bounded_scopes();
        assert_eq!(shown.len(), MAX_SERIES_PER_RULE + 1);
        // The five slowest are summed.
        assert_eq!(shown["limit:per-vm:other"].written, 5_000 + 10);
        assert!(shown.contains_key("limit:per-vm[vm=104]"));
        assert!(!shown.contains_key("limit:per-vm[vm=0]"));
    }

    fn at(ms: u64, written: u64) -> Usage {
        Usage {
            elapsed_ms: ms,
            written_bytes: written,
            ..Usage::default()
        }
    }

    #[test]
    fn a_history_is_bounded_and_gives_the_recent_rate() {
        let mut m = Meters::default();
        assert_eq!(m.recent(1), None);
        let scopes = ["limit:a".to_string()];
        m.record(1, at(1_000, 1_000), &scopes);
        assert_eq!(m.recent(1), None, "one report gives no rate");
        for i in 2..=(HISTORY as u64 + 10) {
            m.record(1, at(i * 1_000, i * 1_000 + (i % 2) * 500), &scopes);
        }
        // Counted over the window: the bursts of odd seconds even out.
        let rate = m.recent(1).unwrap().written;
        assert!((900..=1_100).contains(&rate), "{rate}");
        assert_eq!(
            m.scope_bytes("limit:a"),
            (HISTORY as u64 + 10) * 1_000 - 1_000
        );
        assert_eq!(m.jobs[&1].len(), HISTORY);
        let last = *m.jobs[&1].back().unwrap();
        let v = m.view(1, &last);
        assert!(v.written_per_s.is_some(), "{v:?}");
        m.forget(1);
        assert!(m.jobs.is_empty());
        assert_eq!(m.view(1, &last).written_per_s, None);
    }
}
