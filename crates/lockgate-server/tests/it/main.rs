//! Integration tests: the real server over real HTTP on 127.0.0.1 with a real SQLite file
//! in a temporary directory, driven with the blocking client of `lockgate-api`.

/// The product's allocator: the servers these tests run in child processes (`memory.rs`)
/// use what `lockgate server` uses.
#[global_allocator]
static ALLOC: lockgate_server::alloc::Allocator = lockgate_server::alloc::Allocator;

mod api;
mod audit;
mod backups;
mod batch;
mod cluster;
mod confinement;
mod database;
mod durability;
mod edges;
mod errors;
mod forecast;
mod fulldisk;
mod hardening;
mod harness;
mod holds;
mod limits;
mod listing;
mod longpoll;
mod memory;
mod metrics;
mod openapi;
mod quotas;
mod replicas;
mod restore_pods;
mod restores;
mod rpo;
mod schedules;
mod snapshots;
mod streams;
mod ui;
