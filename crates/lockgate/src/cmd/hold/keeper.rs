//! The keeper of one hold (`lockgate __hold-keeper`): started by `hold acquire` with the
//! admitted job on stdin, it says `ready` (or `refused WHY`) on stdout once, then writes
//! only to its log (its stderr) while it renews the lease and waits for a release, the
//! bound process's end, or the lease's loss. See the parent module's docs.
//!
//! A stop signal (SIGTERM, SIGINT, SIGHUP) does not end the keeper: it is logged, and the
//! hold goes on until the bound process ends or is released. Ending at the signal would
//! hand the slot on while the tool still runs (after a TTL, or at once if it finished the
//! job); at a shutdown the tool gets the same signal, and its end returns the slot.

use super::{interrupts, open_lock, path, start_time, Handover};
use crate::cmd::run::retrying;
use crate::GlobalArgs;
use lockgate_client::meter::TreeMeter;
use lockgate_client::{LeaseKeeper, Renewal, WhileUnreachable};
use lockgate_core::Outcome;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `hold release` sends: one JSON line.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Release {
    /// The tool's exit code: 0 succeeded, anything else failed.
    pub exit_code: i32,
    /// Recorded with the job's end.
    pub message: Option<String>,
}

/// How long the keeper goes on renewing while the server cannot be reached. It cannot
/// stop the tool (not its child), so giving the lease up early would only let the slot
/// go to another job while the backup still runs; a restarted server gives every lease
/// a fresh TTL, and the renewals find it again.
const UNREACHABLE_HOLD: Duration = Duration::from_secs(24 * 3600);

/// How often the keeper looks at its socket between wake-ups of the bound process.
const SLICE: Duration = Duration::from_millis(100);

fn now() -> String {
    lockgate_api::time::format(crate::cmd::output::now())
}

/// Runs the keeper; its exit code is only for its log.
pub fn run(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let signalled = interrupts()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let h: Handover = serde_json::from_str(&line)?;
    let mut out = std::io::stdout();
    let client = crate::cmd::session::client(global)?;
    let lease_token = h.job.lease.as_ref().map(|l| l.token).unwrap_or(0);
    let refuse = |out: &mut std::io::Stdout, why: String| -> anyhow::Result<ExitCode> {
        eprintln!("{} hold {}: {why}", now(), h.name);
        let _ = writeln!(out, "refused {why}");
        Ok(ExitCode::from(1))
    };
    let lock = open_lock(&h.name)?;
    if lock.try_lock().is_err() {
        let why = format!("a hold named {} is already taken", h.name);
        let _ = client.finish_job(h.job.id, lease_token, Outcome::Cancelled, Some(why.clone()));
        return refuse(&mut out, why);
    }
    let pidfd = match bound(&h) {
        Some(fd) => fd,
        None => {
            let why = format!(
                "process {} ended before the hold was kept; the job is finished failed",
                h.pid
            );
            let _ = client.finish_job(h.job.id, lease_token, Outcome::Failed, Some(why.clone()));
            return refuse(&mut out, why);
        }
    };
    let sock = path(&h.name, "sock");
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(path(&h.name, "ended"));
    let listener = UnixListener::bind(&sock)?;
    listener.set_nonblocking(true)?;
    std::fs::write(path(&h.name, "job"), format!("{}\n", h.job.id))?;
    std::fs::write(path(&h.name, "pid"), format!("{}\n", std::process::id()))?;
    let Some(mut lease) =
        LeaseKeeper::for_job(client, &h.job, WhileUnreachable::HoldFor(UNREACHABLE_HOLD))
    else {
        return refuse(&mut out, format!("job {} holds no lease", h.job.id));
    };
    // The grant may have reached us late: the tool goes on only under a lease that a
    // renewal sent from here has confirmed (lockgate_client::lease).
    if let Err(why) = lease.confirm() {
        return refuse(&mut out, format!("job {}: {why}", h.job.id));
    }
    eprintln!(
        "{} hold {}: job {} admitted, bound to process {}",
        now(),
        h.name,
        h.job.id,
        h.pid
    );
    writeln!(out, "ready {}", h.job.id)?;
    out.flush()?;
    let mut keeper = Keeper {
        h: &h,
        lease,
        listener,
        pidfd,
        signalled,
        meter: TreeMeter::new(h.pid),
        said_cancel: false,
        said_unreachable: false,
    };
    let why = keeper.hold();
    eprintln!("{} hold {}: {why}", now(), h.name);
    let _ = std::fs::write(path(&h.name, "ended"), format!("{} {why}\n", now()));
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(path(&h.name, "job"));
    let _ = std::fs::remove_file(path(&h.name, "pid"));
    drop(lock);
    Ok(ExitCode::SUCCESS)
}

/// A pidfd of the bound process, checked against its start time after opening.
fn bound(h: &Handover) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(h.pid as i32)?;
    let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
    (start_time(h.pid) == Some(h.start_time)).then_some(fd)
}

struct Keeper<'a> {
    h: &'a Handover,
    lease: LeaseKeeper,
    listener: UnixListener,
    pidfd: OwnedFd,
    /// Set by a stop signal; taken back once it is logged.
    signalled: Arc<AtomicBool>,
    /// The bound process's tree from the hold's start: its totals go with each renewal
    /// and the finish (api.md, "Usage").
    meter: TreeMeter,
    said_cancel: bool,
    said_unreachable: bool,
}

impl Keeper<'_> {
    /// Holds until the end; returns what ended it, for the log and `NAME.ended`.
    fn hold(&mut self) -> String {
        let id = self.h.job.id;
        loop {
            let wake = self
                .lease
                .next_renewal()
                .saturating_duration_since(Instant::now())
                .min(SLICE);
            if self.bound_ended(wake) {
                let why = format!(
                    "process {} ended without a release; the job is finished failed",
                    self.h.pid
                );
                return self.finish(Outcome::Failed, why.clone()).unwrap_or(why);
            }
            if self.signalled.swap(false, Ordering::AcqRel) {
                eprintln!(
                    "{} hold {}: job {id}: a stop signal; the hold goes on until process {} ends or is released (ending it now would hand the slot on while the tool runs)",
                    now(),
                    self.h.name,
                    self.h.pid
                );
            }
            if let Ok((stream, _)) = self.listener.accept() {
                if let Some(why) = self.release(stream) {
                    return why;
                }
            }
            if Instant::now() < self.lease.next_renewal() {
                continue;
            }
            self.lease.report(self.meter.sample());
            self.lease
                .report_node(lockgate_client::meter::node_sample());
            match self.lease.renew() {
                Renewal::Held(job) => {
                    self.said_unreachable = false;
                    if job.cancel_requested && !self.said_cancel {
                        eprintln!(
                            "{} hold {}: job {id}: cancel requested; the tool is not stopped by the hold, the slot returns at its release or end",
                            now(),
                            self.h.name
                        );
                        self.said_cancel = true;
                    }
                }
                Renewal::Retrying(e) => {
                    if !self.said_unreachable {
                        eprintln!(
                            "{} hold {}: renewing job {id}: {e}; retrying",
                            now(),
                            self.h.name
                        );
                        self.said_unreachable = true;
                    }
                }
                Renewal::GiveUp(why) => return format!("job {id}: {why}; the hold ended"),
                Renewal::Lost(e) => return format!("job {id}: lease lost: {e}; the hold ended"),
            }
        }
    }

    /// Waits up to `wait` for the bound process to end.
    fn bound_ended(&self, wait: Duration) -> bool {
        let timeout = Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
    }

    /// Serves one connection to the socket: `Some(why)` when the hold ended with it.
    fn release(&mut self, stream: UnixStream) -> Option<String> {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        let request = BufReader::new(&stream)
            .read_line(&mut line)
            .ok()
            .and_then(|_| serde_json::from_str::<Release>(&line).ok());
        let answer = |text: &str| {
            let _ = (&stream).write_all(format!("{text}\n").as_bytes());
        };
        let Some(request) = request else {
            answer("error not a release request");
            return None;
        };
        let outcome = if request.exit_code == 0 {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        };
        let mut message = format!("released with exit code {}", request.exit_code);
        if let Some(m) = request.message {
            message = format!("{message}: {m}");
        }
        match self.finish(outcome, message) {
            Ok(done) => {
                answer(&format!("ok {done}"));
                Some(done)
            }
            Err(why) => {
                answer(&format!("error {why}"));
                Some(why)
            }
        }
    }

    /// Finishes the job: `Ok("job N STATE")`, or why it could not be finished.
    fn finish(&mut self, outcome: Outcome, message: String) -> Result<String, String> {
        let id = self.lease.job_id();
        let client = self.lease.client().clone();
        self.lease.report(self.meter.sample());
        let body = self.lease.finish_request(outcome, Some(message.clone()));
        match retrying(self.lease.ttl(), || client.finish_with(id, &body)) {
            Ok(job) => Ok(format!("job {id} {} ({message})", job.state)),
            Err(Some(e)) => Err(format!("job {id}: finishing failed: {e}")),
            Err(None) => Err(format!(
                "job {id}: the server could not be reached to finish it; its lease runs out instead"
            )),
        }
    }
}
