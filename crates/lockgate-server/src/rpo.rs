//! RPO rules (`[[rpo]]`, docs `policy.md` "RPO rules"): for each value of a rule (every VM
//! group, every repository) the age of its last successful job, an `rpo_alert` event when
//! it passes `max_age` and an `rpo_cleared` event when a success (or a longer `max_age`)
//! ends it; `GET /v1/rpo` (every role), `DELETE /v1/rpo/{rule}/{value}` (admins), and the
//! `lockgate_rpo_*` metrics.
//!
//! `tracker.rs` holds the values and the deadline heap (pure, tested in virtual time);
//! `ops.rs` wires it into the loop; `routes.rs` holds the handlers.
//!
//! # Invariants
//! - **Durable with the job.** A value's row is put in the batch of the job event that
//!   changed it, and its alert state in the batch of the event that raised or cleared the
//!   alert; so after a restart (rebuilt from the `rpo_values` table) ages are what was
//!   acknowledged, and no alert is raised twice.
//! - **No scan per tick.** The loop wakes at the earliest deadline of the tracker's heap
//!   (beside the engine's and the schedules'), and a wake-up costs the values due.

mod ops;
mod routes;
mod tracker;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;
pub(crate) use tracker::Tracker;

use crate::protocol::Reply;
use lockgate_api::{RpoForgotten, RpoList};

/// RPO operations of the loop.
#[derive(Debug)]
pub enum RpoOp {
    /// `GET /v1/rpo`.
    List(Reply<RpoList>),
    /// `DELETE /v1/rpo/{rule}/{value}` (`None`: `DELETE /v1/rpo/{rule}`, a rule without
    /// `per`).
    Forget(String, Option<String>, Reply<RpoForgotten>),
}
