//! The engine: a deterministic state machine that decides which jobs run now, where, and
//! why the others wait.
//!
//! The caller drives it: every operation takes `now`; effects come out of
//! [`Engine::poll_event`]; [`Engine::next_deadline`] says when to call
//! [`Engine::handle_timeout`] again. It never reads a clock, a file or the environment, so
//! the server, the simulator and the property tests run the same code.
//!
//! # Admission
//! After every operation the engine runs an admission pass. Prepared two-stage jobs are
//! started on nodes with a free run slot first (oldest first), then queued jobs are admitted
//! in rank order while they fit. In [`Mode::Indexed`] (the default) the pass only looks at
//! class heads that something woke (see [`queue`](self) docs in `engine/queue.rs`): when a
//! scope gains room, its best-ranked waiting class is woken, and the next one only if the
//! scope still has room after that. [`Mode::Rescan`] walks every queued job on every pass;
//! it is kept as the test oracle and the benchmark baseline.
//!
//! # Costs
//! With s = scopes a job touches (a handful), c = classes, n = queued jobs,
//! N = nodes eligible for a selector:
//! - submit: O(s log c + log n) (plus O(s) to evaluate the job if its class is woken);
//! - finish / cancel / lease expiry: O(s log c) to release, plus O(s + log N) per job the
//!   freed room admits, plus O(log c) per woken class that turns out to be blocked
//!   elsewhere (each such class moves to the scope that blocks it);
//! - heartbeat: O(1) (the lease timer is re-armed lazily when it fires);
//! - node change (register, cordon, lost, removed): O(k log N) for the k placement keys,
//!   plus O(S) over the interned scopes to find the node's per-node pools;
//! - with `fair_share`, every admission and release also re-keys the owner's classes:
//!   O(c_o log c) for the c_o classes of that owner (without fair share: nothing);
//! - shared/exclusive conflicts: O(1) per key checked (two counters); an exclusive job
//!   entering or leaving the queue: O(log n) per key (`engine/exclusive.rs`);
//! - reservations (per rule): O(s) per blocked evaluation (`engine/reserve.rs`);
//! - policy change, restore: O(n log n) (every job is re-indexed);
//! - preemption (`engine/preempt.rs`), after each pass: nothing without a preempting kind;
//!   otherwise O(p) over the queued preempting jobs and plans, plus O(h · b) for the h
//!   holders of the b scopes blocking a preemptor that plans; a held scope adds O(1) to a
//!   scope check. Never a walk of the queue;
//! - explain: O(n) (the position counts competing jobs; not on the admission path);
//! - [`Engine::share`]: O(c log n) for the c jobs inserted, removed or changed since the
//!   last share (no job copied; the first share builds the shared map, O(n log n)); once
//!   an engine was shared, each job change also marks its id (O(1)) and copies the record
//!   if someone still holds it; [`Engine::from_shared`]: O(n log n), as a restore;
//! - every job that joins the queue (submit, retry, `not_before`, a dependency's end)
//!   checks the active pauses: O(p), p at most [`MAX_PAUSES`]; a job's end for good wakes
//!   its own dependents: O(dependents); pause: O(n) (walks the queued jobs once, as a
//!   policy change); resume: O(held · p); set priority: O(log n + log c);
//! - `[queue] order = "window"`: nothing more per submit or admission (one hash lookup
//!   per rank); [`Engine::set_expected_run`]: O(s · l + log n + log c) and a pass; a
//!   pass O(1) more, plus the amortized rescoring of the scopes whose projected end moved
//!   (`engine/window_order.rs`).
//!
//! # Invariants (checked by [`Engine::check_invariants`] in the property tests)
//! - no scope is ever taken past its limit by an admission (a lowered limit may leave a
//!   scope *over limit*; it then admits nothing until it drains);
//! - a job is admitted at most once per attempt, and holds exactly what it took;
//! - after every operation, no queued job is admissible unless strict order or a
//!   reservation holds it (a waiting exclusive job's hold on its key is one);
//! - no exclusive holder of a conflict key holds it beside another holder.

mod admission;
mod auto;
mod deps;
mod entries;
mod exclusive;
pub mod explain;
mod explain_conflict;
mod invariants;
mod needs;
pub use auto::AutoScope;
mod nodes;
mod pause;
mod placement;
mod preempt;
mod queue;
mod rebuild;
mod recover;
pub use recover::RECOVER_OWNER;
mod reserve;
mod scopes;
mod timers;
mod window_order;
mod windows;

use crate::event::{Event, JobChange};
use crate::job::{CancelReason, Job, JobId, JobSpec, JobState, Lease, Outcome};
use crate::policy::Policy;
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

pub use crate::job::SubmitError;
pub use deps::EditError;
pub use nodes::{Node, NodeRegistration, NodeState};
pub use pause::{Pause, PauseError, PauseSpec, MAX_PAUSES};
pub use rebuild::{NodeRecord, Shared, Snapshot};
pub use window_order::WindowPlace;

use entries::{Entries, Entry};
use placement::PlacementIndex;
use queue::QueueIndex;
use scopes::ScopeTable;
use timers::{Timer, Timers};

/// How the admission pass finds candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Wake only what a change can have unblocked (the production engine).
    #[default]
    Indexed,
    /// Walk every queued job on every pass (oracle and baseline).
    Rescan,
}

/// Why a lease operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// No live job has this id.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The token is stale or the lease ran out: the caller no longer holds the job.
    #[error("lease lost for job {0}: the token is stale or the lease expired")]
    LeaseLost(JobId),
    /// The job is not in a state that allows this call.
    #[error("job {id} is {state}: {message}")]
    WrongState {
        /// Job id.
        id: JobId,
        /// Its state.
        state: JobState,
        /// What was expected.
        message: String,
    },
}

/// Why a cancel was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No live job has this id.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job already ended.
    #[error("job {id} already ended ({state})")]
    AlreadyEnded {
        /// Job id.
        id: JobId,
        /// Its final state.
        state: JobState,
    },
}

/// Answer to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// The renewed lease.
    pub lease: Lease,
    /// The holder should stop.
    pub cancel_requested: bool,
}

/// Result of a submit.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The job (its state right after the admission pass).
    pub job: Job,
    /// An idempotent resubmission returned an existing job.
    pub existing: bool,
}

/// Result of applying (or dry-running) a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyReport {
    /// Scopes whose count exceeds their new limit.
    pub over_limit: Vec<String>,
    /// Jobs the new policy admits at once.
    pub admitted_now: Vec<JobId>,
}

/// One scope's count against its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeUsage {
    /// Scope name (policy.md, "Scope names").
    pub scope: String,
    /// The rule it partitions ([`crate::scope::ScopeKey::rule`]): scopes of one rule grow
    /// with the values jobs bring, so a display bounds them per rule.
    pub rule: String,
    /// Units in use.
    pub used: u64,
    /// Limit; `None` when unlimited.
    pub limit: Option<u64>,
    /// Highest count reached since the policy was applied.
    pub peak: u64,
    /// The scope itself, for whoever must tell a policy-named scope from a per-value one.
    pub key: crate::scope::ScopeKey,
}

/// The scheduling engine. See the module docs.
#[derive(Debug, Clone)]
pub struct Engine {
    /// Shared with the [`Shared`] copies taken of the engine (replaced whole, never changed).
    policy: std::sync::Arc<Policy>,
    mode: Mode,
    next_id: JobId,
    next_token: u64,
    entries: Entries,
    nodes: BTreeMap<String, Node>,
    scopes: ScopeTable,
    queue: QueueIndex,
    /// Admitted jobs per owner (fair share ranks by it).
    owner_running: HashMap<String, u64>,
    placement: PlacementIndex,
    timers: Timers,
    events: VecDeque<Event>,
    /// Nodes whose prepared jobs may be able to start.
    dirty_nodes: BTreeSet<String>,
    /// Needs by job shape under the current policy.
    needs_cache: needs::NeedsCache,
    /// Preemptions: waiting preemptors, plans under way, held room.
    preempt: preempt::Preemptions,
    /// Which time windows are active (`engine/windows.rs`).
    windows: windows::WindowState,
    /// Who waits for whom (`after`, `after_ok`).
    deps: deps::Deps,
    /// Active pauses by id.
    pauses: BTreeMap<u64, pause::Active>,
    /// The id the next pause gets.
    next_pause_id: u64,
    /// Expected run times for `[queue] order = "window"` (`engine/window_order.rs`).
    window: window_order::WindowHints,
    /// Recoveries noted for lost holders, submitted by the next pass (`engine/recover.rs`).
    recoveries: Vec<recover::Recovery>,
    /// The numbers the controllers of automatic limits set, by scope name
    /// (`engine/auto.rs`).
    auto: BTreeMap<String, u32>,
    /// Slots the pressure guards of node rules leave each node, by node name
    /// (`engine/auto.rs`).
    guards: BTreeMap<String, u32>,
}

impl Engine {
    /// A new, empty engine.
    pub fn new(policy: Policy, mode: Mode) -> Engine {
        Engine::with_policy(std::sync::Arc::new(policy), mode)
    }

    /// A new, empty engine under a policy shared with others ([`Shared`]).
    fn with_policy(policy: std::sync::Arc<Policy>, mode: Mode) -> Engine {
        Engine {
            policy,
            mode,
            next_id: 1,
            next_token: 1,
            entries: Entries::default(),
            nodes: BTreeMap::new(),
            scopes: ScopeTable::default(),
            queue: QueueIndex::default(),
            owner_running: HashMap::new(),
            placement: PlacementIndex::default(),
            timers: Timers::default(),
            events: VecDeque::new(),
            dirty_nodes: BTreeSet::new(),
            needs_cache: needs::NeedsCache::default(),
            preempt: preempt::Preemptions::default(),
            windows: windows::WindowState::default(),
            deps: deps::Deps::default(),
            pauses: BTreeMap::new(),
            next_pause_id: 1,
            window: window_order::WindowHints::default(),
            recoveries: Vec::new(),
            auto: BTreeMap::new(),
            guards: BTreeMap::new(),
        }
    }

    /// The active policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The admission mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The id the next submitted job will get.
    pub fn next_id(&self) -> JobId {
        self.next_id
    }

    /// The fencing token the next lease grant will get.
    pub fn next_token(&self) -> u64 {
        self.next_token
    }

    /// A live job (queued, admitted, or waiting for a retry).
    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.entries.find(id).map(|e| &*e.job)
    }

    /// Every live job, in no particular order.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.entries.values().map(|e| &*e.job)
    }

    /// Number of live jobs.
    pub fn live_jobs(&self) -> usize {
        self.entries.len()
    }

    /// Every registered node.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// One node.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// The next queued event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Engine::handle_timeout`] should be called next.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next_due()
    }

    /// Every scope the current policy has counted, with its usage and peak.
    pub fn scope_usage(&self) -> Vec<ScopeUsage> {
        (0..self.scopes.states.len())
            .filter(|&i| {
                !matches!(
                    self.scopes.interner.key(i as ScopeId),
                    ScopeKey::Placement(_)
                )
            })
            .map(|i| {
                let s = &self.scopes.states[i];
                let key = self.scopes.interner.key(i as ScopeId);
                ScopeUsage {
                    scope: key.to_string(),
                    rule: key.rule(),
                    used: s.used,
                    limit: s.limit,
                    peak: s.peak,
                    key: key.clone(),
                }
            })
            .collect()
    }

    /// Submits a job.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] names the field: an empty kind, a reserved attribute name,
    /// an invalid selector, a pool the policy does not declare, both `node` and
    /// `node_selector`; a dependency on a job never submitted, or an `after_ok` on a job
    /// that already ended.
    pub fn submit(&mut self, spec: JobSpec, now: Timestamp) -> Result<Submitted, SubmitError> {
        if let Some(key) = &spec.idempotency_key {
            if let Some(id) = self.entries.idempotent(&spec.owner, key) {
                if let Some(e) = self.entries.find(id) {
                    return Ok(Submitted {
                        job: Job::clone(&e.job),
                        existing: true,
                    });
                }
            }
        }
        self.check_deps(&spec)?;
        let job = self.job_from_spec(spec, now)?;
        let id = job.id;
        self.insert_entry(std::sync::Arc::new(job), now);
        self.emit(JobChange::Submitted, id);
        self.run_pass(now);
        Ok(Submitted {
            job: Job::clone(&self.entries.get(id).job),
            existing: false,
        })
    }

    /// Records a job that ran without admission (its holder could not reach the server and
    /// was told to run anyway) and is reported now that it ended: a job of `spec`, ended
    /// `outcome` with `message`, that ran from `started` to `finished`, marked
    /// `unadmitted`. It never enters the queue and holds nothing: its Submitted and Finished
    /// events are all there is of it, so the store and the history keep it like any ended
    /// job.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] as [`Engine::submit`] for a spec the policy refuses.
    pub fn record_unadmitted(
        &mut self,
        spec: JobSpec,
        (started, finished): (Timestamp, Timestamp),
        outcome: crate::job::Outcome,
        message: String,
        now: Timestamp,
    ) -> Result<Job, SubmitError> {
        let mut job = self.job_from_spec(spec, now)?;
        let state = outcome.state();
        job.submitted_at = started;
        job.queued_at = started;
        job.started_at = Some(started);
        job.finished_at = Some(finished.max(started));
        job.state = state;
        job.outcome = Some(state);
        job.message = Some(self.policy.quotas.bound_message(message));
        job.unadmitted = true;
        job.after.clear();
        job.after_ok.clear();
        let job = std::sync::Arc::new(job);
        for change in [JobChange::Submitted, JobChange::Finished] {
            self.events.push_back(Event::Job {
                change,
                job: job.clone(),
            });
        }
        Ok(Job::clone(&job))
    }

    /// How many live jobs (not yet ended for good: queued, admitted or waiting for a retry)
    /// `owner` has; O(1).
    pub fn live_jobs_of(&self, owner: &str) -> usize {
        self.entries.owned_by(owner)
    }

    /// The live job submitted by `owner` with idempotency key `key`, if any. Keys of jobs
    /// that have ended are not kept here; the server's store answers for those.
    pub fn idempotent_job(&self, owner: &str, key: &str) -> Option<JobId> {
        self.entries.idempotent(owner, key)
    }

    fn job_from_spec(&mut self, spec: JobSpec, now: Timestamp) -> Result<Job, SubmitError> {
        let checked = spec.check(&self.policy)?;
        let id = self.next_id;
        self.next_id += 1;
        Ok(checked.into_job(id, now))
    }

    /// Renews a lease.
    ///
    /// # Errors
    /// [`LeaseError::LeaseLost`] when the token is stale or the lease ran out.
    pub fn heartbeat(
        &mut self,
        id: JobId,
        token: u64,
        now: Timestamp,
    ) -> Result<HeartbeatAnswer, LeaseError> {
        self.handle_timeout(now);
        let ttl = self.policy.leases.ttl;
        let e = self.entries.find(id).ok_or(LeaseError::NotFound(id))?;
        // The token is checked before the record is touched: a stale heartbeat copies
        // nothing.
        let admitted = e.job.state.is_admitted();
        let Some(mut lease) = e.job.lease.filter(|l| l.token == token && admitted) else {
            return Err(LeaseError::LeaseLost(id));
        };
        lease.expires_at = now.plus(ttl);
        let job = self.entries.job_mut(id);
        job.lease = Some(lease);
        Ok(HeartbeatAnswer {
            lease,
            cancel_requested: job.cancel_requested,
        })
    }

    /// The scopes a live job holds now, each as its rule and its name as
    /// [`Engine::scope_usage`] gives them (placement scopes left out); empty for a job that
    /// holds none or is not live.
    pub fn held_scopes(&self, id: JobId) -> Vec<(String, String)> {
        let Some(e) = self.entries.find(id) else {
            return Vec::new();
        };
        e.held
            .iter()
            .map(|&(s, _)| self.scopes.interner.key(s))
            .filter(|k| !matches!(k, ScopeKey::Placement(_)))
            .map(|k| (k.rule(), k.to_string()))
            .collect()
    }

    /// Takes a usage report from the holder of lease `token` of job `id` (sent with a
    /// renewal or the finish) and folds it into the job's ([`crate::Usage::merge`]). A
    /// report without the lease changes nothing.
    ///
    /// # Errors
    /// As [`Engine::heartbeat`]: the job is not live, or the lease is not `token`'s.
    pub fn record_usage(
        &mut self,
        id: JobId,
        token: u64,
        usage: &crate::Usage,
        now: Timestamp,
    ) -> Result<(), LeaseError> {
        // A lease that ran out by `now` is gone before the report is looked at.
        self.handle_timeout(now);
        self.holder(id, token)?;
        let job = self.entries.job_mut(id);
        let merged = match &job.usage {
            Some(last) => last.merge(usage),
            None => *usage,
        };
        job.usage = Some(Box::new(merged));
        Ok(())
    }

    fn holder(&self, id: JobId, token: u64) -> Result<&Entry, LeaseError> {
        let e = self.entries.find(id).ok_or(LeaseError::NotFound(id))?;
        match e.job.lease {
            Some(l) if l.token == token && e.job.state.is_admitted() => Ok(e),
            _ => Err(LeaseError::LeaseLost(id)),
        }
    }

    /// A two-stage job's holder reports its prepare step done.
    ///
    /// # Errors
    /// [`LeaseError`] for a stale token, or a job that is not `preparing`.
    pub fn prepared(&mut self, id: JobId, token: u64, now: Timestamp) -> Result<Job, LeaseError> {
        self.handle_timeout(now);
        let e = self.holder(id, token)?;
        if e.job.state != JobState::Preparing {
            return Err(LeaseError::WrongState {
                id,
                state: e.job.state,
                message: "only a preparing job can report prepared".into(),
            });
        }
        let job = self.entries.job_mut(id);
        job.state = JobState::Prepared;
        job.prepared_at = Some(now);
        let node = job.node().map(str::to_string);
        self.emit(JobChange::Prepared, id);
        match node {
            Some(node) => self.node_prepared(&node, id, now),
            None => self.promote(id, None, now),
        }
        self.run_pass(now);
        Ok(Job::clone(&self.entries.get(id).job))
    }

    /// The holder ends its job. A `message` longer than `[quotas].max_message_bytes` is
    /// cut, with a marker ([`crate::policy::QuotasPolicy::bound_message`]).
    ///
    /// # Errors
    /// [`LeaseError`] for a stale token or an expired lease.
    pub fn finish(
        &mut self,
        id: JobId,
        token: u64,
        outcome: Outcome,
        message: Option<String>,
        now: Timestamp,
    ) -> Result<Job, LeaseError> {
        self.handle_timeout(now);
        let holder = self.holder(id, token)?;
        // A holder that stops on a user's cancel: the record names who cancelled.
        let by = holder
            .job
            .cancel_by
            .clone()
            .filter(|_| outcome == crate::job::Outcome::Cancelled);
        let message = match (by, message) {
            (Some(by), Some(m)) => Some(format!("cancelled by {by}: {m}")),
            (Some(by), None) => Some(format!("cancelled by {by}")),
            (None, m) => m,
        };
        let message = message.map(|m| self.policy.quotas.bound_message(m));
        let job = self.end_or_requeue(id, outcome.state(), message, now);
        self.run_pass(now);
        Ok(job)
    }

    /// Cancels a job: a queued one at once; an admitted one gets `cancel_requested`, or
    /// with `force` its lease is revoked and it ends `cancelled` at once.
    ///
    /// # Errors
    /// [`CancelError`] when the job is unknown or already ended.
    pub fn cancel(&mut self, id: JobId, force: bool, now: Timestamp) -> Result<Job, CancelError> {
        self.cancel_by(id, force, None, now)
    }

    /// [`Engine::cancel`] on behalf of `by` (a user: `admin token "ops"`), who is named in
    /// the message the job ends with.
    ///
    /// # Errors
    /// [`CancelError`] when the job is unknown or already ended.
    pub fn cancel_by(
        &mut self,
        id: JobId,
        force: bool,
        by: Option<&str>,
        now: Timestamp,
    ) -> Result<Job, CancelError> {
        self.handle_timeout(now);
        let state = self
            .entries
            .find(id)
            .ok_or(CancelError::NotFound(id))?
            .job
            .state;
        let job = if state == JobState::Queued || state.is_terminal() || force {
            let msg = if force && state.is_admitted() {
                "force-cancelled"
            } else {
                "cancelled"
            };
            let msg = match by {
                Some(by) => format!("{msg} by {by}"),
                None => msg.to_string(),
            };
            self.end_job(id, JobState::Cancelled, Some(msg), now)
        } else {
            let first = self.entries.get(id).job.cancel_reason != Some(CancelReason::Cancel);
            let job = self.entries.job_mut(id);
            job.cancel_requested = true;
            job.cancel_reason = Some(CancelReason::Cancel);
            if let Some(by) = by {
                job.cancel_by = Some(by.to_string());
            }
            if first {
                self.emit(JobChange::CancelRequested, id);
            }
            Job::clone(&self.entries.get(id).job)
        };
        self.run_pass(now);
        Ok(job)
    }

    /// Fires every timer due at `now`: lease expiry, `not_before`, `max_wait`, `max_run`,
    /// prepare timeouts, retries, reservations, node TTLs, window boundaries. Then runs an
    /// admission pass.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.fire_timers(now) {
            self.run_pass(now);
        }
    }

    /// Reports a change of a live job: its state now, shared with the event (the record is
    /// copied only if it changes again while the event is held).
    fn emit(&mut self, change: JobChange, id: JobId) {
        let job = self.entries.get(id).job.clone();
        self.events.push_back(Event::Job { change, job });
    }

    fn intern(&mut self, key: ScopeKey) -> ScopeId {
        let id = self.scopes.interner.intern(key);
        if id as usize == self.scopes.states.len() {
            let limit = self.scope_limit(self.scopes.interner.key(id));
            self.scopes.states.push(scopes::ScopeState {
                limit,
                ..scopes::ScopeState::default()
            });
        }
        id
    }

    /// A scope's limit under the current policy and node registrations.
    fn scope_limit(&self, key: &ScopeKey) -> Option<u64> {
        let p = &self.policy;
        match key {
            ScopeKey::Global | ScopeKey::Limit { .. } | ScopeKey::Maintenance(_) => {
                self.windowed_limit(key).flatten()
            }
            ScopeKey::GlobalPrepare | ScopeKey::Pool(_) | ScopeKey::PoolValue { .. } => {
                key.limit_in(p)
            }
            ScopeKey::NodePool { pool, node } => Some(self.node_pool_capacity(node, pool)),
            ScopeKey::Node(n) => self.guarded_number(n).map(u64::from),
            ScopeKey::NodePrepare(n) => self
                .guarded_number(n)
                .map(|m| u64::from(m) + u64::from(p.nodes.prepare_queue)),
            ScopeKey::Conflict { .. } | ScopeKey::Placement(_) => None,
        }
    }
}
