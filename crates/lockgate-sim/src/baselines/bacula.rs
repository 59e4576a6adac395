//! `--compare bacula`: the Bacula director's job queue. Jobs wait in one queue ordered by
//! priority (lockgate's: higher first), then submit time, and the director starts them
//! under its "Maximum Concurrent Jobs" limits, with strict priority:
//!
//! - **Head-of-line blocking by priority** (Bacula without `Allow Mixed Priority`): while
//!   jobs of one priority run, only waiting jobs of that same priority may start; with
//!   nothing running, only jobs of the highest waiting priority may. So a more urgent job
//!   waits for the less urgent running ones to end, and a less urgent job whose limits are
//!   free waits behind every more urgent one, even one that cannot start.
//! - Within one priority a job whose limits are full is skipped and the next one is tried.
//! - **Maximum Concurrent Jobs**: `[global].max_running` is the Director's, every
//!   `[[limit]]` partition a Storage's, Pool's or Client's (whatever it partitions by), a
//!   node's number its Client's (a pinned job takes its node; a movable one the first
//!   eligible node with a free slot). Pools, conflicts, prepare queues, fair share and
//!   aging are ignored: Bacula has none of them.
//! - **Re-check**: the queue is examined when a job is submitted and then every
//!   [`RECHECK_MS`] (ticks at multiples of 30 s) while a job waits; a job's end frees its
//!   slots but the queue is examined only at the next tick. (Bacula's director also wakes
//!   its queue when a job ends: the model is up to 30 s slower per hand-off than that.)
//! - A job holds its slots from admission (a two-stage job's prepare is part of the job)
//!   to its end.

use super::{checked, eligible, scopes, Admission, Harness};
use crate::contention::Contention;
use crate::input::{NodeSpec, WorkloadJob};
use crate::sim::Run;
use lockgate_core::scope::{Check, ScopeKey};
use lockgate_core::Policy;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// How often the director re-examines a queue that has waiting jobs.
pub const RECHECK_MS: u64 = 30_000;

struct Bacula {
    /// Per job: its priority and Maximum Concurrent Jobs scopes (name, limit).
    priority: Vec<i64>,
    limits: Vec<Vec<(String, u64)>>,
    eligible: Vec<Option<Vec<usize>>>,
    node_names: Vec<String>,
    node_slots: Vec<Option<u32>>,
    /// Used per scope name (nodes as `node:<name>`).
    used: BTreeMap<String, u64>,
    /// Waiting jobs: (priority, highest first; submit; index).
    waiting: BTreeSet<(Reverse<i64>, u64, usize)>,
    running: usize,
    running_priority: i64,
    /// The node each running job holds.
    node_of: Vec<Option<usize>>,
}

impl Bacula {
    fn node_fits(&self, n: usize) -> bool {
        let used = self.used.get(&self.node_key(n)).copied().unwrap_or(0);
        self.node_slots[n].is_none_or(|s| used < u64::from(s))
    }

    fn node_key(&self, n: usize) -> String {
        format!("node:{}", self.node_names[n])
    }

    /// The node job `i` would take (`Some(None)`: it needs none), or `None` when its
    /// limits or every eligible node are full.
    fn fits(&self, i: usize) -> Option<Option<usize>> {
        let free =
            |(name, limit): &(String, u64)| self.used.get(name).copied().unwrap_or(0) < *limit;
        if !self.limits[i].iter().all(free) {
            return None;
        }
        match &self.eligible[i] {
            None => Some(None),
            Some(e) => e.iter().copied().find(|&n| self.node_fits(n)).map(Some),
        }
    }

    fn take(&mut self, h: &mut Harness<'_>, i: usize, node: Option<usize>, sign: i64) {
        let mut keys: Vec<(String, Option<u64>)> = self.limits[i]
            .iter()
            .map(|(k, l)| (k.clone(), Some(*l)))
            .collect();
        if let Some(n) = node {
            keys.push((self.node_key(n), self.node_slots[n].map(u64::from)));
        }
        for (k, limit) in keys {
            let u = self.used.entry(k.clone()).or_insert(0);
            *u = u.saturating_add_signed(sign);
            h.count(&k, limit, sign);
        }
    }

    /// One pass of the director's queue (see the module docs).
    fn scan(&mut self, h: &mut Harness<'_>, now: u64) {
        let Some(&(Reverse(head), _, _)) = self.waiting.first() else {
            return;
        };
        let p = if self.running > 0 {
            self.running_priority
        } else {
            head
        };
        let queue: Vec<(Reverse<i64>, u64, usize)> = self.waiting.iter().copied().collect();
        for entry in queue {
            let (Reverse(prio), _, i) = entry;
            if prio != p {
                break;
            }
            let Some(node) = self.fits(i) else {
                continue;
            };
            self.waiting.remove(&entry);
            self.take(h, i, node, 1);
            self.node_of[i] = node;
            self.running += 1;
            self.running_priority = prio;
            let name = node.map(|n| self.node_names[n].clone());
            h.admit(i, name.as_deref(), now);
        }
        if !self.waiting.is_empty() {
            h.tick(RECHECK_MS, now);
        }
    }
}

impl Admission for Bacula {
    fn submit(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        if self.eligible[i].as_ref().is_some_and(Vec::is_empty) {
            return; // no node can run it: never starts
        }
        self.waiting
            .insert((Reverse(self.priority[i]), h.jobs[i].at_ms(), i));
        self.scan(h, now);
    }

    fn ended(&mut self, h: &mut Harness<'_>, i: usize, _now: u64) {
        self.take(h, i, self.node_of[i], -1);
        self.running -= 1;
    }

    fn tick(&mut self, h: &mut Harness<'_>, now: u64) {
        self.scan(h, now);
    }
}

/// Runs the workload through the Bacula model (see the module docs).
pub fn simulate(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    let node_slots: Vec<Option<u32>> = nodes
        .iter()
        .map(|n| policy.node_number(&n.labels).0)
        .collect();
    let limits = jobs
        .iter()
        .map(|j| {
            let Some(s) = scopes(policy, j) else {
                return Vec::new();
            };
            s.common
                .into_iter()
                .filter(|u| u.check == Check::Fits)
                .filter(|u| matches!(u.key, ScopeKey::Global | ScopeKey::Limit { .. }))
                .filter_map(|u| u.key.limit_in(policy).map(|l| (u.key.to_string(), l)))
                .collect()
        })
        .collect();
    let mut model = Bacula {
        priority: jobs
            .iter()
            .map(|j| checked(policy, j).map_or(0, |c| c.priority))
            .collect(),
        limits,
        eligible: jobs
            .iter()
            .map(|j| eligible(nodes, &node_slots, j))
            .collect(),
        node_names: nodes.iter().map(|n| n.name.clone()).collect(),
        node_slots: node_slots.clone(),
        used: BTreeMap::new(),
        waiting: BTreeSet::new(),
        running: 0,
        running_priority: 0,
        node_of: vec![None; jobs.len()],
    };
    let slots = |n: &NodeSpec| policy.node_number(&n.labels).0;
    Harness::new(policy, nodes, slots, jobs, contention).run(&mut model)
}
