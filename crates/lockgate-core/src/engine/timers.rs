//! Timers: every time-driven change, kept in one ordered set and validated lazily.
//!
//! A timer names the job (and the attempt or lease token it was armed for); when it fires
//! and the job has moved on, it is dropped. A renewed lease does not re-arm its timer: the
//! lease timer, when it fires early, re-arms itself at the lease's current expiry, so a
//! heartbeat costs O(1).
//!
//! Invariant: [`Timers`] is the only place time-driven work is kept; anything that must
//! happen later is a [`Timer`] in it, so [`Engine::next_deadline`] is always the earliest
//! of them and nothing is missed between two calls.

use super::Engine;
use crate::event::JobChange;
use crate::job::{JobId, JobState};
use crate::time::Timestamp;
use std::collections::BTreeSet;

/// What a timer does when it fires.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Timer {
    /// The lease with this token runs out.
    Lease(JobId, u64),
    /// `not_before` passed: the job (this attempt) joins the queue.
    NotBefore(JobId, u32),
    /// `max_wait` passed for this attempt.
    MaxWait(JobId, u32),
    /// `max_run` passed for this lease: request cancellation.
    MaxRun(JobId, u64),
    /// One lease TTL after `max_run`: revoke.
    MaxRunRevoke(JobId, u64),
    /// `prepare_timeout` for this lease.
    PrepareTimeout(JobId, u64),
    /// A retry is due for this attempt.
    Retry(JobId, u32),
    /// `reserve_after` passed: evaluate the job again so it may reserve.
    Reserve(JobId, u32),
    /// A node's TTL may have run out.
    NodeTtl(String),
}

/// Every armed timer, by due time (ties in [`Timer`] order, so firing is deterministic).
#[derive(Debug, Clone, Default)]
pub(crate) struct Timers(BTreeSet<(Timestamp, Timer)>);

impl Timers {
    /// Arms `timer` for `at` (arming the same timer twice for one instant is one timer).
    pub fn arm(&mut self, at: Timestamp, timer: Timer) {
        self.0.insert((at, timer));
    }

    /// When the earliest timer is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.0.first().map(|(t, _)| *t)
    }

    /// Takes the earliest timer if it is due at `now`.
    fn pop_due(&mut self, now: Timestamp) -> Option<Timer> {
        if self.next_due()? > now {
            return None;
        }
        self.0.pop_first().map(|(_, timer)| timer)
    }
}

impl Engine {
    /// Fires every timer due at `now`; returns whether anything may have changed.
    pub(crate) fn fire_timers(&mut self, now: Timestamp) -> bool {
        let mut fired = false;
        while let Some(timer) = self.timers.pop_due(now) {
            fired |= self.fire(timer, now);
        }
        fired
    }

    fn state_of(&self, id: JobId) -> Option<(JobState, u32, Option<u64>)> {
        self.entries
            .find(id)
            .map(|e| (e.job.state, e.job.attempt, e.job.lease.map(|l| l.token)))
    }

    fn fire(&mut self, timer: Timer, now: Timestamp) -> bool {
        match timer {
            Timer::Lease(id, token) => {
                let Some((state, _, Some(t))) = self.state_of(id) else {
                    return false;
                };
                if t != token || !state.is_admitted() {
                    return false;
                }
                let expires = self.entries.get(id).job.lease.expect("admitted").expires_at;
                if expires > now {
                    self.timers.arm(expires, Timer::Lease(id, token));
                    return false;
                }
                self.end_job(id, JobState::Lost, Some("lease expired".into()), now);
                true
            }
            Timer::NotBefore(id, attempt) => {
                if self.state_of(id).map(|s| (s.0, s.1)) != Some((JobState::Queued, attempt)) {
                    return false;
                }
                self.enqueue(id);
                true
            }
            Timer::MaxWait(id, attempt) => {
                if self.state_of(id).map(|s| (s.0, s.1)) != Some((JobState::Queued, attempt)) {
                    return false;
                }
                let ms = self.entries.get(id).job.max_wait_ms.unwrap_or(0);
                let msg = format!(
                    "not admitted within max_wait ({})",
                    crate::time::format_duration(std::time::Duration::from_millis(ms))
                );
                self.end_job(id, JobState::Expired, Some(msg), now);
                true
            }
            Timer::MaxRun(id, token) => {
                let Some((state, _, Some(t))) = self.state_of(id) else {
                    return false;
                };
                if t != token || !state.is_admitted() {
                    return false;
                }
                let e = self.entries.get_mut(id);
                e.job.cancel_requested = true;
                e.job.message = Some("max_run exceeded: cancellation requested".into());
                self.emit(JobChange::CancelRequested, id);
                let ttl = self.policy.leases.ttl;
                self.timers
                    .arm(now.plus(ttl), Timer::MaxRunRevoke(id, token));
                false
            }
            Timer::MaxRunRevoke(id, token) => {
                let Some((state, _, Some(t))) = self.state_of(id) else {
                    return false;
                };
                if t != token || !state.is_admitted() {
                    return false;
                }
                self.end_job(id, JobState::Failed, Some("max_run exceeded".into()), now);
                true
            }
            Timer::PrepareTimeout(id, token) => {
                let Some((state, _, t)) = self.state_of(id) else {
                    return false;
                };
                if state != JobState::Preparing || t != Some(token) {
                    return false;
                }
                self.end_job(
                    id,
                    JobState::Failed,
                    Some("prepare timeout: not prepared in time".into()),
                    now,
                );
                true
            }
            Timer::Retry(id, attempt) => {
                let Some((state, a, _)) = self.state_of(id) else {
                    return false;
                };
                if a != attempt || !matches!(state, JobState::Failed | JobState::Lost) {
                    return false;
                }
                self.requeue(id, now);
                true
            }
            Timer::Reserve(id, attempt) => {
                if self.state_of(id).map(|s| (s.0, s.1)) != Some((JobState::Queued, attempt)) {
                    return false;
                }
                self.wake_class_of(id);
                true
            }
            Timer::NodeTtl(name) => {
                let ttl = self.policy.nodes.ttl;
                let Some(node) = self.nodes.get(&name) else {
                    return false;
                };
                if node.state != super::NodeState::Ready {
                    return false;
                }
                let due = node.last_seen.plus(ttl);
                if due > now {
                    self.timers.arm(due, Timer::NodeTtl(name));
                    return false;
                }
                self.node_lost(&name, now);
                true
            }
        }
    }
}
