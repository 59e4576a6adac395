//! The job operations inside the loop: submit, read, wait, explain, leases, cancel.

use super::{may_act, may_see, JobOp, Submitted};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::protocol::Reply;
use lockgate_api::{ErrorCode, ExplainView, FinishRequest, JobView, Role, SubmitRequest};
use lockgate_core::engine::{CancelError, LeaseError, SubmitError};
use lockgate_core::job::{Job, JobId, JobState};
use lockgate_core::Timestamp;

/// A long-poll on one job's state.
#[derive(Debug)]
pub(crate) struct Waiter {
    from: JobState,
    or_cancel: bool,
    reply: Reply<JobView>,
}

impl Waiter {
    /// The job left the state the waiter knows, or its cancellation it waits for came.
    fn wakes_for(&self, job: &Job) -> bool {
        job.state != self.from || (self.or_cancel && job.cancel_requested)
    }
}

impl Loop {
    /// Applies one job operation.
    pub(crate) fn job_op(&mut self, p: &Principal, op: JobOp, now: Timestamp) {
        match op {
            JobOp::Submit(req, reply) => {
                let r = self.submit(p, *req, now);
                self.answer(reply, r);
            }
            JobOp::Unadmitted(req, reply) => {
                let r = self.unadmitted(p, *req, now);
                self.answer(reply, r);
            }
            JobOp::Get(id, reply) => {
                let r = self.get(p, id, now);
                self.answer(reply, r);
            }
            JobOp::List(q, reply) => {
                let r = self.list(p, q);
                self.answer(reply, r);
            }
            JobOp::Wait {
                id,
                from,
                or_cancel,
                reply,
            } => self.wait(p, id, (from, or_cancel), reply),
            JobOp::Explain(id, reply) => {
                let r = self.explain(p, id, now);
                self.answer(reply, r);
            }
            JobOp::Heartbeat(id, req, reply) => {
                let r = self.lease_call(p, id, &req, now, |e| {
                    e.heartbeat(id, req.token, now).map(|_| ())
                });
                self.answer(reply, r);
            }
            JobOp::Prepared(id, req, reply) => {
                let r = self.lease_call(p, id, &req, now, |e| {
                    e.prepared(id, req.token, now).map(|_| ())
                });
                self.answer(reply, r);
            }
            JobOp::Finish(id, req, reply) => {
                let r = self.finish(p, id, req, now);
                if crate::plant::planted(crate::plant::Plant::AckBeforeCommit) {
                    // The planted bug: answered before its batch is committed.
                    let _ = reply.send(r);
                } else {
                    self.answer(reply, r);
                }
            }
            JobOp::Cancel(id, force, reply) => {
                let r = self.cancel(p, id, force, now);
                self.answer(reply, r);
            }
            JobOp::Set(id, req, reply) => {
                let r = self.set_job(p, id, req, now);
                self.answer(reply, r);
            }
            JobOp::Retry(id, reply) => {
                let r = self.retry_job(p, id, now);
                self.answer(reply, r);
            }
            JobOp::Batch(items, reply) => self.job_batch(p, items, reply, now),
        }
    }

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

    /// The view of a job as the engine holds it now, else as `job` says.
    pub(super) fn current_view(&self, job: Job) -> JobView {
        match self.engine.job(job.id) {
            Some(live) => self.view(live),
            None => self.view(&job),
        }
    }

    pub(crate) fn check_priority(&self, p: &Principal, prio: i64) -> Result<(), ApiError> {
        lockgate_core::limits::priority("priority", prio)?;
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
        match max.filter(|&m| prio > m) {
            Some(max) => Err(ApiError::forbidden(format!(
                "priority {prio} is above {:?}'s max_priority {max} ([owners.{}].max_priority in the policy)",
                p.name, p.name
            ))
            .field("priority")),
            None => Ok(()),
        }
    }

    /// Room on the data dir's disk for one more job, measured now with what the jobs
    /// already in this batch will write (`space.rs`): 507 when there is none.
    fn check_room(&mut self, req: &SubmitRequest) -> Result<(), ApiError> {
        let Some(space) = &self.space else {
            return Ok(());
        };
        // The job's row and its event, each up to twice its text in SQLite pages and WAL
        // frames, and the pages of the indexes and the batch's other rows.
        let text = req.kind.len()
            + req
                .attrs
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
            + [&req.idempotency_key, &req.node, &req.node_selector]
                .iter()
                .map(|v| v.as_ref().map_or(0, String::len))
                .sum::<usize>();
        let bytes = 16 * 1024 + 4 * text as u64;
        if let Some(why) = space.room_for(self.pending_bytes + bytes) {
            return Err(ApiError::new(ErrorCode::InsufficientStorage, why));
        }
        self.pending_bytes += bytes;
        Ok(())
    }

    /// `[quotas].max_queued_per_owner`: a submitter token's owner may have at most that many
    /// jobs that have not ended. Admin tokens and the server's own owners (`schedule:<name>`,
    /// `backup:<name>`, which no token may be named) are exempt.
    fn check_owner_quota(&self, p: &Principal) -> Result<(), ApiError> {
        let exempt = p.role == Role::Admin
            || p.name.starts_with("schedule:")
            || p.name.starts_with("backup:");
        let max = self.engine.policy().quotas.max_queued_per_owner as usize;
        let live = self.engine.live_jobs_of(&p.name);
        if exempt || live < max {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::QuotaExceeded,
            format!(
                "owner {:?} has {live} jobs queued or running; the quota [quotas].max_queued_per_owner is {max}: submit again when some have ended",
                p.name
            ),
        ))
    }

    /// The job an idempotency key already names (live, else stored).
    fn existing_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, ApiError> {
        if key.is_empty() {
            return Err(ApiError::invalid(
                "idempotency_key",
                "idempotency_key must not be empty",
            ));
        }
        let live = self
            .engine
            .idempotent_job(owner, key)
            .and_then(|id| self.engine.job(id))
            .cloned();
        match live {
            Some(j) => Ok(Some(j)),
            None => Ok(self.store.job_by_key(owner, key)?),
        }
    }

    pub(super) fn submit(
        &mut self,
        p: &Principal,
        req: SubmitRequest,
        now: Timestamp,
    ) -> Result<Submitted, ApiError> {
        p.require(&[Role::Admin, Role::Submitter], "submit jobs")?;
        if let Some(prio) = req.priority {
            self.check_priority(p, prio)?;
        }
        if let Some(key) = &req.idempotency_key {
            if let Some(j) = self.existing_by_key(&p.name, key)? {
                return Ok(Submitted {
                    job: self.current_view(j),
                    created: false,
                });
            }
        }
        self.check_owner_quota(p)?;
        self.check_room(&req)?;
        let mut spec = req
            .into_spec(p.name.clone())
            .map_err(|(field, message)| ApiError::invalid(field, message))?;
        self.resolve_deps(p, &mut spec)?;
        match self.engine.submit(spec, now) {
            Ok(s) => Ok(Submitted {
                job: self.view(&s.job),
                created: !s.existing,
            }),
            Err(SubmitError::Invalid { field, message }) => Err(ApiError::invalid(field, message)),
        }
    }

    /// Records a run that went ahead without admission (see
    /// [`lockgate_core::Engine::record_unadmitted`]); a repeated report returns the job
    /// recorded first.
    fn unadmitted(
        &mut self,
        p: &Principal,
        req: lockgate_api::UnadmittedReport,
        now: Timestamp,
    ) -> Result<Submitted, ApiError> {
        p.require(&[Role::Admin, Role::Submitter], "report unadmitted runs")?;
        let time = |field: &str, t: &str| {
            lockgate_api::time::parse(t).map_err(|e| ApiError::invalid(field, e.to_string()))
        };
        let started = time("started_at", &req.started_at)?;
        let finished = time("finished_at", &req.finished_at)?;
        // Hosts' clocks differ: a run may seem to end a little ahead of this server's now.
        let skew = std::time::Duration::from_secs(600);
        if finished < started || finished > now.plus(skew) {
            return Err(ApiError::invalid(
                "started_at",
                format!(
                    "a run from {} to {} is not one that ended by now",
                    req.started_at, req.finished_at
                ),
            ));
        }
        let Some(key) = req.job.idempotency_key.clone() else {
            return Err(ApiError::invalid(
                "job.idempotency_key",
                "a report needs the job's idempotency_key (a repeated report must not record the run twice)",
            ));
        };
        if let Some(j) = self.existing_by_key(&p.name, &key)? {
            return Ok(Submitted {
                job: self.current_view(j),
                created: false,
            });
        }
        if let Some(prio) = req.job.priority {
            self.check_priority(p, prio)?;
        }
        self.check_room(&req.job)?;
        let job = lockgate_api::SubmitRequest {
            after: Vec::new(),
            after_ok: Vec::new(),
            not_before: None,
            max_wait_s: None,
            max_run_s: None,
            ..req.job
        };
        let spec = job
            .into_spec(p.name.clone())
            .map_err(|(field, message)| ApiError::invalid(field, message))?;
        let message = req
            .message
            .unwrap_or_else(|| "ran without admission".to_string());
        match self
            .engine
            .record_unadmitted(spec, (started, finished), req.outcome, message, now)
        {
            Ok(j) => Ok(Submitted {
                job: self.view(&j),
                created: true,
            }),
            Err(SubmitError::Invalid { field, message }) => Err(ApiError::invalid(field, message)),
        }
    }

    fn get(&mut self, p: &Principal, id: JobId, now: Timestamp) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        may_see(p, &job)?;
        let mut view = self.view(&job);
        view.expected = Some(self.expected_view(&job, now));
        Ok(view)
    }

    /// Answers at once when the state already differs from `from` (or, with `or_cancel`,
    /// its cancellation is requested), else registers a waiter ([`Loop::wake_waiters`]
    /// answers it).
    fn wait(
        &mut self,
        p: &Principal,
        id: JobId,
        (from, or_cancel): (JobState, bool),
        reply: Reply<JobView>,
    ) {
        let job = match self.find(id).and_then(|j| may_see(p, &j).map(|()| j)) {
            Ok(j) => j,
            Err(e) => return self.answer(reply, Err(e)),
        };
        let waiter = Waiter {
            from,
            or_cancel,
            reply,
        };
        if waiter.wakes_for(&job) {
            let view = self.view(&job);
            return self.answer(waiter.reply, Ok(view));
        }
        let ws = self.waiters.entry(id).or_default();
        ws.retain(|w| !w.reply.is_closed());
        ws.push(waiter);
    }

    /// Answers the waiters of `job` whose state it left (called for every job event).
    pub(crate) fn wake_waiters(&mut self, job: &Job, view: &JobView) {
        let Some(ws) = self.waiters.get_mut(&job.id) else {
            return;
        };
        let (woken, keep): (Vec<Waiter>, Vec<Waiter>) =
            ws.drain(..).partition(|w| w.wakes_for(job));
        *ws = keep;
        for w in woken {
            self.answer(w.reply, Ok(view.clone()));
        }
    }

    /// Drops the waiters whose caller went away (housekeeping).
    pub(crate) fn forget_gone_waiters(&mut self) {
        for ws in self.waiters.values_mut() {
            ws.retain(|w| !w.reply.is_closed());
        }
        self.waiters.retain(|_, ws| !ws.is_empty());
    }

    /// Answers every waiter with 503 (shutdown).
    pub(crate) fn stop_waiters(&mut self) {
        for (_, ws) in self.waiters.drain() {
            for w in ws {
                let _ = w.reply.send(Err(ApiError::unavailable(
                    "the server is shutting down; wait again",
                )));
            }
        }
    }

    fn explain(
        &mut self,
        p: &Principal,
        id: JobId,
        now: Timestamp,
    ) -> Result<ExplainView, ApiError> {
        let job = self.find(id)?;
        may_see(p, &job)?;
        let estimate = self.estimate_for(&job);
        Ok(match self.engine.explain(id, now) {
            Some(e) => {
                let mut view = self.with_auto(ExplainView {
                    estimate,
                    ..ExplainView::from(e)
                });
                if let Some(progress) = self.progress(&job, now) {
                    view.text = format!("{}: {progress}", view.text);
                }
                view
            }
            None => ExplainView {
                position: 0,
                effective_priority: job.priority as f64,
                reasons: Vec::new(),
                text: match &job.message {
                    Some(m) => format!("{}: {m}", job.state),
                    None => job.state.to_string(),
                },
                estimate,
            },
        })
    }

    /// A running job's progress as its holder measured it, for explain: what it moved, at
    /// what rate now, and when it ends at that rate where its size is learned
    /// (`moved 1.2 GiB, 40.0 MiB/s now, ends 2026-12-07T02:41:10Z at its own rate`).
    fn progress(&self, job: &Job, now: Timestamp) -> Option<String> {
        if job.state != JobState::Running {
            return None;
        }
        let b = lockgate_core::usage::format_bytes;
        let moved = lockgate_core::durations::moved(job)?;
        let mut text = format!("moved {}", b(moved));
        if let Some((_, rate)) = self.own_rate(job) {
            text += &format!(", {}/s now", b(rate));
        }
        let size = self.forecast.durations.expected(job).size;
        if let Some(end) = self.end_at(job, size, now) {
            let end = lockgate_api::time::format(end);
            text += &format!(", ends {end} at its own rate");
        }
        Some(text)
    }

    /// Adds to each reason on an automatic scope its number, range and measured rates.
    fn with_auto(&self, mut view: ExplainView) -> ExplainView {
        for r in &mut view.reasons {
            let scope = r.scope.as_deref().unwrap_or("");
            let described = match scope.strip_prefix("node:") {
                Some(node) => self.auto.describe_guard(node),
                None => self.auto.describe(scope),
            };
            let Some(auto) = described else {
                continue;
            };
            let old = r.text.clone();
            r.text = format!("{old} ({auto})");
            view.text = view.text.replace(&old, &r.text);
        }
        view
    }

    fn lease_error(&mut self, id: JobId, e: LeaseError) -> ApiError {
        match e {
            LeaseError::LeaseLost(_) => ApiError::new(
                ErrorCode::LeaseLost,
                format!("job {id}: the lease token is stale or the lease expired; the job's slots may be someone else's now"),
            ),
            LeaseError::NotFound(_) => match self.store.job(id) {
                Ok(Some(j)) => ApiError::new(ErrorCode::LeaseLost, format!("job {id} already ended ({})", j.state)),
                _ => ApiError::not_found(format!("job {id} not found")),
            },
            LeaseError::WrongState { state, message, .. } => {
                ApiError::new(ErrorCode::WrongState, format!("job {id} is {state}: {message}"))
            }
        }
    }

    /// A heartbeat or `prepared`: checks the caller, calls the engine (and, once that
    /// took the lease, keeps the usage the request carries), answers the job.
    pub(super) fn lease_call(
        &mut self,
        p: &Principal,
        id: JobId,
        req: &lockgate_api::LeaseRequest,
        now: Timestamp,
        call: impl FnOnce(&mut lockgate_core::Engine) -> Result<(), LeaseError>,
    ) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        may_act(p, &job)?;
        let r =
            call(&mut self.engine).and_then(|()| self.record_usage(id, req.token, req.usage, now));
        if let (Ok(()), Some(sample)) = (&r, &req.node) {
            if let Some(node) = self
                .engine
                .job(id)
                .and_then(|j| j.node())
                .map(str::to_string)
            {
                self.node_meters.record(&node, sample.clone(), now);
                self.guard_sample(&node, &sample.clone().sane(), now);
            }
        }
        match r {
            Ok(()) => Ok(self.current_view(job)),
            Err(e) => Err(self.lease_error(id, e)),
        }
    }

    /// Keeps a holder's usage report on its job (the lease checked again by the engine).
    fn record_usage(
        &mut self,
        id: JobId,
        token: u64,
        usage: Option<lockgate_core::Usage>,
        now: Timestamp,
    ) -> Result<(), LeaseError> {
        let Some(u) = usage else {
            return Ok(());
        };
        self.engine.record_usage(id, token, &u, now)?;
        if let Some(totals) = self.engine.job(id).and_then(|j| j.usage.as_deref()) {
            let totals = *totals;
            let scopes: Vec<String> = self
                .engine
                .held_scopes(id)
                .into_iter()
                .map(|(_, s)| s)
                .collect();
            self.meters.record(id, totals, &scopes);
        }
        Ok(())
    }

    pub(super) fn finish(
        &mut self,
        p: &Principal,
        id: JobId,
        req: FinishRequest,
        now: Timestamp,
    ) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        may_act(p, &job)?;
        let finished = self
            .record_usage(id, req.token, req.usage, now)
            .and_then(|()| {
                self.engine
                    .finish(id, req.token, req.outcome, req.message, now)
            });
        match finished {
            Ok(j) => Ok(self.view(&j)),
            Err(e) => Err(self.lease_error(id, e)),
        }
    }

    fn cancel(
        &mut self,
        p: &Principal,
        id: JobId,
        force: bool,
        now: Timestamp,
    ) -> Result<JobView, ApiError> {
        let job = self.find(id)?;
        may_act(p, &job)?;
        if force && p.role != Role::Admin {
            return Err(ApiError::forbidden(format!(
                "{} token {:?} may not force-cancel: force=true revokes the lease at once and needs an admin token",
                p.role, p.name
            )));
        }
        let ended = |state: JobState| {
            ApiError::new(
                ErrorCode::AlreadyEnded,
                format!("job {id} already ended ({state})"),
            )
        };
        let by = format!("{} token {:?}", p.role, p.name);
        match self.engine.cancel_by(id, force, Some(&by), now) {
            Ok(j) => Ok(self.view(&j)),
            Err(CancelError::NotFound(_)) => Err(ended(job.state)),
            Err(CancelError::AlreadyEnded { state, .. }) => Err(ended(state)),
        }
    }
}
