//! Pauses: an admin stops admission of every queued job a match expression selects (no
//! expression: every job) until it resumes the pause or its `until` time passes. Running,
//! preparing and prepared jobs are never stopped by a pause.
//!
//! Implementation details. A paused job is taken out of its class and kept in its pause's
//! `held` set, so no pass, strict order or reservation sees it, and the admission path
//! costs nothing for it. Every job that would join the queue goes through
//! [`Engine::admit_gate`], which checks the active pauses (O(p) for p pauses, bounded by
//! [`MAX_PAUSES`]). Creating a pause walks the queued jobs once, O(n), as a policy change
//! does; resuming one re-gates only the jobs it held, O(held · p).
//!
//! Invariants:
//! - a queued job that an active pause matches is in no class: it is in exactly one pause's
//!   `held` set (the one that caught it), or waits for `not_before` or a dependency and
//!   will meet the gate then;
//! - pause ids grow and never repeat (the next id is exported in the snapshot and the
//!   server's store keeps the highest);
//! - an `until` is a [`Timer::PauseEnd`](super::timers::Timer) in the timer set, so a
//!   pause ends at its boundary without polling.

use super::timers::Timer;
use super::Engine;
use crate::event::Event;
use crate::job::{JobId, JobState};
use crate::selector::Selector;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// At most this many pauses are active at once (each costs O(1) on every queue entry).
pub const MAX_PAUSES: usize = 100;

/// A pause as it is kept, exported and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// Id (grows, never reused).
    pub id: u64,
    /// The match expression (job selector syntax, as a limit's `match`); `None`: every job.
    #[serde(rename = "match", default)]
    pub selector: Option<String>,
    /// Why (free text, required).
    pub reason: String,
    /// Who paused (the principal).
    pub by: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it ends by itself; `None`: until resumed.
    #[serde(default)]
    pub until: Option<Timestamp>,
}

/// What a caller asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseSpec {
    /// Match expression; `None` pauses everything.
    pub selector: Option<String>,
    /// Why.
    pub reason: String,
    /// Who.
    pub by: String,
    /// Ends by itself at this time.
    pub until: Option<Timestamp>,
}

/// Why a pause or resume was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PauseError {
    /// A field is invalid (`match`, `reason`, `until`).
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong, and what was expected.
        message: String,
    },
    /// [`MAX_PAUSES`] are active.
    #[error("{MAX_PAUSES} pauses are active already: resume one first")]
    TooMany,
    /// No active pause has this id.
    #[error("pause {0} not found (it was resumed, ended, or never existed)")]
    NotFound(u64),
}

/// An active pause with its parsed selector and the jobs it holds.
#[derive(Debug, Clone)]
pub(crate) struct Active {
    pub pause: Pause,
    selector: Option<Selector>,
    pub held: BTreeSet<JobId>,
}

impl Active {
    fn matches(&self, job: &crate::job::Job) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(|k| job.key_value(k)))
    }
}

fn parse(text: Option<&str>) -> Result<Option<Selector>, PauseError> {
    text.map(|t| {
        Selector::parse_jobs(t).map_err(|e| PauseError::Invalid {
            field: "match",
            message: format!("invalid match expression {t:?}: {e}"),
        })
    })
    .transpose()
}

impl Engine {
    /// Pauses admission of the queued jobs `spec.selector` matches (all when `None`), now
    /// and until resumed or `until`. Cost O(n) over the queued jobs.
    ///
    /// # Errors
    /// [`PauseError::Invalid`] for a bad or too long match expression, an empty or too long
    /// reason (`crate::limits`) or an `until`
    /// not after `now`; [`PauseError::TooMany`].
    pub fn pause(&mut self, spec: PauseSpec, now: Timestamp) -> Result<Pause, PauseError> {
        self.handle_timeout(now);
        use crate::limits::{text, MAX_EXPR_BYTES, MAX_REASON_BYTES};
        let texts = [
            ("match", spec.selector.as_deref(), MAX_EXPR_BYTES),
            ("reason", Some(spec.reason.as_str()), MAX_REASON_BYTES),
        ];
        for (field, value, max) in texts {
            if let Some(e) = value.and_then(|v| text(field, v, max).err()) {
                let message = e.message;
                return Err(PauseError::Invalid { field, message });
            }
        }
        let selector = parse(spec.selector.as_deref())?;
        if spec.reason.trim().is_empty() {
            return Err(PauseError::Invalid {
                field: "reason",
                message: "expected why the queue is paused, got an empty reason".into(),
            });
        }
        if let Some(t) = spec.until.filter(|&t| t <= now) {
            return Err(PauseError::Invalid {
                field: "until",
                message: format!(
                    "expected a time in the future, got {}",
                    super::explain::rfc3339(t)
                ),
            });
        }
        if self.pauses.len() >= MAX_PAUSES {
            return Err(PauseError::TooMany);
        }
        let pause = Pause {
            id: self.next_pause_id,
            selector: selector.as_ref().map(|s| s.text().to_string()),
            reason: spec.reason,
            by: spec.by,
            created_at: now,
            until: spec.until,
        };
        self.next_pause_id += 1;
        self.add_pause(pause.clone(), selector);
        let mut caught: Vec<JobId> = self
            .entries
            .values()
            .filter(|e| e.class.is_some() && self.pauses[&pause.id].matches(&e.job))
            .map(|e| e.job.id)
            .collect();
        caught.sort_unstable(); // the engine is deterministic: never a hash order

        for id in caught {
            self.dequeue(id);
            self.hold_in(pause.id, id);
        }
        self.events.push_back(Event::Paused {
            pause: pause.clone(),
        });
        self.run_pass(now);
        Ok(pause)
    }

    fn add_pause(&mut self, pause: Pause, selector: Option<Selector>) {
        if let Some(t) = pause.until {
            self.timers.arm(t, Timer::PauseEnd(pause.id));
        }
        self.pauses.insert(
            pause.id,
            Active {
                pause,
                selector,
                held: BTreeSet::new(),
            },
        );
    }

    fn hold_in(&mut self, pause: u64, id: JobId) {
        self.entries.get_mut(id).paused_by = Some(pause);
        if let Some(p) = self.pauses.get_mut(&pause) {
            p.held.insert(id);
        }
    }

    /// Resumes a pause: the jobs it held join the queue (unless another pause holds them).
    ///
    /// # Errors
    /// [`PauseError::NotFound`].
    pub fn resume(&mut self, id: u64, now: Timestamp) -> Result<Pause, PauseError> {
        self.handle_timeout(now);
        let pause = self.end_pause(id).ok_or(PauseError::NotFound(id))?;
        self.run_pass(now);
        Ok(pause)
    }

    /// Takes a pause away and re-gates what it held; `None` when it is not active.
    pub(crate) fn end_pause(&mut self, id: u64) -> Option<Pause> {
        let active = self.pauses.remove(&id)?;
        for job in active.held {
            if let Some(e) = self.entries.find_mut(job) {
                if e.paused_by == Some(id) && e.job.state == JobState::Queued {
                    e.paused_by = None;
                    self.admit_gate(job);
                }
            }
        }
        self.events.push_back(Event::Resumed {
            pause: active.pause.clone(),
        });
        Some(active.pause)
    }

    /// Every active pause, by id.
    pub fn pauses(&self) -> impl Iterator<Item = &Pause> {
        self.pauses.values().map(|a| &a.pause)
    }

    /// The id the next pause will get.
    pub fn next_pause_id(&self) -> u64 {
        self.next_pause_id
    }

    /// The pause holding a queued job, if one does.
    pub fn paused_by(&self, id: JobId) -> Option<&Pause> {
        let p = self.entries.find(id)?.paused_by?;
        self.pauses.get(&p).map(|a| &a.pause)
    }

    /// The one way a queued job (past `not_before`) joins the queue: unless a dependency
    /// or an active pause holds it, it goes into its class. O(p).
    pub(crate) fn admit_gate(&mut self, id: JobId) {
        if self.deps.holds(id) {
            return;
        }
        let job = &self.entries.get(id).job;
        let caught = self
            .pauses
            .values()
            .find(|p| p.matches(job))
            .map(|p| p.pause.id);
        match caught {
            Some(p) => self.hold_in(p, id),
            None => self.enqueue(id),
        }
    }

    /// A job that ends for good leaves its pause's held set.
    pub(crate) fn forget_pause_hold(&mut self, id: JobId) {
        let Some(p) = self.entries.find_mut(id).and_then(|e| e.paused_by.take()) else {
            return;
        };
        if let Some(a) = self.pauses.get_mut(&p) {
            a.held.remove(&id);
        }
    }

    /// Restores pauses from a snapshot (before the jobs are filed).
    pub(crate) fn restore_pauses(&mut self, pauses: Vec<Pause>, next: u64) {
        self.next_pause_id = next.max(1);
        for p in pauses {
            self.next_pause_id = self.next_pause_id.max(p.id + 1);
            // Stored pauses were parsed when created; the grammar does not change.
            if let Ok(sel) = parse(p.selector.as_deref()) {
                self.add_pause(p, sel);
            }
        }
    }

    /// The explain reasons of a held job: its pause, and each dependency it waits for.
    pub(crate) fn hold_reasons(&self, id: JobId) -> Vec<super::explain::Reason> {
        let mut out = Vec::new();
        if let Some(p) = self.paused_by(id) {
            let until = match p.until {
                Some(t) => format!("until {}", super::explain::rfc3339(t)),
                None => "until resumed".into(),
            };
            let what = p.selector.as_deref().unwrap_or("every job");
            out.push(super::explain::Reason {
                scope: Some(format!("pause:{}", p.id)),
                kind: "paused".into(),
                count: None,
                limit: None,
                holders: Vec::new(),
                text: format!(
                    "pause:{}: paused by {} {until} ({what}): {}",
                    p.id, p.by, p.reason
                ),
            });
        }
        for (dep, ok) in self.pending_deps(id) {
            let state = self.entries.get(dep).job.state;
            let (kind, wants) = if ok {
                ("after_ok", "to succeed")
            } else {
                ("after", "to end")
            };
            out.push(super::explain::Reason {
                scope: Some(format!("after:{dep}")),
                kind: kind.into(),
                count: None,
                limit: None,
                holders: vec![dep],
                text: format!("after:{dep}: waits for job {dep} ({state}) {wants}"),
            });
        }
        out
    }
}
