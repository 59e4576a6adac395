//! `GET /v1/audit` (admins only).

use super::AuditOp;
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, Q};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use lockgate_api::AuditList;
use lockgate_store::AuditFilter;
use serde::Deserialize;

/// Entries per page unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 100;

/// Largest page.
const MAX_LIMIT: usize = 1000;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    /// Only entries at or after this time (RFC 3339).
    #[serde(default)]
    since: Option<String>,
    /// Only this token name's entries.
    #[serde(default)]
    principal: Option<String>,
    /// Page size (default 100, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
    /// Only entries with a larger `seq` (the cursor: the last `seq` of the previous page).
    #[serde(default)]
    after: Option<u64>,
}

/// The audit routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list))]
pub(crate) struct ApiDoc;

/// The audit routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/audit", get(list))
}

#[utoipa::path(get, path = "/v1/audit", tag = "audit", params(AuditQuery),
    responses((status = 200, description = "Audit entries after `after`, oldest first (admins only)", body = AuditList)))]
async fn list(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<AuditQuery>,
) -> ApiResult<AuditList> {
    let since = match &q.since {
        Some(t) => Some(lockgate_api::time::parse(t).map_err(|m| {
            ApiError::invalid("since", format!("since must be an RFC 3339 time: {m}"))
        })?),
        None => None,
    };
    let filter = AuditFilter {
        after: q.after.unwrap_or(0),
        since,
        principal: q.principal,
        limit: q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
    };
    ok(st.lp.ask(p, |r| AuditOp::List(filter, r)).await?)
}
