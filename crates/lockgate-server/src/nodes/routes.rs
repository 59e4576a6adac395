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

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    /// Longest wait in seconds (default 30, at most 300).
    #[serde(default)]
    #[param(minimum = 0)]
    timeout_s: Option<f64>,
}

/// The node routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list, show, put, remove, heartbeat, cordon, uncordon, assignments, ack))]
pub(crate) struct ApiDoc;

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

#[utoipa::path(get, path = "/v1/nodes", tag = "nodes",
    responses((status = 200, description = "Every node, by name", body = NodeList)))]
async fn list(State(st): State<AppState>, _: NoQuery, Auth(p): Auth) -> ApiResult<NodeList> {
    ok(st.lp.ask(p, NodeOp::List).await?)
}

#[utoipa::path(get, path = "/v1/nodes/{name}", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    responses((status = 200, description = "The node", body = NodeView)))]
async fn show(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Get(name, r)).await?)
}

#[utoipa::path(put, path = "/v1/nodes/{name}", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    request_body(content = Option<NodeRegister>, description = "What the node has; an empty body registers it with nothing"),
    responses((status = 200, description = "Registered (or updated)", body = NodeView)))]
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

#[utoipa::path(delete, path = "/v1/nodes/{name}", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    responses((status = 200, description = "Removed", body = Removed)))]
async fn remove(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<Removed> {
    ok(st.lp.ask(p, |r| NodeOp::Delete(name, r)).await?)
}

#[utoipa::path(post, path = "/v1/nodes/{name}/heartbeat", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    responses((status = 200, description = "The node is seen", body = NodeView)))]
async fn heartbeat(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Heartbeat(name, r)).await?)
}

#[utoipa::path(post, path = "/v1/nodes/{name}/cordon", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    responses((status = 200, description = "Cordoned: no new admissions on it", body = NodeView)))]
async fn cordon(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Cordon(name, true, r)).await?)
}

#[utoipa::path(post, path = "/v1/nodes/{name}/uncordon", tag = "nodes", params(("name" = String, Path, description = "The node's name")),
    responses((status = 200, description = "Uncordoned", body = NodeView)))]
async fn uncordon(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    ok(st.lp.ask(p, |r| NodeOp::Cordon(name, false, r)).await?)
}

#[utoipa::path(get, path = "/v1/nodes/{name}/assignments", tag = "nodes", params(("name" = String, Path, description = "The node's name"), PollQuery),
    responses((status = 200, description = "Jobs admitted on the node that its agent has not acknowledged; empty when the poll times out", body = AssignmentList)))]
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
    let _slot = st.open.take(crate::longlived::Kind::Poll, &p)?;
    // Dropping the poll at the timeout is harmless: asking for assignments changes nothing.
    let polled = st.lp.ask(p, |r| NodeOp::Assignments(name, r));
    match tokio::time::timeout(timeout, polled).await {
        Ok(r) => ok(r?),
        Err(_) => ok(AssignmentList {
            assignments: vec![],
        }),
    }
}

#[utoipa::path(post, path = "/v1/nodes/{name}/assignments/{job}/ack", tag = "nodes",
    params(("name" = String, Path, description = "The node's name"), ("job" = u64, Path, description = "The job's id")),
    responses((status = 200, description = "The agent took the assignment", body = Acknowledged)))]
async fn ack(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path((name, job)): Path<(String, String)>,
) -> ApiResult<Acknowledged> {
    let id = parse_job_id(&job)?;
    ok(st.lp.ask(p, |r| NodeOp::Ack(name, id, r)).await?)
}
