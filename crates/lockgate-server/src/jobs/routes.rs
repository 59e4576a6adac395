//! The `/v1/jobs` handlers.

use super::{BatchItems, JobOp};
use crate::error::ApiError;
use crate::http::{ok, poll_timeout, ApiResult, AppState, Auth, JobIdPath, JsonBody, NoQuery, Q};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{
    BatchAnswer, BatchFinishRequest, BatchHeartbeatRequest, BatchSubmitRequest, ExplainView,
    FinishRequest, JobList, JobQuery, JobSetRequest, JobView, LeaseRequest, SubmitRequest,
};
use lockgate_core::job::JobState;
use serde::Deserialize;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    /// Answer once the job's state is no longer this one.
    #[param(value_type = lockgate_api::schema::JobStateSchema)]
    from: String,
    /// Longest wait in seconds (default 30, at most 300).
    #[serde(default)]
    #[param(minimum = 0)]
    timeout_s: Option<f64>,
    /// Also answer once the job's cancellation is requested (`cancel_requested` true): a
    /// holder that waits with this learns of a cancel at once. Default false.
    #[serde(default)]
    cancel: Option<bool>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct CancelQuery {
    /// Revoke the lease at once (admin tokens only) instead of asking the holder to stop.
    #[serde(default)]
    force: Option<bool>,
}

/// The job routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    submit,
    unadmitted,
    list,
    show,
    wait,
    explain,
    heartbeat,
    prepared,
    finish,
    cancel,
    set,
    retry,
    batch_submit,
    batch_finish,
    batch_heartbeat
))]
pub(crate) struct ApiDoc;

/// The job routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/unadmitted", post(unadmitted))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/wait", get(wait))
        .route("/v1/jobs/{id}/explain", get(explain))
        .route("/v1/jobs/{id}/heartbeat", post(heartbeat))
        .route("/v1/jobs/{id}/prepared", post(prepared))
        .route("/v1/jobs/{id}/finish", post(finish))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/set", post(set))
        .route("/v1/jobs/{id}/retry", post(retry))
        .route("/v1/batch/submit", post(batch_submit))
        .route("/v1/batch/finish", post(batch_finish))
        .route("/v1/batch/heartbeat", post(batch_heartbeat))
}

/// Sends a batch to the loop once its length is within the limit.
async fn batch(
    st: AppState,
    p: crate::auth::Principal,
    items: BatchItems,
) -> ApiResult<BatchAnswer> {
    items.check_len()?;
    ok(st.lp.ask(p, |r| JobOp::Batch(items, r)).await?)
}

#[utoipa::path(post, path = "/v1/batch/submit", tag = "jobs", request_body = BatchSubmitRequest,
    responses((status = 200, description = "One answer per job, in order: each with the status and body `POST /v1/jobs` would have answered (one bad item does not fail the others)", body = BatchAnswer)))]
async fn batch_submit(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<BatchSubmitRequest>,
) -> ApiResult<BatchAnswer> {
    batch(st, p, BatchItems::Submit(req.jobs)).await
}

#[utoipa::path(post, path = "/v1/batch/finish", tag = "jobs", request_body = BatchFinishRequest,
    responses((status = 200, description = "One answer per finish, in order, as `POST /v1/jobs/{id}/finish` would have answered", body = BatchAnswer)))]
async fn batch_finish(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<BatchFinishRequest>,
) -> ApiResult<BatchAnswer> {
    batch(st, p, BatchItems::Finish(req.jobs)).await
}

#[utoipa::path(post, path = "/v1/batch/heartbeat", tag = "jobs", request_body = BatchHeartbeatRequest,
    responses((status = 200, description = "One answer per lease, in order, as `POST /v1/jobs/{id}/heartbeat` would have answered", body = BatchAnswer)))]
async fn batch_heartbeat(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<BatchHeartbeatRequest>,
) -> ApiResult<BatchAnswer> {
    batch(st, p, BatchItems::Heartbeat(req.leases)).await
}

#[utoipa::path(post, path = "/v1/jobs/{id}/set", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")), request_body = JobSetRequest,
    responses((status = 200, description = "The queued job, re-ranked with its new priority (owner within its `max_priority`, or admin)", body = JobView)))]
async fn set(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<JobSetRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Set(id, req, r)).await?)
}

#[utoipa::path(post, path = "/v1/jobs/{id}/retry", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")),
    responses((status = 200, description = "The failed agent job, queued again as its next attempt", body = JobView)))]
async fn retry(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Retry(id, r)).await?)
}

#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = SubmitRequest,
    responses(
        (status = 201, description = "Created", body = JobView),
        (status = 200, description = "A resubmission with the same `idempotency_key`: the existing job", body = JobView),
    ))]
async fn submit(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<SubmitRequest>,
) -> ApiResult<JobView> {
    created(st.lp.ask(p, |r| JobOp::Submit(Box::new(req), r)).await?)
}

/// 201 with the job when the request made it, 200 when it named an existing one.
fn created(s: super::Submitted) -> ApiResult<JobView> {
    let status = if s.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(s.job)))
}

#[utoipa::path(post, path = "/v1/jobs/unadmitted", tag = "jobs", request_body = lockgate_api::UnadmittedReport,
    responses(
        (status = 201, description = "Recorded: an ended job marked `unadmitted`", body = JobView),
        (status = 200, description = "A repeated report (same `job.idempotency_key`): the job already recorded", body = JobView),
    ))]
async fn unadmitted(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<lockgate_api::UnadmittedReport>,
) -> ApiResult<JobView> {
    created(
        st.lp
            .ask(p, |r| JobOp::Unadmitted(Box::new(req), r))
            .await?,
    )
}

#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(JobQuery),
    responses((status = 200, description = "One page of the jobs the caller may see", body = JobList)))]
async fn list(State(st): State<AppState>, Auth(p): Auth, Q(q): Q<JobQuery>) -> ApiResult<JobList> {
    ok(st.lp.ask(p, |r| JobOp::List(q, r)).await?)
}

#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")),
    responses((status = 200, description = "The job", body = JobView)))]
async fn show(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Get(id, r)).await?)
}

#[utoipa::path(get, path = "/v1/jobs/{id}/wait", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)"), WaitQuery),
    responses((status = 200, description = "The job once its state is no longer `from` (or, with `cancel=true`, once its cancellation is requested), or as it is when the poll times out", body = JobView)))]
// The query is read before the id (a bad query wins over a bad id, as it always did).
async fn wait(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<WaitQuery>,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    let Some(from) = JobState::parse(&q.from) else {
        let all: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
        return Err(ApiError::invalid(
            "from",
            format!(
                "unknown state {:?}: expected one of {}",
                q.from,
                all.join(", ")
            ),
        ));
    };
    let timeout = poll_timeout(q.timeout_s)?;
    let _slot = st.open.take(crate::longlived::Kind::Poll, &p)?;
    // Dropping the wait at the timeout is harmless: a wait changes nothing.
    let waited = st.lp.ask(p.clone(), |reply| JobOp::Wait {
        id,
        from,
        or_cancel: q.cancel.unwrap_or(false),
        reply,
    });
    match tokio::time::timeout(timeout, waited).await {
        Ok(r) => ok(r?),
        Err(_) => ok(st.lp.ask(p, |r| JobOp::Get(id, r)).await?),
    }
}

#[utoipa::path(get, path = "/v1/jobs/{id}/explain", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")),
    responses((status = 200, description = "Why the job waits (or runs)", body = ExplainView)))]
async fn explain(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<ExplainView> {
    let view = st.lp.ask(p.clone(), |r| JobOp::Explain(id, r)).await?;
    if view
        .estimate
        .as_ref()
        .is_none_or(|e| e.computed_at.is_some())
    {
        return ok(view);
    }
    // A queued job the cached forecast does not know yet: its explain asked for a refresh;
    // wait (bounded) for a forecast that knows it, then explain again.
    let mut rx = st
        .lp
        .ask(p.clone(), crate::forecast::ForecastOp::Subscribe)
        .await?;
    let knows =
        |s: &crate::forecast::Published| s.as_ref().is_some_and(|s| s.estimate(id).is_some());
    let limit = crate::forecast::ON_DEMAND_WAIT;
    let known = matches!(
        tokio::time::timeout(limit, rx.wait_for(knows)).await,
        Ok(Ok(_))
    );
    if !known {
        return ok(view);
    }
    let view = st.lp.ask(p, |r| JobOp::Explain(id, r)).await?;
    ok(view)
}

#[utoipa::path(post, path = "/v1/jobs/{id}/heartbeat", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")), request_body = LeaseRequest,
    responses((status = 200, description = "The lease is renewed", body = JobView)))]
async fn heartbeat(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<LeaseRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Heartbeat(id, req, r)).await?)
}

#[utoipa::path(post, path = "/v1/jobs/{id}/prepared", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")), request_body = LeaseRequest,
    responses((status = 200, description = "The prepare stage is done; the job waits for a run slot", body = JobView)))]
async fn prepared(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<LeaseRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Prepared(id, req, r)).await?)
}

#[utoipa::path(post, path = "/v1/jobs/{id}/finish", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")), request_body = FinishRequest,
    responses((status = 200, description = "The job ended", body = JobView)))]
async fn finish(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<FinishRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Finish(id, req, r)).await?)
}

#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)"), CancelQuery),
    responses((status = 200, description = "Cancelled (queued), or asked to stop (admitted)", body = JobView)))]
async fn cancel(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<CancelQuery>,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    let force = q.force.unwrap_or(false);
    ok(st.lp.ask(p, |r| JobOp::Cancel(id, force, r)).await?)
}
