//! Throughput over time, for the dashboard: every [`STEP_MS`], while jobs run, the loop
//! samples the recent rates of the admitted jobs per scope and per node
//! ([`super::Throughput`]) and each node's last pressure, and keeps the last [`POINTS`]
//! samples (an hour).
//!
//! # Invariants
//! - **Bounded**: at most [`POINTS`] samples, each with the scopes `/metrics` shows (per
//!   rule the busiest, the rest summed) and at most [`MAX_NODES`] nodes (the busiest).
//! - **Nothing when idle**: a sample is taken only while some job reports a rate, so an
//!   idle server keeps nothing new; the view places samples by their time.
//! - What a sample says is what `/metrics` said at that moment: the same sums, the same
//!   bounds.

use super::{NodeMeters, Throughput};
use lockgate_api::{UiRates, UiThroughput};
use lockgate_core::Timestamp;
use std::collections::{BTreeMap, VecDeque};

/// Milliseconds between samples.
pub(crate) const STEP_MS: u64 = 10_000;
/// Samples kept: an hour at [`STEP_MS`].
pub(crate) const POINTS: usize = 360;
/// Nodes kept per sample (the busiest).
pub(crate) const MAX_NODES: usize = 50;

#[derive(Debug)]
struct Sample {
    at: Timestamp,
    scopes: Vec<(String, u64)>,
    /// Node, bytes per second, memory and IO pressure.
    nodes: Vec<(String, u64, Option<f64>, Option<f64>)>,
}

/// The samples of the last hour.
#[derive(Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
    next: Timestamp,
}

impl History {
    /// Whether a sample is due at `now`.
    pub(crate) fn due(&self, now: Timestamp) -> bool {
        now >= self.next
    }

    /// Takes a sample at `now` if one is due and anything moved.
    pub(crate) fn tick(&mut self, now: Timestamp, t: &Throughput, nodes: &NodeMeters) {
        if now < self.next {
            return;
        }
        self.next = now.plus(std::time::Duration::from_millis(STEP_MS));
        if t.nodes.is_empty() && t.scopes.is_empty() {
            return;
        }
        let scopes = t
            .bounded_scopes()
            .into_iter()
            .map(|(s, r)| (s, r.moved()))
            .collect();
        let mut busiest: Vec<(&String, u64)> =
            t.nodes.iter().map(|(n, r)| (n, r.moved())).collect();
        busiest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        busiest.truncate(MAX_NODES);
        let nodes = busiest
            .into_iter()
            .map(|(n, rate)| {
                let s = nodes.view(n, now).map(|v| v.sample);
                let memory = s.as_ref().and_then(|s| s.memory_some);
                let io = s.as_ref().and_then(|s| s.io_some);
                (n.clone(), rate, memory, io)
            })
            .collect();
        if self.samples.len() == POINTS {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            at: now,
            scopes,
            nodes,
        });
    }

    /// The dashboard's view: one series per scope and per node seen in the hour.
    pub(crate) fn view(&self) -> UiThroughput {
        let n = self.samples.len();
        let mut scopes: BTreeMap<&str, UiRates> = BTreeMap::new();
        let mut nodes: BTreeMap<&str, UiRates> = BTreeMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            for (name, rate) in &s.scopes {
                let x = scopes.entry(name).or_insert_with(|| series(name, n, false));
                x.bytes_per_s[i] = Some(*rate);
            }
            for (name, rate, memory, io) in &s.nodes {
                let x = nodes.entry(name).or_insert_with(|| series(name, n, true));
                x.bytes_per_s[i] = Some(*rate);
                x.memory[i] = *memory;
                x.io[i] = *io;
            }
        }
        UiThroughput {
            step_s: STEP_MS / 1000,
            at: self
                .samples
                .iter()
                .map(|s| lockgate_api::time::format(s.at))
                .collect(),
            scopes: scopes.into_values().collect(),
            nodes: nodes.into_values().collect(),
        }
    }
}

impl crate::event_loop::Loop {
    /// Samples the throughput for the dashboard when a sample is due.
    pub(crate) fn throughput_tick(&mut self, now: Timestamp) {
        if !self.throughput_history.due(now) {
            return;
        }
        let t = self.meters.throughput(&self.engine);
        self.throughput_history.tick(now, &t, &self.node_meters);
    }
}

fn series(name: &str, n: usize, node: bool) -> UiRates {
    UiRates {
        name: name.to_string(),
        bytes_per_s: vec![None; n],
        memory: if node { vec![None; n] } else { Vec::new() },
        io: if node { vec![None; n] } else { Vec::new() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Rates;

    fn throughput(scope: &str, node: &str, rate: u64) -> Throughput {
        let mut t = Throughput::default();
        let r = Rates {
            read: rate / 2,
            written: rate,
        };
        t.nodes.insert(node.into(), r);
        t.scopes
            .entry("limit:ds".into())
            .or_default()
            .insert(scope.into(), r);
        t
    }

    #[test]
    fn samples_are_due_every_step_bounded_and_skipped_when_idle() {
        let mut h = History::default();
        let nodes = NodeMeters::default();
        let mut at = 0;
        for i in 0..(POINTS as u64 + 10) {
            h.tick(Timestamp(at), &throughput("ds1", "n1", 100 + i), &nodes);
            // Not due yet: no second sample in the same step.
            h.tick(Timestamp(at + 1), &throughput("ds1", "n1", 1), &nodes);
            at += STEP_MS;
        }
        let v = h.view();
        assert_eq!(v.at.len(), POINTS, "an hour kept");
        assert_eq!(v.scopes.len(), 1);
        assert_eq!(
            v.scopes[0].bytes_per_s[0],
            Some(110),
            "the oldest dropped first"
        );
        assert_eq!(v.nodes[0].name, "n1");
        assert_eq!(v.nodes[0].memory.len(), POINTS);
        // Idle: nothing is kept.
        h.tick(Timestamp(at), &Throughput::default(), &nodes);
        assert_eq!(h.view().at.len(), POINTS);
        let last = h.view().at.last().cloned();
        assert_eq!(
            last,
            Some(lockgate_api::time::format(Timestamp(at - STEP_MS)))
        );
    }

    #[test]
    fn a_series_has_gaps_where_its_scope_had_nothing_running() {
        let mut h = History::default();
        let nodes = NodeMeters::default();
        h.tick(Timestamp(0), &throughput("ds1", "n1", 10), &nodes);
        h.tick(Timestamp(STEP_MS), &throughput("ds2", "n1", 20), &nodes);
        let v = h.view();
        let by: BTreeMap<&str, &Vec<Option<u64>>> = v
            .scopes
            .iter()
            .map(|s| (s.name.as_str(), &s.bytes_per_s))
            .collect();
        assert_eq!(by["ds1"], &vec![Some(10), None]);
        assert_eq!(by["ds2"], &vec![None, Some(20)]);
        assert_eq!(v.nodes[0].bytes_per_s, vec![Some(10), Some(20)]);
    }
}
