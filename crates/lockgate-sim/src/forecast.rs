//! The forward run: a live engine's state played forward in virtual time with learned
//! durations, to say when each queued job will start and end.
//!
//! [`forward`] takes a copy of the server's engine (its queue, admitted jobs, nodes, timers
//! and policy, exactly as they are), and plays the holders as [`crate::sim`] does:
//! a preparing job reports `prepared` at `prepare_started_at + prepare`, a running job
//! finishes at `started_at + run` (or now, if that is past; or, given its holder's
//! measurements, where its own rate takes it: [`OwnEnd`]), a job admitted later finishes
//! `run` after its start, and a job asked to stop (preempted, cancelled) finishes
//! [`STOP_MS`] later. Leases and nodes are renewed every TTL/3, so nothing expires that
//! would not expire in production. The known schedules' runs arrive as [`Arrival`]s. The
//! durations are one quantile of [`Durations::expected`] ([`Quantile`]): the server runs
//! it once with p50 and once with p90.
//!
//! # Invariants
//! - The engine is the real one ([`lockgate_core::Engine`]): no second model of
//!   admission. Nothing here reads a clock; the caller's `keep_going` is the only way out
//!   before the end, checked every [`CHECK_EVERY`] steps.
//! - A job with no estimate (no history, no policy default) never ends in the run: its end
//!   is `None`, and so is the start of everything that must wait for it. A forecast never
//!   invents a duration.
//! - The run stops at `horizon`, or when nothing with a known end is in flight and no
//!   arrival is left. Jobs not started by then have `start: None`.

use crate::sim::STOP_MS;
use lockgate_core::durations::{Durations, Estimate};
use lockgate_core::event::{Event, JobChange};
use lockgate_core::job::{CancelReason, JobId, JobSpec, JobState, Outcome};
use lockgate_core::{Engine, Job, Timestamp};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The caller's `keep_going` is asked after this many steps.
pub const CHECK_EVERY: u64 = 256;

/// A job that will be submitted during the run (a schedule's planned run).
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// When it is submitted.
    pub at: Timestamp,
    /// What is submitted.
    pub spec: JobSpec,
    /// Which schedule it comes from (for reports).
    pub schedule: String,
}

/// Which duration the holders take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantile {
    /// The median.
    P50,
    /// The 90th percentile.
    P90,
}

impl Quantile {
    fn of(self, e: Option<Estimate>) -> Option<u64> {
        e.map(|e| match self {
            Quantile::P50 => e.p50_ms,
            Quantile::P90 => e.p90_ms,
        })
    }
}

/// Where a running job's holder measured it: the end it reaches at its own recent rate,
/// moving what it still has to to its learned size's median and 90th percentile (`None`
/// where it has no rate, or is past that size). A running job with one ends there rather
/// than at its start plus the learned run time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnEnd {
    /// For the run at p50.
    pub p50: Option<Timestamp>,
    /// For the run at p90.
    pub p90: Option<Timestamp>,
}

/// What is known beyond the engine and the durations: the planned arrivals and the own-rate
/// ends of running jobs.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// The schedules' planned runs.
    pub arrivals: &'a [Arrival],
    /// Running jobs' ends at their own rate, by id.
    pub ends: &'a HashMap<JobId, OwnEnd>,
}

/// One job's forecast.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobForecast {
    /// Admission (to prepare, for a two-stage job; to run otherwise).
    pub start: Option<Timestamp>,
    /// End.
    pub end: Option<Timestamp>,
}

/// What a forward run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForwardRun {
    /// Every job the engine held, and every arrival submitted, by id.
    pub jobs: BTreeMap<JobId, JobForecast>,
    /// The id each arrival got (`None`: refused, or not submitted before the end).
    pub arrivals: Vec<Option<JobId>>,
    /// Per scope that reached its limit during the run: milliseconds its jobs waited in
    /// the queue (the bottleneck is the largest).
    pub waits: BTreeMap<String, u64>,
    /// Whether the run got to its natural end (not stopped by `keep_going`).
    pub complete: bool,
    /// Engine and agenda steps taken.
    pub steps: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Submit(usize),
    Prepared(JobId, u64),
    Finish(JobId, u64, Outcome),
    Renew,
}

struct Driver<'a> {
    engine: Engine,
    durations: &'a Durations,
    q: Quantile,
    arrivals: &'a [Arrival],
    ends: &'a HashMap<JobId, OwnEnd>,
    agenda: BTreeMap<(u64, u64), Action>,
    seq: u64,
    /// Admitted, not ended, with the lease token and whether its end is known.
    in_flight: BTreeMap<JobId, (u64, bool)>,
    known_in_flight: usize,
    to_submit: usize,
    renew_every: u64,
    renew_armed: bool,
    nodes: Vec<String>,
    out: ForwardRun,
    queued_since: HashMap<JobId, u64>,
    /// Each wait that ended in the run: the job's scopes and the milliseconds.
    waited: Vec<(Vec<String>, u64)>,
}

/// Plays `engine` forward from `now` until `horizon` (see the module docs). `keep_going`
/// is asked every [`CHECK_EVERY`] steps; when it says no, the run stops where it is
/// (`complete: false`).
pub fn forward(
    engine: Engine,
    now: Timestamp,
    durations: &Durations,
    arrivals: &[Arrival],
    q: Quantile,
    horizon: Timestamp,
    keep_going: &mut dyn FnMut() -> bool,
) -> ForwardRun {
    let ends = HashMap::new();
    let known = Known {
        arrivals,
        ends: &ends,
    };
    forward_known(engine, now, durations, known, q, horizon, keep_going)
}

/// As [`forward`], with what the holders measured of the running jobs ([`Known::ends`]).
pub fn forward_known(
    engine: Engine,
    now: Timestamp,
    durations: &Durations,
    known: Known<'_>,
    q: Quantile,
    horizon: Timestamp,
    keep_going: &mut dyn FnMut() -> bool,
) -> ForwardRun {
    let arrivals = known.arrivals;
    let policy = engine.policy();
    let ttl = policy.leases.ttl.min(policy.nodes.ttl).as_millis() as u64;
    let nodes = engine.nodes().map(|n| n.name.clone()).collect();
    let mut d = Driver {
        engine,
        durations,
        q,
        arrivals,
        ends: known.ends,
        agenda: BTreeMap::new(),
        seq: 0,
        in_flight: BTreeMap::new(),
        known_in_flight: 0,
        to_submit: arrivals.len(),
        renew_every: (ttl / 3).max(1),
        renew_armed: false,
        nodes,
        out: ForwardRun {
            arrivals: vec![None; arrivals.len()],
            ..ForwardRun::default()
        },
        queued_since: HashMap::new(),
        waited: Vec::new(),
    };
    while d.engine.poll_event().is_some() {}
    d.take_live(now.0);
    for (i, a) in arrivals.iter().enumerate() {
        d.schedule(a.at.0.max(now.0), Action::Submit(i));
    }
    d.arm_renew(now.0);
    d.out.complete = d.run(horizon.0, keep_going);
    d.attribute_waits();
    d.out
}

impl Driver<'_> {
    fn schedule(&mut self, at: u64, action: Action) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), action);
    }

    fn busy(&self) -> bool {
        self.to_submit > 0 || self.known_in_flight > 0
    }

    fn arm_renew(&mut self, now: u64) {
        if !self.renew_armed && !self.in_flight.is_empty() {
            self.renew_armed = true;
            self.schedule(now + self.renew_every, Action::Renew);
        }
    }

    fn prepare_ms(&self, job: &Job) -> Option<u64> {
        self.q.of(self.durations.expected(job).prepare)
    }

    fn run_ms(&self, job: &Job) -> Option<u64> {
        self.q.of(self.durations.expected(job).run)
    }

    /// Marks a job admitted with `token`; its end is known when `until` is.
    fn hold(&mut self, id: JobId, token: u64, known: bool) {
        let before = self.in_flight.insert(id, (token, known));
        if before.is_some_and(|(_, k)| k) {
            self.known_in_flight -= 1;
        }
        if known {
            self.known_in_flight += 1;
        }
    }

    fn release(&mut self, id: JobId) {
        if let Some((_, true)) = self.in_flight.remove(&id) {
            self.known_in_flight -= 1;
        }
    }

    /// The jobs the engine holds now: admitted ones get their holder's next step.
    fn take_live(&mut self, now: u64) {
        let live: Vec<Job> = self.engine.jobs().cloned().collect();
        for job in live {
            let f = self.out.jobs.entry(job.id).or_default();
            f.start = job.prepare_started_at.or(job.started_at);
            let token = job.lease.map(|l| l.token);
            match (job.state, token) {
                (JobState::Queued, _) => {
                    f.start = None;
                    self.queued_since.insert(job.id, now);
                }
                (JobState::Preparing, Some(token)) => {
                    let began = job.prepare_started_at.map_or(now, |t| t.0);
                    let at = self.prepare_ms(&job).map(|p| (began + p).max(now));
                    self.hold(job.id, token, at.is_some() && self.run_ms(&job).is_some());
                    if let Some(at) = at {
                        self.schedule(at, Action::Prepared(job.id, token));
                    }
                }
                (JobState::Prepared, Some(token)) => {
                    self.hold(job.id, token, self.run_ms(&job).is_some());
                }
                (JobState::Running, Some(token)) => {
                    let began = job.started_at.map_or(now, |t| t.0);
                    let own = self.ends.get(&job.id).and_then(|e| match self.q {
                        Quantile::P50 => e.p50,
                        Quantile::P90 => e.p90,
                    });
                    let at = own
                        .map(|t| t.0)
                        .or_else(|| self.run_ms(&job).map(|r| began + r))
                        .map(|t| t.max(now));
                    self.hold(job.id, token, at.is_some());
                    if let Some(at) = at {
                        let done = Action::Finish(job.id, token, Outcome::Succeeded);
                        self.schedule(at, done);
                    }
                }
                _ => {}
            }
        }
    }

    fn run(&mut self, horizon: u64, keep_going: &mut dyn FnMut() -> bool) -> bool {
        while self.busy() {
            self.out.steps += 1;
            if self.out.steps % CHECK_EVERY == 0 && !keep_going() {
                return false;
            }
            let next_action = self.agenda.first_key_value().map(|(k, _)| k.0);
            let next_timer = self.engine.next_deadline().map(|t| t.0);
            let next = match (next_timer, next_action) {
                (Some(t), Some(a)) => t.min(a),
                (t, a) => match t.or(a) {
                    Some(x) => x,
                    None => break,
                },
            };
            if next > horizon {
                break;
            }
            if next_timer == Some(next) {
                self.engine.handle_timeout(Timestamp(next));
                self.drain(next);
            } else {
                let ((now, _), action) = self.agenda.pop_first().expect("non-empty");
                self.act(action, now);
            }
        }
        true
    }

    fn act(&mut self, action: Action, now: u64) {
        let t = Timestamp(now);
        match action {
            Action::Submit(i) => {
                self.to_submit -= 1;
                if let Ok(s) = self.engine.submit(self.arrivals[i].spec.clone(), t) {
                    self.out.arrivals[i] = Some(s.job.id);
                    self.out.jobs.entry(s.job.id).or_default();
                    self.queued_since.insert(s.job.id, now);
                }
            }
            Action::Prepared(id, token) => {
                if self.in_flight.get(&id).map(|x| x.0) == Some(token) {
                    let _ = self.engine.prepared(id, token, t);
                }
            }
            Action::Finish(id, token, outcome) => {
                if self.in_flight.get(&id).map(|x| x.0) == Some(token) {
                    let _ = self.engine.finish(id, token, outcome, None, t);
                }
            }
            Action::Renew => {
                self.renew_armed = false;
                let held: Vec<(JobId, u64)> = self
                    .in_flight
                    .iter()
                    .map(|(&id, &(tok, _))| (id, tok))
                    .collect();
                for (id, token) in held {
                    let _ = self.engine.heartbeat(id, token, t);
                }
                for name in &self.nodes {
                    self.engine.node_heartbeat(name, t);
                }
            }
        }
        self.drain(now);
        self.arm_renew(now);
    }

    /// Plays the holder for every event the engine produced.
    fn drain(&mut self, now: u64) {
        while let Some(event) = self.engine.poll_event() {
            let Event::Job { change, job } = event else {
                continue;
            };
            let token = job.lease.map(|l| l.token);
            match change {
                JobChange::AdmittedPrepare | JobChange::Started => {
                    let token = token.expect("admitted jobs hold a lease");
                    let f = self.out.jobs.entry(job.id).or_default();
                    f.start.get_or_insert(Timestamp(now));
                    if let Some(since) = self.queued_since.remove(&job.id) {
                        let scopes = self.engine.policy().scopes_of(&job).common;
                        let names = scopes.iter().map(|s| s.key.to_string()).collect();
                        self.waited.push((names, now - since));
                    }
                    let run = self.run_ms(&job);
                    if change == JobChange::AdmittedPrepare {
                        let prepare = self.prepare_ms(&job);
                        self.hold(job.id, token, prepare.is_some() && run.is_some());
                        if let Some(p) = prepare {
                            self.schedule(now + p, Action::Prepared(job.id, token));
                        }
                    } else {
                        self.hold(job.id, token, run.is_some());
                        if let Some(r) = run {
                            let done = Action::Finish(job.id, token, Outcome::Succeeded);
                            self.schedule(now + r, done);
                        }
                    }
                }
                JobChange::Finished => {
                    self.out.jobs.entry(job.id).or_default().end = Some(Timestamp(now));
                    self.release(job.id);
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
                    self.out.jobs.insert(job.id, JobForecast::default());
                    self.queued_since.insert(job.id, now);
                }
                JobChange::Submitted | JobChange::Prepared | JobChange::Edited => {}
            }
        }
    }

    /// Gives every wait to the limited scopes its job takes that were full during the run.
    fn attribute_waits(&mut self) {
        let full: BTreeSet<String> = self
            .engine
            .scope_usage()
            .into_iter()
            .filter(|u| u.limit.is_some_and(|l| u.peak >= l))
            .map(|u| u.scope)
            .collect();
        if full.is_empty() {
            return;
        }
        for (names, ms) in &self.waited {
            for name in names.iter().filter(|n| full.contains(*n)) {
                *self.out.waits.entry(name.clone()).or_default() += ms;
            }
        }
    }
}
