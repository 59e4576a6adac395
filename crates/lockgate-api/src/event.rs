//! The event log as JSON: `GET /v1/events` and the data of each SSE message.
//!
//! Sequence numbers grow by one per event, so a client resumes with `after=SEQ` (or
//! `Last-Event-ID`) without gaps or repeats.

use serde::{Deserialize, Serialize};

/// One event (`GET /v1/events`, and the data of each SSE message): `seq`, `at` and the
/// event's own fields: `type` (`job`, `node_changed`, `node_lost`, `node_removed`,
/// `policy_applied`), and for `job` the `change` and the `job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    /// Sequence number, growing by one.
    pub seq: u64,
    /// When it happened (RFC 3339).
    pub at: String,
    /// The event.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// The last message of an event stream that the server ends itself, sent as
/// `event: cut` with no `id` (so `Last-Event-ID` stays the last event received).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamCut {
    /// Why: `write_stall` (no byte of the stream could be written for the server's
    /// `--write-stall-timeout`: the client stopped reading).
    pub reason: String,
    /// The same for a person.
    pub message: String,
    /// The last event sent before the cut: resume with `Last-Event-ID` set to it.
    pub resume_after: u64,
}

/// `GET /v1/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventList {
    /// Events after the requested sequence number, oldest first.
    pub events: Vec<EventView>,
}
