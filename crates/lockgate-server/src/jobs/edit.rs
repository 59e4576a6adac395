//! Job operations beyond the life cycle: dependencies named at submit, `set` (priority) on
//! a queued job and `retry` of a failed agent job.
//!
//! Dependencies may name only jobs the submitter may see; an unknown id and one it may not
//! see get the same answer, so ids of other owners' jobs do not leak.

use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{ErrorCode, JobSetRequest, JobView};
use lockgate_core::engine::EditError;
use lockgate_core::job::{JobId, JobSpec, JobState};
use lockgate_core::policy::Executor;
use lockgate_core::Timestamp;

fn edit_error(e: EditError) -> ApiError {
    ApiError::new(ErrorCode::WrongState, e.to_string())
}

impl Loop {
    /// Checks every dependency of a spec against what `p` may see, and resolves those that
    /// already ended: an ended `after` job is met (the engine knows); an `after_ok` job that
    /// succeeded is met too (moved to `after`, which the engine meets for an ended job); one
    /// that ended otherwise is refused, since the new job could never start.
    pub(crate) fn resolve_deps(
        &mut self,
        p: &Principal,
        spec: &mut JobSpec,
    ) -> Result<(), ApiError> {
        let named: Vec<(&'static str, JobId)> = spec
            .after
            .iter()
            .map(|&id| ("after", id))
            .chain(spec.after_ok.iter().map(|&id| ("after_ok", id)))
            .collect();
        let mut met = Vec::new();
        for (field, id) in named {
            let unknown = || ApiError::invalid(field, format!("{field}: job {id} not found"));
            let job = match self.find(id) {
                Ok(j) if super::may_see(p, &j).is_ok() => j,
                _ => return Err(unknown()),
            };
            let ended = self.engine.job(id).is_none();
            if field == "after_ok" && ended {
                if job.state != JobState::Succeeded {
                    return Err(ApiError::new(
                        ErrorCode::WrongState,
                        format!(
                            "after_ok: job {id} already ended {}: a job after it could never start",
                            job.state
                        ),
                    )
                    .field("after_ok"));
                }
                met.push(id);
            }
        }
        spec.after_ok.retain(|id| !met.contains(id));
        spec.after.extend(met);
        Ok(())
    }

    /// `POST /v1/jobs/{id}/set`: a queued job's new priority (an owner within its
    /// `max_priority`, or an admin).
    pub(crate) fn set_job(
        &mut self,
        p: &Principal,
        id: JobId,
        req: JobSetRequest,
        now: Timestamp,
    ) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        super::may_act(p, &job)?;
        if p.role == lockgate_api::Role::Agent {
            return Err(ApiError::forbidden(format!(
                "agent token {:?} may not change jobs",
                p.name
            )));
        }
        self.check_priority(p, req.priority)?;
        let job = self
            .engine
            .set_priority(id, req.priority, now)
            .map_err(|e| match e {
                EditError::NotFound(_) => edit_error(EditError::NotQueued {
                    id,
                    state: job.state,
                }),
                e => edit_error(e),
            })?;
        Ok(self.view(&job))
    }

    /// `POST /v1/jobs/{id}/retry`: a failed agent job is queued again as a new attempt.
    pub(crate) fn retry_job(
        &mut self,
        p: &Principal,
        id: JobId,
        now: Timestamp,
    ) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        super::may_act(p, &job)?;
        if job.executor != Executor::Agent {
            return Err(ApiError::new(
                ErrorCode::WrongState,
                format!("job {id} is a client job: only an agent job can be retried by the server (run the command again)"),
            ));
        }
        let job = self.engine.retry_failed(job, now).map_err(edit_error)?;
        Ok(self.view(&job))
    }
}
