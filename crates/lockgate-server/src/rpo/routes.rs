//! The `/v1/rpo` handlers.

use super::RpoOp;
use crate::http::{ok, ApiResult, AppState, Auth, NoQuery};
use axum::extract::{Path, State};
use axum::routing::{delete, get};
use axum::Router;
use lockgate_api::{RpoForgotten, RpoList};

/// The RPO routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list, forget, forget_only))]
pub(crate) struct ApiDoc;

/// The RPO routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/rpo", get(list))
        .route("/v1/rpo/{rule}", delete(forget_only))
        .route("/v1/rpo/{rule}/{value}", delete(forget))
}

#[utoipa::path(get, path = "/v1/rpo", tag = "rpo",
    responses((status = 200, description = "Every `[[rpo]]` rule with each value's last success, age and status (any token)", body = RpoList)))]
async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<RpoList> {
    ok(st.lp.ask(p, RpoOp::List).await?)
}

#[utoipa::path(delete, path = "/v1/rpo/{rule}/{value}", tag = "rpo",
    params(("rule" = String, Path, description = "The rule's name"),
           ("value" = String, Path, description = "The value: its values comma-joined in `per` order (the metrics' `value` label), percent-encoded")),
    responses((status = 200, description = "The value, no longer tracked until its next job (admin)", body = RpoForgotten)))]
async fn forget(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path((rule, value)): Path<(String, String)>,
) -> ApiResult<RpoForgotten> {
    ok(st
        .lp
        .ask(p, |r| RpoOp::Forget(rule, Some(value), r))
        .await?)
}

#[utoipa::path(delete, path = "/v1/rpo/{rule}", tag = "rpo",
    params(("rule" = String, Path, description = "The rule's name (a rule without `per`: its one value)")),
    responses((status = 200, description = "The rule's one value, no longer tracked until its next job (admin)", body = RpoForgotten)))]
async fn forget_only(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(rule): Path<String>,
) -> ApiResult<RpoForgotten> {
    ok(st.lp.ask(p, |r| RpoOp::Forget(rule, None, r)).await?)
}
