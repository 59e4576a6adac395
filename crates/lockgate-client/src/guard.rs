//! The guard: a small process beside a held command that outlives its holder.
//!
//! `PR_SET_PDEATHSIG` reaches only the command's own process, and only with one signal. A
//! holder that dies (`kill -9` of `lockgate run`) must still leave no work running once
//! the server can hand the slot to someone else, and should give the command its stop
//! signal and grace (restic removes its lock only on SIGINT). So `lockgate run` starts a
//! guard (`lockgate __guard`, its own process group) that it keeps informed through a
//! pipe: the command's process group, and after each renewal the moment the lease can
//! first run out on the server. When the pipe closes without a `done` (the holder died),
//! the guard sends the stop signal to the command's whole process group and SIGKILL at
//! `min(death + grace, lease expiry)`, then exits.
//!
//! # Invariant
//! The SIGKILL deadline lies [`KILL_MARGIN`] before
//! [`crate::LeaseKeeper::expires_no_earlier_than`] as last reported. The server expires a
//! lease at (when it *received* the last renewal) plus the TTL; the keeper's moment is
//! (when that renewal was *sent*) plus the TTL, never later. That difference, and the
//! renewals every TTL/3, are the margin: a holder that dies just before a renewal still
//! leaves the command about 2/3 of the TTL to stop. Times are `CLOCK_MONOTONIC`
//! nanoseconds, the same clock for both processes.

use crate::child::{group_alive, signal_group, Signal};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How much earlier than the lease's first possible expiry the guard sends SIGKILL: its
/// own wake-up and the kernel's delivery take milliseconds on a loaded machine.
pub const KILL_MARGIN: Duration = Duration::from_millis(50);

/// `CLOCK_MONOTONIC` now, in nanoseconds.
fn mono_now() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// `at` as `CLOCK_MONOTONIC` nanoseconds (the clock `Instant` reads on Linux).
fn mono_of(at: Instant) -> u128 {
    let now = Instant::now();
    let base = mono_now();
    if at >= now {
        base + (at - now).as_nanos()
    } else {
        base.saturating_sub((now - at).as_nanos())
    }
}

/// The holder's end of a running guard.
#[derive(Debug)]
pub struct Guard {
    pipe: ChildStdin,
    child: Child,
}

impl Guard {
    /// Starts `exe __guard` with the stop `signal` and `grace`. The guard is told the
    /// command's group with [`Guard::watch`].
    ///
    /// # Errors
    /// The guard could not be started.
    pub fn start(exe: &Path, signal: Signal, grace: Duration) -> std::io::Result<Guard> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(exe)
            .arg("__guard")
            .arg("--signal")
            .arg(signal.as_raw().to_string())
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take().expect("piped");
        Ok(Guard { pipe, child })
    }

    /// The command's process group (its leader's pid).
    pub fn watch(&mut self, pgid: u32) {
        let _ = writeln!(self.pipe, "group {pgid}");
    }

    /// The lease cannot run out on the server before `at`.
    pub fn lease_until(&mut self, at: Instant) {
        let _ = writeln!(self.pipe, "until {}", mono_of(at));
    }

    /// The command has ended under its holder: the guard exits without a signal.
    pub fn done(self) {
        let _ = self.release().wait();
    }

    /// Tells the guard the command has ended (it exits without a signal) and returns its
    /// process without waiting for it: the holder reaps it once its own last request is
    /// out of the way.
    pub fn release(mut self) -> Child {
        let _ = writeln!(self.pipe, "done");
        drop(self.pipe);
        self.child
    }
}

/// What the guard was told.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Told {
    group: Option<u32>,
    until: Option<u128>,
    done: bool,
}

fn read(input: impl BufRead) -> Told {
    let mut told = Told::default();
    for line in input.lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("group", g)) => told.group = g.trim().parse().ok(),
            Some(("until", t)) => told.until = t.trim().parse().ok(),
            _ if line.trim() == "done" => {
                told.done = true;
                break;
            }
            _ => {}
        }
    }
    told
}

/// The guard process: reads its stdin until the holder says `done` or dies, and in the
/// second case stops the command's group (see the module docs). Returns when done.
pub fn run_guard(signal: Signal, grace: Duration) {
    let told = read(std::io::stdin().lock());
    let Some(group) = told.group.filter(|_| !told.done) else {
        return;
    };
    let died = mono_now();
    let mut kill_at = died + grace.as_nanos();
    if let Some(until) = told.until {
        kill_at = kill_at.min(until.saturating_sub(KILL_MARGIN.as_nanos()));
    }
    signal_group(group, signal);
    while group_alive(group) {
        let now = mono_now();
        if now >= kill_at {
            signal_group(group, Signal::KILL);
            break;
        }
        let left = Duration::from_nanos(((kill_at - now) as u64).min(10_000_000));
        std::thread::sleep(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_says_the_group_the_lease_and_done() {
        let t = read("group 42\nuntil 1000\nuntil 2000\n".as_bytes());
        assert_eq!(
            t,
            Told {
                group: Some(42),
                until: Some(2000),
                done: false
            }
        );
        assert!(read("group 42\ndone\n".as_bytes()).done);
        // A closed pipe with nothing said: no group to stop.
        assert_eq!(read("".as_bytes()).group, None);
    }

    #[test]
    fn instants_map_onto_the_monotonic_clock() {
        let now = Instant::now();
        let later = mono_of(now + Duration::from_secs(2));
        let m = mono_now();
        assert!(later > m + 1_900_000_000 && later < m + 2_100_000_000);
    }
}
