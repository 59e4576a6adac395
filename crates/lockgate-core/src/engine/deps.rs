//! Dependencies: a job submitted with `after` or `after_ok` enters the queue only once each
//! job it names has ended for good (no retry left).
//!
//! Implementation details. [`Deps`] keeps two maps: for each job that others wait for, its
//! dependents (`dependents[dep]`, with whether they need success), and for each waiting job
//! the number of its dependencies that have not ended (`waiting[job]`). When a job ends for
//! good, [`Engine::dependency_ended`] walks only its own dependents: O(dependents), never a
//! queue scan. An `after_ok` dependent of a job that ended otherwise ends `cancelled`, which
//! may end its own dependents in turn; that cascade runs from a work list, not by recursion.
//!
//! Invariants:
//! - a job is in `waiting` exactly while it is live, queued and has a dependency that is
//!   still live; such a job is in no class (so no pass, strict order or reservation sees
//!   it) and joins the queue through [`Engine::admit_gate`] once its count reaches 0;
//! - a dependency is always an older job (ids are assigned at submit and a job can only
//!   name jobs that exist), and nothing edits dependencies later, so no cycle can form;
//! - entries in `dependents` may name dependents that ended since; they are skipped (and
//!   dropped) when their dependency ends, so the map never outgrows the live jobs' deps.

use super::Engine;
use crate::event::JobChange;
use crate::job::{JobId, JobSpec, JobState, SubmitError};
use crate::time::Timestamp;
use std::collections::HashMap;

/// The dependency index. See the module docs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Deps {
    /// Dependency -> its dependents and whether each needs it to succeed.
    dependents: HashMap<JobId, Vec<(JobId, bool)>>,
    /// Waiting job -> how many of its dependencies have not ended.
    waiting: HashMap<JobId, u32>,
    /// Jobs that ended for good and whose dependents are not yet handled.
    ended: Vec<(JobId, JobState)>,
    /// A cascade is being handled (ends found on the way join `ended`).
    draining: bool,
}

impl Deps {
    /// Whether `id` waits for a dependency.
    pub fn holds(&self, id: JobId) -> bool {
        self.waiting.contains_key(&id)
    }
}

impl Engine {
    /// Refuses dependencies the engine cannot wait for: a job never submitted, or an
    /// `after_ok` job that already ended (its outcome is no longer held here; the server
    /// resolves ended dependencies from its store before it submits).
    pub(crate) fn check_deps(&self, spec: &JobSpec) -> Result<(), SubmitError> {
        let named = spec.after.iter().map(|&id| ("after", id));
        for (field, id) in named.chain(spec.after_ok.iter().map(|&id| ("after_ok", id))) {
            let message = if id == 0 || id >= self.next_id {
                format!("job {id} does not exist")
            } else if field == "after_ok" && !self.entries.contains(id) {
                format!("job {id} already ended: its outcome must be resolved before submit")
            } else {
                continue;
            };
            return Err(SubmitError::Invalid {
                field: field.into(),
                message,
            });
        }
        Ok(())
    }

    /// Records the live dependencies of a just-inserted job (before it is gated). Only a
    /// first attempt waits: a retried job met its dependencies before its first run.
    pub(crate) fn register_deps(&mut self, id: JobId) {
        let job = &self.entries.get(id).job;
        let first = job.state == JobState::Queued && job.attempt == 1;
        if !first || (job.after.is_empty() && job.after_ok.is_empty()) {
            return;
        }
        let named: Vec<(JobId, bool)> = job
            .after
            .iter()
            .map(|&d| (d, false))
            .chain(job.after_ok.iter().map(|&d| (d, true)))
            .filter(|&(d, _)| d != id && self.entries.contains(d))
            .collect();
        if named.is_empty() {
            return;
        }
        self.deps.waiting.insert(id, named.len() as u32);
        for (d, ok) in named {
            self.deps.dependents.entry(d).or_default().push((id, ok));
        }
    }

    /// A live job that ends for good leaves the dependency index.
    pub(crate) fn forget_deps(&mut self, id: JobId) {
        self.deps.waiting.remove(&id);
    }

    /// `id` ended for good in `state`: its dependents either count one dependency less
    /// (and join the queue at 0) or, needing success it did not have, end `cancelled`.
    pub(crate) fn dependency_ended(&mut self, id: JobId, state: JobState, now: Timestamp) {
        self.deps.ended.push((id, state));
        if self.deps.draining {
            return;
        }
        self.deps.draining = true;
        while let Some((dep, state)) = self.deps.ended.pop() {
            for (d, ok) in self.deps.dependents.remove(&dep).unwrap_or_default() {
                if !self.deps.waiting.contains_key(&d) {
                    continue;
                }
                if ok && state != JobState::Succeeded {
                    let msg = format!("dependency job {dep} ended {state} (after_ok)");
                    // Ends for good (a queued job has no retry), so it joins `ended`.
                    self.end_job(d, JobState::Cancelled, Some(msg), now);
                    continue;
                }
                let left = self.deps.waiting.get_mut(&d).expect("checked");
                *left -= 1;
                if *left == 0 {
                    self.deps.waiting.remove(&d);
                    let job = &self.entries.get(d).job;
                    if job.not_before.is_none_or(|t| t <= now) {
                        self.admit_gate(d);
                    }
                }
            }
        }
        self.deps.draining = false;
    }

    /// The live dependencies a queued job still waits for, with whether each must succeed.
    pub(crate) fn pending_deps(&self, id: JobId) -> Vec<(JobId, bool)> {
        if !self.deps.holds(id) {
            return Vec::new();
        }
        let job = &self.entries.get(id).job;
        job.after
            .iter()
            .map(|&d| (d, false))
            .chain(job.after_ok.iter().map(|&d| (d, true)))
            .filter(|&(d, _)| self.entries.contains(d))
            .collect()
    }

    /// Changes a queued job's priority: it is taken out of the queue and filed again at its
    /// new rank (O(log n + log c)), then a pass runs.
    ///
    /// # Errors
    /// [`EditError`] when the job is not live or not queued.
    pub fn set_priority(
        &mut self,
        id: JobId,
        priority: i64,
        now: Timestamp,
    ) -> Result<crate::job::Job, EditError> {
        self.handle_timeout(now);
        let e = self.entries.find(id).ok_or(EditError::NotFound(id))?;
        if e.job.state != JobState::Queued {
            return Err(EditError::NotQueued {
                id,
                state: e.job.state,
            });
        }
        let in_class = e.class.is_some();
        if in_class {
            self.dequeue(id);
        }
        self.entries.job_mut(id).priority = priority;
        if in_class {
            self.enqueue(id);
        }
        self.emit(JobChange::Edited, id);
        self.run_pass(now);
        Ok(crate::job::Job::clone(&self.entries.get(id).job))
    }

    /// Queues a failed job again as a new attempt (same id, `attempt + 1`): a live one
    /// waiting for its kind's retry at once, or one that ended for good (the caller passes
    /// it back, as its store kept it).
    ///
    /// # Errors
    /// [`EditError::NotFailed`] for a job in any other state.
    pub fn retry_failed(
        &mut self,
        job: crate::job::Job,
        now: Timestamp,
    ) -> Result<crate::job::Job, EditError> {
        self.handle_timeout(now);
        let id = job.id;
        let state = self.entries.find(id).map_or(job.state, |e| e.job.state);
        if state != JobState::Failed {
            return Err(EditError::NotFailed { id, state });
        }
        if !self.entries.contains(id) {
            let job = crate::job::Job {
                retry_at: None,
                ..job
            };
            self.entries
                .insert(super::Entry::new(std::sync::Arc::new(job)));
        }
        self.requeue(id, now);
        self.run_pass(now);
        Ok(crate::job::Job::clone(&self.entries.get(id).job))
    }
}

/// Why an edit of a job was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// No live job has this id.
    #[error("job {0} is not queued (it is not live)")]
    NotFound(JobId),
    /// Only a queued job can be edited.
    #[error("job {id} is {state}: only a queued job can be changed")]
    NotQueued {
        /// Job id.
        id: JobId,
        /// Its state.
        state: JobState,
    },
    /// Only a failed job can be retried.
    #[error("job {id} is {state}: only a failed job can be retried")]
    NotFailed {
        /// Job id.
        id: JobId,
        /// Its state.
        state: JobState,
    },
}
