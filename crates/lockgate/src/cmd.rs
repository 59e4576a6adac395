//! One module per subcommand.

pub mod agent;
pub mod backup;
pub mod bench;
pub mod connect;
pub mod demo;
pub mod events;
pub mod job;
pub mod node;
pub mod policy;
pub mod run;
pub mod schedule;
pub mod server;
pub mod simulate;
pub mod token;
