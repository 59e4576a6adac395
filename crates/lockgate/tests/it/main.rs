//! Integration tests of the `lockgate` binary: a real server process, real `lockgate run`
//! processes, real signals and `kill -9`.

mod admin_db;
mod agent;
mod audit;
mod autolimit;
mod backup;
mod behaviour;
mod borgmatic;
mod cli;
mod clock;
mod conf_dir;
mod crash;
mod edges;
mod failover;
mod forecast;
mod formats;
mod hardening;
mod harness;
mod history;
mod hold;
mod joblogs;
mod load;
mod notify;
mod packaging;
mod policy_test;
mod postgres;
mod preempt;
mod queue;
mod restore;
mod rpo;
mod run;
mod schedule;
mod tools;
mod top;
mod usage;
mod vzdump;
