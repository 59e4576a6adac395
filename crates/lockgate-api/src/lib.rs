//! lockgate-api: the JSON the HTTP API speaks (design `api.md`), shared by the server, the
//! agent and the CLI. The calls themselves are in `lockgate-client`.
//!
//! The types here do no I/O: this crate depends on serde and the engine's types only, so
//! the server does not carry an HTTP client. Conventions of the contract:
//! - times are RFC 3339 strings (UTC, millisecond precision when not whole seconds):
//!   [`time::format`] and [`time::parse`];
//! - durations are numbers of seconds in fields ending `_s`;
//! - request bodies reject unknown fields (`deny_unknown_fields`), answers do not (a newer
//!   server may add fields);
//! - every 4xx/5xx carries an [`ErrorBody`]: `{"error": {"code", "message", "field"}}`,
//!   its code one of [`ErrorCode`].
//!
//! Main types, one module per resource: [`JobView`] (a job as JSON), [`SubmitRequest`],
//! [`ExplainView`]; [`PolicyView`], [`PolicyAnswer`]; [`NodeView`], [`Assignment`];
//! [`EventView`]; [`TokenCreated`], [`Role`]; [`ScheduleView`]; [`BackupRequest`] and
//! [`BackupView`] (item-block backups).
#![warn(missing_docs)]

mod audit;
mod backup;
mod batch;
mod cluster;
mod error;
mod error_body;
mod event;
mod forecast;
mod job;
mod joblog;
mod node;
mod notify;
mod pause;
mod policy;
mod restore;
mod rpo;
mod schedule;
#[cfg(feature = "openapi")]
pub mod schema;
pub mod time;
mod token;
mod ui;
mod usage;

pub use audit::*;
pub use backup::*;
pub use batch::*;
pub use cluster::*;
pub use error::ErrorCode;
pub use error_body::*;
pub use event::*;
pub use forecast::*;
pub use job::*;
pub use joblog::*;
pub use node::*;
pub use notify::*;
pub use pause::*;
pub use policy::*;
pub use restore::*;
pub use rpo::*;
pub use schedule::*;
pub use token::*;
pub use ui::*;
pub use usage::*;
