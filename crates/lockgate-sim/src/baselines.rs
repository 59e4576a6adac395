//! Models of the anchors' own admission, for `lockgate simulate --compare pbs|bacula|
//! velero-1.17|unlimited`, on one shared discrete-event `Harness`.
//!
//! The harness owns virtual time and everything that is not admission: it submits every
//! job at its `at`, reports `prepared` `prepare_s` after a two-stage job is admitted (0 for
//! a one-stage job), and ends a started job `run_s` later, or, under a contention model,
//! when the [`Flows`] say its data is moved. A model (an `Admission`) only decides when a
//! job is admitted and started, and may ask for per-job wake-ups and periodic ticks; its
//! callbacks run at the instant of the event, in the order the events were scheduled (a
//! pure function of the input, like lockgate's run).
//!
//! Invariants:
//! - every record's times are in order (`submitted <= admitted <= started <= finished`);
//! - the run ends: wake-ups and ticks are dropped once nothing is running, preparing or
//!   left to submit and none of them has admitted, started or ended a job for
//!   [`GIVE_UP_MS`] of virtual time (nothing can change any more); the jobs left then are
//!   reported as unfinished.
//!
//! The models and their assumptions are in their modules and in docs/simulate.md.

pub mod bacula;
pub mod pbs;
pub mod unlimited;
pub mod velero117;

use crate::contention::{Contention, Flows};
use crate::input::{NodeSpec, WorkloadJob};
use crate::report::ScopePeak;
use crate::sim::{JobRecord, NodeSlots, Run};
use lockgate_core::job::Job;
use lockgate_core::scope::JobScopes;
use lockgate_core::selector::Selector;
use lockgate_core::{JobState, Policy, Timestamp};
use std::collections::BTreeMap;

/// How long nothing may change before the waiting jobs are given up (see the module docs).
pub const GIVE_UP_MS: u64 = 600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Submit(usize),
    Prepared(usize),
    End(usize),
    Wake(usize),
    Tick,
    FlowEnd(u64),
}

/// What a model decides; the harness calls it at each event of a job.
pub(crate) trait Admission {
    /// Job `i` is submitted.
    fn submit(&mut self, h: &mut Harness<'_>, i: usize, now: u64);
    /// Job `i`'s prepare step is done (at once after admission for a one-stage job). By
    /// default it starts at once.
    fn prepared(&mut self, h: &mut Harness<'_>, i: usize, now: u64) {
        h.start(i, now);
    }
    /// Job `i` ended (succeeded).
    fn ended(&mut self, h: &mut Harness<'_>, i: usize, now: u64);
    /// A wake-up asked for with [`Harness::wake`].
    fn wake(&mut self, _h: &mut Harness<'_>, _i: usize, _now: u64) {}
    /// A tick asked for with [`Harness::tick`].
    fn tick(&mut self, _h: &mut Harness<'_>, _now: u64) {}
}

/// Virtual time, records and run times for an [`Admission`] model.
pub(crate) struct Harness<'a> {
    /// The workload.
    pub jobs: &'a [WorkloadJob],
    prep_ms: Vec<u64>,
    /// One record per job.
    pub records: Vec<JobRecord>,
    agenda: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    /// Submit, prepared and end events in the agenda.
    pending: usize,
    flows: Option<Flows<usize>>,
    flows_armed: u64,
    /// Scope name -> (limit, current, peak).
    counts: BTreeMap<String, (Option<u64>, u64, u64)>,
    /// Admissions, starts and ends so far.
    progress: u64,
    /// Since when nothing was pending, and the progress then.
    idle: Option<(u64, u64)>,
    ticks_armed: Option<u64>,
    nodes: Vec<NodeSlots>,
}

impl<'a> Harness<'a> {
    /// A harness over the workload; `slots` gives each node's number as the model sees it.
    pub fn new(
        policy: &Policy,
        nodes: &[NodeSpec],
        slots: impl Fn(&NodeSpec) -> Option<u32>,
        jobs: &'a [WorkloadJob],
        contention: Option<&Contention>,
    ) -> Self {
        Harness {
            jobs,
            prep_ms: jobs
                .iter()
                .map(|j| {
                    let two = j
                        .two_stage
                        .unwrap_or_else(|| policy.kind_two_stage(&j.kind));
                    if two {
                        j.prepare_ms()
                    } else {
                        0
                    }
                })
                .collect(),
            records: jobs
                .iter()
                .map(|j| JobRecord {
                    submitted_ms: j.at_ms(),
                    ..JobRecord::default()
                })
                .collect(),
            agenda: BTreeMap::new(),
            seq: 0,
            pending: 0,
            flows: contention.map(|c| Flows::new(c.clone())),
            flows_armed: 0,
            counts: BTreeMap::new(),
            progress: 0,
            idle: None,
            ticks_armed: None,
            nodes: nodes
                .iter()
                .map(|n| NodeSlots {
                    name: n.name.clone(),
                    slots: slots(n),
                })
                .collect(),
        }
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        if matches!(ev, Ev::Submit(_) | Ev::Prepared(_) | Ev::End(_)) {
            self.pending += 1;
        }
        self.agenda.insert((at, self.seq), ev);
    }

    /// Admits job `i` at `now` (on `node`, if any): `prepared` follows after its prepare
    /// time.
    pub fn admit(&mut self, i: usize, node: Option<&str>, now: u64) {
        self.progress += 1;
        let rec = &mut self.records[i];
        rec.admitted_ms = Some(now);
        rec.node = node.map(str::to_string);
        self.schedule(now + self.prep_ms[i], Ev::Prepared(i));
    }

    /// Starts job `i`'s run at `now`.
    pub fn start(&mut self, i: usize, now: u64) {
        self.progress += 1;
        self.records[i].started_ms = Some(now);
        let j = &self.jobs[i];
        if let Some(flows) = self.flows.as_mut() {
            let res = flows.model().resources_of(j);
            if !res.is_empty() {
                let size = flows.model().size_mb(j, &res);
                self.records[i].run_alone_ms = Some(flows.model().alone_ms(j, &res));
                flows.start(i, res, size, now);
                return;
            }
        }
        self.schedule(now + j.run_ms(), Ev::End(i));
    }

    /// Asks for [`Admission::wake`] of job `i` at `at`.
    pub fn wake(&mut self, i: usize, at: u64) {
        self.schedule(at, Ev::Wake(i));
    }

    /// Asks for [`Admission::tick`] at the next multiple of `period` after `now` (one
    /// tick armed at a time).
    pub fn tick(&mut self, period: u64, now: u64) {
        let next = (now / period + 1) * period;
        if self.ticks_armed.is_none_or(|t| t <= now) {
            self.ticks_armed = Some(next);
            self.schedule(next, Ev::Tick);
        }
    }

    /// Counts `delta` on a scope the model reports (its peak goes into the run's scopes).
    pub fn count(&mut self, scope: &str, limit: Option<u64>, delta: i64) {
        let c = self
            .counts
            .entry(scope.to_string())
            .or_insert((limit, 0, 0));
        c.1 = c.1.saturating_add_signed(delta);
        c.2 = c.2.max(c.1);
    }

    /// Whether nothing is running, preparing or left to submit.
    fn quiet(&self) -> bool {
        self.pending == 0 && self.flows.as_ref().is_none_or(|f| f.next_end().is_none())
    }

    /// Whether a wake-up or tick at `now` is still worth handling (see the module docs).
    fn worth_waking(&mut self, now: u64) -> bool {
        if !self.quiet() {
            self.idle = None;
            return true;
        }
        match self.idle {
            Some((since, p)) if p == self.progress => now - since < GIVE_UP_MS,
            _ => {
                self.idle = Some((now, self.progress));
                true
            }
        }
    }

    fn end(&mut self, i: usize, now: u64) {
        self.progress += 1;
        let rec = &mut self.records[i];
        rec.finished_ms = Some(now);
        rec.outcome = Some(JobState::Succeeded);
    }

    fn arm_flows(&mut self) {
        let Some(f) = self.flows.as_ref() else {
            return;
        };
        let (epoch, next) = (f.epoch(), f.next_end());
        if epoch != self.flows_armed {
            self.flows_armed = epoch;
            if let Some(at) = next {
                self.schedule(at, Ev::FlowEnd(epoch));
            }
        }
    }

    /// Runs the model over the workload and returns the records with the model's scopes.
    pub fn run(mut self, model: &mut impl Admission) -> Run {
        for (i, j) in self.jobs.iter().enumerate() {
            self.schedule(j.at_ms(), Ev::Submit(i));
        }
        while let Some(((now, _), ev)) = self.agenda.pop_first() {
            if matches!(ev, Ev::Submit(_) | Ev::Prepared(_) | Ev::End(_)) {
                self.pending -= 1;
            }
            match ev {
                Ev::Submit(i) => model.submit(&mut self, i, now),
                Ev::Prepared(i) => model.prepared(&mut self, i, now),
                Ev::End(i) => {
                    self.end(i, now);
                    model.ended(&mut self, i, now);
                }
                Ev::FlowEnd(epoch) => {
                    let done = match self.flows.as_mut() {
                        Some(f) if f.epoch() == epoch => f.take_done(now),
                        _ => Vec::new(),
                    };
                    for i in done {
                        self.end(i, now);
                        model.ended(&mut self, i, now);
                    }
                }
                Ev::Wake(i) => {
                    if self.worth_waking(now) {
                        model.wake(&mut self, i, now);
                    }
                }
                Ev::Tick => {
                    if self.worth_waking(now) {
                        model.tick(&mut self, now);
                    }
                }
            }
            self.arm_flows();
        }
        let scopes = self
            .counts
            .into_iter()
            .map(|(scope, (limit, _, peak))| ScopePeak { scope, limit, peak })
            .collect();
        Run {
            jobs: self.records,
            scopes,
            nodes: self.nodes,
        }
    }
}

/// A workload job as the engine would see it (`None` when the engine would refuse it).
pub(crate) fn checked(policy: &Policy, j: &WorkloadJob) -> Option<Job> {
    j.spec()
        .check(policy)
        .ok()
        .map(|c| c.into_job(0, Timestamp(j.at_ms())))
}

/// The scopes a job takes under the policy (`None` when the engine would refuse it).
pub(crate) fn scopes(policy: &Policy, j: &WorkloadJob) -> Option<JobScopes> {
    checked(policy, j).map(|job| policy.scopes_of(&job))
}

/// A job's eligible nodes (indices into `nodes`): its pinned node, or the nodes its
/// selector matches whose number is not 0. `None` for a job that runs on no node; empty
/// when no node fits (a missing pinned node, a bad selector).
pub(crate) fn eligible(
    nodes: &[NodeSpec],
    slots: &[Option<u32>],
    j: &WorkloadJob,
) -> Option<Vec<usize>> {
    match (&j.node, &j.node_selector) {
        (Some(n), _) => Some(
            nodes
                .iter()
                .position(|x| &x.name == n)
                .into_iter()
                .collect(),
        ),
        (None, Some(sel)) => Some(match Selector::parse_labels(sel) {
            Ok(s) => (0..nodes.len())
                .filter(|&i| slots[i] != Some(0) && s.matches_map(&nodes[i].labels))
                .collect(),
            Err(_) => Vec::new(),
        }),
        (None, None) => None,
    }
}
