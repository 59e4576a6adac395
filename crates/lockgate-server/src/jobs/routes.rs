//! The `/v1/jobs` handlers.

use super::JobOp;
use crate::error::ApiError;
use crate::http::{ok, poll_timeout, ApiResult, AppState, Auth, JobIdPath, JsonBody, NoQuery, Q};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{
    ExplainView, FinishRequest, JobList, JobQuery, JobSetRequest, JobView, LeaseRequest,
    SubmitRequest,
};
use lockgate_core::job::JobState;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    from: String,
    #[serde(default)]
    timeout_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelQuery {
    #[serde(default)]
    force: Option<bool>,
}

/// The job routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/wait", get(wait))
        .route("/v1/jobs/{id}/explain", get(explain))
        .route("/v1/jobs/{id}/heartbeat", post(heartbeat))
        .route("/v1/jobs/{id}/prepared", post(prepared))
        .route("/v1/jobs/{id}/finish", post(finish))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/set", post(set))
        .route("/v1/jobs/{id}/retry", post(retry))
}

async fn set(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<JobSetRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Set(id, req, r)).await?)
}

async fn retry(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Retry(id, r)).await?)
}

async fn submit(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<SubmitRequest>,
) -> ApiResult<JobView> {
    let s = st.lp.ask(p, |r| JobOp::Submit(Box::new(req), r)).await?;
    let status = if s.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(s.job)))
}

async fn list(State(st): State<AppState>, Auth(p): Auth, Q(q): Q<JobQuery>) -> ApiResult<JobList> {
    ok(st.lp.ask(p, |r| JobOp::List(q, r)).await?)
}

async fn show(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Get(id, r)).await?)
}

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
    // Dropping the wait at the timeout is harmless: a wait changes nothing.
    let waited = st
        .lp
        .ask(p.clone(), |reply| JobOp::Wait { id, from, reply });
    match tokio::time::timeout(timeout, waited).await {
        Ok(r) => ok(r?),
        Err(_) => ok(st.lp.ask(p, |r| JobOp::Get(id, r)).await?),
    }
}

async fn explain(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
) -> ApiResult<ExplainView> {
    ok(st.lp.ask(p, |r| JobOp::Explain(id, r)).await?)
}

async fn heartbeat(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<LeaseRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Heartbeat(id, req.token, r)).await?)
}

async fn prepared(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<LeaseRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Prepared(id, req.token, r)).await?)
}

async fn finish(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(req): JsonBody<FinishRequest>,
) -> ApiResult<JobView> {
    ok(st.lp.ask(p, |r| JobOp::Finish(id, req, r)).await?)
}

async fn cancel(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<CancelQuery>,
    JobIdPath(id): JobIdPath,
) -> ApiResult<JobView> {
    let force = q.force.unwrap_or(false);
    ok(st.lp.ask(p, |r| JobOp::Cancel(id, force, r)).await?)
}
