//! lockgate-core integration tests: one binary, one module per area.

mod auto;
mod calendar;
mod common;
mod engine;
mod exclusive;
mod holds;
mod policy;
mod preempt;
mod props;
mod pure;
mod seeds;
mod selector;
mod window_order;
mod windows;
