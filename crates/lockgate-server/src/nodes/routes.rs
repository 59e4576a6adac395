//! The `/v1/nodes` handlers.

use super::{may_manage_node, Acknowledged, NodeOp, Removed};
use crate::error::parse_json;
use crate::http::{ok, parse_job_id, poll_timeout, ApiResult, AppState, Auth, NoQuery, Q};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::Router;
use lockgate_api::{AssignmentList, NodeList, NodeRegister, NodeView};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    #[serde(default)]
    timeout_s: Option<f64>,
}

/// The node routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/nodes", get(list))
        .route("/v1/nodes/{name}", get(show).put(put).delete(remove))
        .route("/v1/nodes/{name}/heartbeat", post(heartbeat))
        .route("/v1/nodes/{name}/cordon", post(cordon))
        .route("/v1/nodes/{name}/uncordon", post(uncordon))
        .route("/v1/nodes/{name}/assignments", get(assignments))
        .route("/v1/nodes/{name}/assignments/{job}/ack", post(ack))
}

async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<NodeList> {
    ok(st.lp.ask(p, NodeOp::List).await?)
}

async fn show(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Get(name, r)).await?)
}

/// An empty body registers a node with nothing (no labels, resources or kinds).
async fn put(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<NodeView> {
    let reg: NodeRegister = if body.iter().all(u8::is_ascii_whitespace) {
        NodeRegister::default()
    } else {
        parse_json(&body)?
    };
    ok(st.lp.ask(p, |r| NodeOp::Put(name, reg, r)).await?)
}

async fn remove(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<Removed> {
    ok(st.lp.ask(p, |r| NodeOp::Delete(name, r)).await?)
}

async fn heartbeat(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Heartbeat(name, r)).await?)
}

async fn cordon(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Cordon(name, true, r)).await?)
}

async fn uncordon(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Cordon(name, false, r)).await?)
}

async fn assignments(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    Q(q): Q<PollQuery>,
) -> ApiResult<AssignmentList> {
    let timeout = poll_timeout(q.timeout_s)?;
    // Refuse a foreign node before waiting: a short poll must not time out into an empty
    // answer before the loop's refusal arrives.
    may_manage_node(&p, &name)?;
    // Dropping the poll at the timeout is harmless: asking for assignments changes nothing.
    let polled = st.lp.ask(p, |r| NodeOp::Assignments(name, r));
    match tokio::time::timeout(timeout, polled).await {
        Ok(r) => ok(r?),
        Err(_) => ok(AssignmentList {
            assignments: vec![],
        }),
    }
}

async fn ack(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path((name, job)): Path<(String, String)>,
) -> ApiResult<Acknowledged> {
    let id = parse_job_id(&job)?;
    ok(st.lp.ask(p, |r| NodeOp::Ack(name, id, r)).await?)
}
