//! lockgate-core: the pure, deterministic scheduling engine of lockgate.
//!
//! No async runtime, no clock, no files, no environment: time comes in as an argument
//! ([`time::Timestamp`]), effects go out as values.
#![warn(missing_docs)]

pub mod calendar;
pub mod policy;
pub mod selector;
pub mod time;
