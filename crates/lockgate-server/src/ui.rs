//! The dashboard at `/ui/` (docs/dashboard.md): sign-in, sessions, the pages and the few
//! endpoints only it needs.
//!
//! - `session.rs`: sessions and one-time codes in memory, the cookie and the CSRF rule;
//!   [`crate::http::Auth`] accepts a session cookie beside the bearer token.
//! - `routes.rs`: `GET /ui/` (the sign-in page or the app), the embedded assets,
//!   `POST /ui/login`, `POST /ui/logout`, `GET /ui/session`, `POST /v1/ui/codes`,
//!   `GET /v1/ui/overview`, `GET /v1/ui/occupancy`, `GET /v1/ui/gantt.svg`.
//! - `pages.rs`: the files of `crates/lockgate-server/ui/`, embedded at build time, and
//!   the sign-in page's one substitution.
//! - `ops.rs` and `occupancy.rs`: the loop side of the overview and the occupancy replay.
//!
//! # Invariants
//! - The pages are built by `cargo build` alone: every file is `include_str!`ed; no
//!   Node.js, no bundler, no CDN. The JavaScript is the project's own.
//! - The pages show only what the ordinary API answers the session's principal: every
//!   action is a `/v1` request checked by role on the server, as a bearer request is.
//!   A viewer sees no action buttons, and the server refuses the action anyway.
//! - Every answer of `/ui/` carries a Content-Security-Policy that allows only this
//!   origin's scripts and styles, and refuses framing.

mod occupancy;
mod ops;
pub mod pages;
pub(crate) mod routes;
pub mod session;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;
pub use session::Sessions;

use crate::protocol::Reply;
use lockgate_api::{UiOccupancy, UiOverview};
use serde::Deserialize;

/// The query of `GET /v1/ui/occupancy`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OccupancyQuery {
    /// Hours back from now (default 6, from 0.1 to 168).
    #[serde(default)]
    #[param(minimum = 0.1, maximum = 168)]
    pub hours: Option<f64>,
}

/// Dashboard operations of the loop.
#[derive(Debug)]
pub enum UiOp {
    /// `GET /v1/ui/overview`.
    Overview(Reply<UiOverview>),
    /// `GET /v1/ui/occupancy`.
    Occupancy(OccupancyQuery, Reply<UiOccupancy>),
    /// `GET /v1/ui/throughput`.
    Throughput(Reply<lockgate_api::UiThroughput>),
}
