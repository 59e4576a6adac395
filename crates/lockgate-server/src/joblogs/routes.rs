//! The `/v1/jobs/{id}/logs` handlers.

use super::{LogOp, PAGE_LINES};
use crate::http::{ok, poll_timeout, ApiResult, AppState, Auth, JobIdPath, JsonBody, NoQuery, Q};
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use lockgate_api::{LogAccepted, LogBatch, LogPage};
use serde::Deserialize;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    /// Only lines after this line number (default 0: from the start); pass the last
    /// page's `next`.
    #[serde(default)]
    #[param(minimum = 0)]
    after: Option<u64>,
    /// At most this many lines (default and most 1000).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// Long-poll: when no line follows `after` and the job has not ended, wait up to this
    /// many seconds (at most 300) for one; absent: answer at once.
    #[serde(default)]
    #[param(minimum = 0)]
    timeout_s: Option<f64>,
}

/// The job log routes' part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(append, read))]
pub(crate) struct ApiDoc;

/// The job log routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/jobs/{id}/logs", post(append).get(read))
}

#[utoipa::path(post, path = "/v1/jobs/{id}/logs", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)")), request_body = LogBatch,
    responses((status = 200, description = "The lines are stored (by the job's current holder: its lease token, and a token that may act on the job)", body = LogAccepted)))]
async fn append(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JobIdPath(id): JobIdPath,
    JsonBody(batch): JsonBody<LogBatch>,
) -> ApiResult<LogAccepted> {
    ok(st.lp.ask(p, |r| LogOp::Append(id, batch, r)).await?)
}

#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs", params(("id" = u64, Path, description = "The job's id (a positive integer; anything else is 404)"), LogQuery),
    responses((status = 200, description = "One page of the job's output, for whoever may see the job", body = LogPage)))]
// The query is read before the id (a bad query wins over a bad id, as for `wait`).
async fn read(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<LogQuery>,
    JobIdPath(id): JobIdPath,
) -> ApiResult<LogPage> {
    let after = q.after.unwrap_or(0);
    let limit = q.limit.unwrap_or(PAGE_LINES).clamp(1, PAGE_LINES);
    let read = |wait| {
        move |reply| LogOp::Read {
            id,
            after,
            limit,
            wait,
            reply,
        }
    };
    let Some(timeout_s) = q.timeout_s else {
        return ok(st.lp.ask(p, read(false)).await?);
    };
    let timeout = poll_timeout(Some(timeout_s))?;
    let _slot = st.open.take(crate::longlived::Kind::Poll, &p)?;
    // Dropping the wait at the timeout is harmless: a read changes nothing.
    match tokio::time::timeout(timeout, st.lp.ask(p.clone(), read(true))).await {
        Ok(r) => ok(r?),
        Err(_) => ok(st.lp.ask(p, read(false)).await?),
    }
}
