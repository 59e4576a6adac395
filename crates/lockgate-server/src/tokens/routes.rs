//! The `/v1/tokens` handlers.

use super::{Revoked, TokenOp};
use crate::http::{ok, ApiResult, AppState, Auth, JsonBody, NoQuery};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use lockgate_api::{TokenCreate, TokenCreated, TokenInfo};

/// The token routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(create, list, revoke))]
pub(crate) struct ApiDoc;

/// The token routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/tokens", post(create).get(list))
        .route("/v1/tokens/{name}", delete(revoke))
}

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = TokenCreate,
    responses((status = 201, description = "Created; the only answer that shows the secret", body = TokenCreated)))]
async fn create(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    JsonBody(req): JsonBody<TokenCreate>,
) -> ApiResult<TokenCreated> {
    let created = st.lp.ask(p, |r| TokenOp::Create(req, r)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens",
    responses((status = 200, description = "Every token, without secrets", body = Vec<TokenInfo>)))]
async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<Vec<TokenInfo>> {
    ok(st.lp.ask(p, TokenOp::List).await?)
}

#[utoipa::path(delete, path = "/v1/tokens/{name}", tag = "tokens", params(("name" = String, Path, description = "The token's name")),
    responses((status = 200, description = "Revoked", body = Revoked)))]
async fn revoke(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<Revoked> {
    ok(st.lp.ask(p, |r| TokenOp::Revoke(name, r)).await?)
}
