//! The HTTP API (design `api.md`): routes, extractors and handlers.
//!
//! Handlers do no scheduling: they authenticate, parse and validate, then send one
//! [`Op`] to the event loop and turn its [`Reply`] into a response. Long-polls hold only a
//! oneshot receiver; the loop answers it when the job changes (no polling).

mod schedules;

use crate::auth::{authenticate, Principal, Tokens};
use crate::error::{parse_json, ApiError};
use crate::event_loop::{admin::visible, Answer, Msg, Op, Reply};
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{
    EventList, EventView, FinishRequest, JobQuery, LeaseRequest, NodeRegister, SubmitRequest,
    TokenCreate,
};
use lockgate_core::job::JobState;
use lockgate_core::{JobId, Policy};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Longest long-poll a client may ask for.
const MAX_POLL: Duration = Duration::from_secs(300);

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// To the event loop.
    pub tx: mpsc::Sender<Msg>,
    /// Token table.
    pub tokens: Tokens,
    /// Committed events.
    pub events: broadcast::Sender<Arc<EventView>>,
    /// Turns true when the server starts shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// The store is open, the engine rebuilt, the API serving.
    pub ready: Arc<AtomicBool>,
}

/// The authenticated caller.
pub struct Auth(pub Principal);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        authenticate(&state.tokens, header).map(Auth)
    }
}

/// A query string, rejected with our error format.
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(q.as_bytes()));
        serde_path_to_error::deserialize(de).map(Q).map_err(|e| {
            let path = e.path().to_string();
            let msg = e.into_inner().to_string();
            let field = msg
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string)
                .unwrap_or(path);
            ApiError::invalid(
                field.clone(),
                format!("invalid query parameter {field}: {msg}"),
            )
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    from: String,
    #[serde(default)]
    timeout_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelQuery {
    #[serde(default)]
    force: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    #[serde(default)]
    after: Option<u64>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyQuery {
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    #[serde(default)]
    timeout_s: Option<f64>,
}

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({"status": "ok"})) }),
        )
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/wait", get(wait))
        .route("/v1/jobs/{id}/explain", get(explain))
        .route("/v1/jobs/{id}/heartbeat", post(heartbeat))
        .route("/v1/jobs/{id}/prepared", post(prepared))
        .route("/v1/jobs/{id}/finish", post(finish))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/nodes", get(nodes))
        .route(
            "/v1/nodes/{name}",
            get(node_get).put(node_put).delete(node_delete),
        )
        .route("/v1/nodes/{name}/heartbeat", post(node_heartbeat))
        .route("/v1/nodes/{name}/cordon", post(cordon))
        .route("/v1/nodes/{name}/uncordon", post(uncordon))
        .route("/v1/nodes/{name}/assignments", get(assignments))
        .route("/v1/nodes/{name}/assignments/{job}/ack", post(ack))
        .route("/v1/policy", get(policy_get).put(policy_put))
        .route("/v1/tokens", post(token_create).get(token_list))
        .route("/v1/tokens/{name}", axum::routing::delete(token_revoke))
        .route("/v1/events", get(events))
        .route("/v1/events/stream", get(events_stream))
        .merge(schedules::routes())
        .fallback(|| async { ApiError::not_found("no such endpoint (see api.md)") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this path",
            )
        })
        .with_state(state)
}

/// Sends an operation to the loop and waits for its answer.
pub async fn ask(state: &AppState, principal: Principal, op: Op) -> Reply {
    let (tx, rx) = oneshot::channel();
    state
        .tx
        .send(Msg {
            principal,
            op,
            reply: tx,
        })
        .await
        .map_err(|_| ApiError::unavailable("the server is shutting down"))?;
    rx.await
        .map_err(|_| ApiError::unavailable("the server is shutting down"))?
}

fn respond(r: Reply) -> Response {
    match r {
        Ok(Answer::Json(status, v)) => (status, Json(v)).into_response(),
        Ok(Answer::Text(t)) => (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            t,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

fn job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::not_found(format!(
            "invalid job id {text:?}: ids are positive integers"
        ))
    })
}

async fn readyz(State(st): State<AppState>) -> Response {
    if st.ready.load(Ordering::Acquire) && !*st.shutdown.borrow() {
        Json(serde_json::json!({"status": "ready"})).into_response()
    } else {
        ApiError::unavailable("not ready").into_response()
    }
}

async fn metrics(State(st): State<AppState>) -> Response {
    respond(ask(&st, Principal::system(), Op::Metrics).await)
}

async fn submit(State(st): State<AppState>, Auth(p): Auth, body: Bytes) -> Response {
    let req: SubmitRequest = match parse_json(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    respond(ask(&st, p, Op::Submit(Box::new(req))).await)
}

async fn list(State(st): State<AppState>, Auth(p): Auth, Q(q): Q<JobQuery>) -> Response {
    respond(ask(&st, p, Op::List(q)).await)
}

async fn show(State(st): State<AppState>, Auth(p): Auth, Path(id): Path<String>) -> Response {
    match job_id(&id) {
        Ok(id) => respond(ask(&st, p, Op::Get(id)).await),
        Err(e) => e.into_response(),
    }
}

fn poll_timeout(t: Option<f64>) -> Result<Duration, ApiError> {
    let s = t.unwrap_or(30.0);
    if !s.is_finite() || s < 0.0 {
        return Err(ApiError::invalid(
            "timeout_s",
            format!("timeout_s must be a number of seconds >= 0, got {s}"),
        ));
    }
    Ok(Duration::from_secs_f64(s).min(MAX_POLL))
}

async fn wait(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Q(q): Q<WaitQuery>,
) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    let Some(from) = JobState::parse(&q.from) else {
        let all: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
        return ApiError::invalid(
            "from",
            format!(
                "unknown state {:?}: expected one of {}",
                q.from,
                all.join(", ")
            ),
        )
        .into_response();
    };
    let timeout = match poll_timeout(q.timeout_s) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let (tx, rx) = oneshot::channel();
    if st
        .tx
        .send(Msg {
            principal: p.clone(),
            op: Op::Wait { id, from },
            reply: tx,
        })
        .await
        .is_err()
    {
        return ApiError::unavailable("the server is shutting down").into_response();
    }
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(r)) => respond(r),
        Ok(Err(_)) => ApiError::unavailable("the server is shutting down").into_response(),
        Err(_) => respond(ask(&st, p, Op::Get(id)).await),
    }
}

async fn explain(State(st): State<AppState>, Auth(p): Auth, Path(id): Path<String>) -> Response {
    match job_id(&id) {
        Ok(id) => respond(ask(&st, p, Op::Explain(id)).await),
        Err(e) => e.into_response(),
    }
}

async fn lease_op(
    st: AppState,
    p: Principal,
    id: String,
    body: Bytes,
    make: fn(JobId, u64) -> Op,
) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    match parse_json::<LeaseRequest>(&body) {
        Ok(req) => respond(ask(&st, p, make(id, req.token)).await),
        Err(e) => e.into_response(),
    }
}

async fn heartbeat(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    lease_op(st, p, id, body, Op::Heartbeat).await
}

async fn prepared(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    lease_op(st, p, id, body, Op::Prepared).await
}

async fn finish(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    match parse_json::<FinishRequest>(&body) {
        Ok(req) => respond(ask(&st, p, Op::Finish(id, req)).await),
        Err(e) => e.into_response(),
    }
}

async fn cancel(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Q(q): Q<CancelQuery>,
) -> Response {
    match job_id(&id) {
        Ok(id) => respond(ask(&st, p, Op::Cancel(id, q.force.unwrap_or(false))).await),
        Err(e) => e.into_response(),
    }
}

async fn nodes(State(st): State<AppState>, Auth(p): Auth) -> Response {
    respond(ask(&st, p, Op::NodeList).await)
}

async fn node_get(State(st): State<AppState>, Auth(p): Auth, Path(name): Path<String>) -> Response {
    respond(ask(&st, p, Op::NodeGet(name)).await)
}

async fn node_put(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let reg: NodeRegister = if body.iter().all(u8::is_ascii_whitespace) {
        NodeRegister::default()
    } else {
        match parse_json(&body) {
            Ok(r) => r,
            Err(e) => return e.into_response(),
        }
    };
    respond(ask(&st, p, Op::NodePut(name, reg)).await)
}

async fn node_delete(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> Response {
    respond(ask(&st, p, Op::NodeDelete(name)).await)
}

async fn node_heartbeat(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> Response {
    respond(ask(&st, p, Op::NodeHeartbeat(name)).await)
}

async fn cordon(State(st): State<AppState>, Auth(p): Auth, Path(name): Path<String>) -> Response {
    respond(ask(&st, p, Op::Cordon(name, true)).await)
}

async fn uncordon(State(st): State<AppState>, Auth(p): Auth, Path(name): Path<String>) -> Response {
    respond(ask(&st, p, Op::Cordon(name, false)).await)
}

async fn assignments(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    Q(q): Q<PollQuery>,
) -> Response {
    let timeout = match poll_timeout(q.timeout_s) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    // Refuse a foreign node before waiting: a short poll must not time out into an empty
    // answer before the loop's refusal arrives.
    if let Err(e) = crate::event_loop::Loop::may_manage_node(&p, &name) {
        return e.into_response();
    }
    let (tx, rx) = oneshot::channel();
    if st
        .tx
        .send(Msg {
            principal: p,
            op: Op::Assignments(name),
            reply: tx,
        })
        .await
        .is_err()
    {
        return ApiError::unavailable("the server is shutting down").into_response();
    }
    let empty = || Json(serde_json::json!({"assignments": []})).into_response();
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Ok(Answer::Json(_, serde_json::Value::Null)))) => empty(),
        Ok(Ok(r)) => respond(r),
        Ok(Err(_)) => ApiError::unavailable("the server is shutting down").into_response(),
        Err(_) => empty(),
    }
}

async fn ack(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path((name, job)): Path<(String, String)>,
) -> Response {
    match job_id(&job) {
        Ok(id) => respond(ask(&st, p, Op::Ack(name, id)).await),
        Err(e) => e.into_response(),
    }
}

async fn policy_get(State(st): State<AppState>, Auth(p): Auth) -> Response {
    let r = ask(&st, p, Op::PolicyGet).await;
    let etag = match &r {
        Ok(Answer::Json(_, v)) => v
            .get("digest")
            .and_then(|d| d.as_str())
            .map(|d| format!("\"{d}\"")),
        _ => None,
    };
    let mut resp = respond(r);
    if let Some(e) = etag.and_then(|e| e.parse().ok()) {
        resp.headers_mut().insert(axum::http::header::ETAG, e);
    }
    resp
}

/// A policy validation error as a 422 naming the field and line.
pub fn policy_error(e: lockgate_core::policy::PolicyError) -> ApiError {
    let mut err = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_policy",
        e.to_string(),
    );
    if !e.field.is_empty() {
        err.field = Some(e.field.clone());
    }
    err.line = e.line;
    err
}

async fn policy_put(
    State(st): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    Q(q): Q<PolicyQuery>,
    body: Bytes,
) -> Response {
    if let Err(e) = p.require(&[lockgate_api::Role::Admin], "change the policy") {
        return e.into_response();
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return ApiError::bad_request("the policy document is not UTF-8").into_response();
    };
    let ctype = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_json = if ctype.is_empty() {
        text.trim_start().starts_with('{')
    } else {
        ctype.contains("json")
    };
    if !is_json && !ctype.is_empty() && !ctype.contains("toml") && !ctype.contains("text/plain") {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("Content-Type {ctype:?}: send application/toml or application/json"),
        )
        .into_response();
    }
    let parsed = if is_json {
        Policy::from_json(text)
    } else {
        Policy::from_toml(text, None)
    };
    let policy = match parsed {
        Ok(p) => p,
        Err(e) => return policy_error(e).into_response(),
    };
    let text = if is_json {
        policy.to_toml_string()
    } else {
        text.to_string()
    };
    let if_match = headers
        .get(axum::http::header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let op = Op::PolicyPut {
        policy: Box::new(policy),
        text,
        if_match,
        dry_run: q.dry_run.unwrap_or(false),
    };
    respond(ask(&st, p, op).await)
}

async fn token_create(State(st): State<AppState>, Auth(p): Auth, body: Bytes) -> Response {
    match parse_json::<TokenCreate>(&body) {
        Ok(req) => respond(ask(&st, p, Op::TokenCreate(req)).await),
        Err(e) => e.into_response(),
    }
}

async fn token_list(State(st): State<AppState>, Auth(p): Auth) -> Response {
    respond(ask(&st, p, Op::TokenList).await)
}

async fn token_revoke(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> Response {
    respond(ask(&st, p, Op::TokenRevoke(name)).await)
}

async fn events(State(st): State<AppState>, Auth(p): Auth, Q(q): Q<EventsQuery>) -> Response {
    let op = Op::Events {
        after: q.after.unwrap_or(0),
        limit: q.limit.unwrap_or(1000),
    };
    respond(ask(&st, p, op).await)
}

struct Stream {
    st: AppState,
    p: Principal,
    rx: broadcast::Receiver<Arc<EventView>>,
    last: u64,
    backlog: VecDeque<EventView>,
    catch_up: bool,
}

fn sse_event(ev: &EventView) -> SseEvent {
    SseEvent::default()
        .id(ev.seq.to_string())
        .data(serde_json::to_string(ev).expect("serializes"))
}

async fn events_stream(
    State(st): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    Q(q): Q<EventsQuery>,
) -> Response {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .or(q.after)
        .unwrap_or(0);
    let rx = st.events.subscribe();
    let state = Stream {
        st,
        p,
        rx,
        last,
        backlog: VecDeque::new(),
        catch_up: true,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(ev) = s.backlog.pop_front() {
                if ev.seq > s.last {
                    s.last = ev.seq;
                    return Some((Ok::<_, Infallible>(sse_event(&ev)), s));
                }
                continue;
            }
            if s.catch_up {
                s.catch_up = false;
                let page = 1000;
                match ask(
                    &s.st,
                    s.p.clone(),
                    Op::Events {
                        after: s.last,
                        limit: page,
                    },
                )
                .await
                {
                    Ok(Answer::Json(_, v)) => {
                        if let Ok(list) = serde_json::from_value::<EventList>(v) {
                            s.catch_up = list.events.len() == page;
                            s.backlog.extend(list.events);
                        }
                    }
                    _ => return None,
                }
                continue;
            }
            let mut shutdown = s.st.shutdown.clone();
            if *shutdown.borrow() {
                return None;
            }
            tokio::select! {
                r = s.rx.recv() => match r {
                    Ok(ev) => {
                        if ev.seq > s.last {
                            s.last = ev.seq;
                            if visible(&s.p, &ev) {
                                return Some((Ok(sse_event(&ev)), s));
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => s.catch_up = true,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = shutdown.changed() => return None,
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
