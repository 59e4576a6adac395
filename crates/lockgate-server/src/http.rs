//! The HTTP side: the router that merges every feature's routes, what handlers share
//! ([`AppState`]), the extractors, and the few routes that belong to no feature
//! (`/healthz`, `/readyz`, `/metrics`, and `/v1/openapi.json` from [`crate::openapi`]).
//!
//! Handlers do no scheduling: they authenticate, parse and validate, send one typed
//! operation to the loop ([`LoopHandle::ask`]), pick the HTTP status and serialize the
//! typed answer. Long-polls hold only a oneshot receiver; the loop answers it when the
//! job changes (no polling). Every rejection is an [`ApiError`], so every error has the
//! one `{"error": {...}}` shape, and what axum or hyper would answer on their own
//! (a bad path encoding, a body over the limit, a long target) is reshaped by the layers
//! of [`shape`].
//!
//! Every query is read with [`Q`] into a struct with `deny_unknown_fields`, or refused
//! with [`NoQuery`] where an endpoint takes none: an unknown parameter is a 400 naming it.

use crate::auth::{authenticate, Principal, Tokens};
use crate::error::{parse_json, ApiError};
use crate::protocol::{LoopHandle, Op};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use lockgate_api::{ErrorCode, EventView};
use lockgate_core::JobId;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

pub mod shape;

/// Longest long-poll a client may ask for.
const MAX_POLL: Duration = Duration::from_secs(300);

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// To the event loop.
    pub lp: LoopHandle,
    /// Token table.
    pub tokens: Tokens,
    /// Committed events.
    pub events: broadcast::Sender<Arc<EventView>>,
    /// Turns true when the server starts shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// The store is open, the engine rebuilt, the API serving.
    pub ready: Arc<AtomicBool>,
    /// `--metrics-auth`: `/metrics` answers only a valid token (any role).
    pub metrics_auth: bool,
    /// The dashboard's sessions and sign-in codes ([`crate::ui::session`]).
    pub sessions: crate::ui::Sessions,
    /// Who leads (`GET /v1/cluster`): this replica's leadership, or a single server.
    pub cluster: crate::cluster::Membership,
    /// The streams and long-polls open, capped ([`crate::longlived`]).
    pub open: Arc<crate::longlived::Open>,
}

/// What a JSON handler returns.
pub type ApiResult<T> = Result<(axum::http::StatusCode, Json<T>), ApiError>;

/// 200 with `v`.
pub fn ok<T>(v: T) -> ApiResult<T> {
    Ok((axum::http::StatusCode::OK, Json(v)))
}

/// The authenticated caller: a bearer token, or else a dashboard session cookie (checked
/// for CSRF on a request that is not a read, [`crate::ui::session::session_principal`]).
pub struct Auth(pub Principal);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if header.is_none() {
            let (tokens, sessions) = (&state.tokens, &state.sessions);
            if let Some(p) = crate::ui::session::session_principal(
                sessions,
                tokens,
                &parts.method,
                &parts.headers,
            )? {
                return Ok(Auth(p));
            }
        }
        authenticate(&state.tokens, header).map(Auth)
    }
}

/// A query string, rejected with our error format: 400 `bad_request` naming an unknown
/// parameter, 422 `invalid_field` naming one with a bad value.
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(q.as_bytes()));
        serde_path_to_error::deserialize(de).map(Q).map_err(|e| {
            let path = e.path().to_string();
            let msg = e.into_inner().to_string();
            if let Some(name) = msg
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
            {
                return ApiError::bad_request(format!("unknown query parameter {name:?}: {msg}"))
                    .field(name);
            }
            ApiError::invalid(
                path.clone(),
                format!("invalid query parameter {path}: {msg}"),
            )
        })
    }
}

/// The query of an endpoint that takes no parameters: any parameter is a 400 naming it.
pub struct NoQuery;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Q::<NoParams>::from_request_parts(parts, state)
            .await
            .map(|_| NoQuery)
    }
}

/// A JSON body read with [`parse_json`]: 400 `malformed_json` for bad or empty JSON, 422
/// `invalid_field` naming the field for an unknown, missing or mistyped one.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        parse_json(&body)
            .map(JsonBody)
            .map_err(IntoResponse::into_response)
    }
}

/// Parses a job id path segment: 404 for anything but a positive integer.
///
/// # Errors
/// 404 `not_found` naming the text.
pub fn parse_job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::not_found(format!(
            "invalid job id {text:?}: ids are positive integers"
        ))
    })
}

/// The `{id}` of a `/v1/jobs/{id}/...` path.
pub struct JobIdPath(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobIdPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        parse_job_id(&text)
            .map(JobIdPath)
            .map_err(IntoResponse::into_response)
    }
}

/// The long-poll timeout of a `timeout_s` parameter (default 30 s, at most 300 s).
///
/// # Errors
/// 422 for a negative or non-finite number.
pub fn poll_timeout(t: Option<f64>) -> Result<Duration, ApiError> {
    let s = t.unwrap_or(30.0);
    if !s.is_finite() || s < 0.0 {
        return Err(ApiError::invalid(
            "timeout_s",
            format!("timeout_s must be a number of seconds >= 0, got {s}"),
        ));
    }
    Ok(Duration::from_secs_f64(s).min(MAX_POLL))
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Status {
    /// `ok` (health) or `ready` (readiness).
    status: &'static str,
}

/// The routes of no feature's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(healthz, readyz, metrics))]
pub(crate) struct ApiDoc;

/// The router: every feature's routes, plus health, readiness and metrics.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(crate::openapi::serve))
        .merge(crate::jobs::routes())
        .merge(crate::nodes::routes())
        .merge(crate::policy::routes())
        .merge(crate::tokens::routes())
        .merge(crate::events::routes())
        .merge(crate::schedules::routes())
        .merge(crate::queue::routes())
        .merge(crate::rpo::routes())
        .merge(crate::audit::routes())
        .merge(crate::joblogs::routes())
        .merge(crate::notify::routes())
        .merge(crate::forecast::routes())
        .merge(crate::ui::routes())
        .merge(crate::cluster::routes())
        .fallback(|| async { ApiError::not_found("no such endpoint (see api.md)") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this path",
            )
        })
        .with_state(state)
}

/// `app` (every route, the backups' included) with the audit layer
/// (`crate::audit::record`) on each route: every act that is not a read is recorded.
pub fn audited(app: Router, state: AppState) -> Router {
    app.route_layer(axum::middleware::from_fn_with_state(
        state,
        crate::audit::record,
    ))
}

/// `app` behind the layers of [`shape`]: every error in the one shape, 414 and 431 in it.
pub fn shaped(app: Router) -> Router {
    app.layer(axum::middleware::from_fn(shape::limit_request))
        .layer(axum::middleware::map_response(shape::shape_errors))
}

#[utoipa::path(get, path = "/healthz", tag = "server", security(()),
    responses((status = 200, description = "The process serves HTTP", body = Status)))]
async fn healthz(_: NoQuery) -> Json<Status> {
    Json(Status { status: "ok" })
}

#[utoipa::path(get, path = "/readyz", tag = "server", security(()),
    responses((status = 200, description = "The store is open and the API serving", body = Status)))]
async fn readyz(State(st): State<AppState>, _: NoQuery) -> Result<Json<Status>, ApiError> {
    if st.ready.load(Ordering::Acquire) && !*st.shutdown.borrow() && st.cluster.serves() {
        Ok(Json(Status { status: "ready" }))
    } else {
        Err(ApiError::unavailable("not ready"))
    }
}

/// The Prometheus text; with `--metrics-auth`, only for a valid token (any role).
#[utoipa::path(get, path = "/metrics", tag = "server", security((), ("bearer" = [])),
    responses((status = 200, description = "Prometheus text exposition (a token of any role with `--metrics-auth`)",
        body = String, content_type = "text/plain")))]
async fn metrics(
    State(st): State<AppState>,
    _: NoQuery,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if st.metrics_auth {
        let header = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        authenticate(&st.tokens, header)?;
    }
    let text = st.lp.ask(Principal::system(), Op::Metrics).await?;
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    ))
}
