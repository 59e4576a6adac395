//! The scope table: every scope the current policy has counted, by dense id, with its
//! counter, limit, holders, waiting classes and reservation.
//!
//! Invariants:
//! - `states[id]` exists for every id the interner has given out (interning and pushing a
//!   state happen together, in `Engine::intern`), and both are rebuilt together on every
//!   policy change;
//! - `used` is the sum of what the jobs in `holders` took (checked by
//!   `Engine::check_invariants`), so giving back exactly a job's `held` list can never
//!   unbalance a counter;
//! - `reserved` holds exactly the ids whose `reserved_by` is set.

use super::queue::{ClassId, Rank};
use crate::job::JobId;
use crate::scope::{Interner, ScopeId};
use std::collections::BTreeSet;

/// Counter, holders and waiters of one scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScopeState {
    pub used: u64,
    pub limit: Option<u64>,
    pub peak: u64,
    pub holders: BTreeSet<JobId>,
    /// Classes whose head this scope blocked, by the head's effective rank (the queue
    /// index files and unfiles them; see `queue.rs`).
    pub waiters: BTreeSet<(Rank, ClassId)>,
    pub reserved_by: Option<JobId>,
    /// On a conflict's exclusive twin: the base ranks of the queued exclusive jobs that
    /// take it and have waited their `exclusive_delay` (`engine/exclusive.rs`).
    pub exclusive_waiting: BTreeSet<Rank>,
}

/// Every counted scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScopeTable {
    /// Key <-> id.
    pub interner: Interner,
    /// By id.
    pub states: Vec<ScopeState>,
    /// Scopes that hold a reservation.
    pub reserved: BTreeSet<ScopeId>,
}
