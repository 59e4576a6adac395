//! Events: `GET /v1/events` (a page of the log) and `GET /v1/events/stream` (SSE: a
//! catch-up from the log, then the live broadcast).
//!
//! `routes.rs` holds the handlers; [`EventOp`] the loop operation, applied in `ops.rs`.
//!
//! # Invariants
//! - Every event has a sequence number, given in commit order; the log and the broadcast
//!   carry only committed events.
//! - A stream never repeats or skips an event it may see: it sends only sequence numbers
//!   above the last one sent, and when the broadcast lags it catches up from the log.
//! - A stream resumes only from a `Last-Event-ID` that is a sequence number given so far:
//!   anything else is a 400, never a replay of the whole log.
//! - Submitters see their own jobs' events, agents their node's, everyone the node and
//!   policy events ([`visible`]).

mod ops;
mod routes;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::auth::Principal;
use crate::protocol::Reply;
use lockgate_api::{EventList, EventView, Role};
use serde_json::Value;

/// A page of the log as one principal may see it, with where the reading stopped: the
/// rows it may not see are skipped but still read past.
#[derive(Debug)]
pub struct Page {
    /// The events `p` may see.
    pub list: EventList,
    /// The sequence number of the last row read (the `after` given when none was).
    pub next: u64,
    /// Whether rows may follow (the page was cut by its count or its bytes).
    pub more: bool,
}

/// Event operations of the loop.
#[derive(Debug)]
pub enum EventOp {
    /// `GET /v1/events`: at most `limit` events after `after`, those the caller may see.
    List {
        /// After this sequence number.
        after: u64,
        /// At most this many.
        limit: usize,
        /// At most about this many bytes of event text (at least one event).
        max_bytes: usize,
        /// The page.
        reply: Reply<Page>,
    },
    /// The sequence number of the last event given (0 before the first).
    LastSeq(Reply<u64>),
}

/// Whether `p` may see an event: submitters see their own jobs' events, agents their
/// node's, everyone the node and policy events.
pub fn visible(p: &Principal, ev: &EventView) -> bool {
    let Some(job) = ev.data.get("job") else {
        return true;
    };
    match p.role {
        Role::Admin | Role::Viewer => true,
        Role::Submitter => job.get("owner").and_then(Value::as_str) == Some(p.name.as_str()),
        Role::Agent => job.get("node").and_then(Value::as_str) == p.node.as_deref(),
    }
}
