//! One job on this node: the prepare handler (two-stage jobs), `prepared`, the wait for
//! the run slot, the run handler, and the finish; the lease is renewed throughout.
//!
//! # Invariants
//! - the lease is kept by one [`LeaseKeeper`] (every TTL/3, faster while the server is
//!   unreachable) for as long as the job is held, handler running or not (a prepared job
//!   waiting for its run slot holds prepared resources);
//! - a handler runs under [`lockgate_client::hold`], which stops it (SIGTERM to its process
//!   group, SIGKILL after the grace period) as soon as the job is no longer ours: lease
//!   lost, cancel requested, the server unreachable past `unreachable_grace`, or the agent
//!   stopping;
//! - no handler starts before [`LeaseKeeper::confirm`] has had a renewal through (an
//!   assignment may have been granted long before it was fetched), and none runs twice
//!   under one lease: the finish (and `prepared`) is retried until the server takes it,
//!   so a restarted server that offers the lease again finds this worker;
//! - the job is finished exactly once by this worker, with the handler's exit status and
//!   the last lines of its output; a handler stopped because the lease was lost or the
//!   server was out of reach is finished `failed` (the server refuses that when the lease
//!   really ran out: it is no longer ours to finish);
//! - every line of a handler's output goes to the job's log on the server
//!   (`lockgate_client::logs`, never blocking the handler), and the last lines are sent
//!   before the finish, waiting at most `FINAL_FLUSH` (the server takes lines only from
//!   the job's holder).

use super::{Shared, WorkerMsg};
use crate::config::Stage;
use crate::output::{join_readers, Tail};
use crate::template::{attr_env_name, render_argv, Context};
use lockgate_api::{JobView, LogStream};
use lockgate_client::child::{self, Supervised};
use lockgate_client::{
    hold_with, retry_with, ClientError, Ending, Holder, LeaseKeeper, LogShipper, Renewal,
    RetryError, Stop, WhileUnreachable,
};
use lockgate_core::{JobState, Outcome};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Longest wait for a handler's last lines to reach the server before the job is finished.
const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// How a handler ended.
enum Ended {
    /// It exited by itself.
    Exited(ExitStatus, Vec<String>),
    /// Cancellation was requested; it was stopped.
    Cancelled(ExitStatus, Vec<String>),
    /// The job is no longer ours; it was stopped. Nothing to report.
    Lost(String),
    /// The agent is stopping; it was stopped.
    Stopping(ExitStatus, Vec<String>),
    /// It could not be started (missing handler or attribute, bad program).
    NotStarted(String),
}

struct Worker<'a> {
    sh: &'a Shared,
    job: JobView,
    token: u64,
    rx: mpsc::Receiver<WorkerMsg>,
    lease: LeaseKeeper,
    run_assigned: bool,
}

/// What a worker learns while its handler runs: a stop from the agent, the run slot.
struct Listener<'a> {
    rx: &'a mpsc::Receiver<WorkerMsg>,
    run_assigned: &'a mut bool,
    job: &'a mut JobView,
    stage: Stage,
}

impl Holder for Listener<'_> {
    fn stop_requested(&mut self) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(WorkerMsg::Stop) => return true,
                Ok(WorkerMsg::Run) => *self.run_assigned = true,
                Err(_) => return false,
            }
        }
    }

    fn renewed(&mut self, job: &JobView) {
        if job.state == JobState::Running {
            *self.run_assigned = true;
        }
        *self.job = job.clone();
    }

    fn stopping(&mut self, why: &Ending) {
        if *why == Ending::Preempted {
            tracing::info!(
                "job {}: preempted; stopping the {} handler (the job is queued again)",
                self.job.id,
                self.stage
            );
        }
        if *why == Ending::Cancelled {
            tracing::info!(
                "job {}: cancel requested; stopping the {} handler",
                self.job.id,
                self.stage
            );
        }
    }
}

/// Runs a job from `stage` to its end.
pub(crate) fn work(
    sh: &Shared,
    job: JobView,
    token: u64,
    stage: Stage,
    rx: mpsc::Receiver<WorkerMsg>,
) {
    let ttl = job.lease.as_ref().map(|l| l.ttl_s).unwrap_or(30.0);
    let ttl = Duration::try_from_secs_f64(ttl).unwrap_or(Duration::from_secs(30));
    let lease = LeaseKeeper::new(
        sh.client.clone(),
        job.id,
        token,
        ttl,
        WhileUnreachable::HoldFor(sh.config.unreachable_grace),
    );
    let mut w = Worker {
        sh,
        job,
        token,
        rx,
        lease,
        run_assigned: stage == Stage::Run,
    };
    w.go(stage);
}

fn with_output(head: String, lines: &[String]) -> String {
    if lines.is_empty() {
        head
    } else {
        format!("{head}; last output:\n{}", lines.join("\n"))
    }
}

impl Worker<'_> {
    fn id(&self) -> u64 {
        self.job.id
    }

    fn go(&mut self, stage: Stage) {
        let id = self.id();
        // An assignment may have been granted well before this agent fetched it (or its
        // answer held up): no handler starts before a renewal sent from here confirms the
        // lease (lockgate_client::lease).
        if let Err(why) = self.lease.confirm() {
            tracing::warn!("job {id}: {why}; no handler was started");
            return;
        }
        let Some(handler) = self.sh.config.handlers.get(&self.job.kind) else {
            let msg = format!(
                "node {}: no handler for kind {:?} in the agent's configuration",
                self.sh.node, self.job.kind
            );
            return self.finish(Outcome::Failed, msg);
        };
        if stage == Stage::Prepare {
            if handler.prepare.is_some() {
                match self.run_handler(Stage::Prepare) {
                    Ended::Exited(s, out) if s.success() => {
                        tracing::debug!("job {id}: prepare done");
                        let _ = out;
                    }
                    end => return self.report(Stage::Prepare, end),
                }
            }
            if !self.report_prepared() {
                return;
            }
            // Reporting may have waited out a server restart: count the lease from a
            // renewal sent now, not from the last one before the wait.
            if let Err(why) = self.lease.confirm() {
                tracing::warn!("job {id}: {why} (prepared)");
                return self.fail_prepared(&why);
            }
            if !self.wait_for_run() {
                return;
            }
        }
        let end = self.run_handler(Stage::Run);
        self.report(Stage::Run, end)
    }

    /// Finishes the job as `end` says.
    fn report(&mut self, stage: Stage, end: Ended) {
        let id = self.id();
        match end {
            Ended::Exited(s, out) => {
                let head = format!("{stage}: {}", child::describe(s));
                let outcome = if s.success() {
                    Outcome::Succeeded
                } else {
                    Outcome::Failed
                };
                self.finish(outcome, with_output(head, &out))
            }
            Ended::Cancelled(s, out) => {
                let head = format!(
                    "cancel requested; {stage} handler stopped ({})",
                    child::describe(s)
                );
                self.finish(Outcome::Cancelled, with_output(head, &out))
            }
            Ended::Stopping(s, out) => {
                let head = format!(
                    "agent on node {} stopping; {stage} handler stopped ({})",
                    self.sh.node,
                    child::describe(s)
                );
                self.finish(Outcome::Failed, with_output(head, &out))
            }
            Ended::NotStarted(msg) => self.finish(Outcome::Failed, format!("{stage}: {msg}")),
            Ended::Lost(why) => {
                tracing::warn!("job {id}: {why}; the {stage} handler was stopped");
                // When the server was only out of reach (or restarted), the lease may still
                // be ours there: say the attempt failed, so the server's retry policy
                // decides what runs next (a new attempt under a new token), never this
                // lease again. A lease that ran out is refused, and nothing changes.
                self.finish(
                    Outcome::Failed,
                    format!(
                        "{stage}: the handler was stopped on node {}: {why}",
                        self.sh.node
                    ),
                )
            }
        }
    }

    /// Renews the lease once (the prepared job waiting for its run slot).
    fn renew(&mut self) -> Renewal {
        let r = self.lease.renew();
        if let Renewal::Held(job) = &r {
            if job.state == JobState::Running {
                self.run_assigned = true;
            }
            self.job = (**job).clone();
        }
        r
    }

    /// Starts the stage's handler and holds the lease until it exits.
    fn run_handler(&mut self, stage: Stage) -> Ended {
        let sh = self.sh;
        let job = &self.job;
        let handler = &sh.config.handlers[&job.kind];
        let Some(argv) = handler.argv(stage) else {
            return Ended::NotStarted("no handler for this stage".into());
        };
        let cx = Context {
            job_id: job.id,
            kind: &job.kind,
            node: &sh.node,
            attrs: &job.attrs,
            allow_dash_values: handler.allow_dash_values,
        };
        let argv = match render_argv(argv, &cx) {
            Ok(a) => a,
            Err(e) => return Ended::NotStarted(e.to_string()),
        };
        let mut cmd = sh.launcher.command(&argv);
        cmd.env_remove("LOCKGATE_TOKEN")
            .env("LOCKGATE_JOB_ID", job.id.to_string())
            .env("LOCKGATE_JOB_KIND", &job.kind)
            .env("LOCKGATE_NODE", &sh.node)
            .env("LOCKGATE_STAGE", stage.as_str())
            .env("LOCKGATE_ATTEMPT", job.attempt.to_string())
            .env("LOCKGATE_FENCING_TOKEN", self.token.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &job.attrs {
            cmd.env(attr_env_name(k), v);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return Ended::NotStarted(format!("cannot start {:?}: {e}", argv[0])),
        };
        let tail = Tail::new(sh.config.output_lines);
        let label = format!("job {} {stage}", job.id);
        let shipper = LogShipper::start(sh.client.clone(), job.id, self.token);
        let mut readers = Vec::new();
        if let Some(p) = child.stdout.take() {
            let sink = Some(shipper.sink());
            readers.push(tail.read_logged(p, label.clone(), LogStream::Stdout, sink));
        }
        if let Some(p) = child.stderr.take() {
            let sink = Some(shipper.sink());
            readers.push(tail.read_logged(p, label, LogStream::Stderr, sink));
        }
        let mut proc = Supervised::new(child);
        tracing::info!(
            "job {} {}: {stage} started (pid {})",
            job.id,
            job.kind,
            proc.pid()
        );
        let mut listener = Listener {
            rx: &self.rx,
            run_assigned: &mut self.run_assigned,
            job: &mut self.job,
            stage,
        };
        let stop = Stop {
            signal: handler.stop_signal,
            grace: handler.stop_grace.unwrap_or(sh.config.grace),
        };
        let held = hold_with(&mut proc, &mut self.lease, stop, &mut listener);
        let s = held.status;
        let result = match held.ending {
            Ending::Lost(why) => Ended::Lost(why),
            ending => {
                join_readers(readers, Duration::from_millis(200));
                send_last_lines(self.id(), shipper);
                let lines = tail.lines();
                match ending {
                    // Preempted: finished `cancelled`, the server queues the job again and
                    // assigns it anew (same id, next attempt).
                    Ending::Cancelled | Ending::Preempted => Ended::Cancelled(s, lines),
                    Ending::Stopped => Ended::Stopping(s, lines),
                    _ => Ended::Exited(s, lines),
                }
            }
        };
        if let Ended::Exited(s, _) = &result {
            tracing::info!("job {} {stage}: {}", self.id(), child::describe(*s));
        }
        result
    }

    /// Finishes a prepared job failed: its lease could not be kept (`why`).
    fn fail_prepared(&mut self, why: &str) {
        let message = format!("prepared on node {}, then {why}", self.sh.node);
        self.finish(Outcome::Failed, message);
    }

    /// Reports `prepared`; false when the job is no longer ours (or the agent stops).
    fn report_prepared(&mut self) -> bool {
        let id = self.id();
        // The prepare handler has run: keep saying so until the server takes it (a
        // restarted server offers the same lease again, and it must find this worker, not
        // run the handler twice) or the agent stops.
        let sh = &self.sh;
        let reported = retry_with(
            |pause, _| !sh.shutdown.wait_timeout(pause),
            || sh.client.prepared(id, self.token),
        );
        match reported {
            Ok(job) => {
                if job.state == JobState::Running {
                    self.run_assigned = true;
                }
                self.job = job;
                true
            }
            Err(RetryError::GaveUp(_)) => {
                self.finish(
                    Outcome::Failed,
                    format!(
                        "agent on node {} stopping while reporting prepared",
                        self.sh.node
                    ),
                );
                false
            }
            Err(RetryError::Permanent(e)) if e.code() == Some("wrong_state") => {
                // An earlier try got through and its answer was lost.
                match self.sh.client.job(id) {
                    Ok(j) if matches!(j.state, JobState::Prepared | JobState::Running) => true,
                    _ => {
                        tracing::warn!("job {id}: prepared: {e}");
                        false
                    }
                }
            }
            Err(RetryError::Permanent(e)) => {
                tracing::warn!("job {id}: reporting prepared failed: {e}");
                false
            }
        }
    }

    /// Holds the lease of a prepared job until its run slot is assigned.
    fn wait_for_run(&mut self) -> bool {
        let id = self.id();
        loop {
            if self.run_assigned {
                return true;
            }
            let wait = self
                .lease
                .next_renewal()
                .saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(WorkerMsg::Run) => return true,
                Ok(WorkerMsg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                    self.finish(
                        Outcome::Failed,
                        format!("agent on node {} stopping; the job was prepared and waiting for its run slot", self.sh.node),
                    );
                    return false;
                }
                Err(RecvTimeoutError::Timeout) => match self.renew() {
                    Renewal::Held(job) if job.cancel_requested => {
                        self.finish(Outcome::Cancelled, "cancel requested while prepared".into());
                        return false;
                    }
                    Renewal::Held(_) | Renewal::Retrying(_) => {}
                    Renewal::GiveUp(why) => {
                        tracing::warn!("job {id}: {why} (prepared, waiting for its run slot)");
                        self.fail_prepared(&why);
                        return false;
                    }
                    Renewal::Lost(e) => {
                        tracing::warn!(
                            "job {id}: lease lost: {e} (prepared, waiting for its run slot)"
                        );
                        return false;
                    }
                },
            }
        }
    }

    /// Finishes the job, retrying for as long as the server cannot take it (unreachable,
    /// restarting, its disk full) and the agent runs. The worker stays registered
    /// meanwhile, so a server that restarted and offers the same lease again finds this
    /// worker, and the handler never runs twice under one lease; once the server answers,
    /// the finish goes through, or is refused because the lease ran out there.
    fn finish(&mut self, outcome: Outcome, message: String) {
        let id = self.id();
        let since = Instant::now();
        let mut said = false;
        let sh = &self.sh;
        let wait = |pause, e: &ClientError| {
            if !said {
                tracing::warn!(
                    "job {id}: finishing ({outcome:?}): {e}; retrying until the server takes it"
                );
                said = true;
            }
            if !sh.shutdown.is_triggered() {
                sh.shutdown.wait_timeout(pause);
            } else if since.elapsed() < sh.config.unreachable_grace {
                std::thread::sleep(pause);
            } else {
                return false;
            }
            true
        };
        let body = self.lease.finish_request(outcome, Some(message));
        let finished = retry_with(wait, || sh.client.finish_with(id, &body));
        match finished {
            Ok(j) => tracing::info!("job {id} {}: {}", j.kind, j.state),
            Err(RetryError::GaveUp(_)) => tracing::warn!("job {id}: the agent is stopping and the server did not take the finish ({outcome:?}) within unreachable_grace; the job ends lost when its lease runs out"),
            Err(RetryError::Permanent(e)) => log_finish_error(id, &e),
        }
    }
}

/// Sends the handler's last lines to the job's log before the job is finished (the server
/// takes lines only from the job's holder), waiting at most [`FINAL_FLUSH`].
fn send_last_lines(id: u64, shipper: LogShipper) {
    match shipper.finish(FINAL_FLUSH) {
        None => tracing::warn!(
            "job {id}: the server did not take the last lines of the output within {FINAL_FLUSH:?}"
        ),
        Some(s) if s.unreported > 0 => tracing::warn!(
            "job {id}: {} lines of the output were not stored ({})",
            s.unreported,
            s.refused
                .as_deref()
                .unwrap_or("the server was slow or down")
        ),
        Some(_) => {}
    }
}

fn log_finish_error(id: u64, e: &ClientError) {
    if e.code() == Some("lease_lost") {
        tracing::warn!("job {id}: could not finish, the lease was lost: {e}");
    } else {
        tracing::warn!("job {id}: finish failed: {e}");
    }
}
