//! Preemption (policy.md, Preemption): a queued job of a preempting kind
//! (`[kinds.K] preempt = true`) that only lower-priority running or prepared jobs keep out
//! asks the fewest of them to stop, and the room they free is held for it.
//!
//! Implementation details. After every admission pass, [`Engine::preempt_step`] looks at
//! the queued jobs of preempting kinds (`waiting`) and at the preemptions under way
//! (`plans`). A preemptor with no plan that heads its class (and, under strict order,
//! heads the queue) is evaluated with every block; if each block is a full scope
//! (capacity, a node's slots, a conflict key) whose holders can be asked to go, it picks
//! victims greedily, on the candidate node that needs the fewest, sets their
//! `cancel_requested` with reason `preempted`, and holds the blocking scopes for itself
//! (`held`): a job ranked below the preemptor may take only the room beyond what the
//! preemptor needs there. A victim that stops is queued again (same id, `attempt + 1`,
//! `preemptions + 1`); once the last victim has released, the preemptor is woken, and if
//! it is still held (something else holds it now), its plan is dropped and it may plan
//! again.
//!
//! Invariants:
//! - victims keep holding until they release: a preemptor is admitted only through the
//!   ordinary evaluation, so no scope is ever taken past its limit;
//! - a victim has a strictly lower base priority than its preemptor, is `running` or
//!   `prepared`, and its kind is preemptible; a requeued victim therefore never preempts
//!   its preemptor back, and every plan has at least one victim, so planning cannot loop;
//! - `held` lists exactly the scopes of the live plans, by the plans' scope keys (re-interned
//!   after every rebuild), so a hold never outlives its plan;
//! - the step runs after the pass in both modes and depends only on the engine's state, so
//!   [`Mode::Indexed`](super::Mode) and the rescanning oracle decide the same.
//!
//! Costs: with no preempting kind in the policy, O(1) per pass. Otherwise, per pass,
//! O(p) over the queued preempting jobs and the plans, plus, for each preemptor that plans,
//! one full evaluation and O(h · b) for the h holders of its b blocking scopes (times the
//! eligible nodes of a movable preemptor that no node has room for). Never a walk of the
//! queue.

use super::admission::{Block, BlockKind};
use super::queue::Rank;
use super::Engine;
use crate::event::JobChange;
use crate::job::{CancelReason, Job, JobId, JobState};
use crate::scope::{Check, ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Every preemption the engine knows about.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preemptions {
    /// Queued jobs of preempting kinds (ids that moved on are dropped by the step).
    pub waiting: BTreeSet<JobId>,
    /// Preemptions under way, by preemptor.
    pub plans: BTreeMap<JobId, Plan>,
    /// Room held for preemptors: scope -> (preemptor, units it needs there).
    pub held: HashMap<ScopeId, Vec<(JobId, u64)>>,
    /// Victim -> its preemptor (for the victim's message).
    pub victim_of: HashMap<JobId, JobId>,
}

/// One preemption under way.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Victims still holding, with the lease token they held when asked.
    pub victims: BTreeMap<JobId, u64>,
    /// The scopes held for the preemptor, by key, with the units it needs there.
    pub scopes: Vec<(ScopeKey, u64)>,
    /// The preemptor was woken after its last victim released.
    pub woken: bool,
}

/// A choice of victims for one placement.
struct Choice {
    /// Jobs asked to stop now.
    asked: Vec<JobId>,
    /// Holders already stopping that the preemptor waits for too.
    leaving: Vec<JobId>,
    /// Scopes to hold, with the units the preemptor needs there.
    hold: Vec<(ScopeId, u64)>,
}

impl Choice {
    fn better_than(&self, other: &Choice) -> bool {
        (self.asked.len(), self.leaving.len()) < (other.asked.len(), other.leaving.len())
    }
}

impl Engine {
    /// A queued job joins the preemptors when its kind preempts (called by `enqueue`).
    pub(crate) fn note_preemptor(&mut self, id: JobId) {
        if self.policy.kind_preempts(&self.entries.get(id).job.kind) {
            self.preempt.waiting.insert(id);
        }
    }

    /// The block a hold for a better-ranked preemptor puts on `id` taking `take` from
    /// `scope`, if any. O(1) when nothing is held.
    pub(crate) fn held_block(
        &self,
        id: JobId,
        scope: ScopeId,
        take: u64,
        check: Check,
    ) -> Option<BlockKind> {
        if self.preempt.held.is_empty() {
            return None;
        }
        if self.waits_for_victims(id, scope) {
            return Some(BlockKind::HeldFor(id));
        }
        let (p, units) = self.held_for_better(scope, self.eff_rank(id), Some(id))?;
        let s = &self.scopes.states[scope as usize];
        let blocked = match check {
            Check::Free => true,
            Check::Fits => s.limit.is_some_and(|l| s.used + take + units > l),
        };
        blocked.then_some(BlockKind::HeldFor(p))
    }

    /// Whether `scope` is held for `id` and some of its victims still hold: the preemptor
    /// is admitted there only once they all released.
    fn waits_for_victims(&self, id: JobId, scope: ScopeId) -> bool {
        self.preempt
            .plans
            .get(&id)
            .is_some_and(|plan| !plan.victims.is_empty())
            && self
                .preempt
                .held
                .get(&scope)
                .is_some_and(|l| l.iter().any(|&(p, _)| p == id))
    }

    /// The best-ranked preemptor (other than `except`) ranked before `rank` that holds
    /// room in `scope`, and the units all such preemptors hold there.
    fn held_for_better(
        &self,
        scope: ScopeId,
        rank: Rank,
        except: Option<JobId>,
    ) -> Option<(JobId, u64)> {
        let list = self.preempt.held.get(&scope)?;
        let mut best: Option<(Rank, JobId)> = None;
        let mut units = 0;
        for &(p, u) in list {
            if Some(p) == except || !self.entries.contains(p) {
                continue;
            }
            let r = self.eff_rank(p);
            if r < rank {
                units += u;
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, p));
                }
            }
        }
        best.map(|(_, p)| (p, units))
    }

    /// Whether a wake of `scope` must not hand the waiter filed at `key` (head `head`) to
    /// the pass: the room left there is held for a better-ranked preemptor.
    /// Under fair share ranks move with running counts, so nothing is held back (the
    /// evaluation decides, at the cost of evaluating the scope's waiters).
    pub(crate) fn wake_held_back(&self, scope: ScopeId, key: Rank, head: Option<JobId>) -> bool {
        if self.preempt.held.is_empty() || self.policy.queue.fair_share {
            return false;
        }
        let Some((_, units)) = self.held_for_better(scope, key, head) else {
            return false;
        };
        let s = &self.scopes.states[scope as usize];
        match self.scopes.interner.key(scope) {
            ScopeKey::Conflict { .. } => true,
            _ => s.limit.is_some_and(|l| s.used + units >= l),
        }
    }

    /// An owner's preemptors rank worse now (fair share): the scopes held for them choose
    /// their waiters again.
    pub(crate) fn wake_held_for_owner(&mut self, owner: &str) {
        let scopes: Vec<ScopeId> = self
            .preempt
            .held
            .iter()
            .filter(|(_, list)| {
                list.iter()
                    .any(|&(p, _)| self.entries.find(p).is_some_and(|e| e.job.owner == owner))
            })
            .map(|(&s, _)| s)
            .collect();
        for s in scopes {
            self.wake_unindexed(s);
        }
    }

    /// The preemption work after a pass; true when it freed a hold or woke a preemptor, so
    /// the pass must run again.
    pub(crate) fn preempt_step(&mut self, now: Timestamp) -> bool {
        if self.preempt.waiting.is_empty() && self.preempt.plans.is_empty() {
            return false;
        }
        let mut again = self.track_plans();
        let mut order: Vec<(Rank, JobId)> = Vec::new();
        let mut stale = Vec::new();
        for &id in &self.preempt.waiting {
            match self.entries.find(id) {
                Some(e)
                    if e.job.state == JobState::Queued
                        && self.policy.kind_preempts(&e.job.kind) =>
                {
                    order.push((self.eff_rank(id), id));
                }
                _ => stale.push(id),
            }
        }
        for id in stale {
            self.preempt.waiting.remove(&id);
        }
        order.sort_unstable();
        for (_, p) in order {
            if !self.preempt.plans.contains_key(&p) && self.may_plan(p) {
                again |= self.plan_preemption(p, now);
            }
        }
        again
    }

    /// Follows the plans: drops victims that released, wakes a preemptor whose victims
    /// all released, and drops the plan of one that is admitted, gone, or still held after
    /// being woken.
    fn track_plans(&mut self) -> bool {
        let mut again = false;
        let ids: Vec<JobId> = self.preempt.plans.keys().copied().collect();
        for p in ids {
            let queued = self
                .entries
                .find(p)
                .is_some_and(|e| e.job.state == JobState::Queued);
            if !queued {
                again |= self.drop_plan(p);
                continue;
            }
            let entries = &self.entries;
            let plan = self.preempt.plans.get_mut(&p).expect("listed");
            plan.victims.retain(|&v, &mut token| {
                entries.find(v).is_some_and(|e| {
                    e.job.state.is_admitted() && e.job.lease.is_some_and(|l| l.token == token)
                })
            });
            if !plan.victims.is_empty() {
                continue;
            }
            if plan.woken {
                again |= self.drop_plan(p);
            } else {
                plan.woken = true;
                self.wake_class_of(p);
                again = true;
            }
        }
        again
    }

    /// Ends a plan: its holds go, and the scopes they held are woken.
    fn drop_plan(&mut self, p: JobId) -> bool {
        let Some(plan) = self.preempt.plans.remove(&p) else {
            return false;
        };
        for v in plan.victims.keys() {
            if self.preempt.victim_of.get(v) == Some(&p) {
                self.preempt.victim_of.remove(v);
            }
        }
        for (key, _) in plan.scopes {
            let s = self.intern(key);
            if let Some(list) = self.preempt.held.get_mut(&s) {
                list.retain(|&(q, _)| q != p);
                if list.is_empty() {
                    self.preempt.held.remove(&s);
                }
            }
            self.wake_unindexed(s);
        }
        true
    }

    /// Whether `p` may plan now: it heads its class (the others in it are interchangeable
    /// and ranked after it) and no classmate split off into a class of its own ranks
    /// before it (the rescanning oracle never splits: its classes are whole), and under
    /// strict order it heads the queue.
    fn may_plan(&self, p: JobId) -> bool {
        let Some(cid) = self.entries.get(p).class else {
            return false;
        };
        if self.queue.classes[cid as usize].head() != Some(p) || self.outranked_by_split(p) {
            return false;
        }
        !self.policy.queue.strict
            || self
                .queue
                .heads
                .first()
                .is_some_and(|&(_, c)| self.queue.classes[c as usize].head() == Some(p))
    }

    /// Plans a preemption for `p` if only preemptible holders keep it out; returns whether
    /// it did.
    fn plan_preemption(&mut self, p: JobId, now: Timestamp) -> bool {
        let Err(blocks) = self.evaluate(p, now, true) else {
            return false;
        };
        let placement = self.entries.get(p).placement;
        let (at_nodes, common): (Vec<Block>, Vec<Block>) = blocks
            .into_iter()
            .partition(|b| placement.is_some() && b.scope == placement);
        let choice = if at_nodes.is_empty() {
            self.choose_victims(p, &common)
        } else if at_nodes.iter().all(|b| b.kind == BlockKind::NoRoom) {
            let scope = placement.expect("movable");
            let nodes: Vec<String> = self
                .placement_candidates(scope)
                .map(str::to_string)
                .collect();
            let mut best: Option<Choice> = None;
            for node in nodes {
                let mut bl = common.clone();
                self.check_node(p, &node, &mut bl);
                if let Some(c) = self.choose_victims(p, &bl) {
                    if best.as_ref().is_none_or(|b| c.better_than(b)) {
                        best = Some(c);
                    }
                }
            }
            best
        } else {
            None
        };
        match choice {
            Some(c) if !c.asked.is_empty() || !c.leaving.is_empty() => {
                self.apply_plan(p, c);
                true
            }
            _ => false,
        }
    }

    /// Whether `v` may be asked to stop for a preemptor of base priority `prio`.
    fn preemptible_by(&self, v: &Job, p: JobId, prio: i64) -> bool {
        v.id != p
            && matches!(v.state, JobState::Running | JobState::Prepared)
            && !v.cancel_requested
            && v.priority < prio
            && self.policy.kind_preemptible(&v.kind)
    }

    /// Units `v` holds in `scope`.
    fn units_in(&self, v: JobId, scope: ScopeId) -> u64 {
        let held = &self.entries.get(v).held;
        held.iter()
            .filter(|(s, _)| *s == scope)
            .map(|(_, a)| a)
            .sum()
    }

    /// What each block misses: (scope, units still missing, every holder must go, units
    /// the preemptor needs there); `None` when a block is not a full scope.
    fn gaps_of(&self, blocks: &[Block]) -> Option<Vec<(ScopeId, u64, bool, u64)>> {
        let mut missing: Vec<(ScopeId, u64, bool, u64)> = Vec::new();
        for b in blocks {
            let s = b.scope?;
            let st = &self.scopes.states[s as usize];
            let (gap, all) = match b.kind {
                BlockKind::Capacity
                | BlockKind::OverLimit
                | BlockKind::NodeFull
                | BlockKind::NodePrepareFull => {
                    ((st.used + b.need).saturating_sub(st.limit?), false)
                }
                BlockKind::Conflict => (st.used, true),
                _ => return None,
            };
            if !missing.iter().any(|m| m.0 == s) {
                missing.push((s, gap, all, b.need));
            }
        }
        Some(missing)
    }

    /// The fewest victims (greedy: the holder that covers most of what is still missing
    /// first; ties to the lowest priority, then the latest started) whose release lifts
    /// every block, or `None` when a block cannot be lifted by preemption.
    fn choose_victims(&self, p: JobId, blocks: &[Block]) -> Option<Choice> {
        let prio = self.entries.get(p).job.priority;
        let missing = self.gaps_of(blocks)?;
        let mut chosen: BTreeSet<JobId> = BTreeSet::new();
        let (mut asked, mut leaving) = (Vec::new(), Vec::new());
        let mut candidates: BTreeSet<JobId> = BTreeSet::new();
        for &(s, _, all, _) in &missing {
            for &h in &self.scopes.states[s as usize].holders {
                let j = &self.entries.get(h).job;
                let gone = j.cancel_requested && j.state.is_admitted();
                if gone {
                    if chosen.insert(h) {
                        leaving.push(h);
                    }
                } else if self.preemptible_by(j, p, prio) {
                    candidates.insert(h);
                } else if all {
                    return None;
                }
            }
        }
        for &(s, _, all, _) in &missing {
            if all {
                for &h in &self.scopes.states[s as usize].holders {
                    if chosen.insert(h) {
                        asked.push(h);
                    }
                }
            }
        }
        let left = |chosen: &BTreeSet<JobId>, m: &(ScopeId, u64, bool, u64)| {
            let freed: u64 = chosen.iter().map(|&v| self.units_in(v, m.0)).sum();
            m.1.saturating_sub(freed)
        };
        loop {
            let gaps: Vec<(ScopeId, u64)> = missing
                .iter()
                .map(|m| (m.0, left(&chosen, m)))
                .filter(|g| g.1 > 0)
                .collect();
            if gaps.is_empty() {
                break;
            }
            let best = candidates
                .iter()
                .filter(|v| !chosen.contains(v))
                .map(|&v| {
                    let gain: u64 = gaps.iter().map(|&(s, g)| self.units_in(v, s).min(g)).sum();
                    let j = &self.entries.get(v).job;
                    let started = j.started_at.or(j.prepared_at).unwrap_or_default();
                    (gain, std::cmp::Reverse(j.priority), started, v)
                })
                .filter(|c| c.0 > 0)
                .max()?;
            chosen.insert(best.3);
            asked.push(best.3);
        }
        let hold = missing.iter().map(|m| (m.0, m.3)).collect();
        Some(Choice {
            asked,
            leaving,
            hold,
        })
    }

    /// Asks the victims to stop and holds the scopes for `p`.
    fn apply_plan(&mut self, p: JobId, c: Choice) {
        let mut victims = BTreeMap::new();
        for &v in c.asked.iter().chain(&c.leaving) {
            let token = self.entries.get(v).job.lease.map_or(0, |l| l.token);
            victims.insert(v, token);
        }
        for &v in &c.asked {
            let job = self.entries.job_mut(v);
            job.cancel_requested = true;
            job.cancel_reason = Some(CancelReason::Preempted);
            job.message = Some(format!("preempted by job {p}: stopping"));
            self.preempt.victim_of.insert(v, p);
            self.emit(JobChange::CancelRequested, v);
        }
        let mut scopes = Vec::new();
        for (s, units) in c.hold {
            self.preempt.held.entry(s).or_default().push((p, units));
            scopes.push((self.scopes.interner.key(s).clone(), units));
        }
        self.preempt.plans.insert(
            p,
            Plan {
                victims,
                scopes,
                woken: false,
            },
        );
    }

    /// Ends an admitted job in `state`, unless it is a preempted victim that did not
    /// succeed: that one goes back to the queue instead (preemption is not an end).
    pub(crate) fn end_or_requeue(
        &mut self,
        id: JobId,
        state: JobState,
        message: Option<String>,
        now: Timestamp,
    ) -> Job {
        let job = &self.entries.get(id).job;
        let preempted = job.cancel_reason == Some(CancelReason::Preempted)
            && job.state.is_admitted()
            && state != JobState::Succeeded;
        if !preempted {
            return self.end_job(id, state, message, now);
        }
        let prev = job.state;
        self.release(id, prev);
        let by = self.preempt.victim_of.remove(&id);
        let job = self.entries.job_mut(id);
        job.lease = None;
        job.cancel_reason = None;
        job.cancel_by = None;
        job.preemptions += 1;
        job.message = Some(match by {
            Some(p) => format!("preempted by job {p}"),
            None => "preempted".into(),
        });
        self.requeue(id, now);
        Job::clone(&self.entries.get(id).job)
    }

    /// After a rebuild: the plans' holds under the new scope ids.
    pub(crate) fn reindex_preemptions(&mut self) {
        self.preempt.held.clear();
        let plans: Vec<(JobId, Vec<(ScopeKey, u64)>)> = self
            .preempt
            .plans
            .iter()
            .map(|(&p, plan)| (p, plan.scopes.clone()))
            .collect();
        for (p, scopes) in plans {
            for (key, units) in scopes {
                let s = self.intern(key);
                self.preempt.held.entry(s).or_default().push((p, units));
            }
        }
    }

    /// The victims a queued preemptor waits for (explain).
    pub(crate) fn preempt_victims(&self, p: JobId) -> Option<Vec<JobId>> {
        let plan = self.preempt.plans.get(&p)?;
        Some(plan.victims.keys().copied().collect())
    }
}
