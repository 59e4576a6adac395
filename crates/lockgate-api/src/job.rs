//! Jobs as the API shows them, and what clients send about them.

use crate::time;
use lockgate_core::job::{CancelReason, Job, JobState};
use lockgate_core::policy::Executor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A job's lease as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseView {
    /// Fencing token; grows with every grant.
    pub token: u64,
    /// When the lease runs out unless renewed (RFC 3339).
    pub expires_at: String,
    /// The policy's lease TTL in seconds: renew every `ttl_s / 3` (an addition to api.md).
    #[serde(default)]
    pub ttl_s: f64,
}

/// A job as JSON (api.md: "A job as JSON"), plus a few additive fields at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    /// Id.
    pub id: u64,
    /// Kind.
    pub kind: String,
    /// Attributes.
    pub attrs: BTreeMap<String, String>,
    /// The principal that submitted it.
    pub owner: String,
    /// Priority after defaults.
    pub priority: i64,
    /// `client` or `agent`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::ExecutorSchema))]
    pub executor: Executor,
    /// State.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JobStateSchema))]
    pub state: JobState,
    /// Pinned node, or the node a movable job was placed on.
    pub node: Option<String>,
    /// Attempt, from 1.
    pub attempt: u32,
    /// The lease while admitted.
    pub lease: Option<LeaseView>,
    /// The holder has been asked to stop.
    pub cancel_requested: bool,
    /// Submit time.
    pub submitted_at: String,
    /// Admitted to prepare.
    pub prepare_started_at: Option<String>,
    /// Admitted to run.
    pub started_at: Option<String>,
    /// Ended.
    pub finished_at: Option<String>,
    /// How it ended (its final state).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schema::JobStateSchema>))]
    pub outcome: Option<JobState>,
    /// Last message (failure reason, holder message).
    pub message: Option<String>,
    /// Selector of a movable job.
    #[serde(default)]
    pub node_selector: Option<String>,
    /// Whether `node` was given by the submitter.
    #[serde(default)]
    pub pinned: bool,
    /// Two-stage job.
    #[serde(default)]
    pub two_stage: bool,
    /// Pool costs after defaults.
    #[serde(default)]
    pub cost: BTreeMap<String, u64>,
    /// When it last entered `queued`.
    #[serde(default)]
    pub queued_at: Option<String>,
    /// When it reported `prepared`.
    #[serde(default)]
    pub prepared_at: Option<String>,
    /// Do not start before.
    #[serde(default)]
    pub not_before: Option<String>,
    /// Waiting bound, seconds.
    #[serde(default)]
    pub max_wait_s: Option<f64>,
    /// Run-time bound, seconds.
    #[serde(default)]
    pub max_run_s: Option<f64>,
    /// Idempotency key.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// When a pending retry queues it again.
    #[serde(default)]
    pub retry_at: Option<String>,
    /// Jobs it waits for to end (`after`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<u64>,
    /// Jobs it waits for to succeed (`after_ok`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ok: Vec<u64>,
    /// Why the holder is asked to stop, while `cancel_requested`: `cancel`, `max_run`, or
    /// `preempted` (stop, finish `cancelled`, and wait: the job is queued again, same id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schema::CancelReasonSchema>))]
    pub cancel_reason: Option<CancelReason>,
    /// How many of its attempts were preempted (not counted against its retries).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preemptions: u32,
    /// Learned durations (`GET /v1/jobs/{id}` only; docs/forecasts.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<crate::ExpectedView>,
    /// The policy sends this kind's output to the job's log (`[kinds.NAME].log`; shown
    /// only when true): `lockgate run` learns it from the submit answer, without a second
    /// request for the policy.
    #[serde(default, skip_serializing_if = "is_false")]
    pub log: bool,
    /// The policy runs this kind's jobs without admission when the server cannot be
    /// reached (`[kinds.NAME].if_unreachable = "run"`; shown only when true): `lockgate
    /// run` keeps it from the submit answer for the times the server is away.
    #[serde(default, skip_serializing_if = "is_false")]
    pub run_if_unreachable: bool,
    /// It ran without admission: its holder could not reach the server, ran anyway
    /// (`lockgate run --if-unreachable run`) and reported the run afterwards
    /// (`POST /v1/jobs/unadmitted`). Shown only when true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unadmitted: bool,
    /// What its processes used (the current or last attempt), as its holder measured it
    /// from the kernel and reported with its renewals and finish; absent until the first
    /// report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::UsageView>,
}

/// `POST /v1/jobs/unadmitted`: a run that went ahead without admission because the server
/// could not be reached, reported once it is back. The server records it as an ended job
/// marked `unadmitted` (it never held a slot). The job's `idempotency_key` makes a repeated
/// report (an answer lost on the way back) return the job already recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UnadmittedReport {
    /// The job as it would have been submitted (`executor`, `two_stage`, dependencies and
    /// waiting bounds do not apply and are ignored).
    pub job: SubmitRequest,
    /// When the command started (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339).
    pub finished_at: String,
    /// How it ended: `succeeded`, `failed` or `cancelled`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::OutcomeSchema))]
    pub outcome: lockgate_core::Outcome,
    /// What happened (the holder's account: host, why it ran unadmitted, exit status).
    #[serde(default)]
    pub message: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl JobView {
    /// The API view of an engine job; `lease_ttl` is the policy's `[leases].ttl`.
    pub fn from_job(job: &Job, lease_ttl: Duration) -> JobView {
        JobView {
            id: job.id,
            kind: job.kind.clone(),
            attrs: job.attrs.to_map(),
            owner: job.owner.clone(),
            priority: job.priority,
            executor: job.executor,
            state: job.state,
            node: job.node().map(str::to_string),
            attempt: job.attempt,
            lease: job.lease.map(|l| LeaseView {
                token: l.token,
                expires_at: time::format(l.expires_at),
                ttl_s: lease_ttl.as_secs_f64(),
            }),
            cancel_requested: job.cancel_requested,
            submitted_at: time::format(job.submitted_at),
            prepare_started_at: time::format_opt(job.prepare_started_at),
            started_at: time::format_opt(job.started_at),
            finished_at: time::format_opt(job.finished_at),
            outcome: job.outcome,
            message: job.message.clone(),
            node_selector: job.placement.selector().map(|s| s.text().to_string()),
            pinned: job.placement.pinned().is_some(),
            two_stage: job.two_stage,
            cost: job.cost.clone(),
            queued_at: Some(time::format(job.queued_at)),
            prepared_at: time::format_opt(job.prepared_at),
            not_before: time::format_opt(job.not_before),
            max_wait_s: job.max_wait_ms.map(time::secs),
            max_run_s: job.max_run_ms.map(time::secs),
            idempotency_key: job.idempotency_key.clone(),
            retry_at: time::format_opt(job.retry_at),
            cancel_reason: job.cancel_reason.filter(|_| job.cancel_requested),
            preemptions: job.preemptions,
            after: job.after.clone(),
            after_ok: job.after_ok.clone(),
            expected: None,
            log: false,
            run_if_unreachable: false,
            unadmitted: job.unadmitted,
            usage: job.usage.as_deref().map(crate::UsageView::of),
        }
    }

    /// The holder is asked to stop because a job of higher priority preempts it.
    pub fn preempted(&self) -> bool {
        self.cancel_requested && self.cancel_reason == Some(CancelReason::Preempted)
    }

    /// Ended for good: terminal and no retry pending.
    pub fn is_final(&self) -> bool {
        self.state.is_terminal() && self.retry_at.is_none()
    }
}

/// `POST /v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// Job kind (required).
    pub kind: String,
    /// Attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
    /// Priority; default from the kind. A submitter may not exceed its `max_priority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Pinned node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node selector (`""`: any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,
    /// `client` or `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schema::ExecutorSchema>))]
    pub executor: Option<Executor>,
    /// Pool costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<BTreeMap<String, u64>>,
    /// Two-stage job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_stage: Option<bool>,
    /// Do not start before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    /// Give up (`expired`) after waiting this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_s: Option<f64>,
    /// Request cancellation after running this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_s: Option<f64>,
    /// Per owner: a resubmission with the same key returns the existing job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Jobs that must end (in any state) before this one is queued.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<u64>,
    /// Jobs that must succeed before this one is queued; if one ends otherwise, this job
    /// ends `cancelled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ok: Vec<u64>,
}

/// `POST /v1/jobs/{id}/set`: changes a queued job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSetRequest {
    /// The new priority (a submitter within its `max_priority`).
    pub priority: i64,
}

/// `POST /v1/jobs/{id}/heartbeat` and `/prepared`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The lease's fencing token.
    pub token: u64,
    /// What the job's processes used so far, measured by its holder (totals from the
    /// start of the command); the server keeps it on the job only when the lease is the
    /// caller's. Omit it when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<lockgate_core::Usage>,
    /// The pressure and network counters of the node the holder runs on, sampled with
    /// `usage`; the server keeps it for the job's node (a job without one: ignored), only
    /// when the lease is the caller's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<crate::NodeSample>,
}

impl LeaseRequest {
    /// A renewal with `token` and no reports.
    pub fn new(token: u64) -> LeaseRequest {
        LeaseRequest {
            token,
            usage: None,
            node: None,
        }
    }
}

/// `POST /v1/jobs/{id}/finish`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishRequest {
    /// The lease's fencing token.
    pub token: u64,
    /// `succeeded`, `failed` or `cancelled`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::OutcomeSchema))]
    pub outcome: lockgate_core::Outcome,
    /// Free text (an exit status, a failure reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the job's processes used, measured by its holder at the end (as in
    /// [`LeaseRequest::usage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<lockgate_core::Usage>,
}

/// `GET /v1/jobs` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobList {
    /// One page of jobs, by id (ascending, or descending with `order=desc`).
    pub jobs: Vec<JobView>,
    /// Pass as `after` for the next page (as `before` with `order=desc`); `null` on the
    /// last page. A page may hold fewer than `limit` jobs and still have a `next`.
    pub next: Option<u64>,
}

/// The order of a job listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum JobOrder {
    /// Oldest (lowest id) first; pages go on with `after`. The default.
    #[default]
    Asc,
    /// Newest (highest id) first; pages go on with `before`.
    Desc,
}

/// `GET /v1/jobs` query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    /// Only jobs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only jobs of this owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Only jobs on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Page size (default 100, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Jobs with a larger id than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Jobs with a smaller id than this (the cursor of `order=desc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// `asc` (default) or `desc`: newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<JobOrder>,
    /// Only jobs that have not ended (queued, preparing, prepared, running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// Only jobs this selector matches, as a limit's `match` reads it: `KEY=VALUE` pairs
    /// joined by `,` (all must hold) over the job's attributes, `kind`, `owner` and `node`;
    /// `!=`, `in (..)`, `notin (..)`, `KEY` and `!KEY` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attr: Option<String>,
}

/// One holding condition in an explanation (policy.md, Explain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReasonView {
    /// Scope name, when the condition is a scope.
    pub scope: Option<String>,
    /// `capacity`, `zero`, `over_limit`, `conflict`, `reserved`, ...
    pub kind: String,
    /// Units in use.
    pub count: Option<u64>,
    /// The scope's limit.
    pub limit: Option<u64>,
    /// Jobs holding the scope.
    pub holders: Vec<u64>,
    /// The condition in words.
    pub text: String,
}

/// `GET /v1/jobs/{id}/explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExplainView {
    /// 1-based position among competing queued jobs (0 when not queued).
    pub position: usize,
    /// Effective priority now.
    pub effective_priority: f64,
    /// Every holding condition.
    pub reasons: Vec<ReasonView>,
    /// All of it in one line.
    pub text: String,
    /// A queued job's estimated start and end (docs/forecasts.md); absent for a job
    /// that is not queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::EstimateView>,
}

impl SubmitRequest {
    /// The job this request asks for, owned by `owner` (the submitting token's principal;
    /// never a field of the body). Times and durations are read here; everything else is
    /// checked by `JobSpec::check` when the engine takes it.
    ///
    /// # Errors
    /// `(field, message)` for a `not_before` that is not RFC 3339 or a duration that is not
    /// a number of seconds >= 0.
    pub fn into_spec(self, owner: String) -> Result<lockgate_core::JobSpec, (String, String)> {
        let not_before = match &self.not_before {
            Some(t) => Some(time::parse(t).map_err(|m| ("not_before".to_string(), m))?),
            None => None,
        };
        let ms = |field: &str, v: Option<f64>| {
            v.map(|s| time::millis(s).map_err(|m| (field.to_string(), format!("{field}: {m}"))))
                .transpose()
        };
        Ok(lockgate_core::JobSpec {
            max_wait_ms: ms("max_wait_s", self.max_wait_s)?,
            max_run_ms: ms("max_run_s", self.max_run_s)?,
            kind: self.kind,
            attrs: self.attrs,
            owner,
            priority: self.priority,
            node: self.node,
            node_selector: self.node_selector,
            executor: self.executor,
            cost: self.cost,
            two_stage: self.two_stage,
            not_before,
            idempotency_key: self.idempotency_key,
            retry: None,
            after: self.after,
            after_ok: self.after_ok,
        })
    }
}

impl From<lockgate_core::explain::Explanation> for ExplainView {
    fn from(e: lockgate_core::explain::Explanation) -> Self {
        ExplainView {
            position: e.position,
            effective_priority: e.effective_priority,
            reasons: e
                .reasons
                .into_iter()
                .map(|r| ReasonView {
                    scope: r.scope,
                    kind: r.kind,
                    count: r.count,
                    limit: r.limit,
                    holders: r.holders,
                    text: r.text,
                })
                .collect(),
            text: e.text,
            estimate: None,
        }
    }
}
