//! Pauses: `POST /v1/pauses` (admins), `GET /v1/pauses`, `DELETE /v1/pauses/{id}` and
//! `DELETE /v1/pauses` (resume all; admins).
//!
//! `routes.rs` holds the handlers; [`QueueOp`] the loop operations, applied in `ops.rs`.
//!
//! # Invariants
//! - Only an admin pauses or resumes; every token may list the pauses (explain shows them
//!   to every job's reader anyway).
//! - A pause is durable before it is acknowledged: its `paused` event puts its row in the
//!   batch (`Loop::track_pause`), its `resumed` event deletes it, both in the commit that
//!   answers; so a restart restores exactly the acknowledged pauses.

mod ops;
mod routes;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::protocol::Reply;
use lockgate_api::{PauseList, PauseRequest, PauseView, Resumed};

/// Pause operations of the loop.
#[derive(Debug)]
pub enum QueueOp {
    /// `POST /v1/pauses`.
    Pause(PauseRequest, Reply<PauseView>),
    /// `GET /v1/pauses`.
    List(Reply<PauseList>),
    /// `DELETE /v1/pauses/{id}`.
    Resume(u64, Reply<PauseView>),
    /// `DELETE /v1/pauses`.
    ResumeAll(Reply<Resumed>),
}
