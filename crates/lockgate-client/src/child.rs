//! Starting and stopping the work: one piece of code for `lockgate run` and the agent
//! ([`crate::hold()`] runs it under a lease).
//!
//! - **Own process group.** The child leads a new process group, so a terminal's Ctrl+C
//!   reaches the wrapper (which decides what to forward) and a stop reaches the child's own
//!   children too ([`signal_group`]).
//! - **Dies with its wrapper.** The forked child asks the kernel for `PR_SET_PDEATHSIG`
//!   (SIGKILL) before it `exec`s the command, then checks that the wrapper is still its
//!   parent (it may have died before the request: the man page's advice). This is the one
//!   `unsafe` function of the workspace (`die_with_parent`): a `pre_exec` hook. It used
//!   to be a re-exec of the `lockgate` binary (`lockgate __exec -- COMMAND`), which cost a
//!   second start of the binary for every command. The signal is tied to the *thread* that
//!   started the child: start children from a thread that lives until the child has exited
//!   (the agent's job threads and `lockgate run`'s main thread do).
//! - **Stopping**: [`Supervised::terminate`] sends SIGTERM to the group, then SIGKILL after
//!   a grace period, and waits for the exit.
//! - **Exit codes**: [`exit_code`] is the child's own, or 128+N when it died of signal N.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lockgate_core::Usage;
pub use rustix::process::Signal;

/// How children are started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The signal a child gets when the process that started it dies (`PR_SET_PDEATHSIG`).
    death_signal: Option<Signal>,
}

impl Default for Launcher {
    fn default() -> Launcher {
        Launcher::new()
    }
}

impl Launcher {
    /// Children die with the process that started them (`PR_SET_PDEATHSIG`, SIGKILL).
    pub fn new() -> Launcher {
        Launcher {
            death_signal: Some(Signal::KILL),
        }
    }

    /// Children get `sig` when the process that started them dies: for a child whose
    /// [`crate::guard`] enforces the SIGKILL deadline itself, so the command gets its own
    /// stop signal (restic removes its lock on SIGINT) and its grace.
    pub fn dying_with(sig: Signal) -> Launcher {
        Launcher {
            death_signal: Some(sig),
        }
    }

    /// Children start without `PR_SET_PDEATHSIG`: a killed wrapper leaves them running.
    /// For tests that want to see exactly that.
    pub fn direct() -> Launcher {
        Launcher { death_signal: None }
    }

    /// A command for `argv` (program and arguments) in its own process group. The caller
    /// adds environment, stdio and working directory, then spawns it.
    ///
    /// # Panics
    /// When `argv` is empty.
    pub fn command(&self, argv: &[String]) -> Command {
        assert!(!argv.is_empty(), "a command needs a program");
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]).process_group(0);
        if let Some(sig) = self.death_signal {
            die_with_parent(&mut c, sig);
        }
        c
    }
}

/// Arms `PR_SET_PDEATHSIG` (`sig`) in `cmd`'s forked child, before it `exec`s. When the
/// parent is already gone by then (it died between the fork and the request, so the
/// signal will never come), the child does not `exec`: `spawn` fails with `ESRCH`.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command, sig: Signal) {
    let parent = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child between fork and exec, where only
    // async-signal-safe calls are allowed. It makes two system calls (prctl, getppid)
    // through rustix, which allocate nothing and take no lock; it reads only `parent`, a
    // plain integer copied before the fork, and `sig`, a plain value; its error is an OS error code (no allocation).
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(sig))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

/// Sends `sig` to the process group led by `pid` (ignoring a group that is gone).
pub fn signal_group(pid: u32, sig: Signal) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(p, sig);
    }
}

/// Whether any live process of `pid`'s process group is still there (an exited leader's
/// children keep the group alive). Zombies do not count: a process reparented to an init
/// that does not reap (a container's) stays a zombie member of the group for ever. Read
/// from `/proc/*/stat`; where `/proc` cannot be read, any member counts (`kill(-pgid, 0)`).
pub fn group_alive(pid: u32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return signal_test(pid);
    };
    procs.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(e.path().join("stat"))
                .is_ok_and(|stat| live_member(&stat, pid))
    })
}

/// Whether a `/proc/N/stat` line is of a live (not zombie, not dead) process in group
/// `pgid`. Its fields after the command's closing parenthesis: state, ppid, pgrp, ...
fn live_member(stat: &str, pgid: u32) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next().unwrap_or("Z");
    let pgrp = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
    pgrp == Some(pgid) && !matches!(state, "Z" | "X" | "x")
}

/// `kill(-pgid, 0)`: whether the group has any member, zombies included (EPERM: there,
/// but not ours to signal).
fn signal_test(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process_group(p),
        Err(rustix::io::Errno::SRCH)
    )
}

/// Waits until `pid` (a child of this process) has exited, leaving it unreaped (`waitid`
/// with `WNOWAIT`): false when that could not be done.
fn exited_unreaped(pid: u32) -> bool {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    loop {
        match waitid(
            WaitId::Pid(p),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// How long a group is waited for after its SIGKILL (a zombie that nobody reaps would keep
/// it alive for ever).
const AFTER_KILL: Duration = Duration::from_secs(1);

/// The exit code a wrapper passes on: the child's own, 128+N when it died of signal N.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

/// `exit status 3`, `signal 15`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    }
}

/// A started child whose exit is collected by a waiter thread, so the caller can wait with
/// a timeout, renew leases in between, and stop it. The waiter reads the child's totals
/// (`meter.rs`) after it exited and before it reaps it: they hold every descendant the
/// child reaped, and are gone once it is reaped.
#[derive(Debug)]
pub struct Supervised {
    pid: u32,
    exited: mpsc::Receiver<(io::Result<ExitStatus>, Option<Usage>)>,
    status: Option<ExitStatus>,
    at_exit: Option<Usage>,
}

impl Supervised {
    /// Takes over a spawned child.
    pub fn new(mut child: Child) -> Supervised {
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("wait-{pid}"))
            .spawn(move || {
                let at_exit = exited_unreaped(pid).then(|| crate::meter::of_process(pid));
                let _ = tx.send((child.wait(), at_exit.flatten()));
            })
            .expect("spawn a waiter thread");
        Supervised {
            pid,
            exited: rx,
            status: None,
            at_exit: None,
        }
    }

    /// The child's totals read as it exited (`None` while it runs, or where they could
    /// not be read).
    pub fn usage_at_exit(&self) -> Option<Usage> {
        self.at_exit
    }

    /// The child's process id (and process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits up to `timeout` for the exit; `None` when it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.status.is_none() {
            match self.exited.recv_timeout(timeout) {
                Ok((Ok(s), at_exit)) => {
                    self.status = Some(s);
                    self.at_exit = at_exit;
                }
                // wait() itself failed: nothing more to learn about this child.
                Ok((Err(_), _)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.status = Some(ExitStatus::from_raw(1 << 8))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        self.status
    }

    /// Sends `sig` to the child's process group.
    pub fn signal(&self, sig: Signal) {
        if self.status.is_none() {
            signal_group(self.pid, sig);
        }
    }

    /// After a stop, once the command itself has exited: waits until the rest of its
    /// group has gone too (a backup tool's own children finish their cleanup after it:
    /// `sh -c 'restic ...'` exits at SIGINT before restic has removed its lock), sends
    /// SIGKILL to what is left at `kill_at`, and stops waiting a second later (a zombie
    /// that nobody reaps would keep the group alive for ever).
    /// A wrapper that returns after this leaves nothing of the stopped command running.
    pub fn wait_group(&self, kill_at: Instant) {
        let mut killed = false;
        while group_alive(self.pid) {
            let now = Instant::now();
            if !killed && now >= kill_at {
                signal_group(self.pid, Signal::KILL);
                killed = true;
            }
            if now >= kill_at + AFTER_KILL {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM to the group, SIGKILL after `grace`, and the exit status.
    pub fn terminate(&mut self, grace: Duration) -> ExitStatus {
        self.signal(Signal::TERM);
        let deadline = Instant::now() + grace;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(s) = self.wait_timeout(left) {
                return s;
            }
            if left.is_zero() {
                break;
            }
        }
        self.signal(Signal::KILL);
        loop {
            if let Some(s) = self.wait_timeout(Duration::from_secs(3600)) {
                return s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn exit_codes() {
        let mut c = Supervised::new(Launcher::direct().command(&sh("exit 3")).spawn().unwrap());
        let s = c.wait_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!((exit_code(s), describe(s)), (3, "exit status 3".into()));
    }

    /// `PR_SET_PDEATHSIG` fires when the thread that started the child ends: a child
    /// started from a short-lived thread is killed as soon as that thread returns.
    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        let mut child = std::thread::spawn(|| {
            Launcher::new()
                .command(&sh("exec sleep 30"))
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.id();
        let start = Instant::now();
        let dead = loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .to_string();
            if stat.is_empty() || state.starts_with('Z') {
                break true;
            }
            if start.elapsed() > Duration::from_secs(5) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if !dead {
            let _ = child.kill();
        }
        // Reap it: it is dead (or was just killed), so this returns at once.
        let _ = child.wait();
        assert!(dead, "the child outlived the thread that started it");
    }

    #[test]
    fn terminate_escalates_to_kill() {
        let started = Instant::now();
        let mut c = Supervised::new(
            Launcher::direct()
                .command(&sh("trap '' TERM; sleep 10 & wait; sleep 10"))
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(100));
        let s = c.terminate(Duration::from_millis(200));
        assert_eq!(exit_code(s), 128 + 9, "{}", describe(s));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn terminate_reaches_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let mut c = Supervised::new(Launcher::direct().command(&sh(&script)).spawn().unwrap());
        let grandchild = read_pid(&pidfile);
        let s = c.terminate(Duration::from_secs(5));
        assert_eq!(exit_code(s), 128 + 15);
        let start = Instant::now();
        while !gone(grandchild) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            gone(grandchild),
            "the grandchild survived the group's SIGTERM"
        );
    }

    /// Whether `pid` has exited (gone, or a zombie not yet reaped).
    fn gone(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    }

    /// Waits until `path` holds a pid.
    fn read_pid(path: &std::path::Path) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(p) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return p;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no pid in {path:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn wait_group_lets_a_grandchild_finish_its_cleanup_after_the_command_exited() {
        let dir = tempfile::tempdir().unwrap();
        let (pidfile, done) = (dir.path().join("pid"), dir.path().join("done"));
        // The leader dies of SIGTERM at once; its child cleans up for 300 ms first, as
        // restic does under `sh -c` when it removes its lock. The child writes the pid
        // file itself once its trap is set, so the signal never comes before the trap (on
        // a loaded machine it did, and the child died without cleaning up).
        let script = format!(
            "(trap 'sleep 0.3; echo cleaned > {}; exit 0' TERM; echo $$ > {}; \
             while :; do sleep 0.05; done) & wait",
            done.display(),
            pidfile.display()
        );
        let mut c = Supervised::new(Launcher::direct().command(&sh(&script)).spawn().unwrap());
        read_pid(&pidfile);
        c.signal(Signal::TERM);
        let s = c
            .wait_timeout(Duration::from_secs(5))
            .expect("the leader exits");
        assert_eq!(exit_code(s), 128 + 15);
        c.wait_group(Instant::now() + Duration::from_secs(10));
        assert_eq!(
            std::fs::read_to_string(&done).ok().as_deref(),
            Some("cleaned\n"),
            "wait_group returned before the grandchild's cleanup"
        );
    }

    #[test]
    fn wait_group_kills_what_is_left_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!(
            "(trap '' TERM; sleep 30) & echo $! > {}; wait",
            pidfile.display()
        );
        let mut c = Supervised::new(Launcher::direct().command(&sh(&script)).spawn().unwrap());
        let left = read_pid(&pidfile);
        std::thread::sleep(Duration::from_millis(50));
        c.signal(Signal::TERM);
        c.wait_timeout(Duration::from_secs(5))
            .expect("the leader exits");
        let start = Instant::now();
        c.wait_group(Instant::now() + Duration::from_millis(200));
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        assert!(
            gone(left),
            "the process that ignored SIGTERM was not killed"
        );
    }

    #[test]
    fn a_stat_line_counts_only_live_members_of_the_group() {
        // pid (comm) state ppid pgrp ...; a comm may hold spaces and parentheses.
        assert!(live_member("42 (sleep) S 1 40 40 0 -1", 40));
        assert!(live_member("42 (a b) c)) R 1 40 40 0 -1", 40));
        assert!(!live_member("42 (sleep) Z 1 40 40 0 -1", 40));
        assert!(!live_member("42 (sleep) S 1 41 41 0 -1", 40));
        assert!(!live_member("garbage", 40));
    }
}
