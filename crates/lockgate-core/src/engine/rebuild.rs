//! Rebuilding the engine: after a policy change, from an exported [`Snapshot`] (the
//! server's store keeps one's worth of rows and restores from them at start), and from a
//! [`Shared`] copy (a forecast's, rebuilt on its own thread).
//!
//! A rebuild re-derives every index from the jobs and nodes alone: scopes are interned
//! again, every admitted job takes again exactly what the new policy says it holds (so a
//! lowered limit leaves its scope over limit, never stops a job), and every queued job is
//! filed again. Cost O(n log n).
//!
//! # Invariants
//! - There is one restore: [`Engine::restore_in_zone`] turns its [`Snapshot`] into a
//!   [`Shared`] and calls [`Engine::from_shared`], so an engine rebuilt from a forecast's
//!   copy is exactly the one a restart at that instant would give.
//! - [`Engine::share`] copies no job and does not walk the queue: the jobs come as a
//!   persistent map ([`SharedJobs`], `entries.rs`), brought up to date in O(c log n) for the
//!   c jobs that changed since the last call; nodes and pauses are cloned (O(nodes +
//!   pauses)). What it holds never changes: the engine copies a shared job record before
//!   changing it, and replaces its policy whole.

use super::entries::SharedJobs;
use super::timers::Timer;
use super::{ApplyReport, Engine, Entry, Mode, NodeRegistration, NodeState};
use super::{PlacementIndex, QueueIndex, ScopeTable};
use crate::event::Event;
use crate::job::{Job, JobId, JobState};
use crate::policy::Policy;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// A node as exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// What it registered.
    pub registration: NodeRegistration,
    /// Cordoned.
    pub cordoned: bool,
}

/// Everything needed to rebuild an engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The next job id.
    pub next_id: JobId,
    /// The next lease token.
    pub next_token: u64,
    /// Every live job.
    pub jobs: Vec<Job>,
    /// Every registered node.
    pub nodes: Vec<NodeRecord>,
    /// Every active pause.
    #[serde(default)]
    pub pauses: Vec<super::Pause>,
    /// The next pause id.
    #[serde(default)]
    pub next_pause_id: u64,
}

/// What an engine is rebuilt from, sharing the job records and the policy with the engine
/// it was taken from ([`Engine::share`]): taking it copies no job, so it is cheap enough
/// for the server's event loop at any queue length. [`Engine::from_shared`] rebuilds an
/// engine from it, on any thread.
#[derive(Debug, Clone)]
pub struct Shared {
    policy: Arc<Policy>,
    mode: Mode,
    zone: jiff::tz::TimeZone,
    next_id: JobId,
    next_token: u64,
    jobs: SharedJobs,
    nodes: Vec<NodeRecord>,
    pauses: Vec<super::Pause>,
    next_pause_id: u64,
    /// The numbers of automatic limits (`engine/auto.rs`).
    auto: BTreeMap<String, u32>,
    /// The slots pressure guards leave nodes (`engine/auto.rs`).
    guards: BTreeMap<String, u32>,
}

impl Shared {
    /// Every live job, by id: the engine's own records.
    pub fn jobs(&self) -> impl Iterator<Item = &Arc<Job>> + '_ {
        self.jobs.values()
    }

    /// Number of live jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// No live job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The policy it was taken under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Every registered node, as registered (the server's forecast picture reads each
    /// node's labels for its number).
    pub fn nodes(&self) -> &[NodeRecord] {
        &self.nodes
    }
}

impl Engine {
    /// Exports the live state.
    pub fn export(&self) -> Snapshot {
        let mut jobs: Vec<Job> = self.entries.values().map(|e| Job::clone(&e.job)).collect();
        jobs.sort_by_key(|j| j.id);
        Snapshot {
            next_id: self.next_id,
            next_token: self.next_token,
            jobs,
            nodes: self.node_records(),
            pauses: self.pauses().cloned().collect(),
            next_pause_id: self.next_pause_id,
        }
    }

    fn node_records(&self) -> Vec<NodeRecord> {
        let record = |n: &super::Node| NodeRecord {
            registration: NodeRegistration {
                name: n.name.clone(),
                labels: n.labels.clone(),
                resources: n.resources.clone(),
                kinds: n.kinds.clone(),
                instance: n.instance.clone(),
            },
            cordoned: n.cordoned,
        };
        self.nodes.values().map(record).collect()
    }

    /// The live state as [`Engine::export`] has it, with the policy, the mode and the
    /// zone, sharing the job records instead of copying them (see [`Shared`]). Cost
    /// O(c log n) for the c jobs changed since the last call, O(n log n) the first time
    /// (the engine keeps the shared map from then on).
    pub fn share(&mut self) -> Shared {
        Shared {
            policy: self.policy.clone(),
            mode: self.mode,
            zone: self.windows.zone.clone(),
            next_id: self.next_id,
            next_token: self.next_token,
            jobs: self.entries.shared(),
            nodes: self.node_records(),
            pauses: self.pauses().cloned().collect(),
            next_pause_id: self.next_pause_id,
            auto: self.auto.clone(),
            guards: self.guards.clone(),
        }
    }

    /// Rebuilds an engine from a snapshot. Holders could not renew while the caller was
    /// down, so every lease gets a fresh TTL from `now`; nodes count as seen at `now`.
    pub fn restore(policy: Policy, snapshot: Snapshot, now: Timestamp, mode: Mode) -> Engine {
        Engine::restore_in_zone(policy, snapshot, now, mode, "UTC")
    }

    /// [`Engine::restore`] with time windows read in the IANA zone `zone` (the server's
    /// zone, the one its schedules use) from the first admission on; a name the bundled
    /// database does not know reads them in UTC.
    pub fn restore_in_zone(
        policy: Policy,
        snapshot: Snapshot,
        now: Timestamp,
        mode: Mode,
        zone: &str,
    ) -> Engine {
        let shared = Shared {
            policy: Arc::new(policy),
            mode,
            zone: crate::calendar::zone_by_name(zone).unwrap_or(jiff::tz::TimeZone::UTC),
            next_id: snapshot.next_id,
            next_token: snapshot.next_token,
            jobs: snapshot
                .jobs
                .into_iter()
                .map(|j| (j.id, Arc::new(j)))
                .collect(),
            nodes: snapshot.nodes,
            pauses: snapshot.pauses,
            next_pause_id: snapshot.next_pause_id,
            auto: BTreeMap::new(),
            guards: BTreeMap::new(),
        };
        Engine::from_shared(shared, now)
    }

    /// Rebuilds an engine from a [`Shared`] copy, as [`Engine::restore_in_zone`] does from a
    /// snapshot (the one implementation of both): every lease gets a fresh TTL from `now`,
    /// nodes count as seen at `now`. The job records stay shared until they change.
    /// Cost O(n log n).
    pub fn from_shared(snapshot: Shared, now: Timestamp) -> Engine {
        let mut engine = Engine::with_policy(snapshot.policy, snapshot.mode);
        engine.windows.zone = snapshot.zone;
        engine.auto = snapshot.auto;
        engine.guards = snapshot.guards;
        engine.next_id = snapshot.next_id.max(1);
        engine.next_token = snapshot.next_token.max(1);
        let ttl = engine.policy.leases.ttl;
        engine.restore_pauses(snapshot.pauses, snapshot.next_pause_id);
        for rec in snapshot.nodes {
            let name = rec.registration.name.clone();
            engine.nodes.insert(
                name.clone(),
                super::nodes::fresh_node(rec.registration, rec.cordoned, now),
            );
            engine
                .timers
                .arm(now.plus(engine.policy.nodes.ttl), Timer::NodeTtl(name));
        }
        for (_, mut job) in snapshot.jobs {
            if let Some(mut lease) = job.lease {
                lease.expires_at = now.plus(ttl);
                Arc::make_mut(&mut job).lease = Some(lease);
            }
            engine.next_id = engine.next_id.max(job.id + 1);
            if let Some(token) = job.lease.map(|l| l.token) {
                engine.next_token = engine.next_token.max(token + 1);
            }
            let id = job.id;
            engine.entries.insert(Entry::new(job));
            engine.arm_timers(id, now);
        }
        for id in engine.entries.sorted_ids() {
            engine.register_deps(id);
        }
        engine.rebuild(now);
        engine.run_pass(now);
        engine
    }

    fn arm_timers(&mut self, id: JobId, now: Timestamp) {
        let job = &self.entries.get(id).job;
        let ms = Duration::from_millis;
        let mut timers = Vec::new();
        match job.state {
            JobState::Queued => {
                if let Some(w) = job.max_wait_ms {
                    timers.push((job.queued_at.plus(ms(w)), Timer::MaxWait(id, job.attempt)));
                }
                if let Some(t) = job.not_before.filter(|&t| t > now) {
                    timers.push((t, Timer::NotBefore(id, job.attempt)));
                }
            }
            s if s.is_admitted() => {
                let lease = job.lease.expect("admitted jobs hold a lease");
                timers.push((lease.expires_at, Timer::Lease(id, lease.token)));
                if let (Some(max), Some(start)) = (job.max_run_ms, job.started_at) {
                    timers.push((start.plus(ms(max)), Timer::MaxRun(id, lease.token)));
                }
                if let (JobState::Preparing, Some(start)) = (s, job.prepare_started_at) {
                    let timeout = self.policy.prepare_timeout(&job.kind);
                    timers.push((start.plus(timeout), Timer::PrepareTimeout(id, lease.token)));
                }
            }
            _ => {
                if let Some(at) = job.retry_at {
                    timers.push((at, Timer::Retry(id, job.attempt)));
                }
            }
        }
        for (at, timer) in timers {
            self.timers.arm(at, timer);
        }
    }

    /// Applies a validated policy atomically: running jobs are untouched, over-limit scopes
    /// drain, queued jobs are evaluated again at once.
    pub fn apply_policy(&mut self, policy: Policy, now: Timestamp) -> ApplyReport {
        self.handle_timeout(now);
        let before: BTreeSet<JobId> = self.admitted_ids();
        self.policy = std::sync::Arc::new(policy);
        self.rebuild(now);
        // `exclusive_delay`s that passed before the change hold back again at once.
        self.fire_timers(now);
        let over_limit: Vec<String> = (0..self.scopes.states.len())
            .filter(|&i| {
                self.scopes.states[i]
                    .limit
                    .is_some_and(|l| self.scopes.states[i].used > l)
            })
            .map(|i| self.scopes.interner.key(i as u32).to_string())
            .collect();
        self.run_pass(now);
        let admitted_now = self.admitted_ids().difference(&before).copied().collect();
        self.events.push_back(Event::PolicyApplied {
            over_limit: over_limit.clone(),
        });
        ApplyReport {
            over_limit,
            admitted_now,
        }
    }

    /// What [`Engine::apply_policy`] would do, without doing it.
    pub fn dry_run_policy(&self, policy: Policy, now: Timestamp) -> ApplyReport {
        let mut copy = self.clone();
        copy.apply_policy(policy, now)
    }

    fn admitted_ids(&self) -> BTreeSet<JobId> {
        self.entries
            .values()
            .filter(|e| e.job.state.is_admitted())
            .map(|e| e.job.id)
            .collect()
    }

    /// Re-derives every index from the jobs and nodes under the current policy.
    pub(crate) fn rebuild(&mut self, _now: Timestamp) {
        // Window numbers first: interning reads them (the limits may be renumbered).
        self.compute_windows(_now);
        self.scopes = ScopeTable::default();
        self.queue = QueueIndex::default();
        self.placement = PlacementIndex::default();
        self.owner_running.clear();
        self.needs_cache.clear();
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in &names {
            let (number, rule) = self.policy.node_number(&self.nodes[name].labels);
            let rule = rule.map(|i| self.policy.nodes.rules[i].selector.text().to_string());
            let n = self.nodes.get_mut(name).expect("listed");
            (n.number, n.rule) = (number, rule);
            (n.running, n.preparing, n.prepared) = (0, 0, 0);
            n.scope_ids = None;
            n.filed.clear();
            n.prepared_queue.clear();
        }
        let ids = self.entries.sorted_ids();
        for &id in &ids {
            let job = self.entries.get(id).job.clone();
            let needs = self.needs_of(&job);
            let placement = self.job_placement_scope(&job);
            let e = self.entries.get_mut(id);
            (e.needs, e.placement) = (needs, placement);
            e.held.clear();
            e.class = None;
            e.reserve_armed = None;
            if job.state.is_admitted() {
                self.retake(id, &job);
            }
        }
        for &id in &ids {
            let job = &self.entries.get(id).job;
            if job.state == JobState::Queued && job.not_before.is_none_or(|t| t <= _now) {
                self.forget_pause_hold(id);
                self.admit_gate(id);
            }
        }
        self.reindex_preemptions();
        for name in names {
            if self.nodes[&name].state == NodeState::Lost {
                continue;
            }
            self.dirty_nodes.insert(name.clone());
            self.node_scopes(&name);
        }
    }

    /// An admitted job takes again what it holds under the current policy.
    fn retake(&mut self, id: JobId, job: &Job) {
        let needs = self.entries.get(id).needs.clone();
        self.take_share(id, &needs, job.node(), job.state, job.prepared_at);
        *self.owner_running.entry(job.owner.clone()).or_insert(0) += 1;
    }

    /// Wakes the class of a queued job if the job is its head (a reservation may be due).
    pub(crate) fn wake_class_of(&mut self, id: JobId) {
        let Some(cid) = self.entries.find(id).and_then(|e| e.class) else {
            return;
        };
        if self.queue.classes[cid as usize].head() != Some(id) || self.mode == Mode::Rescan {
            return;
        }
        if self.queue.classes[cid as usize].parked.is_some() {
            self.detach(cid);
            self.file(cid, true);
        }
    }
}
