//! The gate every request of a replica passes (docs/api.md,
//! "Several servers").
//!
//! # Invariants
//! - **A standby acts on nothing**: [`gate`] answers every request but `/healthz`,
//!   `/metrics` and `/v1/cluster` with 503 `not_leader` naming the leader, before any
//!   handler runs, so a client may always send such a request again elsewhere.
//! - **Nothing is served before the term's loop is**: a replica that has won the lease
//!   but not yet installed the rebuilt loop (and the tokens with it) answers 503
//!   `unavailable`, `/readyz` included; a handler never runs on a half-loaded replica
//!   (it would answer 401 for a valid token, or 503 with no reason).
//! - **No answer leaves a replica that may have lost the lead meanwhile**: after the
//!   handler, the gate checks again, on the monotonic clock, that the replica still leads
//!   under the term it had on entry. A lease renewal or a long-poll answered late (a
//!   paused process, a slow commit) is replaced by 503 `unavailable`: it may have been
//!   acted on, so the client's own retry rule applies, never a silent failover.

use super::Leadership;
use crate::error::ApiError;
use crate::http::{AppState, NoQuery};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lockgate_api::ClusterView;

/// The cluster route's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(cluster))]
pub(crate) struct ApiDoc;

/// `GET /v1/cluster`.
pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new().route("/v1/cluster", get(cluster))
}

/// No token: a standby that never led has no token table, and clients ask it to find the
/// leader. The view holds no secret (the database URL without its password).
#[utoipa::path(get, path = "/v1/cluster", tag = "server", security(()),
    responses((status = 200, description = "The replicas on the database, which one leads, since when, the term (a single server: itself, term 0)", body = ClusterView)))]
async fn cluster(State(st): State<AppState>, _: NoQuery) -> axum::Json<ClusterView> {
    axum::Json(st.cluster.view())
}

/// Paths a standby answers itself.
fn standby_answers(path: &str) -> bool {
    matches!(path, "/healthz" | "/v1/cluster")
}

/// The gate of a replica's router; see the module's invariants. `/metrics` gets the
/// leadership metrics appended on the leader, and is only those on a standby.
///
/// # Cancel safety
/// As cancel safe as the route behind it: it only reads the leadership before and after.
pub async fn gate(State(l): State<Leadership>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if standby_answers(&path) {
        return next.run(req).await;
    }
    let Some(term) = l.leading() else {
        if path == "/metrics" {
            return metrics_text(l.metrics());
        }
        return standby_error(&l).into_response();
    };
    if l.serving() != Some(term) {
        if path == "/metrics" {
            return metrics_text(l.metrics());
        }
        return ApiError::unavailable(
            "this replica has just taken the lead and is loading the state from the database: ask again shortly",
        )
        .into_response();
    }
    let resp = next.run(req).await;
    if !l.still_leads(term) {
        return ApiError::unavailable(
            "this replica lost the lead while answering: ask again (the new leader has the state)",
        )
        .into_response();
    }
    if path == "/metrics" && resp.status().is_success() {
        let body = axum::body::to_bytes(resp.into_body(), 64 << 20)
            .await
            .unwrap_or_default();
        let mut text = String::from_utf8_lossy(&body).into_owned();
        text.push_str(&l.metrics());
        return metrics_text(text);
    }
    resp
}

/// 503 `not_leader` naming the leader; without one, because this replica cannot reach
/// the database, the message says so (while the database is away no replica can lead).
fn standby_error(l: &Leadership) -> ApiError {
    let leader = l.leader_url();
    match (&leader, l.database_error()) {
        (None, Some(e)) => {
            let mut err = ApiError::not_leader(None);
            err.message = format!(
                "this replica does not lead because it cannot reach the database ({e}): \
                 the request was not acknowledged; ask again once the database is back"
            );
            err
        }
        _ => ApiError::not_leader(leader),
    }
}

fn metrics_text(text: String) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
