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
    /// `exclusive_delay` passed for this attempt: the exclusive job starts holding shared
    /// jobs ranked below it back.
    ExclusiveDue(JobId, u32),
    /// A time window (`windows`, `[[maintenance]]`) opens or closes: the pass that follows
    /// applies the new numbers (`engine/windows.rs`).
    Window,
    /// A pause's `until` passed.
    PauseEnd(u64),
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
    /// The server's wall clock stepped forward by `by` (an NTP step, a clock set by hand):
    /// every lease and every ready node's TTL moves forward by it, so none runs out early
    /// because the calendar moved while its holder counted on a monotonic clock. Their
    /// timers re-arm themselves at the moved deadlines when they fire (above). Other
    /// deadlines (`max_wait`, `max_run`, retries, windows) count the step as time passed.
    /// Cost O(n) in live jobs and nodes; a step is rare.
    pub fn clock_stepped(&mut self, by: std::time::Duration) {
        let held: Vec<JobId> = self
            .entries
            .values()
            .filter(|e| e.job.state.is_admitted())
            .map(|e| e.job.id)
            .collect();
        for id in held {
            let job = self.entries.job_mut(id);
            if let Some(lease) = &mut job.lease {
                lease.expires_at = lease.expires_at.plus(by);
            }
        }
        for node in self.nodes.values_mut() {
            node.last_seen = node.last_seen.plus(by);
        }
    }

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

    /// Acts on one due timer, if the job (or node) is still where the timer was armed for;
    /// returns whether anything may have changed.
    fn fire(&mut self, timer: Timer, now: Timestamp) -> bool {
        match timer {
            Timer::Lease(id, token) => self.lease_timer(id, token, now),
            Timer::NotBefore(id, attempt) => {
                if !self.queued_for(id, attempt) {
                    return false;
                }
                self.admit_gate(id);
                true
            }
            Timer::MaxWait(id, attempt) => {
                if !self.queued_for(id, attempt) {
                    return false;
                }
                self.expire_max_wait(id, now);
                true
            }
            Timer::MaxRun(id, token) => {
                if self.holds_lease(id, token) {
                    self.request_max_run_cancel(id, token, now);
                }
                false
            }
            Timer::MaxRunRevoke(id, token) => {
                if !self.holds_lease(id, token) {
                    return false;
                }
                self.end_job(id, JobState::Failed, Some("max_run exceeded".into()), now);
                true
            }
            Timer::PrepareTimeout(id, token) => self.prepare_timer(id, token, now),
            Timer::Retry(id, attempt) => self.retry_timer(id, attempt, now),
            Timer::Reserve(id, attempt) => {
                if !self.queued_for(id, attempt) {
                    return false;
                }
                self.entries.get_mut(id).reserve_armed = None;
                self.wake_class_of(id);
                true
            }
            Timer::NodeTtl(name) => self.node_ttl_timer(name, now),
            Timer::ExclusiveDue(id, attempt) => {
                if self.queued_for(id, attempt) {
                    self.exclusive_delay_passed(id, now);
                }
                false
            }
            Timer::Window => true,
            Timer::PauseEnd(pause) => self.end_pause(pause).is_some(),
        }
    }

    /// Whether the job is still queued, in this attempt.
    fn queued_for(&self, id: JobId, attempt: u32) -> bool {
        self.state_of(id).map(|s| (s.0, s.1)) == Some((JobState::Queued, attempt))
    }

    /// Whether the job is still admitted under the lease with this token.
    fn holds_lease(&self, id: JobId, token: u64) -> bool {
        matches!(self.state_of(id), Some((state, _, Some(t))) if t == token && state.is_admitted())
    }

    /// The lease timer: re-arms itself at the lease's current expiry if it was renewed,
    /// otherwise the job is lost.
    fn lease_timer(&mut self, id: JobId, token: u64, now: Timestamp) -> bool {
        if !self.holds_lease(id, token) {
            return false;
        }
        let expires = self.entries.get(id).job.lease.expect("admitted").expires_at;
        if expires > now {
            self.timers.arm(expires, Timer::Lease(id, token));
            return false;
        }
        self.note_lost_holder(id);
        self.end_or_requeue(id, JobState::Lost, Some("lease expired".into()), now);
        true
    }

    /// Ends a queued job whose `max_wait` passed.
    fn expire_max_wait(&mut self, id: JobId, now: Timestamp) {
        let ms = self.entries.get(id).job.max_wait_ms.unwrap_or(0);
        let msg = format!(
            "not admitted within max_wait ({})",
            crate::time::format_duration(std::time::Duration::from_millis(ms))
        );
        self.end_job(id, JobState::Expired, Some(msg), now);
    }

    /// `max_run` passed: asks the holder to cancel and arms the revoke one lease TTL later.
    fn request_max_run_cancel(&mut self, id: JobId, token: u64, now: Timestamp) {
        let job = self.entries.job_mut(id);
        job.cancel_requested = true;
        job.cancel_reason = Some(crate::job::CancelReason::MaxRun);
        job.message = Some("max_run exceeded: cancellation requested".into());
        self.emit(JobChange::CancelRequested, id);
        let ttl = self.policy.leases.ttl;
        self.timers
            .arm(now.plus(ttl), Timer::MaxRunRevoke(id, token));
    }

    /// `prepare_timeout`: fails the job if it is still preparing under this lease.
    fn prepare_timer(&mut self, id: JobId, token: u64, now: Timestamp) -> bool {
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

    /// A retry: requeues the job if this attempt is still the failed or lost one.
    fn retry_timer(&mut self, id: JobId, attempt: u32, now: Timestamp) -> bool {
        let Some((state, a, _)) = self.state_of(id) else {
            return false;
        };
        if a != attempt || !matches!(state, JobState::Failed | JobState::Lost) {
            return false;
        }
        self.requeue(id, now);
        true
    }

    /// A node's TTL: re-arms at `last_seen + ttl` if the node was seen since, otherwise the
    /// node is lost.
    fn node_ttl_timer(&mut self, name: String, now: Timestamp) -> bool {
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
