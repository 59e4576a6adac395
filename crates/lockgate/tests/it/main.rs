//! Integration tests of the `lockgate` binary: a real server process, real `lockgate run`
//! processes, real signals and `kill -9`.

mod agent;
mod cli;
mod crash;
mod harness;
mod load;
mod run;

/// Wall-clock milliseconds (the clock of the handlers' records).
pub fn harness_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
