//! Shared and exclusive conflicts: no writer starvation (policy.md, "Conflicts").
//!
//! A conflict with `exclusive` gives every key a twin scope that counts exclusive holders
//! (`conflict-exclusive:..`, built in `scope.rs`); shared jobs need the twin free. Beside
//! its count, a twin keeps the queued exclusive jobs that take it, by base rank
//! ([`ScopeState::exclusive_waiting`](super::scopes::ScopeState)), from the moment each has
//! waited its rule's `exclusive_delay`. A shared job ranked below the first of them does not
//! get the twin, so it is not admitted on that key: [`BlockKind::ExclusiveWaiting`].
//!
//! Invariants:
//! - `exclusive_waiting` of a scope holds exactly the base ranks of the queued jobs (in a
//!   class) that take the scope and have waited their `exclusive_delay`: [`Engine::hold_exclusive`]
//!   runs when a job enters its class (and when its delay passes), [`Engine::release_exclusive`]
//!   when it leaves it;
//! - base ranks never change while a job is queued, so the hold needs no re-keying; under
//!   fair share it compares base ranks (priority and age, not the fair-share term);
//! - a shared class parked on a twin is woken when the twin is free and no exclusive job
//!   ranked above its head waits there ([`Engine::wake`] stops at the first one), so the
//!   cost is O(log n) per exclusive job queued or leaving the queue, and O(1) per check: no
//!   queue scan.
//!
//! [`BlockKind::ExclusiveWaiting`]: super::admission::BlockKind::ExclusiveWaiting

use super::timers::Timer;
use super::Engine;
use crate::job::JobId;
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::time::Duration;

impl Engine {
    /// The twin scopes a job takes (it is exclusive there), with their rule's delay.
    fn exclusive_takes(&self, id: JobId) -> Vec<(ScopeId, Duration)> {
        let e = self.entries.get(id);
        e.needs
            .common
            .iter()
            .filter(|n| n.take > 0)
            .filter_map(|n| match self.scopes.interner.key(n.scope) {
                ScopeKey::Conflict {
                    index,
                    exclusive: true,
                    ..
                } => Some((n.scope, self.policy.conflicts[*index].exclusive_delay)),
                _ => None,
            })
            .collect()
    }

    /// A queued job entered its class: where it is exclusive with no `exclusive_delay`, it
    /// holds shared jobs ranked below it back at once; elsewhere a timer does it later.
    pub(crate) fn hold_exclusive(&mut self, id: JobId) {
        self.hold_exclusive_at(id, None);
    }

    /// [`Engine::hold_exclusive`], at `now` when known: every rule whose delay has passed
    /// by then holds back.
    fn hold_exclusive_at(&mut self, id: JobId, now: Option<Timestamp>) {
        let takes = self.exclusive_takes(id);
        if takes.is_empty() {
            return;
        }
        let job = &self.entries.get(id).job;
        let (queued_at, attempt, rank) = (job.queued_at, job.attempt, self.base_rank(job));
        let mut later = None;
        for (scope, delay) in takes {
            let due = queued_at.plus(delay);
            if delay.is_zero() || now.is_some_and(|now| now >= due) {
                self.scopes.states[scope as usize]
                    .exclusive_waiting
                    .insert(rank);
            } else {
                later = Some(later.map_or(due, |t: Timestamp| t.min(due)));
            }
        }
        if let Some(at) = later {
            self.timers.arm(at, Timer::ExclusiveDue(id, attempt));
        }
    }

    /// A job left its class (admitted, cancelled, expired, or re-indexed): it holds nobody
    /// back any more; the twin wakes its best shared waiter.
    pub(crate) fn release_exclusive(&mut self, id: JobId) {
        let takes = self.exclusive_takes(id);
        if takes.is_empty() {
            return;
        }
        let rank = self.base_rank(&self.entries.get(id).job);
        for (scope, _) in takes {
            if self.scopes.states[scope as usize]
                .exclusive_waiting
                .remove(&rank)
            {
                self.wake(scope, None);
            }
        }
    }

    /// The `exclusive_delay` of a queued job passed (timer): it starts holding back.
    pub(crate) fn exclusive_delay_passed(&mut self, id: JobId, now: Timestamp) {
        if self.entries.find(id).is_none_or(|e| e.class.is_none()) {
            return;
        }
        self.hold_exclusive_at(id, Some(now));
    }

    /// The exclusive job that waits on `scope` ranked above `id`, if any: `id` (a shared
    /// job checking the twin free) is not admitted on that key.
    pub(crate) fn exclusive_ahead(&self, scope: ScopeId, id: JobId) -> Option<JobId> {
        let first = self.scopes.states[scope as usize]
            .exclusive_waiting
            .first()?;
        (first.id != id && *first < self.base_rank(&self.entries.get(id).job)).then_some(first.id)
    }
}
