//! Schedules after schedules (`after = "nightly-backup"`): a run of schedule S waits for
//! the latest run of its target T planned at or before S's own planned time.
//!
//! The wait is an ordinary job dependency, `after = [that run's job]` (any end, not
//! `after_ok`): a verify after a failed backup still runs and finds what the backup left,
//! and a GC after a failed prune is still safe. An ended job is met at once.
//!
//! Invariants:
//! - **Targets plan first.** Schedules due at one instant are planned in the order of
//!   their `after` chains ([`Loop::in_after_order`]), so a backup and its verify planned at
//!   the same time are decided backup first, and the verify finds that run.
//! - **The latest run at or before P.** A target's in-memory latest run answers when it is
//!   planned at or before P (the usual case: no I/O); else the runs of this batch (not yet
//!   committed), else the store's history, newest first.
//! - **No run, no wait.** A target that is gone, has no such run, or whose run has no job
//!   (skipped) does not hold the run back; the run's history entry says why.
//! - **No cycles.** The policy refuses cycles among its schedules; an API schedule is
//!   checked against every schedule when created ([`Loop::check_schedule_after`]). A policy
//!   schedule names only policy schedules, and API schedules are never edited, so no
//!   cycle can form later.

use super::planner::Sched;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::time::format;
use lockgate_core::job::JobId;
use lockgate_core::schedule::check_after;
use lockgate_core::Timestamp;
use lockgate_store::ScheduleRun;

/// How many history entries of the target are read, newest first, when its latest run is
/// after the planned time (a target much more frequent than its dependent, both late).
const LOOKBACK: usize = 1000;

impl Sched {
    /// The schedule this one waits for.
    pub(super) fn after(&self) -> Option<&str> {
        match (&self.runner, &self.request) {
            (Some(r), _) => r.spec().after.as_deref(),
            (None, Some(req)) => req.after.as_deref(),
            (None, None) => None,
        }
    }
}

impl Loop {
    /// 422 when the new API schedule `name` names an unknown schedule, itself, or closes a
    /// cycle among the existing ones.
    pub(super) fn check_schedule_after(
        &self,
        name: &str,
        after: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(after) = after else {
            return Ok(());
        };
        let by_name = &self.schedules.by_name;
        let after_of = |n: &str| {
            if n == name {
                Some(Some(after))
            } else {
                by_name.get(n).map(Sched::after)
            }
        };
        check_after(
            name,
            after_of,
            by_name.len() + 1,
            " (in the policy or created through the API)",
        )
        .map_err(|e| ApiError::invalid("after", format!("after: {e}")))
    }

    /// `due` reordered so that every schedule comes after the one it waits for (by the
    /// length of its `after` chain, then by name).
    pub(super) fn in_after_order(&self, mut due: Vec<String>) -> Vec<String> {
        let depth = |name: &str| {
            let mut at = name;
            let mut n = 0;
            while let Some(next) = self.schedules.by_name.get(at).and_then(Sched::after) {
                n += 1;
                at = next;
                if n > self.schedules.by_name.len() {
                    break; // a cycle: refused by validation, bounded here anyway
                }
            }
            n
        };
        due.sort_by_cached_key(|n| (depth(n), n.clone()));
        due
    }

    /// The job a run of a schedule with `after = target`, planned at `planned`, waits for;
    /// or, when it waits for none, the history note saying why.
    pub(super) fn after_job(&mut self, target: &str, planned: Timestamp) -> Result<JobId, String> {
        let not_waiting = |why: String| format!("after {target}: {why}; not waiting");
        let run = self
            .latest_run(target, planned)
            .map_err(&not_waiting)?
            .ok_or_else(|| {
                not_waiting(format!("no run planned at or before {}", format(planned)))
            })?;
        match run.job {
            Some(id) => Ok(id),
            None => Err(not_waiting(format!(
                "its run planned at {} has no job ({})",
                format(run.planned),
                run.note.as_deref().unwrap_or("skipped")
            ))),
        }
    }

    /// The latest run of schedule `target` planned at or before `planned`.
    fn latest_run(
        &mut self,
        target: &str,
        planned: Timestamp,
    ) -> Result<Option<ScheduleRun>, String> {
        let Some(t) = self.schedules.by_name.get(target) else {
            return Err(format!("no schedule is named {target:?}"));
        };
        if let Some(r) = t.last_run.as_ref().filter(|r| r.planned <= planned) {
            return Ok(Some(r.clone()));
        }
        let pending = self
            .batch
            .schedule_runs
            .iter()
            .filter(|r| r.schedule == target && r.planned <= planned)
            .max_by_key(|r| r.planned);
        if let Some(r) = pending {
            return Ok(Some(r.clone()));
        }
        match self.store.schedule_runs(target, LOOKBACK) {
            Ok(runs) => Ok(runs.into_iter().find(|r| r.planned <= planned)),
            Err(e) => Err(format!("its history cannot be read ({e})")),
        }
    }
}
