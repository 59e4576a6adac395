//! Running a child under a lease: the one loop `lockgate run` and the agent hold their
//! work with.
//!
//! [`hold`] waits for the child, renews the lease when [`LeaseKeeper::next_renewal`] says,
//! and stops the child (the stop signal, SIGTERM unless [`Stop`] says otherwise, to its
//! process group, SIGKILL at a deadline) as soon as it must: cancel requested, preempted,
//! the holder stopping, the lease lost, or the server unreachable for too long. A cancel
//! or preemption is learnt at once from a long-poll beside the renewals (`cancel_watch`),
//! so the stop signal follows a request within about one wake-up slice (100 ms).
//!
//! It also measures the child's process group from the kernel (`meter.rs`): each renewal
//! carries the totals so far, and once the child has exited the lease keeper holds the
//! final totals for the finish ([`LeaseKeeper::finish_request`]). A keeper that already
//! holds totals (the prepare stage of a two-stage job) has this child's added to them.
//!
//! # Invariants
//! - **The child is dead before the server can hand its slot to someone else** (with
//!   [`WhileUnreachable::StopBeforeExpiry`](crate::WhileUnreachable)): when the keeper
//!   gives up, the SIGKILL deadline is [`LeaseKeeper::kill_by`], which never lies past the
//!   earliest moment the lease can run out on the server; the loop wakes for that deadline
//!   whatever else happens, and the renewal call cannot block past the give-up moment. The
//!   client crate's integration tests check this against a server that stops answering.
//! - **The lease is held while the child stops** after a cancel request or a stop from the
//!   holder, so the job can still be finished (`cancelled`, `failed`) with its lease.
//! - **After a lost lease nothing is renewed**, and [`Ending::Lost`] wins over every other
//!   ending: such a job is no longer ours to finish.
//! - A deadline only moves earlier: a later, more urgent reason shortens the grace; nothing
//!   extends it.

use crate::cancel_watch::CancelWatch;
use crate::child::{Signal, Supervised};
use crate::lease::{LeaseKeeper, Renewal};
use crate::meter::GroupMeter;
use lockgate_api::JobView;
use lockgate_core::Usage;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How often [`Holder::stop_requested`] is asked.
const SLICE: Duration = Duration::from_millis(100);

/// Why the child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself, the lease held throughout.
    Exited,
    /// Cancellation was requested (a renewal said so); it was stopped.
    Cancelled,
    /// A job of higher priority preempted it (a renewal said so); it was stopped. Finish
    /// the job `cancelled`: the server queues it again (same id, next attempt).
    Preempted,
    /// The holder asked to stop ([`Holder::stop_requested`]); it was stopped.
    Stopped,
    /// The job is no longer ours (the server refused a renewal, or could not be reached for
    /// too long); it was stopped. Do not finish the job.
    Lost(String),
}

/// How [`hold`] ended: the child's exit status, why it ended and what it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The child's exit status.
    pub status: ExitStatus,
    /// Why.
    pub ending: Ending,
    /// The job's totals at the child's exit (the earlier stages' included), as the lease
    /// keeper now reports them.
    pub usage: Usage,
}

/// The holder's part in [`hold`]: every method has a default that does nothing.
pub trait Holder {
    /// Asked about every 100 ms while the child runs: true stops it (the agent stopping).
    fn stop_requested(&mut self) -> bool {
        false
    }

    /// Every successful renewal's answer (a prepared job may learn it got its run slot).
    fn renewed(&mut self, _job: &JobView) {}

    /// The child is being stopped (SIGTERM sent) because of `why`: for the log.
    fn stopping(&mut self, _why: &Ending) {}

    /// The lease cannot run out on the server before `at` (told at the start and after
    /// every successful renewal): a [`crate::guard::Guard`] needs it.
    fn lease_until(&mut self, _at: Instant) {}
}

/// A [`Holder`] that only holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct JustHold;

impl Holder for JustHold {}

/// How a child is stopped: `signal` to its process group, SIGKILL `grace` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    /// The first signal (restic removes its lock only on SIGINT).
    pub signal: Signal,
    /// Time from the first signal to SIGKILL.
    pub grace: Duration,
}

impl Stop {
    /// SIGTERM, then SIGKILL after `grace`.
    pub fn term(grace: Duration) -> Stop {
        Stop {
            signal: Signal::TERM,
            grace,
        }
    }
}

/// Parses a signal name (`INT`, `SIGINT`, `term`) or number (`2`).
///
/// # Errors
/// A message naming the accepted names when `text` is none of them.
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    const NAMES: [(&str, Signal); 8] = [
        ("HUP", Signal::HUP),
        ("INT", Signal::INT),
        ("QUIT", Signal::QUIT),
        ("TERM", Signal::TERM),
        ("USR1", Signal::USR1),
        ("USR2", Signal::USR2),
        ("KILL", Signal::KILL),
        ("ALRM", Signal::ALARM),
    ];
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some((_, s)) = NAMES.iter().find(|(n, _)| *n == name) {
        return Ok(*s);
    }
    if let Some(s) = name.parse::<i32>().ok().and_then(Signal::from_named_raw) {
        return Ok(s);
    }
    let names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
    Err(format!(
        "unknown signal {text:?}: expected a name ({}) or a signal number",
        names.join(", ")
    ))
}

/// The state of one [`hold`].
struct Hold<'a, H> {
    child: &'a mut Supervised,
    lease: &'a mut LeaseKeeper,
    holder: &'a mut H,
    grace: Duration,
    signal: Signal,
    ending: Ending,
    /// When SIGKILL is due (set once the child is being stopped, cleared once it was sent).
    kill_at: Option<Instant>,
    stopping: bool,
    renewing: bool,
    watch: CancelWatch,
    meter: GroupMeter,
}

/// Holds `lease` while `child` runs; returns when the child has exited. See the module docs.
/// Stops it with SIGTERM; [`hold_with`] takes another signal.
pub fn hold(
    child: &mut Supervised,
    lease: &mut LeaseKeeper,
    grace: Duration,
    holder: &mut impl Holder,
) -> Held {
    hold_with(child, lease, Stop::term(grace), holder)
}

/// [`hold`], stopping the child with `stop.signal` and SIGKILL `stop.grace` later.
pub fn hold_with(
    child: &mut Supervised,
    lease: &mut LeaseKeeper,
    stop: Stop,
    holder: &mut impl Holder,
) -> Held {
    let watch = CancelWatch::start(lease.client().clone(), lease.job_id());
    holder.lease_until(lease.expires_no_earlier_than());
    let meter = GroupMeter::after(child.pid(), lease.usage().unwrap_or_default());
    let mut h = Hold {
        meter,
        watch,
        child,
        lease,
        holder,
        grace: stop.grace,
        signal: stop.signal,
        ending: Ending::Exited,
        kill_at: None,
        stopping: false,
        renewing: true,
    };
    loop {
        let now = Instant::now();
        let mut until = now + SLICE;
        if h.renewing {
            until = until.min(h.lease.next_renewal());
        }
        if let Some(k) = h.kill_at {
            until = until.min(k);
        }
        if let Some(status) = h.child.wait_timeout(until.saturating_duration_since(now)) {
            if h.stopping {
                // Its SIGKILL already sent when `kill_at` is gone.
                h.child.wait_group(h.kill_at.unwrap_or_else(Instant::now));
            }
            let usage = h.meter.finish(h.child.usage_at_exit());
            h.lease.report(usage);
            return Held {
                status,
                ending: h.ending,
                usage,
            };
        }
        h.step();
    }
}

impl<H: Holder> Hold<'_, H> {
    /// One wake-up: a due SIGKILL, the holder's stop, a due renewal.
    fn step(&mut self) {
        if self.kill_at.is_some_and(|k| Instant::now() >= k) {
            self.child.signal(Signal::KILL);
            self.kill_at = None;
        }
        if !self.stopping && self.holder.stop_requested() {
            self.stop(Ending::Stopped, Instant::now() + self.grace);
        }
        if let Some(job) = self.watch.requested() {
            self.cancel_requested(&job);
        }
        if !self.renewing || Instant::now() < self.lease.next_renewal() {
            return;
        }
        self.lease.report(self.meter.sample());
        self.lease.report_node(crate::meter::node_sample());
        match self.lease.renew() {
            Renewal::Held(job) => {
                self.holder
                    .lease_until(self.lease.expires_no_earlier_than());
                self.holder.renewed(&job);
                self.cancel_requested(&job);
            }
            Renewal::Retrying(_) => {}
            Renewal::GiveUp(why) => {
                self.renewing = false;
                let kill_by = self.lease.kill_by(Instant::now(), self.grace);
                self.stop(Ending::Lost(why), kill_by);
            }
            Renewal::Lost(e) => {
                self.renewing = false;
                self.stop(
                    Ending::Lost(format!("lease lost: {e}")),
                    Instant::now() + self.grace,
                );
            }
        }
    }

    /// Stops the child when `job` (a renewal's answer, or the watch's) asks for it.
    fn cancel_requested(&mut self, job: &JobView) {
        if job.cancel_requested && !self.stopping {
            let why = if job.preempted() {
                Ending::Preempted
            } else {
                Ending::Cancelled
            };
            self.stop(why, Instant::now() + self.grace);
        }
    }

    /// Stops the child for `why` with SIGKILL by `kill_by` (or earlier, if already due).
    fn stop(&mut self, why: Ending, kill_by: Instant) {
        let lost = matches!(why, Ending::Lost(_));
        if !self.stopping || lost {
            self.holder.stopping(&why);
        }
        if !self.stopping {
            self.child.signal(self.signal);
            self.stopping = true;
            self.kill_at = Some(kill_by);
        } else if let Some(k) = self.kill_at {
            self.kill_at = Some(k.min(kill_by));
        }
        if lost || self.ending == Ending::Exited {
            self.ending = why;
        }
    }
}
