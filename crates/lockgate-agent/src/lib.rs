//! lockgate-agent: the node agent (design `README.md`, "Agents"; `api.md`, `lockgate agent`).
//!
//! An agent registers its node with its labels and the job kinds it has handlers for,
//! heartbeats, long-polls the server for the jobs placed on its node, runs the handler that
//! its *own* configuration names for each job's kind, renews the job's lease while the
//! handler runs, and finishes the job with the handler's exit status. The server never
//! sends a command line.
//!
//! Main types:
//! - [`AgentConfig`] (`agent.toml`, validated from the raw [`config::RawConfig`]) with one
//!   [`Handler`] per kind;
//! - [`Template`] (`{attr.NAME}`, `{job.id}`, `{job.kind}`, `{node}` inside whole
//!   arguments; never a shell);
//! - the child runner, the lease keeper and the retry rule come from `lockgate-client`
//!   (shared with `lockgate run`): a handler is held with `lockgate_client::hold`;
//! - [`Agent`] (the loop) with [`AgentOptions`] and a [`Shutdown`] handle.
#![warn(missing_docs)]

mod agent;
pub mod config;
pub mod output;
pub mod template;

pub use agent::{Agent, AgentError, AgentOptions, Shutdown};
pub use config::{AgentConfig, ConfigError, Handler};
pub use template::{RenderError, Template, TemplateError};
