//! `GET/POST /v1/schedules`, `GET/DELETE /v1/schedules/{name}` (design `schedules.md`).

use super::ScheduleOp;
use crate::http::{ok, ApiResult, AppState, Auth, JsonBody, NoQuery, Q};
use crate::nodes::Removed;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use lockgate_api::{ScheduleList, ScheduleRequest, ScheduleView};
use serde::Deserialize;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ShowQuery {
    /// History entries to show (default 50, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
}

/// The schedule routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list, create, show, remove))]
pub(crate) struct ApiDoc;

/// The schedule routes.
pub(crate) fn routes() -> Router<crate::http::AppState> {
    Router::new()
        .route("/v1/schedules", get(list).post(create))
        .route("/v1/schedules/{name}", get(show).delete(remove))
}

#[utoipa::path(get, path = "/v1/schedules", tag = "schedules",
    responses((status = 200, description = "Every schedule, by name", body = ScheduleList)))]
async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<ScheduleList> {
    ok(st.lp.ask(p, ScheduleOp::List).await?)
}

#[utoipa::path(post, path = "/v1/schedules", tag = "schedules", request_body = ScheduleRequest,
    responses((status = 201, description = "Created", body = ScheduleView)))]
async fn create(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<ScheduleRequest>,
) -> ApiResult<ScheduleView> {
    let view = st
        .lp
        .ask(p, |r| ScheduleOp::Create(Box::new(req), r))
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(get, path = "/v1/schedules/{name}", tag = "schedules", params(("name" = String, Path, description = "The schedule's name"), ShowQuery),
    responses((status = 200, description = "The schedule with its history", body = ScheduleView)))]
async fn show(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    Q(q): Q<ShowQuery>,
) -> ApiResult<ScheduleView> {
    ok(st.lp.ask(p, |r| ScheduleOp::Get(name, q.limit, r)).await?)
}

#[utoipa::path(delete, path = "/v1/schedules/{name}", tag = "schedules", params(("name" = String, Path, description = "The schedule's name")),
    responses((status = 200, description = "Removed (an API schedule; a policy one is 409)", body = Removed)))]
async fn remove(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<Removed> {
    ok(st.lp.ask(p, |r| ScheduleOp::Delete(name, r)).await?)
}
