//! Admission: evaluating a job against every scope, taking and giving back room, and the
//! admission pass.
//!
//! Implementation details. A job's verdict is computed by [`Engine::evaluate`] from its
//! needs, its reservation checks and its node; it never changes state. Taking room is
//! [`Engine::admit`], giving it back is [`Engine::end_job`]; both touch exactly the scopes
//! recorded in the job's `held` list, so a policy change between the two cannot unbalance a
//! counter. Every release wakes the scope it frees; a woken scope hands its best waiting
//! class to the pass, and the next one only while it still has room.

use super::needs::Check;
use super::queue::Rank;
use super::timers::Timer;
use super::{Engine, Mode};
use crate::event::JobChange;
use crate::job::{Job, JobId, JobState, Lease};
use crate::policy::Executor;
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::ops::Bound;
use std::sync::Arc;

/// Why a job cannot be admitted now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BlockKind {
    /// The scope is full.
    Capacity,
    /// The scope's limit is 0.
    Zero,
    /// The scope holds more than its (lowered) limit and drains.
    OverLimit,
    /// A conflicting job holds the key.
    Conflict,
    /// The scope is reserved for a better-ranked job.
    Reserved(JobId),
    /// The pinned node is not registered.
    NodeMissing,
    /// The pinned node is lost.
    NodeLost,
    /// The pinned node is cordoned.
    NodeCordoned,
    /// The pinned node's agent does not run this kind.
    NoAgent,
    /// The pinned node's number is 0.
    NodeZero,
    /// The node's run slots are full.
    NodeFull,
    /// The node's prepare bound is reached.
    NodePrepareFull,
    /// No ready node matches a movable job's selector.
    NoEligibleNode,
    /// Eligible nodes exist but none has room.
    NoRoom,
    /// `not_before` has not passed.
    NotBefore(Timestamp),
    /// An exclusive job ranked above waits for this conflict key: a shared job is not
    /// admitted on it (`engine/exclusive.rs`).
    ExclusiveWaiting(JobId),
    /// The room left is held for a better-ranked preemptor whose victims are stopping.
    HeldFor(JobId),
}

impl BlockKind {
    /// Blocked only by a full scope (the kind of wait that may reserve).
    pub fn is_capacity(&self) -> bool {
        matches!(
            self,
            BlockKind::Capacity
                | BlockKind::NodeFull
                | BlockKind::NodePrepareFull
                | BlockKind::NoRoom
        )
    }
}

/// One holding condition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    pub scope: Option<ScopeId>,
    pub kind: BlockKind,
    /// Units the job needs from the scope.
    pub need: u64,
}

/// Where an admissible job goes: `Some(node)` or no node.
pub(crate) type Placement = Option<String>;

impl Engine {
    /// The fair-share shift of an owner's ranks.
    pub(crate) fn fair_term(&self, owner: &str) -> f64 {
        if !self.policy.queue.fair_share {
            return 0.0;
        }
        let running = self.owner_running.get(owner).copied().unwrap_or(0) as f64;
        let scale = self
            .policy
            .queue
            .aging
            .map_or(1.0, |a| a.as_millis() as f64);
        running / f64::from(self.policy.owner_weight(owner)) * scale
    }

    /// Base rank of a job (without fair share).
    pub(crate) fn base_rank(&self, job: &Job) -> Rank {
        let plan = self.planned_start(job);
        let primary = match self.policy.queue.aging {
            Some(a) => plan as f64 - job.priority as f64 * a.as_millis() as f64,
            None => -(job.priority as f64),
        };
        Rank {
            primary,
            plan,
            queued_at: job.queued_at.0,
            id: job.id,
        }
    }

    /// Effective rank of a live job.
    pub(crate) fn eff_rank(&self, id: JobId) -> Rank {
        let e = &self.entries.get(id);
        self.base_rank(&e.job).shifted(self.fair_term(&e.job.owner))
    }

    /// Effective priority at `now` (policy.md, Queue).
    pub(crate) fn effective_priority(&self, id: JobId, now: Timestamp) -> f64 {
        let e = &self.entries.get(id);
        let mut p = e.job.priority as f64;
        if let Some(a) = self.policy.queue.aging {
            p += now.since(e.job.queued_at) as f64 / a.as_millis() as f64;
        }
        if self.policy.queue.fair_share {
            let running = self.owner_running.get(&e.job.owner).copied().unwrap_or(0) as f64;
            p -= running / f64::from(self.policy.owner_weight(&e.job.owner));
        }
        p
    }

    // ----- evaluation -----

    fn check_scope(
        &self,
        id: JobId,
        scope: ScopeId,
        take: u64,
        check: Check,
        out: &mut Vec<Block>,
    ) {
        let s = &self.scopes.states[scope as usize];
        let kind = match check {
            Check::Free if s.used > 0 => Some(BlockKind::Conflict),
            Check::Free => None,
            Check::Fits => match s.limit {
                Some(0) if take > 0 => Some(BlockKind::Zero),
                Some(l) if s.used > l => Some(BlockKind::OverLimit),
                Some(l) if s.used + take > l => Some(BlockKind::Capacity),
                _ => None,
            },
        };
        let kind = kind
            .or_else(|| match check {
                Check::Free => self
                    .exclusive_ahead(scope, id)
                    .map(BlockKind::ExclusiveWaiting),
                Check::Fits => None,
            })
            .or_else(|| {
                let r = s
                    .reserved_by
                    .filter(|&r| r != id && self.entries.contains(r))?;
                (self.reservation_applies(scope, check) && self.eff_rank(r) < self.eff_rank(id))
                    .then_some(BlockKind::Reserved(r))
            });
        let kind = kind.or_else(|| self.held_block(id, scope, take, check));
        if let Some(kind) = kind {
            out.push(Block {
                scope: Some(scope),
                kind,
                need: take,
            });
        }
    }

    /// Whether a job fits on a node; pushes what holds it there.
    pub(crate) fn check_node(&mut self, id: JobId, node: &str, out: &mut Vec<Block>) {
        let (run_scope, prep_scope) = self.node_scopes(node);
        let e = &self.entries.get(id);
        let (two_stage, agent) = (e.job.two_stage, e.job.executor == Executor::Agent);
        // Node-wide conditions park a job on the scope whose room it needs first: the
        // prepare bound for a two-stage job, the run slots otherwise.
        let home = if two_stage { prep_scope } else { run_scope };
        let held = match self.nodes.get(node) {
            None => Some(BlockKind::NodeMissing),
            Some(n) if n.state == super::NodeState::Lost => Some(BlockKind::NodeLost),
            Some(n) if n.cordoned => Some(BlockKind::NodeCordoned),
            Some(n) if agent && !n.kinds.contains(&e.job.kind) => Some(BlockKind::NoAgent),
            Some(n) if n.number == Some(0) => Some(BlockKind::NodeZero),
            Some(_) => None,
        };
        if let Some(kind) = held {
            out.push(Block {
                scope: Some(home),
                kind,
                need: 1,
            });
            return;
        }
        let before = out.len();
        self.check_scope(id, prep_scope, 1, Check::Fits, out);
        if !two_stage {
            self.check_scope(id, run_scope, 1, Check::Fits, out);
        }
        for b in &mut out[before..] {
            b.kind = match (&b.kind, b.scope == Some(run_scope)) {
                (BlockKind::Capacity | BlockKind::OverLimit, true) => BlockKind::NodeFull,
                (BlockKind::Capacity | BlockKind::OverLimit, false) => BlockKind::NodePrepareFull,
                (k, _) => k.clone(),
            };
        }
        if self.entries.get(id).needs.node_cost.is_empty() {
            return;
        }
        for (pool, amount) in self.entries.get(id).needs.node_cost.clone() {
            let scope = self.intern(ScopeKey::NodePool {
                pool,
                node: node.to_string(),
            });
            self.check_scope(id, scope, amount, Check::Fits, out);
        }
    }

    /// Everything that holds a queued job now (all of it, or the first thing when `all` is
    /// false), or where it goes when nothing does.
    pub(crate) fn evaluate(
        &mut self,
        id: JobId,
        now: Timestamp,
        all: bool,
    ) -> Result<Placement, Vec<Block>> {
        let mut out = Vec::new();
        let e = &self.entries.get(id);
        if let Some(t) = e.job.not_before.filter(|&t| t > now) {
            out.push(Block {
                scope: None,
                kind: BlockKind::NotBefore(t),
                need: 0,
            });
            if !all {
                return Err(out);
            }
        }
        for n in &e.needs.common {
            self.check_scope(id, n.scope, n.take, n.check, &mut out);
            if !all && !out.is_empty() {
                return Err(out);
            }
        }
        let prepare = e.needs.prepare;
        let pinned = e.job.placement.pinned().map(str::to_string);
        let placement = e.placement;
        if let Some(p) = prepare {
            self.check_scope(id, p, 1, Check::Fits, &mut out);
        }
        if !all && !out.is_empty() {
            return Err(out);
        }
        let placed = if let Some(node) = pinned {
            self.check_node(id, &node, &mut out);
            Some(node)
        } else if let Some(scope) = placement {
            self.place(id, scope, &mut out)
        } else {
            None
        };
        if out.is_empty() {
            Ok(placed)
        } else {
            Err(out)
        }
    }

    /// Picks the best eligible node with room for a movable job.
    fn place(&mut self, id: JobId, scope: ScopeId, out: &mut Vec<Block>) -> Option<String> {
        let block = |kind| Block {
            scope: Some(scope),
            kind,
            need: 1,
        };
        if self
            .placement
            .nodes
            .get(&scope)
            .is_none_or(|set| set.is_empty())
        {
            out.push(block(BlockKind::NoEligibleNode));
            return None;
        }
        // Walk from the node with the most room; the first one usually fits, so this is
        // O(log N). Nodes without room end the walk: every node after them has none either.
        let mut cursor: Option<super::nodes::RoomKey> = None;
        loop {
            let set = &self.placement.nodes[&scope];
            let next = match &cursor {
                None => set.first(),
                Some(c) => set.range((Bound::Excluded(c), Bound::Unbounded)).next(),
            };
            let Some(key) = next.filter(|(room, _, _)| room.0 > 0).cloned() else {
                break;
            };
            let mut held = Vec::new();
            self.check_node(id, &key.2, &mut held);
            if held.is_empty() {
                let mut reserved = Vec::new();
                self.check_scope(id, scope, 0, Check::Fits, &mut reserved);
                if reserved.is_empty() {
                    return Some(key.2);
                }
                out.extend(reserved);
                return None;
            }
            cursor = Some(key);
        }
        out.push(block(BlockKind::NoRoom));
        None
    }

    // ----- taking and giving back -----

    pub(crate) fn take(&mut self, id: JobId, scope: ScopeId, amount: u64) {
        let s = &mut self.scopes.states[scope as usize];
        s.used += amount;
        s.peak = s.peak.max(s.used);
        // A scope that is only checked (taken 0) is not held: explain names real holders.
        if amount > 0 {
            s.holders.insert(id);
        }
        self.entries.get_mut(id).held.push((scope, amount));
    }

    fn give_back(&mut self, id: JobId, scope: ScopeId, amount: u64) {
        let s = &mut self.scopes.states[scope as usize];
        s.used -= amount;
        s.holders.remove(&id);
        if matches!(self.scopes.interner.key(scope), ScopeKey::NodePool { .. }) {
            self.wake_unindexed(scope);
        } else {
            self.wake(scope, None);
        }
    }

    /// Takes everything a job in `state` holds: its common needs, `global-prepare` while
    /// staged, and on its node the prepare bound, the run slot once running, and node pools.
    pub(crate) fn take_share(
        &mut self,
        id: JobId,
        needs: &super::needs::Needs,
        node: Option<&str>,
        state: JobState,
        prepared_at: Option<Timestamp>,
    ) {
        for n in &needs.common {
            self.take(id, n.scope, n.take);
        }
        let staged = matches!(state, JobState::Preparing | JobState::Prepared);
        if let (true, Some(p)) = (staged, needs.prepare) {
            self.take(id, p, 1);
        }
        let Some(node) = node else { return };
        let (run, prep) = self.node_scopes(node);
        self.take(id, prep, 1);
        if !staged {
            self.take(id, run, 1);
        }
        for (pool, amount) in &needs.node_cost {
            let scope = self.intern(ScopeKey::NodePool {
                pool: pool.clone(),
                node: node.to_string(),
            });
            self.take(id, scope, *amount);
        }
        if let Some(n) = self.nodes.get_mut(node) {
            match state {
                JobState::Preparing => n.preparing += 1,
                JobState::Prepared => {
                    n.prepared += 1;
                    n.prepared_queue
                        .insert((prepared_at.unwrap_or_default(), id));
                }
                _ => n.running += 1,
            }
        }
    }

    fn grant_lease(&mut self, id: JobId, now: Timestamp) -> Lease {
        let lease = Lease {
            token: self.next_token,
            expires_at: now.plus(self.policy.leases.ttl),
        };
        self.next_token += 1;
        self.timers
            .arm(lease.expires_at, Timer::Lease(id, lease.token));
        lease
    }

    /// Admits a queued job: to prepare (two-stage) or to run.
    pub(crate) fn admit(&mut self, id: JobId, node: Placement, now: Timestamp) {
        self.dequeue(id);
        let e = self.entries.get_mut(id);
        let needs = e.needs.clone();
        let (two_stage, owner) = (e.job.two_stage, e.job.owner.clone());
        let state = if two_stage {
            JobState::Preparing
        } else {
            JobState::Running
        };
        self.take_share(id, &needs, node.as_deref(), state, None);
        let lease = self.grant_lease(id, now);
        let timeout = self.policy.prepare_timeout(&self.entries.get(id).job.kind);
        let job = self.entries.job_mut(id);
        if let crate::job::Placement::Movable { placed_on, .. } = &mut job.placement {
            placed_on.clone_from(&node);
        }
        job.lease = Some(lease);
        // A new attempt's usage counts from its own command (usage.rs).
        job.usage = None;
        let change = if two_stage {
            job.state = JobState::Preparing;
            job.prepare_started_at = Some(now);
            self.timers
                .arm(now.plus(timeout), Timer::PrepareTimeout(id, lease.token));
            JobChange::AdmittedPrepare
        } else {
            job.state = JobState::Running;
            job.started_at = Some(now);
            self.arm_max_run(id, now);
            JobChange::Started
        };
        if let Some(node) = &node {
            self.node_counts_changed(node);
        }
        self.owner_count_changed(&owner, 1);
        self.emit(change, id);
    }

    fn arm_max_run(&mut self, id: JobId, now: Timestamp) {
        let e = &self.entries.get(id);
        if let (Some(ms), Some(lease)) = (e.job.max_run_ms, e.job.lease) {
            self.timers.arm(
                now.plus(std::time::Duration::from_millis(ms)),
                Timer::MaxRun(id, lease.token),
            );
        }
    }

    /// Starts a prepared job on its node's run slot.
    pub(crate) fn promote(&mut self, id: JobId, node: Option<&str>, now: Timestamp) {
        if let Some(node) = node {
            let (run, _) = self.node_scopes(node);
            self.take(id, run, 1);
            if let Some(n) = self.nodes.get_mut(node) {
                n.prepared = n.prepared.saturating_sub(1);
                n.running += 1;
            }
        }
        let prepare = self.entries.get(id).needs.prepare;
        if let Some(p) = prepare {
            let e = self.entries.get_mut(id);
            if let Some(pos) = e.held.iter().position(|&(s, _)| s == p) {
                e.held.remove(pos);
                self.give_back(id, p, 1);
            }
        }
        let job = self.entries.job_mut(id);
        job.state = JobState::Running;
        job.started_at = Some(now);
        self.arm_max_run(id, now);
        if let Some(node) = node {
            self.node_counts_changed(node);
        }
        self.emit(JobChange::Started, id);
    }

    /// Starts prepared jobs (oldest first) on nodes whose run slots have room, and prepared
    /// jobs without a node at once.
    fn promote_prepared(&mut self, now: Timestamp) {
        let dirty = std::mem::take(&mut self.dirty_nodes);
        for name in dirty {
            while let Some(n) = self.nodes.get(&name) {
                if n.state != super::NodeState::Ready || n.number.is_some_and(|m| n.running >= m) {
                    break;
                }
                let Some(&(t, id)) = n.prepared_queue.first() else {
                    break;
                };
                self.nodes
                    .get_mut(&name)
                    .expect("exists")
                    .prepared_queue
                    .remove(&(t, id));
                if self
                    .entries
                    .find(id)
                    .is_some_and(|e| e.job.state == JobState::Prepared)
                {
                    self.promote(id, Some(&name), now);
                }
            }
        }
    }

    /// Ends a job in `state`, giving back everything it held; a failed or lost job with
    /// retries left is queued again after its kind's interval.
    pub(crate) fn end_job(
        &mut self,
        id: JobId,
        state: JobState,
        message: Option<String>,
        now: Timestamp,
    ) -> Job {
        let Some(e) = self.entries.find(id) else {
            unreachable!("end_job on a live job")
        };
        let prev = e.job.state;
        if prev == JobState::Queued {
            self.dequeue(id);
        }
        self.release(id, prev);
        let job = &self.entries.get(id).job;
        let retry = match job.retry.as_deref() {
            Some(r) => crate::policy::Retry {
                times: r.times,
                interval: std::time::Duration::from_millis(r.interval_ms),
            },
            None => self.policy.retry(&job.kind),
        };
        let job = self.entries.job_mut(id);
        job.state = state;
        job.finished_at = Some(now);
        job.outcome = Some(state);
        job.lease = None;
        job.retry_at = None;
        if message.is_some() {
            job.message = message;
        }
        // Preempted attempts do not count against the retries.
        let tries = job.attempt.saturating_sub(job.preemptions);
        let retries = matches!(state, JobState::Failed | JobState::Lost) && tries <= retry.times;
        if retries {
            let at = now.plus(retry.interval);
            job.retry_at = Some(at);
            self.timers.arm(at, Timer::Retry(id, job.attempt));
        }
        if retries {
            self.emit(JobChange::Finished, id);
            return Job::clone(&self.entries.get(id).job);
        }
        self.forget_pause_hold(id);
        self.forget_deps(id);
        self.window.forget(id);
        let Some(super::Entry { job, .. }) = self.entries.remove(id) else {
            unreachable!("end_job on a live job")
        };
        self.events.push_back(crate::event::Event::Job {
            change: JobChange::Finished,
            job: job.clone(),
        });
        self.dependency_ended(id, state, now);
        Arc::unwrap_or_clone(job)
    }

    /// Gives back everything an admitted job (in state `prev`) holds; nothing for a job
    /// that holds nothing.
    pub(crate) fn release(&mut self, id: JobId, prev: JobState) {
        if prev.is_admitted() {
            let held = std::mem::take(&mut self.entries.get_mut(id).held);
            for (scope, amount) in held {
                self.give_back(id, scope, amount);
            }
            let e = &self.entries.get(id);
            let owner = e.job.owner.clone();
            if let Some(node) = e.job.node().map(str::to_string) {
                if let Some(n) = self.nodes.get_mut(&node) {
                    match prev {
                        JobState::Preparing => n.preparing = n.preparing.saturating_sub(1),
                        JobState::Prepared => {
                            n.prepared = n.prepared.saturating_sub(1);
                            n.prepared_queue.retain(|&(_, j)| j != id);
                        }
                        _ => n.running = n.running.saturating_sub(1),
                    }
                }
                self.dirty_nodes.insert(node.clone());
                self.node_counts_changed(&node);
            }
            self.owner_count_changed(&owner, -1);
        }
    }

    /// Queues a failed or lost job again (a retry): same id, `attempt + 1`.
    pub(crate) fn requeue(&mut self, id: JobId, now: Timestamp) {
        let Some(e) = self.entries.remove(id) else {
            return;
        };
        let mut shared = e.job;
        let job = Arc::make_mut(&mut shared);
        job.state = JobState::Queued;
        job.attempt += 1;
        job.queued_at = now;
        job.retry_at = None;
        job.cancel_requested = false;
        job.cancel_reason = None;
        job.cancel_by = None;
        job.finished_at = None;
        job.outcome = None;
        job.prepare_started_at = None;
        job.prepared_at = None;
        job.started_at = None;
        if let crate::job::Placement::Movable { placed_on, .. } = &mut job.placement {
            *placed_on = None;
        }
        self.insert_entry(shared, now);
        self.emit(JobChange::Requeued, id);
    }

    // ----- reservations -----

    pub(crate) fn clear_reservations(&mut self, id: JobId) {
        if self.scopes.reserved.is_empty() {
            return;
        }
        let scopes: Vec<ScopeId> = self
            .scopes
            .reserved
            .iter()
            .copied()
            .filter(|&s| self.scopes.states[s as usize].reserved_by == Some(id))
            .collect();
        for s in scopes {
            if self.scopes.states[s as usize].reserved_by == Some(id) {
                self.scopes.states[s as usize].reserved_by = None;
                self.scopes.reserved.remove(&s);
                self.wake_unindexed(s);
            }
        }
    }

    /// A blocked job reserves the scopes that hold it, as each rule allows
    /// (`engine/reserve.rs`).
    fn maybe_reserve(&mut self, id: JobId, now: Timestamp) {
        self.reserve_scopes(id, now);
    }

    // ----- the pass -----

    /// Admits everything that fits now, in rank order.
    pub(crate) fn run_pass(&mut self, now: Timestamp) {
        self.submit_recoveries(now);
        self.refresh_windows(now);
        self.rescore_stale(now);
        loop {
            self.promote_prepared(now);
            match (self.mode, self.policy.queue.strict) {
                (_, true) => self.strict_pass(now),
                (Mode::Indexed, false) => self.indexed_pass(now),
                (Mode::Rescan, false) => self.rescan_pass(now),
            }
            // Preemption (engine/preempt.rs) may free holds: then the pass runs again.
            if !self.preempt_step(now) {
                break;
            }
        }
    }

    fn indexed_pass(&mut self, now: Timestamp) {
        while let Some((key, cid)) = self.queue.ready.pop_first() {
            let class = &mut self.queue.classes[cid as usize];
            class.ready = false;
            let from = class.woken_from.take();
            let Some(head) = class.head() else { continue };
            match self.evaluate(head, now, false) {
                Ok(node) => {
                    self.admit(head, node, now);
                    if self.queue.classes[cid as usize].key.is_some()
                        && !self.queue.classes[cid as usize].ready
                    {
                        self.detach(cid);
                        self.file(cid, true);
                    }
                }
                Err(blocks) => {
                    self.detach(cid);
                    let scope = blocks[0]
                        .scope
                        .expect("queued jobs in classes are past not_before");
                    // Held for itself (its victims still hold): its classmates are not.
                    let own = blocks[0].kind == BlockKind::HeldFor(head);
                    let parked = if own && self.queue.classes[cid as usize].jobs.len() > 1 {
                        self.split_head(cid)
                    } else {
                        cid
                    };
                    self.park_on(parked, scope);
                    self.maybe_reserve(head, now);
                }
            }
            if let Some(s) = from {
                let parked_here = self.queue.classes[cid as usize].parked == Some(s);
                self.wake(s, parked_here.then_some((key, cid)));
            }
        }
    }

    fn strict_pass(&mut self, now: Timestamp) {
        while let Some(&(_, cid)) = self.queue.heads.first() {
            let head = self.queue.classes[cid as usize].head().expect("non-empty");
            match self.evaluate(head, now, false) {
                Ok(node) => self.admit(head, node, now),
                Err(blocks) => {
                    self.detach(cid);
                    let scope = blocks[0].scope.expect("in a class");
                    self.park_on(cid, scope);
                    self.maybe_reserve(head, now);
                    break;
                }
            }
        }
    }

    fn rescan_pass(&mut self, now: Timestamp) {
        loop {
            let mut order: Vec<(Rank, JobId)> = self
                .entries
                .values()
                .filter(|e| e.class.is_some())
                .map(|e| (self.eff_rank(e.job.id), e.job.id))
                .collect();
            order.sort_unstable();
            let mut restart = false;
            for (_, id) in order {
                match self.evaluate(id, now, false) {
                    Ok(node) => {
                        self.admit(id, node, now);
                        if self.policy.queue.fair_share {
                            restart = true;
                            break;
                        }
                    }
                    Err(_) => self.maybe_reserve(id, now),
                }
            }
            if !restart {
                break;
            }
        }
    }
}
