//! Integration tests of the `lockgate` binary: a real server process, real `lockgate run`
//! processes, real signals and `kill -9`.

mod agent;
mod backup;
mod cli;
mod crash;
mod edges;
mod hardening;
mod harness;
mod load;
mod run;
mod schedule;
mod tools;
