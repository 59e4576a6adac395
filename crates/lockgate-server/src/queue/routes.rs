//! The `/v1/pauses` handlers.

use super::QueueOp;
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, JsonBody, NoQuery};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use lockgate_api::{PauseList, PauseRequest, PauseView, Resumed};

/// The pause routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(pause, list, resume, resume_all))]
pub(crate) struct ApiDoc;

/// The pause routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/pauses", post(pause).get(list).delete(resume_all))
        .route("/v1/pauses/{id}", delete(resume))
}

#[utoipa::path(post, path = "/v1/pauses", tag = "queue", request_body = PauseRequest,
    responses((status = 201, description = "The pause (admin): nothing it matches is admitted until it is resumed or its `until` passes", body = PauseView)))]
async fn pause(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<PauseRequest>,
) -> ApiResult<PauseView> {
    let view = st.lp.ask(p, |r| QueueOp::Pause(req, r)).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(get, path = "/v1/pauses", tag = "queue",
    responses((status = 200, description = "The active pauses", body = PauseList)))]
async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<PauseList> {
    ok(st.lp.ask(p, QueueOp::List).await?)
}

#[utoipa::path(delete, path = "/v1/pauses/{id}", tag = "queue", params(("id" = u64, Path, description = "The pause's id")),
    responses((status = 200, description = "The pause, resumed (admin)", body = PauseView)))]
async fn resume(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<PauseView> {
    let id: u64 = id.parse().map_err(|_| {
        ApiError::invalid("id", format!("expected a pause id (a number), got {id:?}"))
    })?;
    ok(st.lp.ask(p, |r| QueueOp::Resume(id, r)).await?)
}

#[utoipa::path(delete, path = "/v1/pauses", tag = "queue",
    responses((status = 200, description = "Every pause, resumed (admin)", body = Resumed)))]
async fn resume_all(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<Resumed> {
    ok(st.lp.ask(p, QueueOp::ResumeAll).await?)
}
