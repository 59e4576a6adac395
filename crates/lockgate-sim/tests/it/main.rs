//! lockgate-sim integration tests: one binary, one module per area.

mod baselines;
mod common;
mod contention;
mod determinism;
mod examples;
mod forward;
mod gantt;
mod job_check;
mod models;
mod origin;
mod preempt;
mod window;
