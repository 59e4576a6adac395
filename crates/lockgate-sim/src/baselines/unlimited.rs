//! `--compare unlimited`: no limits at all. Every job is admitted at its submit and
//! starts when its prepare step is done; nodes, limits, pools and conflicts are ignored.
//!
//! Without a contention model this is the makespan of infinite capacity (every job ends
//! `at + prepare + run`); with one, it shows what running everything at once costs when
//! jobs share a datastore or a link whose throughput falls as concurrency grows.

use super::{Admission, Harness};
use crate::contention::Contention;
use crate::input::{NodeSpec, WorkloadJob};
use crate::sim::Run;
use lockgate_core::Policy;

struct Unlimited;

impl Admission for Unlimited {
    fn submit(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        let node = h.jobs[i].node.clone();
        h.admit(i, node.as_deref(), now);
    }

    fn ended(&mut self, _h: &mut Harness<'_>, _i: usize, _now: u64) {}
}

/// Runs the workload with no limits (see the module docs).
pub fn simulate(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    Harness::new(policy, nodes, |_| None, jobs, contention).run(&mut Unlimited)
}
