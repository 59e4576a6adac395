//! One job on this node: the prepare handler (two-stage jobs), `prepared`, the wait for
//! the run slot, the run handler, and the finish; the lease is renewed throughout.
//!
//! # Invariants
//! - the lease is renewed every TTL/3 for as long as the job is held, handler running or
//!   not (a prepared job waiting for its run slot holds prepared resources);
//! - a handler is stopped (SIGTERM to its process group, SIGKILL after the grace period)
//!   as soon as the job is no longer ours: lease lost, cancel requested, the server
//!   unreachable past `unreachable_grace`, or the agent stopping;
//! - the job is finished exactly once by this worker, with the handler's exit status and
//!   the last lines of its output; a job whose lease was lost is not finished (it is no
//!   longer ours to finish).

use super::{temporary, Backoff, Shared, WorkerMsg};
use crate::child::{self, Supervised};
use crate::config::Stage;
use crate::output::{join_readers, Tail};
use crate::template::{attr_env_name, render_argv, Context};
use lockgate_api::{ClientError, JobView};
use lockgate_core::{JobState, Outcome};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

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

/// What a lease renewal said.
enum Renewal {
    Ok,
    Cancel,
    Lost(String),
}

struct Worker<'a> {
    sh: &'a Shared,
    job: JobView,
    token: u64,
    rx: mpsc::Receiver<WorkerMsg>,
    every: Duration,
    last_ok: Instant,
    run_assigned: bool,
}

/// Runs a job from `stage` to its end.
pub(crate) fn work(
    sh: &Shared,
    job: JobView,
    token: u64,
    stage: Stage,
    rx: mpsc::Receiver<WorkerMsg>,
) {
    let ttl = job
        .lease
        .as_ref()
        .map(|l| l.ttl_s)
        .unwrap_or(30.0)
        .max(0.03);
    let mut w = Worker {
        sh,
        job,
        token,
        rx,
        every: Duration::from_secs_f64(ttl / 3.0),
        last_ok: Instant::now(),
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
            if !self.report_prepared() || !self.wait_for_run() {
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
            Ended::Lost(why) => tracing::warn!("job {id}: {why}; the {stage} handler was stopped"),
        }
    }

    /// Renews the lease once.
    fn renew(&mut self) -> Renewal {
        match self.sh.client.heartbeat(self.id(), self.token) {
            Ok(job) => {
                self.last_ok = Instant::now();
                if let Some(l) = &job.lease {
                    self.every = Duration::from_secs_f64(l.ttl_s.max(0.03) / 3.0);
                }
                let cancel = job.cancel_requested;
                if job.state == JobState::Running {
                    self.run_assigned = true;
                }
                self.job = job;
                if cancel {
                    Renewal::Cancel
                } else {
                    Renewal::Ok
                }
            }
            Err(e) if temporary(&e) => {
                if self.last_ok.elapsed() > self.sh.config.unreachable_grace {
                    Renewal::Lost(format!(
                        "the server was unreachable for longer than unreachable_grace ({:?}): {e}",
                        self.sh.config.unreachable_grace
                    ))
                } else {
                    Renewal::Ok
                }
            }
            Err(e) => Renewal::Lost(format!("lease lost: {e}")),
        }
    }

    /// When to renew next: every TTL/3, faster while the server is unreachable.
    fn renew_interval(&self) -> Duration {
        if self.last_ok.elapsed() > self.every {
            (self.every / 3).clamp(Duration::from_millis(10), Duration::from_secs(1))
        } else {
            self.every
        }
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
        let mut readers = Vec::new();
        if let Some(p) = child.stdout.take() {
            readers.push(tail.read_from(p, label.clone()));
        }
        if let Some(p) = child.stderr.take() {
            readers.push(tail.read_from(p, label));
        }
        let mut proc = Supervised::new(child);
        tracing::info!(
            "job {} {}: {stage} started (pid {})",
            job.id,
            job.kind,
            proc.pid()
        );
        let mut next_renew = Instant::now() + self.every;
        let slice = Duration::from_millis(100);
        let end = loop {
            let wait = next_renew
                .saturating_duration_since(Instant::now())
                .min(slice);
            if let Some(s) = proc.wait_timeout(wait) {
                break Ok(s);
            }
            match self.rx.try_recv() {
                Ok(WorkerMsg::Stop) => break Err(None),
                Ok(WorkerMsg::Run) => self.run_assigned = true,
                Err(_) => {}
            }
            if Instant::now() >= next_renew {
                match self.renew() {
                    Renewal::Ok => {}
                    Renewal::Cancel => break Err(Some(Ok(()))),
                    Renewal::Lost(why) => break Err(Some(Err(why))),
                }
                next_renew = Instant::now() + self.renew_interval();
            }
        };
        let grace = sh.config.grace;
        let result = match end {
            Ok(s) => {
                join_readers(readers, Duration::from_millis(200));
                Ended::Exited(s, tail.lines())
            }
            Err(None) => {
                let s = proc.terminate(grace);
                join_readers(readers, Duration::from_millis(200));
                Ended::Stopping(s, tail.lines())
            }
            Err(Some(Ok(()))) => {
                tracing::info!(
                    "job {}: cancel requested; stopping the {stage} handler",
                    self.id()
                );
                let s = proc.terminate(grace);
                join_readers(readers, Duration::from_millis(200));
                Ended::Cancelled(s, tail.lines())
            }
            Err(Some(Err(why))) => {
                proc.terminate(grace);
                Ended::Lost(why)
            }
        };
        if let Ended::Exited(s, _) = &result {
            tracing::info!("job {} {stage}: {}", self.id(), child::describe(*s));
        }
        result
    }

    /// Reports `prepared`; false when the job is no longer ours (or the agent stops).
    fn report_prepared(&mut self) -> bool {
        let id = self.id();
        let mut backoff = Backoff::new();
        let since = Instant::now();
        loop {
            match self.sh.client.prepared(id, self.token) {
                Ok(job) => {
                    if job.state == JobState::Running {
                        self.run_assigned = true;
                    }
                    self.job = job;
                    return true;
                }
                Err(e) if temporary(&e) && since.elapsed() < self.sh.config.unreachable_grace => {}
                Err(e) if e.code() == Some("wrong_state") => {
                    // An earlier try got through and its answer was lost.
                    return match self.sh.client.job(id) {
                        Ok(j) if matches!(j.state, JobState::Prepared | JobState::Running) => true,
                        _ => {
                            tracing::warn!("job {id}: prepared: {e}");
                            false
                        }
                    };
                }
                Err(e) => {
                    tracing::warn!("job {id}: reporting prepared failed: {e}");
                    return false;
                }
            }
            if self.sh.shutdown.wait_timeout(backoff.next()) {
                self.finish(
                    Outcome::Failed,
                    format!(
                        "agent on node {} stopping while reporting prepared",
                        self.sh.node
                    ),
                );
                return false;
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
            match self.rx.recv_timeout(self.renew_interval()) {
                Ok(WorkerMsg::Run) => return true,
                Ok(WorkerMsg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                    self.finish(
                        Outcome::Failed,
                        format!("agent on node {} stopping; the job was prepared and waiting for its run slot", self.sh.node),
                    );
                    return false;
                }
                Err(RecvTimeoutError::Timeout) => match self.renew() {
                    Renewal::Ok => {}
                    Renewal::Cancel => {
                        self.finish(Outcome::Cancelled, "cancel requested while prepared".into());
                        return false;
                    }
                    Renewal::Lost(why) => {
                        tracing::warn!("job {id}: {why} (prepared, waiting for its run slot)");
                        return false;
                    }
                },
            }
        }
    }

    /// Finishes the job, retrying while the server is unreachable.
    fn finish(&mut self, outcome: Outcome, message: String) {
        let id = self.id();
        let mut backoff = Backoff::new();
        let since = Instant::now();
        loop {
            match self
                .sh
                .client
                .finish_job(id, self.token, outcome, Some(message.clone()))
            {
                Ok(j) => {
                    tracing::info!("job {id} {}: {}", j.kind, j.state);
                    return;
                }
                Err(e) if temporary(&e) && since.elapsed() < self.sh.config.unreachable_grace => {}
                Err(e) => {
                    log_finish_error(id, &e);
                    return;
                }
            }
            std::thread::sleep(backoff.next());
        }
    }
}

fn log_finish_error(id: u64, e: &ClientError) {
    if e.code() == Some("lease_lost") {
        tracing::warn!("job {id}: could not finish, the lease was lost: {e}");
    } else {
        tracing::warn!("job {id}: finish failed: {e}");
    }
}
