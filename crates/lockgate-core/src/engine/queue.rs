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
//! - `heads` holds every non-empty class keyed by its head's effective rank.
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
use std::collections::BTreeSet;

use super::needs::Needs;

/// Dense index of a class.
pub(crate) type ClassId = u32;

/// A queued job's rank: smaller is better.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rank {
    pub primary: f64,
    pub queued_at: u64,
    pub id: JobId,
}

impl Rank {
    /// The same rank shifted by a fair-share term.
    pub fn shifted(self, by: f64) -> Rank {
        Rank { primary: self.primary + by, ..self }
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
    pub needs: Needs,
    pub placement: PlacementSig,
    pub two_stage: bool,
    /// The job kind when the job is an agent job (agents run only kinds they have handlers for).
    pub agent_kind: Option<String>,
    /// The owner, when fair share is on.
    pub owner: Option<String>,
}

/// One class.
#[derive(Debug, Clone)]
pub(crate) struct Class {
    pub sig: ClassSig,
    /// Jobs by base rank (without the fair-share term).
    pub jobs: BTreeSet<(Rank, JobId)>,
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
        self.jobs.first().map(|&(_, id)| id)
    }
}
