//! The lockgate run: the real engine, driven in virtual time.
//!
//! A discrete-event loop over two sources of time: the simulator's own agenda (submits,
//! prepare steps and runs that end, lease renewals) and the engine's
//! [`next_deadline`](Engine::next_deadline). At equal times the engine's timers fire first,
//! then agenda entries in the order they were scheduled, so a run is a pure function of
//! its input. After every engine call the simulator drains [`Engine::poll_event`] and
//! plays the holder: `AdmittedPrepare` schedules `prepared` after `prepare_s`, `Started`
//! schedules `finish(succeeded)` after `run_s`, and `CancelRequested` with reason
//! `preempted` or `cancel` schedules `finish(cancelled)` after [`STOP_MS`], as `lockgate run`
//! stops its command (a preempted job is then requeued by the engine and runs again, from
//! the start). A `max_run` cancel is not obeyed: the engine revokes the lease a TTL later.
//!
//! Every holder action carries the lease token it was scheduled under, and is dropped when
//! the job no longer holds that token (it ended, or was requeued and admitted again), so a
//! stale `finish` never ends a later attempt.
//!
//! Leases and nodes are renewed every `min(lease ttl, node ttl) / 3` (what `lockgate run`
//! and the agents do), so no lease expires spuriously; a job that still ends otherwise is
//! recorded with its outcome (a prepare step longer than the kind's `prepare_timeout`
//! fails the job, as it would in production).
//! The run ends when no job is in flight and none is left to submit; jobs still queued
//! then (held by a `max = 0`, a missing node, ...) are reported as unfinished.
//!
//! With a contention model ([`simulate_with`]), a started job on a shared resource does not
//! finish `run_s` later: it joins the [`Flows`], and the simulator arms one end check at
//! the flows' next end (stale checks, from before the latest start or end, are dropped).
//! A job that ends otherwise (cancelled, requeued) leaves the flows when the engine says so.

use crate::contention::{Contention, Flows};
use crate::input::{NodeSpec, WorkloadJob};
use crate::report::ScopePeak;
use lockgate_core::engine::NodeRegistration;
use lockgate_core::event::{Event, JobChange};
use lockgate_core::job::{CancelReason, JobId, JobState, Outcome};
use lockgate_core::{Engine, Mode, Policy, Timestamp};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What happened to one workload job (times in ms from the start of the run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRecord {
    /// Submit time.
    pub submitted_ms: u64,
    /// Admission: prepare start for a two-stage job, else start.
    pub admitted_ms: Option<u64>,
    /// Admission to run (start of the data movement).
    pub started_ms: Option<u64>,
    /// End.
    pub finished_ms: Option<u64>,
    /// The node it ran on.
    pub node: Option<String>,
    /// Final state (`succeeded`, or `failed`/`lost` when something went wrong).
    pub outcome: Option<JobState>,
    /// Its run time alone, for a job that ran under the contention model (a run on a
    /// shared resource); `None` otherwise.
    pub run_alone_ms: Option<u64>,
}

/// A node's run slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlots {
    /// Node name.
    pub name: String,
    /// Its number (`max_running`); `None`: unlimited.
    pub slots: Option<u32>,
}

/// Everything a run produced, before summarising.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// One record per workload job, in workload order.
    pub jobs: Vec<JobRecord>,
    /// Every scope a job touched, sorted by name.
    pub scopes: Vec<ScopePeak>,
    /// Every node, in `nodes.json` order.
    pub nodes: Vec<NodeSlots>,
}

/// The engine refused something the simulator asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The engine refused a workload job (1-based position in the workload).
    #[error("workload job {index}: {error}")]
    Submit {
        /// 1-based position among the workload's jobs.
        index: usize,
        /// The engine's refusal, naming the field.
        error: lockgate_core::engine::SubmitError,
    },
}

/// How long a simulated holder takes to stop its work once asked to (a preempted or
/// cancelled job): the signal, the tool's cleanup, the `finish` call.
pub const STOP_MS: u64 = 1_000;

/// One agenda entry; holder actions carry the lease token they were scheduled under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Submit(usize),
    Prepared(JobId, u64),
    Finish(JobId, u64, Outcome),
    Renew,
    /// The flows' next end, armed at this epoch.
    FlowEnd(u64),
}

struct Driver<'a> {
    engine: Engine,
    jobs: &'a [WorkloadJob],
    records: Vec<JobRecord>,
    agenda: BTreeMap<(u64, u64), Action>,
    seq: u64,
    /// Jobs admitted and not ended, with their latest lease token (a requeued job keeps
    /// its stale one until it is admitted again).
    in_flight: BTreeMap<JobId, u64>,
    index_of: HashMap<JobId, usize>,
    to_submit: usize,
    renew_every: u64,
    renew_armed: bool,
    node_names: Vec<String>,
    /// The wall-clock time of the workload's 0 (ms since the epoch), as the engine sees it.
    origin: u64,
    flows: Option<Flows<JobId>>,
    /// The flows' epoch an end check is armed for.
    flows_armed: u64,
}

/// Runs the workload through lockgate's engine.
///
/// # Errors
/// [`SimError::Submit`] when the engine refuses a job (an invalid selector, an undeclared
/// pool, a reserved attribute name).
pub fn simulate(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
) -> Result<Run, SimError> {
    simulate_at(policy, nodes, jobs, Timestamp(0))
}

/// [`simulate`] with the workload's time 0 at `origin` on the engine's clock, so that
/// time-of-day rules (maintenance windows, `windows` on a rule) apply at the hours they
/// would (a replay of a server's history starts at its first arrival). The records stay
/// relative to `origin`.
///
/// # Errors
/// As [`simulate`].
pub fn simulate_at(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    origin: Timestamp,
) -> Result<Run, SimError> {
    simulate_at_with(policy, nodes, jobs, None, origin)
}

/// [`simulate`], with run times from a contention model when one is given.
///
/// # Errors
/// As [`simulate`].
pub fn simulate_with(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Result<Run, SimError> {
    simulate_at_with(policy, nodes, jobs, contention, Timestamp(0))
}

/// [`simulate_at`] and [`simulate_with`] at once: time 0 at `origin`, run times from the
/// contention model when one is given.
///
/// # Errors
/// As [`simulate`].
pub fn simulate_at_with(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
    origin: Timestamp,
) -> Result<Run, SimError> {
    let kinds: BTreeSet<String> = jobs.iter().map(|j| j.kind.clone()).collect();
    let mut engine = Engine::new(policy.clone(), Mode::Indexed);
    for n in nodes {
        engine.register_node(
            NodeRegistration {
                name: n.name.clone(),
                labels: n.labels.clone(),
                resources: BTreeMap::new(),
                kinds: kinds.clone(),
                instance: None,
            },
            origin,
        );
    }
    let ttl = policy.leases.ttl.min(policy.nodes.ttl).as_millis() as u64;
    let mut d = Driver {
        engine,
        jobs,
        records: jobs
            .iter()
            .map(|j| JobRecord {
                submitted_ms: j.at_ms(),
                ..JobRecord::default()
            })
            .collect(),
        agenda: BTreeMap::new(),
        seq: 0,
        in_flight: BTreeMap::new(),
        index_of: HashMap::new(),
        to_submit: jobs.len(),
        renew_every: (ttl / 3).max(1),
        renew_armed: false,
        node_names: nodes.iter().map(|n| n.name.clone()).collect(),
        origin: origin.0,
        flows: contention.map(|c| Flows::new(c.clone())),
        flows_armed: 0,
    };
    d.drain(0);
    for (i, j) in jobs.iter().enumerate() {
        d.schedule(j.at_ms(), Action::Submit(i));
    }
    d.arm_renew(0);
    d.run()?;
    let mut scopes: Vec<ScopePeak> = d
        .engine
        .scope_usage()
        .into_iter()
        .map(|u| ScopePeak {
            scope: u.scope,
            limit: u.limit,
            peak: u.peak,
        })
        .collect();
    scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
    let nodes = nodes
        .iter()
        .map(|n| NodeSlots {
            name: n.name.clone(),
            slots: d.engine.node(&n.name).and_then(|n| n.number),
        })
        .collect();
    Ok(Run {
        jobs: d.records,
        scopes,
        nodes,
    })
}

impl Driver<'_> {
    fn schedule(&mut self, at: u64, action: Action) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), action);
    }

    fn busy(&self) -> bool {
        self.to_submit > 0 || !self.in_flight.is_empty()
    }

    fn arm_renew(&mut self, now: u64) {
        if !self.renew_armed && self.busy() {
            self.renew_armed = true;
            self.schedule(now + self.renew_every, Action::Renew);
        }
    }

    fn run(&mut self) -> Result<(), SimError> {
        while self.busy() {
            let next_action = self.agenda.first_key_value().map(|(k, _)| k.0);
            let next_timer = self
                .engine
                .next_deadline()
                .map(|t| t.0.saturating_sub(self.origin));
            match (next_timer, next_action) {
                (Some(t), Some(a)) if t <= a => self.timeout(t),
                (Some(t), None) => self.timeout(t),
                (_, Some(_)) => {
                    let ((now, _), action) = self.agenda.pop_first().expect("non-empty");
                    self.act(action, now)?;
                }
                (None, None) => break,
            }
        }
        Ok(())
    }

    fn timeout(&mut self, now: u64) {
        self.engine.handle_timeout(Timestamp(self.origin + now));
        self.drain(now);
    }

    fn act(&mut self, action: Action, now: u64) -> Result<(), SimError> {
        let t = Timestamp(self.origin + now);
        match action {
            Action::Submit(i) => {
                self.to_submit -= 1;
                let spec = self.jobs[i].spec();
                // The id is known before the events are drained: ids grow by one per submit.
                let submitted = self
                    .engine
                    .submit(spec, t)
                    .map_err(|error| SimError::Submit {
                        index: i + 1,
                        error,
                    })?;
                self.index_of.insert(submitted.job.id, i);
                // `[queue] order = "window"` packs by the workload's own durations.
                let hold = self.jobs[i].prepare_ms() + self.jobs[i].run_ms();
                self.engine.set_expected_run(
                    submitted.job.id,
                    std::time::Duration::from_millis(hold),
                    t,
                );
            }
            Action::Prepared(id, token) => {
                // A job that ended meanwhile (prepare timeout) is no longer in flight.
                if self.in_flight.get(&id) == Some(&token) {
                    let _ = self.engine.prepared(id, token, t);
                }
            }
            Action::Finish(id, token, outcome) => {
                if self.in_flight.get(&id) == Some(&token) {
                    let _ = self.engine.finish(id, token, outcome, None, t);
                }
            }
            Action::Renew => {
                self.renew_armed = false;
                let held: Vec<(JobId, u64)> =
                    self.in_flight.iter().map(|(&id, &tok)| (id, tok)).collect();
                for (id, token) in held {
                    let _ = self.engine.heartbeat(id, token, t);
                }
                for name in &self.node_names {
                    self.engine.node_heartbeat(name, t);
                }
            }
            Action::FlowEnd(epoch) => self.flow_end(epoch, t),
        }
        self.drain(now);
        self.arm_renew(now);
        Ok(())
    }

    /// Finishes every job whose data is moved (when the check is not stale).
    fn flow_end(&mut self, epoch: u64, t: Timestamp) {
        let Some(flows) = self.flows.as_mut().filter(|f| f.epoch() == epoch) else {
            return;
        };
        for id in flows.take_done(t.0) {
            if let Some(&token) = self.in_flight.get(&id) {
                let _ = self.engine.finish(id, token, Outcome::Succeeded, None, t);
            }
        }
    }

    /// Starts the run of job `i` (`id`, lease `token`): into the flows when it uses a
    /// shared resource, else a finish `run_s` later.
    fn start_run(&mut self, i: usize, id: JobId, token: u64, now: u64) {
        let j = &self.jobs[i];
        if let Some(flows) = self.flows.as_mut() {
            let res = flows.model().resources_of(j);
            if !res.is_empty() {
                let size = flows.model().size_mb(j, &res);
                self.records[i].run_alone_ms = Some(flows.model().alone_ms(j, &res));
                flows.start(id, res, size, now);
                return;
            }
        }
        let at = now + j.run_ms();
        self.schedule(at, Action::Finish(id, token, Outcome::Succeeded));
    }

    /// Arms an end check for the flows' current epoch, once.
    fn arm_flows(&mut self) {
        let Some(f) = self.flows.as_ref() else {
            return;
        };
        let (epoch, next) = (f.epoch(), f.next_end());
        if epoch != self.flows_armed {
            self.flows_armed = epoch;
            if let Some(at) = next {
                self.schedule(at, Action::FlowEnd(epoch));
            }
        }
    }

    /// Plays the holder for every event the engine produced.
    fn drain(&mut self, now: u64) {
        self.drain_events(now);
        self.arm_flows();
    }

    fn drain_events(&mut self, now: u64) {
        let origin = self.origin;
        while let Some(event) = self.engine.poll_event() {
            let Event::Job { change, job } = event else {
                continue;
            };
            // Every call is drained right after it returns, so the id of a job submitted
            // by that call is already known.
            let Some(&i) = self.index_of.get(&job.id) else {
                continue;
            };
            let j = &self.jobs[i];
            let rec = &mut self.records[i];
            let token = job.lease.map(|l| l.token);
            match change {
                JobChange::AdmittedPrepare => {
                    rec.admitted_ms = Some(job.prepare_started_at.map_or(now, |t| t.0 - origin));
                    rec.node = job.node().map(str::to_string);
                    let token = token.expect("admitted jobs hold a lease");
                    self.in_flight.insert(job.id, token);
                    let at = now + j.prepare_ms();
                    self.schedule(at, Action::Prepared(job.id, token));
                }
                JobChange::Started => {
                    let started = job.started_at.map_or(now, |t| t.0 - origin);
                    rec.admitted_ms.get_or_insert(started);
                    rec.started_ms = Some(started);
                    rec.node = job.node().map(str::to_string);
                    let token = token.expect("admitted jobs hold a lease");
                    self.in_flight.insert(job.id, token);
                    self.start_run(i, job.id, token, now);
                }
                JobChange::Finished => {
                    if let Some(f) = self.flows.as_mut() {
                        f.remove(job.id, now);
                    }
                    rec.finished_ms = Some(job.finished_at.map_or(now, |t| t.0 - origin));
                    rec.outcome = Some(job.outcome.unwrap_or(job.state));
                    self.in_flight.remove(&job.id);
                }
                JobChange::CancelRequested => {
                    let obeyed = matches!(
                        job.cancel_reason,
                        Some(CancelReason::Preempted | CancelReason::Cancel)
                    );
                    if let (true, Some(token)) = (obeyed, token) {
                        let stop = Action::Finish(job.id, token, Outcome::Cancelled);
                        self.schedule(now + STOP_MS, stop);
                    }
                }
                JobChange::Requeued => {
                    if let Some(f) = self.flows.as_mut() {
                        f.remove(job.id, now);
                    }
                    // It stays in `in_flight` (under its stale token) until it ends: a
                    // retried or preempted job keeps the run going.
                    *rec = JobRecord {
                        submitted_ms: rec.submitted_ms,
                        ..JobRecord::default()
                    };
                }
                JobChange::Submitted | JobChange::Prepared | JobChange::Edited => {}
            }
        }
    }
}
