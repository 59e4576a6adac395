//! The `/v1/pauses` handlers.

use super::QueueOp;
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, JsonBody, NoQuery};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use lockgate_api::{PauseList, PauseRequest, PauseView, Resumed};

/// The pause routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/pauses", post(pause).get(list).delete(resume_all))
        .route("/v1/pauses/{id}", delete(resume))
}

async fn pause(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<PauseRequest>,
) -> ApiResult<PauseView> {
    let view = st.lp.ask(p, |r| QueueOp::Pause(req, r)).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<PauseList> {
    ok(st.lp.ask(p, QueueOp::List).await?)
}

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

async fn resume_all(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<Resumed> {
    ok(st.lp.ask(p, QueueOp::ResumeAll).await?)
}
