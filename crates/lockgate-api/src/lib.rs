//! lockgate-api: the JSON the HTTP API speaks (design `api.md`), shared by the server, the
//! agent and the CLI, plus a small blocking [`Client`].
//!
//! The types here do no I/O (except [`client`]). Conventions of the contract:
//! - times are RFC 3339 strings (UTC, millisecond precision when not whole seconds):
//!   [`time::format`] and [`time::parse`];
//! - durations are numbers of seconds in fields ending `_s`;
//! - request bodies reject unknown fields (`deny_unknown_fields`), answers do not (a newer
//!   server may add fields);
//! - every 4xx/5xx carries an [`ErrorBody`]: `{"error": {"code", "message", "field"}}`,
//!   its code one of [`ErrorCode`].
//!
//! Main types: [`JobView`] (a job as JSON), [`SubmitRequest`], [`ExplainView`],
//! [`PolicyView`], [`PolicyAnswer`], [`NodeView`], [`EventView`], [`TokenCreated`],
//! [`BackupRequest`] and [`BackupView`] (item-block backups).
#![warn(missing_docs)]

mod backup;
pub mod client;
mod error;
mod job;
mod misc;
mod schedule;
pub mod time;

pub use backup::*;
pub use client::{Client, ClientError};
pub use error::ErrorCode;
pub use job::*;
pub use misc::*;
pub use schedule::*;
