//! `--compare velero-1.17`: Velero 1.17's node-agent admission, beside the older model
//! in [`crate::velero`]. What 1.17 adds is `prepareQueueLength` (node-agent ConfigMap,
//! `loadConcurrency`): before a DataUpload / PodVolumeBackup is accepted and its data-mover
//! pod created, the node agent asks a counter how many such requests are in the prepare
//! phases (Accepted, Prepared) across the cluster, and requeues the request 5 s later
//! when the queue is full. The counter is fed by the informer cache, so it is best effort:
//!
//! - **Queue length**: `[global].prepare_queue` when the policy sets it (one cluster-wide
//!   number, as Velero's is), else `[nodes].prepare_queue x nodes`, else unbounded.
//! - **Counted from caches**: a node agent deciding at time `t` sees the count as it was
//!   before anything else changed at `t`, plus its own acceptances at `t`; acceptances by
//!   other node agents at the same instant are not visible yet. Several agents can so
//!   accept at once and overshoot the length (the `global-prepare` peak shows by how much).
//!   The agent deciding is the one of the node the pod lands on.
//! - **Placement** at acceptance, as in the older model: the eligible node (pinned, or
//!   matching the selector, number not 0) with the fewest data-mover pods, ties by order.
//! - **5 s requeue, per request**: a request that is not accepted, or that is prepared
//!   while its node's `loadConcurrency` slots are full, is reconciled again 5 s after that
//!   attempt (not on a shared tick); a freed slot is seen only then.
//! - Node numbers come from the policy's `[nodes]` rules; datastore limits, pools,
//!   conflicts and priorities are ignored; a job on no node starts at submit.

use super::{eligible, Admission, Harness};
use crate::contention::Contention;
use crate::input::{NodeSpec, WorkloadJob};
use crate::sim::Run;
use lockgate_core::Policy;

/// Velero's requeue period.
pub const REQUEUE_MS: u64 = 5_000;

struct Velero117 {
    eligible: Vec<Option<Vec<usize>>>,
    names: Vec<String>,
    slots: Vec<Option<u32>>,
    running: Vec<u32>,
    pods: Vec<u32>,
    node_of: Vec<Option<usize>>,
    queue_len: Option<u64>,
    /// Requests in the prepare phases (the true count).
    count: u64,
    /// The instant of the latest change of `count`, and the count before it.
    changed_at: u64,
    before: u64,
    /// Each node agent's own acceptances at `changed_at`.
    own: Vec<u64>,
}

impl Velero117 {
    fn change(&mut self, delta: i64, now: u64) {
        if self.changed_at != now {
            self.changed_at = now;
            self.before = self.count;
            self.own.iter_mut().for_each(|o| *o = 0);
        }
        self.count = self.count.saturating_add_signed(delta);
    }

    /// The count node agent `n` sees at `now` (see the module docs).
    fn seen(&self, n: usize, now: u64) -> u64 {
        if self.changed_at == now {
            self.before + self.own[n]
        } else {
            self.count
        }
    }

    fn try_accept(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        let Some(Some(e)) = self.eligible.get(i) else {
            return;
        };
        let Some(&n) = e.iter().min_by_key(|&&n| (self.pods[n], n)) else {
            return; // no eligible node: never runs
        };
        if self.queue_len.is_some_and(|q| self.seen(n, now) >= q) {
            h.wake(i, now + REQUEUE_MS);
            return;
        }
        self.change(1, now);
        self.own[n] += 1;
        self.pods[n] += 1;
        self.node_of[i] = Some(n);
        h.count("global-prepare", self.queue_len, 1);
        let name = self.names[n].clone();
        h.admit(i, Some(&name), now);
    }

    fn try_start(&mut self, h: &mut Harness<'_>, i: usize, n: usize, now: u64) {
        if self.slots[n].is_some_and(|s| self.running[n] >= s) {
            h.wake(i, now + REQUEUE_MS);
            return;
        }
        self.running[n] += 1;
        self.change(-1, now);
        h.count("global-prepare", self.queue_len, -1);
        let key = format!("node:{}", self.names[n]);
        h.count(&key, self.slots[n].map(u64::from), 1);
        h.start(i, now);
    }
}

impl Admission for Velero117 {
    fn submit(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        if self.eligible[i].is_none() {
            h.admit(i, None, now);
        } else {
            self.try_accept(h, i, now);
        }
    }

    fn prepared(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        match self.node_of[i] {
            Some(n) => self.try_start(h, i, n, now),
            None => h.start(i, now),
        }
    }

    fn ended(&mut self, h: &mut Harness<'_>, i: usize, _now: u64) {
        if let Some(n) = self.node_of[i] {
            self.running[n] -= 1;
            self.pods[n] -= 1;
            let key = format!("node:{}", self.names[n]);
            h.count(&key, self.slots[n].map(u64::from), -1);
        }
    }

    fn wake(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        match self.node_of[i] {
            None => self.try_accept(h, i, now),
            Some(n) => self.try_start(h, i, n, now),
        }
    }
}

/// Runs the workload through the Velero 1.17 model (see the module docs).
pub fn simulate(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    let slots: Vec<Option<u32>> = nodes
        .iter()
        .map(|n| policy.node_number(&n.labels).0)
        .collect();
    let per_node = u64::from(policy.nodes.prepare_queue) * nodes.len() as u64;
    let queue_len = policy
        .global
        .prepare_queue
        .map(u64::from)
        .or((per_node > 0).then_some(per_node));
    let mut model = Velero117 {
        eligible: jobs.iter().map(|j| eligible(nodes, &slots, j)).collect(),
        names: nodes.iter().map(|n| n.name.clone()).collect(),
        slots: slots.clone(),
        running: vec![0; nodes.len()],
        pods: vec![0; nodes.len()],
        node_of: vec![None; jobs.len()],
        queue_len,
        count: 0,
        changed_at: u64::MAX,
        before: 0,
        own: vec![0; nodes.len()],
    };
    let number = |n: &NodeSpec| policy.node_number(&n.labels).0;
    Harness::new(policy, nodes, number, jobs, contention).run(&mut model)
}
