//! The job calls: submit, list, show, wait, explain, cancel, and the holder's lease calls
//! (heartbeat, prepared, finish).

use crate::{Client, ClientError};
use lockgate_api::{
    ExplainView, FinishRequest, JobList, JobQuery, JobView, LeaseRequest, SubmitRequest,
};
use std::time::Duration;

impl Client {
    /// `POST /v1/jobs`: the job, and whether it was created (false: an idempotent
    /// resubmission returned the existing job).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn submit(&self, req: &SubmitRequest) -> Result<(JobView, bool), ClientError> {
        let (status, job) =
            self.call_status("POST", "/v1/jobs", Some(req), self.plain_timeout())?;
        Ok((job, status == 201))
    }

    /// `POST /v1/jobs/unadmitted`: reports a run that went ahead without admission; the
    /// job recorded, and whether this report recorded it (false: a repeated report).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn report_unadmitted(
        &self,
        report: &lockgate_api::UnadmittedReport,
    ) -> Result<(JobView, bool), ClientError> {
        let (status, job) = self.call_status(
            "POST",
            "/v1/jobs/unadmitted",
            Some(report),
            self.plain_timeout(),
        )?;
        Ok((job, status == 201))
    }

    /// `GET /v1/jobs/{id}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn job(&self, id: u64) -> Result<JobView, ClientError> {
        self.call("GET", &format!("/v1/jobs/{id}"), None::<&()>)
    }

    /// `GET /v1/jobs` with a query.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn jobs(&self, q: &JobQuery) -> Result<JobList, ClientError> {
        let mut parts = Vec::new();
        for (k, v) in [
            ("state", &q.state),
            ("kind", &q.kind),
            ("owner", &q.owner),
            ("node", &q.node),
            ("attr", &q.attr),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}={}", super::encode(v)));
            }
        }
        for (k, v) in [("limit", q.limit.map(u64::from)), ("after", q.after)] {
            if let Some(v) = v {
                parts.push(format!("{k}={v}"));
            }
        }
        if let Some(b) = q.before {
            parts.push(format!("before={b}"));
        }
        if let Some(o) = q.order {
            let o = match o {
                lockgate_api::JobOrder::Asc => "asc",
                lockgate_api::JobOrder::Desc => "desc",
            };
            parts.push(format!("order={o}"));
        }
        if let Some(a) = q.active {
            parts.push(format!("active={a}"));
        }
        let qs = if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        };
        self.call("GET", &format!("/v1/jobs{qs}"), None::<&()>)
    }

    /// `GET /v1/jobs/{id}/wait`: answers when the state differs from `from`, or after
    /// `timeout_s` with the job unchanged.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn wait(
        &self,
        id: u64,
        from: lockgate_core::JobState,
        timeout_s: u64,
    ) -> Result<JobView, ClientError> {
        self.wait_on(id, from, timeout_s, "")
    }

    /// `GET /v1/jobs/{id}/wait?cancel=true`: [`Client::wait`] that also answers once the
    /// job's cancellation is requested (how a holder learns of a cancel at once).
    ///
    /// # Errors
    /// See [`ClientError`]; a server older than `cancel` refuses it (422).
    pub fn wait_or_cancel(
        &self,
        id: u64,
        from: lockgate_core::JobState,
        timeout_s: u64,
    ) -> Result<JobView, ClientError> {
        self.wait_on(id, from, timeout_s, "&cancel=true")
    }

    fn wait_on(
        &self,
        id: u64,
        from: lockgate_core::JobState,
        timeout_s: u64,
        extra: &str,
    ) -> Result<JobView, ClientError> {
        let (poll, timeout) =
            self.long_poll(Duration::from_secs(timeout_s), Duration::from_secs(15));
        let path = format!(
            "/v1/jobs/{id}/wait?from={from}&timeout_s={}{extra}",
            poll.as_secs()
        );
        self.call_status("GET", &path, None::<&()>, timeout)
            .map(|(_, v)| v)
    }

    /// `GET /v1/jobs/{id}/explain`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn explain(&self, id: u64) -> Result<ExplainView, ClientError> {
        self.call("GET", &format!("/v1/jobs/{id}/explain"), None::<&()>)
    }

    /// `POST /v1/jobs/{id}/heartbeat`; `lease_lost` comes back as a 409 [`ClientError::Api`].
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn heartbeat(&self, id: u64, token: u64) -> Result<JobView, ClientError> {
        self.heartbeat_within(id, &LeaseRequest::new(token), self.plain_timeout())
    }

    /// [`Client::heartbeat`] that gives up after `timeout` (an [`ClientError::Unreachable`]
    /// then): the lease keeper must not wait on a silent server past the moment it has to
    /// stop the work. `req` carries the token and the holder's reports (`meter.rs`).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn heartbeat_within(
        &self,
        id: u64,
        req: &LeaseRequest,
        timeout: Duration,
    ) -> Result<JobView, ClientError> {
        self.call_status(
            "POST",
            &format!("/v1/jobs/{id}/heartbeat"),
            Some(req),
            timeout,
        )
        .map(|(_, v)| v)
    }

    /// `POST /v1/jobs/{id}/prepared`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn prepared(&self, id: u64, token: u64) -> Result<JobView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/jobs/{id}/prepared"),
            Some(&LeaseRequest::new(token)),
        )
    }

    /// `POST /v1/jobs/{id}/finish`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn finish_job(
        &self,
        id: u64,
        token: u64,
        outcome: lockgate_core::Outcome,
        message: Option<String>,
    ) -> Result<JobView, ClientError> {
        let body = FinishRequest {
            token,
            outcome,
            message,
            usage: None,
        };
        self.finish_with(id, &body)
    }

    /// `POST /v1/jobs/{id}/finish` with the whole body (the holder's usage too).
    ///
    /// # Errors
    /// See [`ClientError`].
    /// A server older than `usage` refuses the field: the finish is then sent again
    /// without it.
    pub fn finish_with(&self, id: u64, body: &FinishRequest) -> Result<JobView, ClientError> {
        let path = format!("/v1/jobs/{id}/finish");
        match self.call("POST", &path, Some(body)) {
            Err(e) if body.usage.is_some() && e.refuses_field("usage") => {
                let plain = FinishRequest {
                    usage: None,
                    ..body.clone()
                };
                self.call("POST", &path, Some(&plain))
            }
            r => r,
        }
    }

    /// `POST /v1/jobs/{id}/cancel?force=..`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn cancel(&self, id: u64, force: bool) -> Result<JobView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/jobs/{id}/cancel?force={force}"),
            None::<&()>,
        )
    }

    /// `POST /v1/jobs/{id}/set`: a queued job's new priority.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn set_job(&self, id: u64, priority: i64) -> Result<JobView, ClientError> {
        let req = lockgate_api::JobSetRequest { priority };
        self.call("POST", &format!("/v1/jobs/{id}/set"), Some(&req))
    }

    /// `POST /v1/jobs/{id}/retry`: a failed agent job queued again as a new attempt.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn retry_job(&self, id: u64) -> Result<JobView, ClientError> {
        self.call("POST", &format!("/v1/jobs/{id}/retry"), None::<&()>)
    }
}
