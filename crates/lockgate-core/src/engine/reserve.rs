//! Reservations per scope (policy.md, "Reservations"): a waiting job holds the scopes that
//! keep it out for itself, so jobs ranked below it cannot take them first.
//!
//! Each rule has its own `reserve_after` and `strict` (`[[limit]]`, `[[conflict]]`,
//! `[resources.<name>]` tables for plain and per-value pools; every other scope, and a rule
//! that sets neither, takes `[queue].reserve_after`). When a job is
//! evaluated blocked, every scope that blocks it is reserved for it once it has waited that
//! rule's `reserve_after`, provided everything that blocks it is a wait for room (a full
//! scope or a held conflict key): a job that cannot run anyway (its node is missing, a
//! limit is 0) holds nobody back. A restore's job reserves at once
//! (`Policy::restores_first`). A `strict` rule drops both conditions for its own scopes:
//! a job it blocks reserves them at once.
//!
//! A conflict is reserved whole: a job a conflict key blocks reserves every scope of that
//! key it would take. What one job takes from a conflict is exactly what a job it conflicts
//! with must find free (see `conflict_scopes` in `scope.rs`), and a reservation on a
//! conflict scope holds back only jobs that need it free, so it holds back exactly the jobs
//! that would conflict with the reserving job, on that key only.
//!
//! Invariants:
//! - a scope is reserved by at most one job ([`super::scopes::ScopeState::reserved_by`]); a
//!   better-ranked job takes it over; it is cleared when its job leaves the queue;
//! - the best-ranked queued job is never held by a reservation, so reservations cannot
//!   deadlock: every reserving job waits only for holders, and holders end.
//!
//! Cost: O(s) per blocked evaluation (s = scopes the job touches), never a queue scan.

use super::admission::BlockKind;
use super::timers::Timer;
use super::Engine;
use crate::job::JobId;
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::time::Duration;

impl Engine {
    /// The reservation rule of a scope: `(reserve_after, strict)`.
    pub(crate) fn reserve_rule(&self, scope: ScopeId) -> (Duration, bool) {
        let rule = match self.scopes.interner.key(scope) {
            ScopeKey::Limit { name, .. } => self
                .policy
                .limits
                .iter()
                .find(|l| &l.name == name)
                .map(|l| l.reserve),
            ScopeKey::Conflict { index, .. } => {
                self.policy.conflicts.get(*index).map(|c| c.reserve)
            }
            ScopeKey::Pool(pool) | ScopeKey::PoolValue { pool, .. } => {
                self.policy.pool_reserves.get(pool).copied()
            }
            _ => None,
        }
        .unwrap_or_default();
        (
            rule.after.unwrap_or(self.policy.queue.reserve_after),
            rule.strict,
        )
    }

    /// Whether a reservation on `scope` holds back a job that uses it with `check`: on a
    /// conflict scope, only jobs that need it free.
    pub(crate) fn reservation_applies(&self, scope: ScopeId, check: super::needs::Check) -> bool {
        check == super::needs::Check::Free
            || !matches!(self.scopes.interner.key(scope), ScopeKey::Conflict { .. })
    }

    /// The scopes of the conflict key `scope` belongs to that job `id` takes.
    fn conflict_takes(&self, id: JobId, scope: ScopeId) -> Vec<ScopeId> {
        let ScopeKey::Conflict { index, parts, .. } = self.scopes.interner.key(scope) else {
            return vec![scope];
        };
        self.entries
            .get(id)
            .needs
            .common
            .iter()
            .filter(|n| n.take > 0)
            .filter(|n| {
                matches!(self.scopes.interner.key(n.scope),
                    ScopeKey::Conflict { index: i, parts: p, .. } if i == index && p == parts)
            })
            .map(|n| n.scope)
            .collect()
    }

    /// A blocked job reserves what its rules let it reserve now, and arms a timer for the
    /// earliest rule that will later.
    pub(crate) fn reserve_scopes(&mut self, id: JobId, now: Timestamp) {
        let Err(blocks) = self.evaluate(id, now, true) else {
            return;
        };
        let waits = blocks
            .iter()
            .all(|b| b.kind.is_capacity() || b.kind == BlockKind::Conflict);
        let queued_at = self.entries.get(id).job.queued_at;
        let at_once = self.policy.restores_first(&self.entries.get(id).job.kind);
        // `order = "window"`: counted from the planned start (`window_order.rs`).
        let planned = Timestamp(self.planned_start(&self.entries.get(id).job));
        let (mut targets, mut later) = (Vec::new(), None::<Timestamp>);
        for b in &blocks {
            let Some(s) = b.scope else { continue };
            let (after, strict) = self.reserve_rule(s);
            if !(strict || waits) {
                continue;
            }
            let due = if strict {
                queued_at
            } else if at_once {
                planned
            } else {
                planned.plus(after)
            };
            if now < due {
                later = Some(later.map_or(due, |t| t.min(due)));
            } else if b.kind == BlockKind::Conflict {
                targets.extend(self.conflict_takes(id, s));
            } else {
                targets.push(s);
            }
        }
        if let Some(at) = later {
            let e = self.entries.get_mut(id);
            if e.reserve_armed.is_none_or(|t| at < t) {
                e.reserve_armed = Some(at);
                let attempt = e.job.attempt;
                self.timers.arm(at, Timer::Reserve(id, attempt));
            }
        }
        let rank = self.eff_rank(id);
        for s in targets {
            let current = self.scopes.states[s as usize].reserved_by;
            let take = match current {
                None => true,
                Some(r) if r == id => false,
                Some(r) => !self.entries.contains(r) || rank < self.eff_rank(r),
            };
            if take {
                self.scopes.states[s as usize].reserved_by = Some(id);
                self.scopes.reserved.insert(s);
            }
        }
    }
}
