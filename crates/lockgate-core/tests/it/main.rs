//! lockgate-core integration tests: one binary, one module per area.

mod calendar;
mod common;
mod engine;
mod holds;
mod policy;
mod props;
mod seeds;
mod selector;
