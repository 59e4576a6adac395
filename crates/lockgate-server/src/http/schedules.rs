//! `GET/POST /v1/schedules`, `GET/DELETE /v1/schedules/{name}` (design `schedules.md`).
//!
//! Handlers parse and authenticate, then hand a [`ScheduleOp`] to the event loop.

use super::{ask, respond, AppState, Auth, Q};
use crate::error::parse_json;
use crate::event_loop::schedules::ScheduleOp;
use crate::event_loop::Op;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use lockgate_api::ScheduleRequest;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShowQuery {
    /// History entries to show (default 50, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
}

/// The schedule routes, merged into the API router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/schedules", get(list).post(create))
        .route("/v1/schedules/{name}", get(show).delete(remove))
}

async fn list(State(st): State<AppState>, Auth(p): Auth) -> Response {
    respond(ask(&st, p, Op::Schedule(ScheduleOp::List)).await)
}

async fn create(State(st): State<AppState>, Auth(p): Auth, body: Bytes) -> Response {
    match parse_json::<ScheduleRequest>(&body) {
        Ok(req) => respond(ask(&st, p, Op::Schedule(ScheduleOp::Create(Box::new(req)))).await),
        Err(e) => e.into_response(),
    }
}

async fn show(
    State(st): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    Q(q): Q<ShowQuery>,
) -> Response {
    respond(ask(&st, p, Op::Schedule(ScheduleOp::Get(name, q.limit))).await)
}

async fn remove(State(st): State<AppState>, Auth(p): Auth, Path(name): Path<String>) -> Response {
    respond(ask(&st, p, Op::Schedule(ScheduleOp::Delete(name))).await)
}
