//! One module per subcommand, and what they share: [`session`] (the connection),
//! [`output`] (JSON and tables) and [`flags`] (shared flags and value parsers).

pub mod admin;
pub mod agent;
pub mod audit;
pub mod backup;
pub mod bench;
pub mod cluster;
pub mod completions;
pub mod demo;
pub mod events;
pub mod exit;
pub mod flags;
pub mod forecast;
pub mod hold;
pub mod hook;
pub mod job;
pub mod job_logs;
pub mod node;
pub mod notify;
pub mod output;
pub mod policy;
pub mod queue;
pub mod restore;
pub mod rpo;
pub mod run;
pub mod schedule;
pub mod server;
pub mod session;
pub mod simulate;
#[cfg(test)]
mod testdata;
pub mod token;
pub mod top;
pub mod ui;
