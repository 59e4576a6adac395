//! The schedule operations of the API inside the loop: create, list, show (with its
//! history), remove.

use super::planner::Sched;
use super::ScheduleOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::nodes::Removed;
use crate::policy::PolicySource;
use lockgate_api::{ErrorCode, Role, ScheduleList, ScheduleRequest, ScheduleRunView, ScheduleView};
use lockgate_core::schedule::Runner;
use lockgate_core::Timestamp;
use lockgate_store::{ScheduleRun, ScheduleSource as Source};

/// Default number of history entries `GET /v1/schedules/{name}` shows.
const DEFAULT_HISTORY: usize = 50;
/// At most this many history entries in one answer.
const MAX_HISTORY: usize = 1000;

impl Loop {
    /// Applies one schedule operation.
    pub(crate) fn schedule_op(&mut self, p: &Principal, op: ScheduleOp, now: Timestamp) {
        match op {
            ScheduleOp::Create(req, reply) => {
                let r = p
                    .require(&[Role::Admin], "create schedules")
                    .and_then(|()| self.schedule_create(*req, now));
                self.answer(reply, r);
            }
            ScheduleOp::Delete(name, reply) => {
                let r = p
                    .require(&[Role::Admin], "remove schedules")
                    .and_then(|()| self.schedule_delete(name));
                self.answer(reply, r);
            }
            ScheduleOp::List(reply) => {
                let names: Vec<String> = self.schedules.by_name.keys().cloned().collect();
                let r = names
                    .iter()
                    .map(|n| self.schedule_view(n, 0))
                    .collect::<Result<_, _>>()
                    .map(|schedules| ScheduleList { schedules });
                self.answer(reply, r);
            }
            ScheduleOp::Get(name, limit, reply) => {
                let limit = limit.unwrap_or(DEFAULT_HISTORY).min(MAX_HISTORY);
                let r = self.schedule_view(&name, limit);
                self.answer(reply, r);
            }
        }
    }

    fn schedule_create(
        &mut self,
        req: ScheduleRequest,
        now: Timestamp,
    ) -> Result<ScheduleView, ApiError> {
        let spec = crate::schedules::validate(&req, self.engine.policy())?;
        if let Some(s) = self.schedules.by_name.get(&req.name) {
            let from = match s.source {
                Source::Policy => "in the policy",
                Source::Api => "created through the API",
            };
            return Err(ApiError::new(
                ErrorCode::ScheduleExists,
                format!(
                    "a schedule named {:?} exists ({from}); choose another name, or remove it first",
                    req.name
                ),
            )
            .field("name"));
        }
        self.check_schedule_after(&req.name, spec.after.as_deref())?;
        let runner = Runner::new(spec, &self.schedules.zone)
            .map_err(|e| ApiError::invalid("when", format!("when: {e}")))?;
        if runner.next_after(now).is_none() {
            return Err(ApiError::invalid(
                "when",
                format!(
                    "when: schedule {:?} has no future time (a date in the past, or one no calendar has)",
                    runner.spec().when
                ),
            ));
        }
        let name = req.name.clone();
        let mut s = Sched::new(Source::Api, Some(runner), now);
        s.request = Some(req);
        s.refresh_next();
        self.batch.schedules.push(s.record(&name));
        self.schedules.by_name.insert(name.clone(), s);
        tracing::info!("schedule {name:?} created");
        self.schedule_view(&name, 0)
    }

    fn schedule_delete(&mut self, name: String) -> Result<Removed, ApiError> {
        let Some(s) = self.schedules.by_name.get(&name) else {
            return Err(ApiError::not_found(format!("no schedule named {name:?}")));
        };
        if s.source == Source::Policy {
            let how = match &self.source {
                PolicySource::File(path) => format!(
                    "remove its [[schedule]] from {} and reload (SIGHUP or lockgate policy apply)",
                    path.display()
                ),
                PolicySource::Store | PolicySource::Database { .. } => {
                    "remove its [[schedule]] from the policy (lockgate policy apply)".into()
                }
            };
            return Err(ApiError::new(
                ErrorCode::PolicySchedule,
                format!("schedule {name:?} is part of the policy and cannot be removed through the API: {how}"),
            ));
        }
        self.schedules.by_name.remove(&name);
        self.batch.removed_schedules.push(name.clone());
        tracing::info!("schedule {name:?} removed");
        Ok(Removed { removed: name })
    }

    fn run_view(&mut self, r: &ScheduleRun) -> ScheduleRunView {
        let state = r.job.and_then(|id| self.find(id).ok()).map(|j| j.state);
        ScheduleRunView {
            planned: lockgate_api::time::format(r.planned),
            job: r.job,
            state,
            skipped: r.job.is_none(),
            note: r.note.clone(),
            at: lockgate_api::time::format(r.at),
        }
    }

    fn schedule_view(&mut self, name: &str, history: usize) -> Result<ScheduleView, ApiError> {
        let Some(s) = self.schedules.by_name.get(name) else {
            return Err(ApiError::not_found(format!("no schedule named {name:?}")));
        };
        let req = match (&s.runner, &s.request) {
            (Some(r), _) => ScheduleRequest::from_spec(r.spec()),
            (None, Some(req)) => req.clone(),
            (None, None) => ScheduleRequest {
                name: name.to_string(),
                ..ScheduleRequest::default()
            },
        };
        let (source, created_at, last_planned, next, error, last_run) = (
            s.source,
            s.created_at,
            s.last_planned,
            s.next,
            s.error.clone(),
            s.last_run.clone(),
        );
        let last_run = last_run.map(|r| self.run_view(&r));
        let mut runs = Vec::new();
        if history > 0 {
            for r in self.store.schedule_runs(name, history)? {
                runs.push(self.run_view(&r));
            }
        }
        Ok(ScheduleView {
            name: name.to_string(),
            when: req.when,
            source: source.as_str().into(),
            zone: self.schedules.zone.clone(),
            job: req.job,
            duplicates: req.duplicates.unwrap_or_else(|| "skip".into()),
            misfire: req.misfire.unwrap_or_else(|| "run-once".into()),
            max_start_delay_s: req.max_start_delay_s,
            jitter_s: req.jitter_s,
            retry: req.retry,
            after: req.after,
            created_at: lockgate_api::time::format(created_at),
            last_planned: (last_run.is_some()).then(|| lockgate_api::time::format(last_planned)),
            last_run,
            next: next.map(lockgate_api::time::format),
            error,
            history: runs,
        })
    }
}
