//! The `/v1/policy` handlers.

use super::PolicyOp;
use crate::error::{policy_error, ApiError};
use crate::http::{ok, ApiResult, AppState, Auth, NoQuery, Q};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, ETAG, IF_MATCH};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use lockgate_api::{ErrorCode, PolicyAnswer, Role};
use lockgate_core::Policy;
use serde::Deserialize;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PolicyQuery {
    /// Validate and diff only; apply nothing.
    #[serde(default)]
    dry_run: Option<bool>,
    /// Accept a policy that removes every limit.
    #[serde(default)]
    allow_unlimited: Option<bool>,
}

/// The policy routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(show, put))]
pub(crate) struct ApiDoc;

/// The policy routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/policy", get(show).put(put))
}

#[utoipa::path(get, path = "/v1/policy", tag = "policy",
    responses((status = 200, description = "The active policy; its digest is also the `ETag`", body = lockgate_api::PolicyView,
        headers(("ETag" = String, description = "The digest, quoted")))))]
/// The active policy, its digest also as the `ETag`.
async fn show(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
) -> Result<impl IntoResponse, ApiError> {
    let view = st.lp.ask(p, PolicyOp::Get).await?;
    let mut headers = HeaderMap::new();
    if let Ok(tag) = HeaderValue::from_str(&format!("\"{}\"", view.digest)) {
        headers.insert(ETAG, tag);
    }
    Ok((headers, Json(view)))
}

/// Whether the body is JSON (by `Content-Type`, else by its first character).
///
/// # Errors
/// 415 for a type that is neither JSON, TOML nor text.
fn is_json(headers: &HeaderMap, text: &str) -> Result<bool, ApiError> {
    let ctype = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let json = if ctype.is_empty() {
        text.trim_start().starts_with('{')
    } else {
        ctype.contains("json")
    };
    if !json && !ctype.is_empty() && !ctype.contains("toml") && !ctype.contains("text/plain") {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Type {ctype:?}: send application/toml or application/json"),
        ));
    }
    Ok(json)
}

#[utoipa::path(put, path = "/v1/policy", tag = "policy", params(PolicyQuery),
    request_body(description = "The policy document (docs/policy.md), as TOML or JSON",
        content((String = "application/toml"), (Object = "application/json"))),
    params(("If-Match" = Option<String>, Header, description = "Apply only if the active policy's digest is this one (412 otherwise)")),
    responses((status = 200, description = "Applied (or, with `dry_run`, what would change)", body = PolicyAnswer)))]
async fn put(
    State(st): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    Q(q): Q<PolicyQuery>,
    body: Bytes,
) -> ApiResult<PolicyAnswer> {
    p.require(&[Role::Admin], "change the policy")?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("the policy document is not UTF-8"))?;
    let json = is_json(&headers, text)?;
    let parsed = if json {
        Policy::from_json(text)
    } else {
        Policy::from_toml(text, None)
    };
    let policy = parsed.map_err(policy_error)?;
    let text = if json {
        policy.to_toml_string()
    } else {
        text.to_string()
    };
    let if_match = headers
        .get(IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let dry_run = q.dry_run.unwrap_or(false);
    let answer = st
        .lp
        .ask(p, |reply| PolicyOp::Put {
            allow_unlimited: q.allow_unlimited.unwrap_or(false),
            policy: Box::new(policy),
            text,
            if_match,
            dry_run,
            reply,
        })
        .await?;
    ok(answer)
}
