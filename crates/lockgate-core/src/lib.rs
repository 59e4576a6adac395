//! lockgate-core: the pure, deterministic scheduling engine of lockgate.
//!
//! No async runtime, no clock, no files, no environment: time comes in as an argument
//! ([`time::Timestamp`]), effects go out as values.
#![warn(missing_docs)]

pub mod auto;
pub mod calendar;
pub mod daily;
pub mod durations;
pub mod engine;
pub mod event;
pub use engine::explain;
pub mod job;
pub mod limits;
pub mod policy;
pub mod schedule;
pub mod scope;
pub mod selector;
pub mod time;
pub mod usage;

pub use engine::{Engine, Mode};
pub use job::{Job, JobId, JobSpec, JobState, Outcome};
pub use policy::Policy;
pub use time::Timestamp;
pub use usage::Usage;
