//! `--compare pbs`: Proxmox Backup Server's own admission. PBS has no queue and no
//! limit: a backup starts when it is submitted, unless another job holds the lock of its
//! backup group, in which case it fails at once ("unable to acquire lock") and is tried
//! again [`RETRY_MS`] later, as a re-run by the operator's schedule or a retry wrapper
//! would; it then waits again if the group is still locked.
//!
//! - The group locks are the policy's `[[conflict]]` keys: every conflict scope a job
//!   would take under lockgate is one lock, held from admission to the end, exclusively
//!   (PBS's group lock has no shared mode). A policy without conflicts gives no locks.
//! - Node numbers, limits, pools and priorities are ignored (PBS has none of them).
//! - A wait runs from the submit to the attempt that got the lock; the failed attempts are
//!   counted in the scope `pbs-failed-attempts` (its peak is the total).

use super::{scopes, Admission, Harness};
use crate::contention::Contention;
use crate::input::{NodeSpec, WorkloadJob};
use crate::sim::Run;
use lockgate_core::scope::ScopeKey;
use lockgate_core::Policy;
use std::collections::BTreeSet;

/// How long after a failed attempt a job is tried again.
pub const RETRY_MS: u64 = 60_000;

struct Pbs {
    /// The locks of each job.
    locks: Vec<Vec<String>>,
    held: BTreeSet<String>,
}

impl Pbs {
    fn attempt(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        if self.locks[i].iter().any(|l| self.held.contains(l)) {
            h.count("pbs-failed-attempts", None, 1);
            h.wake(i, now + RETRY_MS);
            return;
        }
        for l in &self.locks[i] {
            self.held.insert(l.clone());
            h.count(l, Some(1), 1);
        }
        let node = h.jobs[i].node.clone();
        h.admit(i, node.as_deref(), now);
    }
}

impl Admission for Pbs {
    fn submit(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        self.attempt(h, i, now);
    }

    fn ended(&mut self, h: &mut Harness<'_>, i: usize, _now: u64) {
        for l in &self.locks[i] {
            self.held.remove(l);
            h.count(l, Some(1), -1);
        }
    }

    fn wake(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        self.attempt(h, i, now);
    }
}

/// Runs the workload through the PBS model (see the module docs).
pub fn simulate(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    let locks = jobs
        .iter()
        .map(|j| {
            scopes(policy, j)
                .map(|s| {
                    s.common
                        .into_iter()
                        .filter(|u| matches!(u.key, ScopeKey::Conflict { .. }))
                        .map(|u| u.key.to_string())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let mut model = Pbs {
        locks,
        held: BTreeSet::new(),
    };
    Harness::new(policy, nodes, |_| None, jobs, contention).run(&mut model)
}
