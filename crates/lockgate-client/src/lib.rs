//! lockgate-client: everything a program needs to talk to a lockgate server and to hold a
//! job's lease (design `api.md`, "lockgate run semantics").
//!
//! - [`Client`]: a blocking HTTP client, one method per API call; every failure is a
//!   [`ClientError`], and [`ClientError::is_temporary`] is the one rule for "try again
//!   later".
//! - [`Backoff`] (20 ms doubling to 1 s) and [`retry`]: the one back-off.
//! - Several servers (`http://a:7400,http://b:7400`): a [`Client`] follows the leader of a
//!   cluster, sending a request elsewhere only when it did nothing (`servers.rs`).
//! - [`LeaseKeeper`]: renews a lease every TTL/3, faster while the server cannot be
//!   reached, and says when to give the work up ([`WhileUnreachable`]).
//! - [`child`]: starting a command in its own process group with `PR_SET_PDEATHSIG`,
//!   SIGTERM-then-SIGKILL, exit status to exit code.
//! - [`hold()`]: a child under a lease. This is where the invariant that matters most
//!   lives: the child is dead before the server can hand its slot to someone else.
//!
//! - [`logs`]: a command's output sent to its job's log in batches, through a bounded
//!   buffer that drops (and counts) lines rather than ever slow the command.
//!
//! `lockgate run`, the agent, the CLI and the test harnesses all use these; none keeps a
//! lease or a retry rule of its own. The wire types are in `lockgate-api`.
#![warn(missing_docs)]

mod backoff;
mod cancel_watch;
pub mod child;
mod client;
mod error;
pub mod guard;
pub mod hold;
pub mod lease;
pub mod logs;
pub mod meter;
mod servers;

pub use backoff::{retry, retry_with, Backoff, RetryError};
pub use client::{
    encode, AuditQuery, Client, PolicyPut, CALL_TIMEOUT, CLUSTER_CALL_TIMEOUT, CLUSTER_POLL,
};
pub use error::ClientError;
pub use hold::{hold, hold_with, parse_signal, Ending, Held, Holder, JustHold, Stop};
pub use lease::{LeaseKeeper, Renewal, WhileUnreachable};
pub use logs::{LogShipper, LogSink};
pub use servers::FOLLOW_LIMIT;
