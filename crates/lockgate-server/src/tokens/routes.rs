//! The `/v1/tokens` handlers.

use super::{Revoked, TokenOp};
use crate::http::{ok, ApiResult, AppState, Auth, JsonBody, NoQuery};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use lockgate_api::{TokenCreate, TokenCreated, TokenInfo};

/// The token routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/tokens", post(create).get(list))
        .route("/v1/tokens/{name}", delete(revoke))
}

async fn create(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<TokenCreate>,
) -> ApiResult<TokenCreated> {
    let created = st.lp.ask(p, |r| TokenOp::Create(req, r)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<Vec<TokenInfo>> {
    ok(st.lp.ask(p, TokenOp::List).await?)
}

async fn revoke(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<Revoked> {
    ok(st.lp.ask(p, |r| TokenOp::Revoke(name, r)).await?)
}
