//! A model of Velero's own admission, for `lockgate simulate --compare velero`.
//!
//! Velero (1.12+) moves data with one data-mover pod per volume: the DataUpload (or
//! PodVolumeBackup, ...) is exposed by creating a pod that kube-scheduler places, and the
//! node-agent on the node where the pod landed runs the data path when one of its
//! `loadConcurrency` slots is free; when none is, the request is requeued and checked again
//! 5 s later. The model keeps exactly those mechanisms and nothing else:
//!
//! - **Placement at exposure, by pod count**: a job is placed when it is exposed, on the
//!   eligible node (its pinned node, or the nodes its selector matches) with the fewest
//!   data-mover pods currently on it (exposed or running), ties by name: kube-scheduler
//!   spreading pods, blind to free slots. Nodes whose number is 0 are left out (Velero has
//!   no 0; an admin would exclude the node with `loadAffinity`).
//! - **Exposure**: every job is exposed at submit (Velero creates a pod per volume). With a
//!   prepare queue (`[nodes].prepare_queue = q > 0` in the policy), Velero's
//!   `prepareQueueLength` is taken as `q * nodes`, a cluster-wide cap on jobs exposed but not
//!   yet running (phases Accepted/Prepared, as Velero's docs define it), checked at submit and
//!   then on every 5 s tick, oldest first. (Velero's real check is per node-agent and can
//!   overshoot; the model does not, which flatters Velero slightly.)
//! - **Start**: a job whose prepare step ends (`prepare_s` after exposure; 0 for one-stage
//!   jobs) starts at once if its node has a free slot (the controller reconciles on the
//!   phase change). Otherwise it waits for the node agent's next 5 s tick (ticks at
//!   multiples of 5 s; a freed slot is noticed only then), where prepared jobs start in
//!   the order they became prepared while slots are free.
//! - Node numbers (`loadConcurrency`, global and per-node rules) come from the policy's
//!   `[nodes]` section, so both schedulers get the same slots.
//! - Velero has no datastore limits, pools, conflicts or priorities: they are ignored,
//!   and jobs that run on no node start at submit. The comparison is meaningful for
//!   node-bound data movement.
//!
//! Under a contention model ([`simulate_with`]) a started job's run time comes from the
//! [`Flows`] (jobs on no node then start when their prepare step is done), as for lockgate.
//!
//! Wait is measured as for lockgate: exposure (prepare start) minus submit. Velero exposes
//! everything at once, so its waits look short; the pods that wait hold a snapshot, a PVC
//! and a pod meanwhile, which the `node-prepare:<node>` peaks show against lockgate's
//! bound of `max_running + prepare_queue`.

use crate::contention::{Contention, Flows};
use crate::input::{NodeSpec, WorkloadJob};
use crate::report::ScopePeak;
use crate::sim::{JobRecord, NodeSlots, Run};
use lockgate_core::selector::Selector;
use lockgate_core::{JobState, Policy};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Velero's requeue period for a data-mover request without a free slot.
pub const REQUEUE_MS: u64 = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Submit(usize),
    Prepared(usize),
    Finish(usize),
    Tick,
    /// The flows' next end, armed at this epoch.
    FlowEnd(u64),
}

#[derive(Debug)]
struct VNode {
    name: String,
    slots: Option<u32>,
    running: u32,
    pods: u32,
    peak_running: u32,
    peak_pods: u32,
    used: bool,
    /// Prepared jobs waiting for a slot: (prepared at, job).
    waiting: BTreeSet<(u64, usize)>,
}

impl VNode {
    fn free(&self) -> bool {
        self.slots.is_none_or(|s| self.running < s)
    }
}

struct Model<'a> {
    jobs: &'a [WorkloadJob],
    nodes: Vec<VNode>,
    eligible: Vec<Vec<usize>>,
    /// Prepare time of each job (0 for one-stage jobs).
    prep_ms: Vec<u64>,
    records: Vec<JobRecord>,
    agenda: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    /// Events other than ticks still in the agenda.
    active: usize,
    tick_at: Option<u64>,
    /// `prepareQueueLength`, `None`: unbounded.
    queue_len: Option<u64>,
    /// Exposed, not yet running.
    exposed: u64,
    /// Submitted node jobs not yet exposed.
    unexposed: VecDeque<usize>,
    flows: Option<Flows<usize>>,
    flows_armed: u64,
}

/// Runs the workload through the Velero model (see the module docs).
pub fn simulate(policy: &Policy, nodes: &[NodeSpec], jobs: &[WorkloadJob]) -> Run {
    simulate_with(policy, nodes, jobs, None)
}

/// [`simulate`], with run times from a contention model when one is given.
pub fn simulate_with(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    let mut m = Model::new(policy, nodes, jobs);
    m.flows = contention.map(|c| Flows::new(c.clone()));
    for (i, j) in jobs.iter().enumerate() {
        m.schedule(j.at_ms(), Ev::Submit(i));
    }
    m.run_agenda();
    m.into_run(u64::from(policy.nodes.prepare_queue))
}

/// One [`VNode`] per node, with its number from the policy's `[nodes]` section.
fn vnodes(policy: &Policy, nodes: &[NodeSpec]) -> Vec<VNode> {
    nodes
        .iter()
        .map(|n| VNode {
            name: n.name.clone(),
            slots: policy.node_number(&n.labels).0,
            running: 0,
            pods: 0,
            peak_running: 0,
            peak_pods: 0,
            used: false,
            waiting: BTreeSet::new(),
        })
        .collect()
}

/// Each job's eligible nodes: its pinned node, or the nodes with a non-zero number its
/// selector matches (none for a bad selector or a job that runs on no node).
fn eligible_nodes(nodes: &[NodeSpec], vnodes: &[VNode], jobs: &[WorkloadJob]) -> Vec<Vec<usize>> {
    jobs.iter()
        .map(|j| match (&j.node, &j.node_selector) {
            (Some(n), _) => nodes
                .iter()
                .position(|x| &x.name == n)
                .into_iter()
                .collect(),
            (None, Some(sel)) => match Selector::parse_labels(sel) {
                Ok(s) => (0..nodes.len())
                    .filter(|&i| vnodes[i].slots != Some(0) && s.matches_map(&nodes[i].labels))
                    .collect(),
                Err(_) => Vec::new(),
            },
            (None, None) => Vec::new(),
        })
        .collect()
}

impl<'a> Model<'a> {
    fn new(policy: &Policy, nodes: &[NodeSpec], jobs: &'a [WorkloadJob]) -> Self {
        let vnodes = vnodes(policy, nodes);
        let eligible = eligible_nodes(nodes, &vnodes, jobs);
        let q = u64::from(policy.nodes.prepare_queue);
        Model {
            jobs,
            nodes: vnodes,
            eligible,
            prep_ms: jobs
                .iter()
                .map(|j| {
                    if j.two_stage
                        .unwrap_or_else(|| policy.kind_two_stage(&j.kind))
                    {
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
            active: 0,
            tick_at: None,
            queue_len: (q > 0).then_some(q * nodes.len() as u64),
            exposed: 0,
            unexposed: VecDeque::new(),
            flows: None,
            flows_armed: 0,
        }
    }

    /// Handles events in time order until the agenda is empty.
    fn run_agenda(&mut self) {
        while let Some(((now, _), ev)) = self.agenda.pop_first() {
            if ev != Ev::Tick {
                self.active -= 1;
            }
            match ev {
                Ev::Submit(i) => self.submit(i, now),
                Ev::Prepared(i) => self.prepared(i, now),
                Ev::Finish(i) => self.finish(i, now),
                Ev::Tick => self.tick(now),
                Ev::FlowEnd(epoch) => {
                    let done = match self.flows.as_mut() {
                        Some(f) if f.epoch() == epoch => f.take_done(now),
                        _ => Vec::new(),
                    };
                    for i in done {
                        self.finish(i, now);
                    }
                }
            }
            self.arm_flows();
        }
    }

    /// The records, and the run and prepare peaks of every node used (`q`: the policy's
    /// `prepare_queue`).
    fn into_run(self, q: u64) -> Run {
        let mut scopes = Vec::new();
        for n in self.nodes.iter().filter(|n| n.used) {
            scopes.push(ScopePeak {
                scope: format!("node:{}", n.name),
                limit: n.slots.map(u64::from),
                peak: u64::from(n.peak_running),
            });
            scopes.push(ScopePeak {
                scope: format!("node-prepare:{}", n.name),
                limit: n.slots.map(|s| u64::from(s) + q),
                peak: u64::from(n.peak_pods),
            });
        }
        scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
        let nodes = self
            .nodes
            .iter()
            .map(|n| NodeSlots {
                name: n.name.clone(),
                slots: n.slots,
            })
            .collect();
        Run {
            jobs: self.records,
            scopes,
            nodes,
        }
    }
}

impl Model<'_> {
    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        if ev != Ev::Tick {
            self.active += 1;
        }
        self.agenda.insert((at, self.seq), ev);
    }

    /// Makes sure a tick is due after `now` (the next multiple of the requeue period).
    fn want_tick(&mut self, now: u64) {
        let next = (now / REQUEUE_MS + 1) * REQUEUE_MS;
        if self.tick_at.is_none_or(|t| t <= now) {
            self.tick_at = Some(next);
            self.schedule(next, Ev::Tick);
        }
    }

    fn submit(&mut self, i: usize, now: u64) {
        let j = &self.jobs[i];
        if !j.on_node() && self.flows.is_some() {
            self.records[i].admitted_ms = Some(now);
            self.schedule(now + self.prep_ms[i], Ev::Prepared(i));
            return;
        }
        if !j.on_node() {
            let rec = &mut self.records[i];
            rec.admitted_ms = Some(now);
            rec.started_ms = Some(now + self.prep_ms[i]);
            self.schedule(now + self.prep_ms[i] + j.run_ms(), Ev::Finish(i));
            return;
        }
        self.unexposed.push_back(i);
        self.expose_waiting(now);
    }

    fn expose_waiting(&mut self, now: u64) {
        while self.queue_len.is_none_or(|q| self.exposed < q) {
            let Some(i) = self.unexposed.pop_front() else {
                break;
            };
            self.expose(i, now);
        }
        if !self.unexposed.is_empty() {
            self.want_tick(now);
        }
    }

    fn expose(&mut self, i: usize, now: u64) {
        let Some(&n) = self.eligible[i].iter().min_by(|&&a, &&b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            (x.pods, &x.name).cmp(&(y.pods, &y.name))
        }) else {
            return; // no eligible node: never runs
        };
        let node = &mut self.nodes[n];
        node.pods += 1;
        node.peak_pods = node.peak_pods.max(node.pods);
        node.used = true;
        self.exposed += 1;
        let rec = &mut self.records[i];
        rec.admitted_ms = Some(now);
        rec.node = Some(node.name.clone());
        self.schedule(now + self.prep_ms[i], Ev::Prepared(i));
    }

    fn node_of(&self, i: usize) -> usize {
        let name = self.records[i]
            .node
            .as_deref()
            .expect("exposed jobs are placed");
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .expect("known node")
    }

    fn prepared(&mut self, i: usize, now: u64) {
        if self.records[i].node.is_none() {
            self.run(i, now); // a job on no node, under a contention model
            return;
        }
        let n = self.node_of(i);
        if self.nodes[n].free() {
            self.start(n, i, now);
        } else {
            self.nodes[n].waiting.insert((now, i));
            self.want_tick(now);
        }
    }

    fn start(&mut self, n: usize, i: usize, now: u64) {
        let node = &mut self.nodes[n];
        node.running += 1;
        node.peak_running = node.peak_running.max(node.running);
        self.exposed -= 1;
        self.run(i, now);
    }

    /// Starts job `i`'s run: into the flows when it uses a shared resource, else a finish
    /// `run_s` later.
    fn run(&mut self, i: usize, now: u64) {
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
        self.schedule(now + j.run_ms(), Ev::Finish(i));
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
                self.schedule(at, Ev::FlowEnd(epoch));
            }
        }
    }

    fn finish(&mut self, i: usize, now: u64) {
        let rec = &mut self.records[i];
        rec.finished_ms = Some(now);
        rec.outcome = Some(JobState::Succeeded);
        if rec.node.is_some() {
            let n = self.node_of(i);
            self.nodes[n].running -= 1;
            self.nodes[n].pods -= 1;
        }
    }

    fn tick(&mut self, now: u64) {
        let mut progress = false;
        for n in 0..self.nodes.len() {
            while self.nodes[n].free() {
                let Some((_, i)) = self.nodes[n].waiting.pop_first() else {
                    break;
                };
                self.start(n, i, now);
                progress = true;
            }
        }
        let before = self.unexposed.len();
        self.expose_waiting(now);
        progress |= self.unexposed.len() != before;
        let waiting =
            !self.unexposed.is_empty() || self.nodes.iter().any(|n| !n.waiting.is_empty());
        if waiting && (progress || self.active > 0) {
            self.want_tick(now);
        }
    }
}
