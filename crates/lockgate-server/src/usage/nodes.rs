//! Node samples: the pressure and network counters holders send with their renewals
//! ([`lockgate_api::NodeSample`]), kept per node as a bounded history.
//!
//! # Invariants
//! - **Bounded**: at most [`MAX_NODES`] nodes and [`NODE_HISTORY`] samples each; a node
//!   whose last sample is older than [`FRESH_MS`] is neither shown nor kept past the next
//!   housekeeping. A sample for a node beyond the bound is dropped, never another's.
//! - **Only with a lease**: the loop records a sample after the renewal that carried it was
//!   taken, for the node of that renewal's job.
//! - Pressure values outside 0-100 are dropped on the way in ([`NodeSample::sane`]).

use crate::metrics::{esc, header};
use lockgate_api::{per_second, NodeSample, NodeSampleView};
use lockgate_core::Timestamp;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;

/// Nodes whose samples are kept at once.
pub const MAX_NODES: usize = 10_000;
/// Samples kept per node.
pub const NODE_HISTORY: usize = 360;
/// How long a sample stands for its node (milliseconds).
pub const FRESH_MS: u64 = 120_000;

/// The sample histories of nodes.
#[derive(Debug, Default)]
pub struct NodeMeters {
    nodes: HashMap<String, VecDeque<(Timestamp, NodeSample)>>,
}

impl NodeMeters {
    /// Keeps `sample` for `node`, received at `now`.
    pub(crate) fn record(&mut self, node: &str, sample: NodeSample, now: Timestamp) {
        if !self.nodes.contains_key(node) && self.nodes.len() >= MAX_NODES {
            self.prune(now);
            if self.nodes.len() >= MAX_NODES {
                return;
            }
        }
        let history = self.nodes.entry(node.to_string()).or_default();
        if history.len() == NODE_HISTORY {
            history.pop_front();
        }
        history.push_back((now, sample.sane()));
    }

    /// Forgets the nodes whose last sample is no longer fresh at `now`.
    pub(crate) fn prune(&mut self, now: Timestamp) {
        self.nodes
            .retain(|_, h| h.back().is_some_and(|(at, _)| fresh(*at, now)));
    }

    /// The last fresh sample of `node`, with the network rates since the one before.
    pub(crate) fn view(&self, node: &str, now: Timestamp) -> Option<NodeSampleView> {
        let history = self.nodes.get(node)?;
        let (at, last) = history.back()?;
        if !fresh(*at, now) {
            return None;
        }
        let before = history.iter().rev().nth(1);
        let rate = |pick: fn(&NodeSample) -> Option<u64>| {
            let (then, earlier) = before?;
            let ms = at.0.checked_sub(then.0).filter(|&d| d > 0)?;
            Some(per_second(pick(last)?.checked_sub(pick(earlier)?)?, ms))
        };
        Some(NodeSampleView {
            at: lockgate_api::time::format(*at),
            sample: last.clone(),
            net_rx_per_s: rate(|s| s.net_rx_bytes),
            net_tx_per_s: rate(|s| s.net_tx_bytes),
        })
    }

    /// The `/metrics` series of the nodes with a fresh sample: pressure and network rates.
    pub(crate) fn render(&self, out: &mut String, now: Timestamp) {
        let views: BTreeMap<&String, NodeSampleView> = self
            .nodes
            .keys()
            .filter_map(|n| Some((n, self.view(n, now)?)))
            .collect();
        header(
            out,
            "lockgate_node_pressure",
            "gauge",
            "The node's pressure stall information (avg10, percent) as the last holder on it reported, by resource (cpu, io, memory) and kind (some, full).",
        );
        for (node, v) in &views {
            let s = &v.sample;
            let values = [
                ("cpu", "some", s.cpu_some),
                ("io", "some", s.io_some),
                ("io", "full", s.io_full),
                ("memory", "some", s.memory_some),
                ("memory", "full", s.memory_full),
            ];
            for (resource, kind, value) in values {
                if let Some(value) = value {
                    let _ = writeln!(
                        out,
                        "lockgate_node_pressure{{node=\"{}\",resource=\"{resource}\",kind=\"{kind}\"}} {value}",
                        esc(node)
                    );
                }
            }
        }
        header(
            out,
            "lockgate_node_network_bytes_per_second",
            "gauge",
            "Bytes per second the node received and sent on every interface but loopback, between its last two samples.",
        );
        for (node, v) in &views {
            for (direction, value) in [("rx", v.net_rx_per_s), ("tx", v.net_tx_per_s)] {
                if let Some(value) = value {
                    let _ = writeln!(
                        out,
                        "lockgate_node_network_bytes_per_second{{node=\"{}\",direction=\"{direction}\"}} {value}",
                        esc(node)
                    );
                }
            }
        }
    }
}

fn fresh(at: Timestamp, now: Timestamp) -> bool {
    now.0.saturating_sub(at.0) <= FRESH_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(io: f64, rx: u64) -> NodeSample {
        NodeSample {
            io_some: Some(io),
            net_rx_bytes: Some(rx),
            ..NodeSample::default()
        }
    }

    #[test]
    fn a_node_shows_its_last_fresh_sample_with_network_rates() {
        let mut m = NodeMeters::default();
        m.record("n1", sample(10.0, 1_000), Timestamp(1_000));
        assert_eq!(m.view("n1", Timestamp(1_000)).unwrap().net_rx_per_s, None);
        m.record("n1", sample(250.0, 5_000), Timestamp(3_000));
        let v = m.view("n1", Timestamp(3_000)).unwrap();
        assert_eq!(v.net_rx_per_s, Some(2_000));
        assert_eq!(v.sample.io_some, None, "250% is not a pressure");
        assert!(m.view("n1", Timestamp(3_000 + FRESH_MS + 1)).is_none());
        m.prune(Timestamp(3_000 + FRESH_MS + 1));
        assert!(m.nodes.is_empty());
    }

    #[test]
    fn the_bounds_hold() {
        let mut m = NodeMeters::default();
        for i in 0..NODE_HISTORY + 5 {
            m.record("n1", sample(1.0, i as u64), Timestamp(i as u64));
        }
        assert_eq!(m.nodes["n1"].len(), NODE_HISTORY);
        for i in 0..MAX_NODES + 3 {
            m.record(&format!("m{i}"), sample(1.0, 0), Timestamp(500));
        }
        assert_eq!(m.nodes.len(), MAX_NODES);
        assert!(
            m.nodes.contains_key("n1"),
            "a kept node is never pushed out"
        );
    }
}
