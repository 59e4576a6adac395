//! Job operations of the event loop: submit, read, wait, explain, leases, cancel.

use super::{json, ok, Answer, Loop, Reply};
use crate::auth::Principal;
use crate::error::ApiError;
use axum::http::StatusCode;
use lockgate_api::{time, ExplainView, FinishRequest, JobList, JobQuery, Role, SubmitRequest};
use lockgate_core::engine::{CancelError, LeaseError, SubmitError};
use lockgate_core::job::{Job, JobId, JobSpec, JobState};
use lockgate_core::Timestamp;
use lockgate_store::JobFilter;

impl Loop {
    /// A job, live (engine), ended in this batch (not committed yet) or finished (store).
    pub(crate) fn find(&mut self, id: JobId) -> Result<Job, ApiError> {
        if let Some(j) = self.engine.job(id) {
            return Ok(j.clone());
        }
        // A job that ended earlier in this batch is no longer in the engine and not yet in
        // the store: the store would give its previous state (a wait would then hang).
        if let Some(j) = self.changed.get(&id) {
            return Ok(j.clone());
        }
        self.store
            .job(id)?
            .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))
    }

    /// Whether `p` may read `job`.
    pub(crate) fn may_see(p: &Principal, job: &Job) -> Result<(), ApiError> {
        match p.role {
            Role::Admin | Role::Viewer => Ok(()),
            Role::Submitter if job.owner == p.name => Ok(()),
            Role::Agent if job.node().is_some() && job.node() == p.node.as_deref() => Ok(()),
            _ => Err(ApiError::forbidden(format!(
                "job {} belongs to {:?}; a {} token {:?} may only use its own jobs",
                job.id, job.owner, p.role, p.name
            ))),
        }
    }

    /// Whether `p` may hold, finish or cancel `job`.
    fn may_act(p: &Principal, job: &Job) -> Result<(), ApiError> {
        if p.role == Role::Viewer {
            return Err(ApiError::forbidden(format!(
                "viewer token {:?} is read-only",
                p.name
            )));
        }
        Self::may_see(p, job)
    }

    pub(crate) fn submit(&mut self, p: &Principal, req: SubmitRequest, now: Timestamp) -> Reply {
        p.require(&[Role::Admin, Role::Submitter], "submit jobs")?;
        if let Some(prio) = req.priority {
            let set = self
                .engine
                .policy()
                .owners
                .get(&p.name)
                .and_then(|o| o.max_priority);
            let max = match p.role {
                Role::Admin => set,
                _ => Some(set.unwrap_or(0)),
            };
            if let Some(max) = max.filter(|&m| prio > m) {
                return Err(ApiError::forbidden(format!(
                    "priority {prio} is above {:?}'s max_priority {max} ([owners.{}].max_priority in the policy)",
                    p.name, p.name
                ))
                .field("priority"));
            }
        }
        if let Some(key) = &req.idempotency_key {
            if key.is_empty() {
                return Err(ApiError::invalid(
                    "idempotency_key",
                    "idempotency_key must not be empty",
                ));
            }
            let live = self
                .engine
                .idempotent_job(&p.name, key)
                .and_then(|id| self.engine.job(id))
                .cloned();
            let existing = match live {
                Some(j) => Some(j),
                None => self.store.job_by_key(&p.name, key)?,
            };
            if let Some(j) = existing {
                let j = self.engine.job(j.id).cloned().unwrap_or(j);
                return ok(json(&self.view(&j)));
            }
        }
        let not_before = match &req.not_before {
            Some(t) => Some(time::parse(t).map_err(|m| ApiError::invalid("not_before", m))?),
            None => None,
        };
        let ms = |field: &str, v: Option<f64>| -> Result<Option<u64>, ApiError> {
            v.map(|s| {
                time::millis(s).map_err(|m| ApiError::invalid(field, format!("{field}: {m}")))
            })
            .transpose()
        };
        let spec = JobSpec {
            kind: req.kind,
            attrs: req.attrs,
            owner: p.name.clone(),
            priority: req.priority,
            node: req.node,
            node_selector: req.node_selector,
            executor: req.executor,
            cost: req.cost,
            two_stage: req.two_stage,
            not_before,
            max_wait_ms: ms("max_wait_s", req.max_wait_s)?,
            max_run_ms: ms("max_run_s", req.max_run_s)?,
            idempotency_key: req.idempotency_key,
            retry: None,
        };
        match self.engine.submit(spec, now) {
            Ok(s) => {
                let status = if s.existing {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                Ok(Answer::Json(status, json(&self.view(&s.job))))
            }
            Err(SubmitError::Invalid { field, message }) => Err(ApiError::invalid(field, message)),
        }
    }

    pub(crate) fn get(&mut self, p: &Principal, id: JobId) -> Reply {
        let job = self.find(id)?;
        Self::may_see(p, &job)?;
        ok(json(&self.view(&job)))
    }

    pub(crate) fn list(&mut self, p: &Principal, q: JobQuery) -> Reply {
        if let Some(s) = &q.state {
            if JobState::parse(s).is_none() {
                let all: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                return Err(ApiError::invalid(
                    "state",
                    format!("unknown state {s:?}: expected one of {}", all.join(", ")),
                ));
            }
        }
        let limit = q.limit.unwrap_or(100).clamp(1, 1000) as usize;
        let mut f = JobFilter {
            state: q.state,
            kind: q.kind,
            owner: q.owner,
            node: q.node,
            after: q.after,
            limit,
        };
        match p.role {
            Role::Submitter => f.owner = Some(p.name.clone()),
            Role::Agent => f.node = p.node.clone(),
            _ => {}
        }
        let jobs = self.store.jobs(&f)?;
        let next = if jobs.len() == limit {
            jobs.last().map(|j| j.id)
        } else {
            None
        };
        let jobs = jobs
            .into_iter()
            .map(|j| {
                let j = self.engine.job(j.id).cloned().unwrap_or(j);
                self.view(&j)
            })
            .collect();
        ok(json(&JobList { jobs, next }))
    }

    /// `Some(answer)` at once, or `None`: register a waiter.
    pub(crate) fn wait(
        &mut self,
        p: &Principal,
        id: JobId,
        from: JobState,
    ) -> Result<Option<Answer>, ApiError> {
        let job = self.find(id)?;
        Self::may_see(p, &job)?;
        if job.state != from {
            return Ok(Some(Answer::Json(StatusCode::OK, json(&self.view(&job)))));
        }
        Ok(None)
    }

    pub(crate) fn explain(&mut self, p: &Principal, id: JobId, now: Timestamp) -> Reply {
        let job = self.find(id)?;
        Self::may_see(p, &job)?;
        let view = match self.engine.explain(id, now) {
            Some(e) => ExplainView::from(e),
            None => ExplainView {
                position: 0,
                effective_priority: job.priority as f64,
                reasons: Vec::new(),
                text: match &job.message {
                    Some(m) => format!("{}: {m}", job.state),
                    None => job.state.to_string(),
                },
            },
        };
        ok(json(&view))
    }

    fn lease_error(&mut self, id: JobId, e: LeaseError) -> ApiError {
        match e {
            LeaseError::LeaseLost(_) => ApiError::conflict(
                "lease_lost",
                format!("job {id}: the lease token is stale or the lease expired; the job's slots may be someone else's now"),
            ),
            LeaseError::NotFound(_) => match self.store.job(id) {
                Ok(Some(j)) => ApiError::conflict("lease_lost", format!("job {id} already ended ({})", j.state)),
                _ => ApiError::not_found(format!("job {id} not found")),
            },
            LeaseError::WrongState { state, message, .. } => {
                ApiError::conflict("wrong_state", format!("job {id} is {state}: {message}"))
            }
        }
    }

    pub(crate) fn heartbeat(
        &mut self,
        p: &Principal,
        id: JobId,
        token: u64,
        now: Timestamp,
    ) -> Reply {
        let job = self.find(id)?;
        Self::may_act(p, &job)?;
        match self.engine.heartbeat(id, token, now) {
            Ok(_) => {
                let j = self.engine.job(id).cloned().unwrap_or(job);
                ok(json(&self.view(&j)))
            }
            Err(e) => Err(self.lease_error(id, e)),
        }
    }

    pub(crate) fn prepared(
        &mut self,
        p: &Principal,
        id: JobId,
        token: u64,
        now: Timestamp,
    ) -> Reply {
        let job = self.find(id)?;
        Self::may_act(p, &job)?;
        match self.engine.prepared(id, token, now) {
            Ok(j) => ok(json(&self.view(&j))),
            Err(e) => Err(self.lease_error(id, e)),
        }
    }

    pub(crate) fn finish(
        &mut self,
        p: &Principal,
        id: JobId,
        req: FinishRequest,
        now: Timestamp,
    ) -> Reply {
        let job = self.find(id)?;
        Self::may_act(p, &job)?;
        match self
            .engine
            .finish(id, req.token, req.outcome, req.message, now)
        {
            Ok(j) => ok(json(&self.view(&j))),
            Err(e) => Err(self.lease_error(id, e)),
        }
    }

    pub(crate) fn cancel(
        &mut self,
        p: &Principal,
        id: JobId,
        force: bool,
        now: Timestamp,
    ) -> Reply {
        let job = self.find(id)?;
        Self::may_act(p, &job)?;
        if force && p.role != Role::Admin {
            return Err(ApiError::forbidden(format!(
                "{} token {:?} may not force-cancel: force=true revokes the lease at once and needs an admin token",
                p.role, p.name
            )));
        }
        match self.engine.cancel(id, force, now) {
            Ok(j) => ok(json(&self.view(&j))),
            Err(CancelError::NotFound(_)) => Err(ApiError::conflict(
                "already_ended",
                format!("job {id} already ended ({})", job.state),
            )),
            Err(CancelError::AlreadyEnded { state, .. }) => Err(ApiError::conflict(
                "already_ended",
                format!("job {id} already ended ({state})"),
            )),
        }
    }
}
