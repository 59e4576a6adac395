//! lockgate-core integration tests: one binary, one module per area.

mod common;
mod engine;
mod props;
mod seeds;
