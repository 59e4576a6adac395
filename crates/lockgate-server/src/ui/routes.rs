//! The dashboard's handlers: its pages and assets, sign-in and sign-out, the session, the
//! one-time codes and the two read endpoints the pages need beyond the ordinary API.

use super::pages::{self, Page};
use super::session::{self, check_csrf, check_same_origin, clear_cookie, set_cookie};
use super::{OccupancyQuery, UiOp};
use crate::auth::{self, Principal};
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, NoQuery, Q};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{ErrorCode, Role, UiCode, UiOccupancy, UiOverview, UiPolicy, UiSession};

/// The dashboard routes' part of the OpenAPI document (list every handler of [`routes`]).
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(index, asset, login, logout, whoami, code, overview, occupancy, throughput, policy_toml),
    tags((name = "ui", description = "The dashboard at /ui/ (docs/dashboard.md)"))
)]
pub(crate) struct ApiDoc;

/// The dashboard routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui/", get(index))
        .route("/ui/assets/{file}", get(asset))
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/session", get(whoami))
        .route("/v1/ui/codes", post(code))
        .route("/v1/ui/overview", get(overview))
        .route("/v1/ui/occupancy", get(occupancy))
        .route("/v1/ui/throughput", get(throughput))
        .route("/v1/ui/policy", get(policy_toml))
}

/// The sign-in form (`application/x-www-form-urlencoded`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct LoginForm {
    /// An API token of any role, or a one-time sign-in code.
    token: String,
}

/// The sign-out form (`application/x-www-form-urlencoded`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct LogoutForm {
    /// The session's CSRF token (`GET /ui/session`); needed only with a live session
    /// (without one there is nothing to end).
    csrf: Option<String>,
}

/// `text/html` with the dashboard's security headers.
fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    pages::security_headers(h);
    r.extensions_mut().insert(crate::http::shape::HtmlPage);
    r
}

/// 303 to `/ui/` with a `Set-Cookie`.
fn back_to_ui(cookie: String) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    let h = r.headers_mut();
    h.insert(LOCATION, HeaderValue::from_static("/ui/"));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        h.insert(SET_COOKIE, v);
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The live session of a request's cookie, if any.
fn live_session(st: &AppState, headers: &HeaderMap) -> Option<(String, session::Session)> {
    let id = session::cookie(headers)?;
    st.sessions.get(&st.tokens, id).map(|s| (id.to_string(), s))
}

#[utoipa::path(get, path = "/ui/", tag = "ui", security(()),
    responses((status = 200, description = "The dashboard with a live session, else the sign-in page",
        body = String, content_type = "text/html")))]
async fn index(State(st): State<AppState>, _: NoQuery, headers: HeaderMap) -> Response {
    match live_session(&st, &headers) {
        Some((_, s)) => html(StatusCode::OK, pages::app(&s.csrf)),
        None => html(StatusCode::OK, pages::login(None)),
    }
}

#[utoipa::path(get, path = "/ui/assets/{file}", tag = "ui", security(()),
    params(("file" = String, Path, description = "An asset's file name (app.js, app.css, ...)")),
    responses((status = 200, description = "The embedded file, with its content type", body = String)))]
async fn asset(_: NoQuery, Path(file): Path<String>) -> Result<Response, ApiError> {
    let Some(Page {
        content_type, body, ..
    }) = pages::asset(&file)
    else {
        return Err(ApiError::not_found(format!("no dashboard asset {file:?}")));
    };
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    pages::security_headers(h);
    Ok(r)
}

/// The fields of a form body; 415 for a body of another type.
fn form_fields(headers: &HeaderMap, body: &Bytes) -> Result<Vec<(String, String)>, ApiError> {
    let ct = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/x-www-form-urlencoded") {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("expected a form (application/x-www-form-urlencoded), got {ct:?}"),
        ));
    }
    Ok(form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim())
}

#[utoipa::path(post, path = "/ui/login", tag = "ui", security(()),
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Signed in: `Set-Cookie: lockgate_session=...` and `Location: /ui/`"),
        (status = 401, description = "Not a valid token or code: the sign-in page with the error",
            body = String, content_type = "text/html")))]
async fn login(
    State(st): State<AppState>,
    _: NoQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_same_origin(&headers)?;
    let fields = form_fields(&headers, &body)?;
    let given = field(&fields, "token").unwrap_or("");
    let signed: Option<(Principal, String)> = if given.is_empty() {
        None
    } else if let Some(p) = st.tokens.lookup(given) {
        Some((p, auth::hash(given)))
    } else {
        st.sessions.take_code(&st.tokens, given)
    };
    let Some((principal, token_hash)) = signed else {
        let why = if given.is_empty() {
            "Enter a token or a sign-in code."
        } else {
            "That is not a valid token, or the code was used or has expired."
        };
        return Ok(html(StatusCode::UNAUTHORIZED, pages::login(Some(why))));
    };
    let (id, _) = st.sessions.start(principal, token_hash);
    Ok(back_to_ui(set_cookie(&id, st.sessions.secure)))
}

#[utoipa::path(post, path = "/ui/logout", tag = "ui", security(()),
    request_body(content = LogoutForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 303, description = "Signed out (the session ends on the server) and back to /ui/")))]
async fn logout(
    State(st): State<AppState>,
    _: NoQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Another site's form must not even clear the cookie (a forced sign-out).
    check_same_origin(&headers)?;
    let fields = form_fields(&headers, &body)?;
    if let Some((id, s)) = live_session(&st, &headers) {
        check_csrf(&Method::POST, &headers, &s, field(&fields, "csrf"))?;
        st.sessions.end(&id);
    }
    Ok(back_to_ui(clear_cookie(st.sessions.secure)))
}

#[utoipa::path(get, path = "/ui/session", tag = "ui", security(()),
    responses((status = 200, description = "The session of the request's cookie (401 without one)", body = UiSession)))]
async fn whoami(
    State(st): State<AppState>,
    _: NoQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (_, s) = live_session(&st, &headers)
        .ok_or_else(|| ApiError::unauthorized("no dashboard session: sign in at /ui/"))?;
    let mut r = Json(UiSession {
        name: s.principal.name,
        role: s.principal.role,
        expires: lockgate_api::time::format(lockgate_core::Timestamp(s.expires_ms)),
        csrf: s.csrf,
    })
    .into_response();
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// The SHA-256 of the token behind a request: its bearer token's, or its session's.
fn credential_hash(st: &AppState, headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    match bearer {
        Some(t) => Some(auth::hash(t)),
        None => live_session(st, headers).map(|(_, s)| s.token_hash),
    }
}

#[utoipa::path(post, path = "/v1/ui/codes", tag = "ui",
    responses((status = 201, description = "A one-time sign-in code for the caller, valid 10 minutes (admin)", body = UiCode)))]
async fn code(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    headers: HeaderMap,
) -> ApiResult<UiCode> {
    p.require(&[Role::Admin], "make dashboard sign-in codes")?;
    let hash =
        credential_hash(&st, &headers).ok_or_else(|| ApiError::unauthorized("no credentials"))?;
    let (code, expires_ms) = st.sessions.new_code(p, hash);
    Ok((
        StatusCode::CREATED,
        Json(UiCode {
            code,
            expires: lockgate_api::time::format(lockgate_core::Timestamp(expires_ms)),
        }),
    ))
}

#[utoipa::path(get, path = "/v1/ui/overview", tag = "ui",
    responses((status = 200, description = "Scopes with their split by state, the queue's depth by kind and owner, the oldest waiting job", body = UiOverview)))]
async fn overview(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<UiOverview> {
    ok(st.lp.ask(p, UiOp::Overview).await?)
}

#[utoipa::path(get, path = "/v1/ui/occupancy", tag = "ui", params(OccupancyQuery),
    responses((status = 200, description = "Each scope's units in use over the last hours, replayed from the event log, and waits by kind (admin, viewer)", body = UiOccupancy)))]
async fn occupancy(
    State(st): State<AppState>,
    Q(q): Q<OccupancyQuery>,
    Auth(p): Auth,
) -> ApiResult<UiOccupancy> {
    ok(st.lp.ask(p, |r| UiOp::Occupancy(q, r)).await?)
}

#[utoipa::path(get, path = "/v1/ui/throughput", tag = "ui",
    responses((status = 200, description = "Bytes per second the admitted jobs moved over the last hour, per scope and per node, with each node's pressure (admin, viewer)", body = lockgate_api::UiThroughput)))]
async fn throughput(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
) -> ApiResult<lockgate_api::UiThroughput> {
    ok(st.lp.ask(p, UiOp::Throughput).await?)
}

#[utoipa::path(get, path = "/v1/ui/policy", tag = "ui",
    responses((status = 200, description = "The active policy as TOML, with its digest", body = UiPolicy)))]
async fn policy_toml(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<UiPolicy> {
    let view = st.lp.ask(p, crate::policy::PolicyOp::Get).await?;
    let policy = lockgate_core::Policy::from_json(&view.policy.to_string())
        .map_err(|e| ApiError::internal(format!("the active policy does not read back: {e}")))?;
    ok(UiPolicy {
        digest: view.digest,
        toml: policy.to_toml_string(),
    })
}
