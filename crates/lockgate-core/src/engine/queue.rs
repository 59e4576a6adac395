//! The queue index: queued jobs grouped into classes of interchangeable jobs.
//!
//! Two queued jobs with the same [`ClassSig`] (the same needs, placement, stage, node
//! costs, and owner under fair share) are interchangeable for admission: if one fits, so
//! does the other. Each class keeps its jobs ranked; only a class's head is ever evaluated.
//!
//! Invariants:
//! - every queued job whose `not_before` has passed is in exactly one class;
//! - a non-empty class is in exactly one of: the `ready` set, the waiter set of the one
//!   scope that blocked its head when last evaluated (`parked`), or neither while it is
//!   being evaluated;
//! - `heads` holds every non-empty class keyed by its head's effective rank;
//! - a class with `solo` set holds one job, split off its signature's class while that job
//!   (a preemptor) waits for its own victims, and is listed in `solos` under that
//!   signature until it empties; where the rank among classmates decides (who may plan a
//!   preemption), the split-off jobs count as classmates, as they are in the rescanning
//!   oracle, which never splits.
//!
//! Ranks: effective priority is `priority + wait / aging - fair_share_term`. Ordering by
//! `queued_at - priority * aging + fair_term * aging` (ascending) is the same order at every
//! instant, so keys never change as time passes; only the fair-share term changes, when
//! the owner's running count does, and then only that owner's classes are re-keyed.
//!
//! Costs (c = classes, n = queued jobs): insert/remove a job O(log n + log c); re-key one
//! class O(log c).

use crate::job::JobId;
use crate::scope::ScopeId;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use super::needs::Needs;
use super::timers::Timer;
use super::{Engine, Entry, Mode};
use crate::job::Job;
use crate::policy::Executor;
use crate::scope::ScopeKey;
use crate::time::Timestamp;
use std::ops::Bound;

/// Dense index of a class.
pub(crate) type ClassId = u32;

/// A queued job's rank: smaller is better.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rank {
    pub primary: f64,
    /// The job's place in the window plan (`window_order.rs`); its `queued_at` under FIFO.
    pub plan: u64,
    pub queued_at: u64,
    pub id: JobId,
}

impl Rank {
    /// The same rank shifted by a fair-share term.
    pub fn shifted(self, by: f64) -> Rank {
        Rank {
            primary: self.primary + by,
            ..self
        }
    }
}

impl PartialEq for Rank {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Rank {}
impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Rank {
    fn cmp(&self, other: &Self) -> Ordering {
        self.primary
            .total_cmp(&other.primary)
            .then(self.plan.cmp(&other.plan))
            .then(self.queued_at.cmp(&other.queued_at))
            .then(self.id.cmp(&other.id))
    }
}

/// Where a movable or pinned job runs, as part of a class signature.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PlacementSig {
    /// Runs on no node.
    None,
    /// Pinned to a node.
    Pinned(String),
    /// Movable; the placement scope of its selector, agent kind and stage.
    Movable(ScopeId),
}

/// What makes jobs interchangeable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClassSig {
    pub needs: std::sync::Arc<Needs>,
    pub placement: PlacementSig,
    pub two_stage: bool,
    /// The job kind when the job is an agent job (agents run only kinds they have handlers for).
    pub agent_kind: Option<String>,
    /// The owner, when fair share is on.
    pub owner: Option<String>,
    /// A job split off into a class of its own because something holds only it (a
    /// preemptor waiting for its own victims: see [`Engine::split_head`]); `None` otherwise.
    pub solo: Option<JobId>,
}

/// The queue index: classes, and where each is filed (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueIndex {
    /// By id; a freed id is in `free` and its slot is stale.
    pub classes: Vec<Class>,
    /// Ids of dropped classes, for reuse.
    pub free: Vec<ClassId>,
    /// The class of each signature.
    pub ids: HashMap<ClassSig, ClassId>,
    /// Classes to evaluate in this pass, best first.
    pub ready: BTreeSet<(Rank, ClassId)>,
    /// Every non-empty class by its head's effective rank (strict order walks it).
    pub heads: BTreeSet<(Rank, ClassId)>,
    /// Classes per owner, when fair share is on (re-keyed when the owner's count changes).
    pub owner_classes: HashMap<String, BTreeSet<ClassId>>,
    /// The classes split off each signature (`solo` unset) by [`Engine::split_head`]:
    /// their jobs still count as its classmates where the rank among classmates decides
    /// (who may plan a preemption), so both engine modes decide alike.
    pub solos: HashMap<ClassSig, BTreeSet<ClassId>>,
}

/// One class.
#[derive(Debug, Clone)]
pub(crate) struct Class {
    pub sig: ClassSig,
    /// Jobs by base rank (without the fair-share term; a rank carries its job id).
    pub jobs: BTreeSet<Rank>,
    /// The scope whose waiter set holds this class.
    pub parked: Option<ScopeId>,
    /// In the ready set.
    pub ready: bool,
    /// The key it is filed under in `ready`/waiters/`heads` (effective head rank).
    pub key: Option<Rank>,
    /// The scope whose wake put it in `ready`, to wake that scope's next waiter after it.
    pub woken_from: Option<ScopeId>,
}

impl Class {
    pub fn head(&self) -> Option<JobId> {
        self.jobs.first().map(|r| r.id)
    }
}

impl Engine {
    // ----- filing jobs and classes -----

    /// Adds a job to the engine (a new submit or a retry), with its timers.
    pub(crate) fn insert_entry(&mut self, job: std::sync::Arc<Job>, now: Timestamp) {
        let id = job.id;
        let needs = self.needs_of(&job);
        let placement = self.job_placement_scope(&job);
        let queued_at = job.queued_at;
        let attempt = job.attempt;
        let not_before = job.not_before.filter(|&t| t > now);
        if let Some(ms) = job.max_wait_ms {
            self.timers.arm(
                queued_at.plus(std::time::Duration::from_millis(ms)),
                Timer::MaxWait(id, attempt),
            );
        }
        self.entries.insert(Entry {
            needs,
            placement,
            ..Entry::new(job)
        });
        self.register_deps(id);
        match not_before {
            Some(t) => {
                self.timers.arm(t, Timer::NotBefore(id, attempt));
            }
            None => self.admit_gate(id),
        }
    }

    pub(crate) fn job_placement_scope(&mut self, job: &Job) -> Option<ScopeId> {
        let selector = job.placement.selector()?.clone();
        let agent_kind = (job.executor == Executor::Agent).then(|| job.kind.clone());
        Some(self.placement_scope(super::nodes::PlacementKey {
            selector,
            agent_kind,
            two_stage: job.two_stage,
        }))
    }

    fn class_sig(&self, e: &Entry) -> ClassSig {
        let placement = match (e.job.placement.pinned(), e.placement) {
            (Some(node), _) => PlacementSig::Pinned(node.to_string()),
            (None, Some(p)) => PlacementSig::Movable(p),
            (None, None) => PlacementSig::None,
        };
        ClassSig {
            needs: e.needs.clone(),
            placement,
            two_stage: e.job.two_stage,
            agent_kind: (e.job.executor == Executor::Agent).then(|| e.job.kind.clone()),
            owner: self.policy.queue.fair_share.then(|| e.job.owner.clone()),
            solo: None,
        }
    }

    /// Puts a queued job into its class.
    pub(crate) fn enqueue(&mut self, id: JobId) {
        self.note_preemptor(id);
        let sig = self.class_sig(self.entries.get(id));
        let cid = match self.queue.ids.get(&sig) {
            Some(&c) => c,
            None => self.new_class(sig),
        };
        let rank = self.base_rank(&self.entries.get(id).job);
        let shared = self.queue.classes[cid as usize].sig.needs.clone();
        let e = self.entries.get_mut(id);
        e.class = Some(cid);
        e.needs = shared; // one copy of the needs per class, not per job
        let class = &mut self.queue.classes[cid as usize];
        let was_head = class.jobs.first().copied();
        class.jobs.insert(rank);
        if class.jobs.first().copied() != was_head {
            self.detach(cid);
            self.file(cid, true);
        }
        self.hold_exclusive(id);
    }

    fn new_class(&mut self, sig: ClassSig) -> ClassId {
        let class = Class {
            sig: sig.clone(),
            jobs: BTreeSet::new(),
            parked: None,
            ready: false,
            key: None,
            woken_from: None,
        };
        let cid = match self.queue.free.pop() {
            Some(c) => {
                self.queue.classes[c as usize] = class;
                c
            }
            None => {
                self.queue.classes.push(class);
                (self.queue.classes.len() - 1) as ClassId
            }
        };
        if let Some(owner) = &sig.owner {
            self.queue
                .owner_classes
                .entry(owner.clone())
                .or_default()
                .insert(cid);
        }
        self.queue.ids.insert(sig, cid);
        cid
    }

    /// Takes a queued job out of its class.
    pub(crate) fn dequeue(&mut self, id: JobId) {
        if self.entries.find(id).is_none_or(|e| e.class.is_none()) {
            return;
        }
        self.release_exclusive(id);
        let Some(cid) = self.entries.find_mut(id).and_then(|e| e.class.take()) else {
            return;
        };
        let rank = self.base_rank(&self.entries.get(id).job);
        let class = &mut self.queue.classes[cid as usize];
        let was_head = class.head() == Some(id);
        class.jobs.remove(&rank);
        if was_head {
            let (ready, parked) = (class.ready, class.parked);
            self.detach(cid);
            if self.queue.classes[cid as usize].jobs.is_empty() {
                // A woken class that empties before the pass reaches it (a pause takes
                // several jobs out at once) hands its wake on, or the scope's next waiter
                // would never hear of the room.
                let from = self.queue.classes[cid as usize].woken_from.take();
                self.drop_class(cid);
                if let (true, Some(s)) = (ready, from) {
                    self.wake(s, None);
                }
            } else if ready {
                self.file(cid, true);
            } else if parked.is_some() {
                // The new head is evaluated afresh (it may arm its reservation timer).
                self.file(cid, true);
            } else {
                self.file(cid, false);
            }
        }
        self.clear_reservations(id);
    }

    /// Moves a detached class's head into a class of its own and files the rest ready;
    /// returns the head's new class (detached). For a head held by something its
    /// classmates do not share: a preemptor waiting for its own victims is blocked on room
    /// held for itself, which a worse-ranked classmate may take around (the room beyond
    /// the hold). Left in the class, it would keep them parked behind it. O(log n + log c).
    pub(crate) fn split_head(&mut self, cid: ClassId) -> ClassId {
        let class = &mut self.queue.classes[cid as usize];
        let rank = class
            .jobs
            .pop_first()
            .expect("a class being split has a head");
        let sig = ClassSig {
            solo: Some(rank.id),
            ..class.sig.clone()
        };
        let base = class.sig.clone();
        let solo = match self.queue.ids.get(&sig) {
            Some(&c) => c,
            None => self.new_class(sig),
        };
        self.queue.solos.entry(base).or_default().insert(solo);
        self.queue.classes[solo as usize].jobs.insert(rank);
        self.entries.get_mut(rank.id).class = Some(solo);
        if self.queue.classes[cid as usize].jobs.is_empty() {
            self.drop_class(cid);
        } else {
            self.file(cid, true);
        }
        solo
    }

    /// Whether a job of the same signature ranks before `id`, counting the classes split
    /// off it: the head of `id`'s class is not the best of its signature when a better
    /// classmate waits in a class of its own. O(1) when no class is split off, else
    /// O(s + log c) for the s classes split off `id`'s signature.
    pub(crate) fn outranked_by_split(&self, id: JobId) -> bool {
        if self.queue.solos.is_empty() {
            return false;
        }
        let Some(cid) = self.entries.get(id).class else {
            return false;
        };
        let class = &self.queue.classes[cid as usize];
        let Some(&rank) = class.jobs.first() else {
            return false;
        };
        let base = ClassSig {
            solo: None,
            ..class.sig.clone()
        };
        let better = |c: ClassId| {
            c != cid
                && self.queue.classes[c as usize]
                    .jobs
                    .first()
                    .is_some_and(|r| *r < rank)
        };
        let base_class = self.queue.ids.get(&base).copied();
        base_class.is_some_and(better)
            || self
                .queue
                .solos
                .get(&base)
                .is_some_and(|set| set.iter().any(|&c| better(c)))
    }

    fn drop_class(&mut self, cid: ClassId) {
        let sig = self.queue.classes[cid as usize].sig.clone();
        if let Some(owner) = &sig.owner {
            if let Some(set) = self.queue.owner_classes.get_mut(owner) {
                set.remove(&cid);
            }
        }
        if sig.solo.is_some() {
            let base = ClassSig {
                solo: None,
                ..sig.clone()
            };
            if let Some(set) = self.queue.solos.get_mut(&base) {
                set.remove(&cid);
                if set.is_empty() {
                    self.queue.solos.remove(&base);
                }
            }
        }
        self.queue.ids.remove(&sig);
        self.queue.free.push(cid);
    }

    /// The key a class is filed under: its head's effective rank.
    fn class_key(&self, cid: ClassId) -> Option<Rank> {
        let class = &self.queue.classes[cid as usize];
        let &rank = class.jobs.first()?;
        Some(match &class.sig.owner {
            Some(owner) => rank.shifted(self.fair_term(owner)),
            None => rank,
        })
    }

    /// Removes a class from `heads`, `ready` and its waiter set.
    pub(crate) fn detach(&mut self, cid: ClassId) {
        let class = &mut self.queue.classes[cid as usize];
        let Some(key) = class.key.take() else { return };
        self.queue.heads.remove(&(key, cid));
        if class.ready {
            self.queue.ready.remove(&(key, cid));
        }
        if let Some(s) = class.parked.take() {
            self.scopes.states[s as usize].waiters.remove(&(key, cid));
        }
        class.ready = false;
    }

    /// Files a detached, non-empty class in `heads`, and in `ready` when asked.
    pub(crate) fn file(&mut self, cid: ClassId, ready: bool) {
        let Some(key) = self.class_key(cid) else {
            return;
        };
        let class = &mut self.queue.classes[cid as usize];
        class.key = Some(key);
        class.ready = ready;
        self.queue.heads.insert((key, cid));
        if ready {
            self.queue.ready.insert((key, cid));
        }
    }

    pub(crate) fn park_on(&mut self, cid: ClassId, scope: ScopeId) {
        self.file(cid, false);
        let class = &mut self.queue.classes[cid as usize];
        if let Some(key) = class.key {
            class.parked = Some(scope);
            self.scopes.states[scope as usize]
                .waiters
                .insert((key, cid));
        }
    }

    /// An owner's running count changed: re-key its classes (fair share). When it went
    /// down, its classes rank better and are evaluated again.
    pub(crate) fn owner_count_changed(&mut self, owner: &str, delta: i64) {
        let count = self.owner_running.entry(owner.to_string()).or_insert(0);
        *count = count.saturating_add_signed(delta);
        if !self.policy.queue.fair_share {
            return;
        }
        if delta > 0 {
            // The owner's reservations now outrank fewer jobs: let their scopes choose again.
            let held: Vec<ScopeId> = self
                .scopes
                .reserved
                .iter()
                .copied()
                .filter(|&s| {
                    let r = self.scopes.states[s as usize].reserved_by;
                    r.and_then(|r| self.entries.find(r))
                        .is_some_and(|e| e.job.owner == owner)
                })
                .collect();
            for s in held {
                self.wake_unindexed(s);
            }
            self.wake_held_for_owner(owner);
        }
        let cids: Vec<ClassId> = self
            .queue
            .owner_classes
            .get(owner)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for cid in cids {
            let class = &self.queue.classes[cid as usize];
            let (ready, parked, from) = (class.ready, class.parked, class.woken_from);
            if class.key.is_none() {
                continue;
            }
            self.detach(cid);
            match (parked, from) {
                // Worse ranks: a class woken as its scope's best waiter may no longer be
                // the best; put it back and let the scope choose again.
                (Some(s), _) if delta > 0 => self.park_on(cid, s),
                (None, Some(s)) if ready && delta > 0 => {
                    self.queue.classes[cid as usize].woken_from = None;
                    self.park_on(cid, s);
                    self.wake(s, None);
                }
                // Better ranks: evaluate again (it may now outrank a reservation).
                _ => self.file(cid, ready || parked.is_some()),
            }
        }
    }

    // ----- waking -----

    /// Whether a scope has room for at least some waiter.
    pub(crate) fn has_room(&self, scope: ScopeId) -> bool {
        let s = &self.scopes.states[scope as usize];
        match self.scopes.interner.key(scope) {
            ScopeKey::Conflict { .. } => s.used == 0,
            ScopeKey::Placement(_) => self
                .placement
                .nodes
                .get(&scope)
                .and_then(|set| set.first())
                .is_some_and(|(room, _, _)| room.0 > 0),
            _ => s.limit.is_none_or(|l| s.used < l),
        }
    }

    /// A scope may have gained room: hand its best waiter (after `after`, if given) to the
    /// pass. A reserved scope wakes nobody ranked below its reservation.
    pub(crate) fn wake(&mut self, scope: ScopeId, after: Option<(Rank, ClassId)>) {
        if self.mode == Mode::Rescan || !self.has_room(scope) {
            return;
        }
        let s = &self.scopes.states[scope as usize];
        let next = match after {
            None => s.waiters.first().copied(),
            Some(a) => s
                .waiters
                .range((Bound::Excluded(a), Bound::Unbounded))
                .next()
                .copied(),
        };
        let Some((key, cid)) = next else { return };
        let head = self.queue.classes[cid as usize].head();
        if head.is_some_and(|h| self.exclusive_ahead(scope, h).is_some()) {
            return;
        }
        if self.wake_held_back(scope, key, head) {
            return;
        }
        let s = &self.scopes.states[scope as usize];
        if let Some(r) = s.reserved_by {
            let head = self.queue.classes[cid as usize].head();
            if head != Some(r) && self.entries.contains(r) && self.eff_rank(r) < key {
                return;
            }
        }
        self.scopes.states[scope as usize]
            .waiters
            .remove(&(key, cid));
        let class = &mut self.queue.classes[cid as usize];
        class.parked = None;
        class.ready = true;
        class.woken_from = Some(scope);
        self.queue.ready.insert((key, cid));
    }

    /// Wakes `scope`, and when it is a node's own scope (its run slots, prepare bound or
    /// one of its pools) the placement scopes that node is filed in. For room the placement
    /// index does not see (a reservation or a preemption hold there ended, a pool unit came
    /// back): a movable job that found no node parks on its placement scope, not on the
    /// node's. Room the index does count (a run slot freed) wakes them through the node's
    /// re-filing instead.
    pub(crate) fn wake_unindexed(&mut self, scope: ScopeId) {
        self.wake(scope, None);
        let node = match self.scopes.interner.key(scope) {
            ScopeKey::Node(n) | ScopeKey::NodePrepare(n) | ScopeKey::NodePool { node: n, .. } => {
                n.clone()
            }
            _ => return,
        };
        let filed = self.nodes.get(&node).map_or(0, |n| n.filed.len());
        for i in 0..filed {
            let Some(&(p, _)) = self.nodes.get(&node).and_then(|n| n.filed.get(i)) else {
                break;
            };
            self.wake(p, None);
        }
    }
}
