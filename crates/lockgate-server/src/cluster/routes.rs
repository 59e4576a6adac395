//! The gate every request of a replica passes (docs/api.md,
//! "Several servers").
//!
//! # Invariants
//! - **A standby acts on nothing**: [`gate`] answers every request but `/healthz`,
//!   `/metrics` and `/v1/cluster` with 503 `not_leader` naming the leader, before any
//!   handler runs, so a client may always send such a request again elsewhere.
//! - **No answer leaves a replica that may have lost the lead meanwhile**: after the
//!   handler, the gate checks again, on the monotonic clock, that the replica still leads
//!   under the term it had on entry. A lease renewal or a long-poll answered late (a
//!   paused process, a slow commit) is replaced by 503 `unavailable`: it may have been
//!   acted on, so the client's own retry rule applies, never a silent failover.

use super::Leadership;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

// `GET /v1/cluster` is mounted when a server runs as a replica (not wired in yet):
// `Leadership::view` is its answer; the OpenAPI test requires every mounted route to be
// served by a single server too, so the route comes with that wiring.

/// Paths a standby answers itself.
fn standby_answers(path: &str) -> bool {
    matches!(path, "/healthz" | "/v1/cluster")
}

/// The gate of a replica's router; see the module's invariants. `/metrics` gets the
/// leadership metrics appended on the leader, and is only those on a standby.
pub async fn gate(State(l): State<Leadership>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if standby_answers(&path) {
        return next.run(req).await;
    }
    let Some(term) = l.leading() else {
        if path == "/metrics" {
            return metrics_text(l.metrics());
        }
        return ApiError::not_leader(l.leader_url()).into_response();
    };
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
