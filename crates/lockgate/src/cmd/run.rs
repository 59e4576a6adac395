//! `lockgate run`: submit a client job, wait for admission, run the command, hold the
//! lease while it runs, finish with its exit status (api.md, "lockgate run semantics").
//!
//! Threads: the main thread submits, waits, and then holds the child under its lease with
//! `lockgate_client::hold` (renew every TTL/3, stop the child when the lease is lost,
//! cancellation is requested or the server is unreachable for too long: the child is dead
//! before the server can hand its slot to someone else); a signal thread handles
//! SIGINT/SIGTERM (cancel before the start, forward to the child's process group after).
//! [`Phase`] under one mutex orders them: the child is spawned only while the phase is
//! still `Waiting`, so an interrupt never races a start.
//!
//! The job flags are those of `job submit` ([`flags::JobFlags`]).
//!
//! The forked child asks the kernel for `PR_SET_PDEATHSIG` (SIGKILL) before it `exec`s the
//! command ([`child::Launcher`]): a killed wrapper takes its command with it, so no work
//! runs on a slot the server hands to someone else. The child gets its own process group,
//! so a terminal's Ctrl+C reaches lockgate, which forwards it.

mod log;
mod unadmitted;

use super::exit::Exit;
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::{ExplainView, JobView};
use lockgate_client::child::{self, describe, Supervised};
use lockgate_client::{
    hold_with, Client, ClientError, Ending, Holder, LeaseKeeper, RetryError, Stop, WhileUnreachable,
};
use lockgate_core::{JobState, Outcome};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Exit code: the job could not run (expired, cancelled, lease lost).
pub const EXIT_NOT_RUN: u8 = Exit::NotRun.code();
/// Exit code: the server refused the token.
pub const EXIT_TOKEN: u8 = Exit::Token.code();
/// Exit code: the server could not be reached within `--connect-timeout`.
pub const EXIT_UNREACHABLE: u8 = Exit::Unreachable.code();
/// Exit code: interrupted before the command started.
pub const EXIT_INTERRUPTED: u8 = Exit::Interrupted.code();
/// Exit code: usage error, or a request the server refused.
pub const EXIT_USAGE: u8 = Exit::Usage.code();

/// Arguments of `lockgate run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub wait: flags::ClientJobFlags,
    /// When the server cannot be reached within --connect-timeout: `fail` (exit 69, the
    /// command does not run) or `run` (run it without admission, and report the run to the
    /// server once it is back; it is recorded as `unadmitted`). Default: the policy's
    /// `if_unreachable` for the kind, as last seen from this server, else `fail`.
    #[arg(long, value_enum)]
    pub if_unreachable: Option<unadmitted::IfUnreachable>,
    /// Write the job's final JSON here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// After the stop signal to a command that must stop (lease lost, cancel requested,
    /// preempted), wait this long before SIGKILL (`--grace` is the old name).
    #[arg(long = "stop-grace", visible_alias = "grace", default_value = "10s", value_parser = flags::duration)]
    pub grace: Duration,
    /// The signal that stops the command (cancel, lease lost, preemption): a name (INT,
    /// TERM, HUP, QUIT, USR1, ...) or a number. restic removes its lock only on INT.
    #[arg(long, default_value = "TERM", value_parser = lockgate_client::parse_signal)]
    pub stop_signal: child::Signal,
    /// Send the command's output (stdout and stderr, line by line, with the time) to the
    /// server as the job's log (`lockgate job logs ID`). The command then writes to pipes,
    /// which lockgate copies to its own stdout and stderr unchanged. Default: the kind's
    /// `[kinds.NAME].log` in the policy (false).
    #[arg(long, conflicts_with = "no_log")]
    pub log: bool,
    /// Do not send the output, whatever the policy says.
    #[arg(long)]
    pub no_log: bool,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `lockgate __guard` (internal).
#[derive(Debug, clap::Args)]
pub struct GuardArgs {
    /// The stop signal's number.
    #[arg(long)]
    signal: i32,
    /// The stop grace, in milliseconds.
    #[arg(long)]
    grace_ms: u64,
}

/// Runs the guard (`lockgate_client::guard::run_guard`).
pub fn guard(args: GuardArgs) -> anyhow::Result<ExitCode> {
    let signal = child::Signal::from_named_raw(args.signal)
        .ok_or_else(|| anyhow::anyhow!("unknown signal {}", args.signal))?;
    lockgate_client::guard::run_guard(signal, Duration::from_millis(args.grace_ms));
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Submitting,
    Waiting(u64),
    Running(u64, i32),
    Interrupted,
    Done,
}

struct Shared {
    phase: Mutex<Phase>,
    client: Client,
    report: Option<PathBuf>,
    /// Send the command's output to the job's log (`--log`; decided once the job is
    /// submitted, so an unreachable server costs no extra wait).
    log: std::sync::atomic::AtomicBool,
    /// The signal (SIGINT, SIGTERM) lockgate got and forwarded to the running command, 0
    /// when none: the job then ends `cancelled` (an operator's interrupt), not `failed`.
    forwarded: std::sync::atomic::AtomicI32,
}

impl Shared {
    fn write_report(&self, job: Option<&JobView>) {
        if let (Some(path), Some(job)) = (&self.report, job) {
            let text = serde_json::to_string_pretty(job).expect("serializes");
            if let Err(e) = std::fs::write(path, text + "\n") {
                eprintln!("lockgate: cannot write the report {}: {e}", path.display());
            }
        }
    }

    fn final_report(&self, id: u64) {
        if self.report.is_some() {
            let job = self.client.job(id).ok();
            self.write_report(job.as_ref());
        }
    }
}

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// What to do with an error that is not "unreachable".
pub(crate) fn fatal(e: &ClientError) -> u8 {
    eprintln!("lockgate: {e}");
    if Exit::is_token_refusal(e) {
        return EXIT_TOKEN;
    }
    match e.status() {
        Some(s) if (400..500).contains(&s) && s != 404 && s != 409 => EXIT_USAGE,
        _ => EXIT_NOT_RUN,
    }
}

/// Calls `f` until it succeeds or fails permanently, for at most `timeout` of temporary
/// errors (`Err(None)` then, with a message).
pub(crate) fn retrying<T>(
    timeout: Duration,
    f: impl FnMut() -> Result<T, ClientError>,
) -> Result<T, Option<ClientError>> {
    match lockgate_client::retry(timeout, f) {
        Ok(v) => Ok(v),
        Err(RetryError::GaveUp(e)) => {
            eprintln!("lockgate: {e}; gave up after {timeout:?}");
            Err(None)
        }
        Err(RetryError::Permanent(e)) => Err(Some(e)),
    }
}

pub(crate) fn status_line(job: &JobView, ex: Option<&ExplainView>) -> String {
    let Some(ex) = ex else {
        return format!("{}: job {}", job.state, job.id);
    };
    let mut parts = vec![format!(
        "{} in line",
        lockgate_core::explain::ordinal(ex.position)
    )];
    for r in &ex.reasons {
        match (&r.scope, r.count, r.limit) {
            (Some(s), Some(c), Some(l)) => parts.push(format!("{s} {c}/{l}")),
            _ => parts.push(r.text.clone()),
        }
    }
    if let Some(e) = ex.estimate.as_ref().filter(|e| e.start_p50.is_some()) {
        parts.push(super::job::estimate_text(e, super::output::now()));
    }
    format!("waiting: {}", parts.join("; "))
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let shared = Arc::new(Shared {
        phase: Mutex::new(Phase::Submitting),
        client: client.clone(),
        report: args.report.clone(),
        log: std::sync::atomic::AtomicBool::new(false),
        forwarded: std::sync::atomic::AtomicI32::new(0),
    });
    spawn_signal_thread(shared.clone())?;
    let req = args.wait.request();
    let interrupted = || *shared.phase.lock().expect("phase lock") == Phase::Interrupted;
    let submitted = retrying(args.wait.connect_timeout, || {
        if interrupted() {
            // Stop retrying; one last attempt below finds (or makes) the job to cancel.
            return Err(ClientError::Setup("interrupted".into()));
        }
        client.submit(&req)
    });
    let job = match submitted {
        Ok((job, _)) => job,
        Err(_) if interrupted() => {
            // An earlier attempt may have created the job although its answer was lost:
            // the same idempotency key finds it, so it can be cancelled.
            if let Ok((job, _)) = client.submit(&req) {
                interrupt(&shared, job.id);
            }
            eprintln!("lockgate: interrupted");
            return Ok(exit(EXIT_INTERRUPTED));
        }
        Err(None) => {
            let why = match args.if_unreachable {
                Some(unadmitted::IfUnreachable::Run) => "--if-unreachable run".to_string(),
                Some(unadmitted::IfUnreachable::Fail) => return Ok(exit(EXIT_UNREACHABLE)),
                None if unadmitted::remembered(&client, &args.wait.kind) => format!(
                    "the policy's if_unreachable = \"run\" for kind {} (as last seen from the server)",
                    args.wait.kind
                ),
                None => return Ok(exit(EXIT_UNREACHABLE)),
            };
            let code = unadmitted::run(
                &shared,
                &args.command,
                &req,
                args.wait.connect_timeout,
                &why,
            )?;
            return Ok(exit(code));
        }
        Err(Some(e)) => {
            let code = fatal(&e);
            if let Some(advice) = session::token_advice(&e, &session::find_token(global).1) {
                eprintln!("lockgate: {advice}");
            }
            return Ok(exit(code));
        }
    };
    unadmitted::flush(&client);
    unadmitted::remember(&client, &job);
    let log = log::wanted(&job, args.log, args.no_log);
    shared.log.store(log, std::sync::atomic::Ordering::Relaxed);
    {
        let mut phase = shared.phase.lock().expect("phase lock");
        if *phase == Phase::Interrupted {
            drop(phase);
            interrupt(&shared, job.id);
        }
        *phase = Phase::Waiting(job.id);
    }
    let mut job = job;
    loop {
        job = match wait_for_admission(&shared, &args, job) {
            Ok(job) => job,
            Err(code) => return Ok(exit(code)),
        };
        let lease = LeaseKeeper::for_job(client.clone(), &job, WhileUnreachable::StopBeforeExpiry)
            .expect("an admitted job holds a lease");
        match run_admitted(&shared, &args, lease, job.attempt)? {
            Run::Done(code) => return Ok(code),
            // Preempted: the job is queued again (same id, next attempt); wait and rerun.
            Run::Again(queued) => {
                *shared.phase.lock().expect("phase lock") = Phase::Waiting(queued.id);
                job = *queued;
            }
        }
    }
}

/// How one run of the command ended.
enum Run {
    /// `lockgate run` exits with this code.
    Done(ExitCode),
    /// The command was preempted and stopped; the job is queued again.
    Again(Box<JobView>),
}

/// What `lockgate run` says while it holds the command.
struct Say {
    id: u64,
    /// Stops the command if this process dies (`lockgate_client::guard`).
    guard: Option<lockgate_client::guard::Guard>,
}

impl Holder for Say {
    fn lease_until(&mut self, at: std::time::Instant) {
        if let Some(g) = &mut self.guard {
            g.lease_until(at);
        }
    }

    fn stopping(&mut self, why: &Ending) {
        match why {
            Ending::Cancelled => eprintln!(
                "lockgate: job {}: cancel requested; stopping the command",
                self.id
            ),
            Ending::Lost(why) => {
                eprintln!("lockgate: job {}: {why}; stopping the command", self.id)
            }
            Ending::Preempted => eprintln!(
                "lockgate: job {}: preempted by a job of higher priority; stopping the command, it runs again once admitted",
                self.id
            ),
            Ending::Exited | Ending::Stopped => {}
        }
    }
}

/// Waits until the job is admitted to run (a status line on a terminal); the exit code
/// when it ends, expires or cannot be waited for instead.
fn wait_for_admission(shared: &Shared, args: &Args, mut job: JobView) -> Result<JobView, u8> {
    let client = &shared.client;
    let tty = std::io::stderr().is_terminal();
    let poll_s = if tty { 2 } else { 30 };
    let mut shown = false;
    loop {
        if job.state.is_admitted() && job.state != JobState::Preparing {
            break;
        }
        if job.is_final() {
            if *shared.phase.lock().expect("phase lock") == Phase::Interrupted {
                park_forever();
            }
            if shown {
                eprintln!();
            }
            eprintln!(
                "lockgate: job {} {}{}",
                job.id,
                job.state,
                job.message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
            shared.write_report(Some(&job));
            return Err(EXIT_NOT_RUN);
        }
        if tty && job.state == JobState::Queued {
            let ex = client.explain(job.id).ok();
            eprint!("\r\x1b[2K{}", status_line(&job, ex.as_ref()));
            let _ = std::io::stderr().flush();
            shown = true;
        }
        let from = job.state;
        job = match retrying(args.wait.connect_timeout, || {
            client.wait(job.id, from, poll_s)
        }) {
            Ok(j) => j,
            Err(None) => return Err(EXIT_UNREACHABLE),
            Err(Some(e)) => return Err(fatal(&e)),
        };
    }
    if shown {
        eprint!("\r\x1b[2K");
    }
    Ok(job)
}

fn run_admitted(
    shared: &Arc<Shared>,
    args: &Args,
    mut lease: LeaseKeeper,
    attempt: u32,
) -> anyhow::Result<Run> {
    let id = lease.job_id();
    let token = lease.token();
    // The grant may have reached us late: the command starts only under a lease that a
    // renewal sent from here has confirmed (lockgate_client::lease).
    if let Err(why) = lease.confirm() {
        eprintln!("lockgate: job {id}: {why}; the command was not started");
        shared.final_report(id);
        return Ok(Run::Done(exit(EXIT_NOT_RUN)));
    }
    let mut guard = start_guard(args);
    let mut child = match start_child(shared, args, id, attempt, token, guard.as_mut())? {
        Ok(c) => c,
        Err(code) => {
            if let Some(g) = guard {
                g.done();
            }
            return Ok(Run::Done(code));
        }
    };
    let logging = shared
        .log
        .load(std::sync::atomic::Ordering::Relaxed)
        .then(|| log::Logging::start(&mut child, shared.client.clone(), id, token));
    let mut child = Supervised::new(child);
    let stop = Stop {
        signal: args.stop_signal,
        grace: args.grace,
    };
    let mut say = Say { id, guard };
    let held = hold_with(&mut child, &mut lease, stop, &mut say);
    {
        *shared.phase.lock().expect("phase lock") = Phase::Done;
    }
    // Told `done` now; reaped when this function returns, after the finish, so the finish
    // does not wait for the guard's exit.
    let _guard_exit = ReapOnDrop(say.guard.take().map(lockgate_client::guard::Guard::release));
    if let Some(l) = logging {
        l.finish(id);
    }
    let status = held.status;
    let code = child::exit_code(status);
    let forwarded = shared.forwarded.load(std::sync::atomic::Ordering::Relaxed);
    let Some((outcome, message)) = finish_outcome(&held.ending, status, forwarded) else {
        eprintln!("lockgate: job {id}: lease lost; the command was stopped");
        shared.final_report(id);
        return Ok(Run::Done(exit(EXIT_NOT_RUN)));
    };
    let body = lease.finish_request(outcome, Some(message));
    let finished = retrying(lease.ttl(), || shared.client.finish_with(id, &body));
    let finished = match finished {
        Ok(j) => j,
        Err(e) => {
            if let Some(e) = e {
                eprintln!("lockgate: job {id}: finishing failed: {e}");
            }
            shared.final_report(id);
            return Ok(Run::Done(exit(EXIT_NOT_RUN)));
        }
    };
    if held.ending == Ending::Preempted && finished.state == JobState::Queued {
        return Ok(Run::Again(Box::new(finished)));
    }
    shared.write_report(Some(&finished));
    if outcome == Outcome::Cancelled && forwarded == 0 {
        return Ok(Run::Done(exit(EXIT_NOT_RUN)));
    }
    Ok(Run::Done(exit(code.clamp(0, 255) as u8)))
}

/// A released guard's process, reaped when dropped.
struct ReapOnDrop(Option<std::process::Child>);

impl Drop for ReapOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// Starts the guard that stops the command if this process dies; `None` (said on stderr)
/// when it cannot start: the command then dies of SIGKILL with this process, as before.
fn start_guard(args: &Args) -> Option<lockgate_client::guard::Guard> {
    let started = std::env::current_exe()
        .and_then(|exe| lockgate_client::guard::Guard::start(&exe, args.stop_signal, args.grace));
    match started {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("lockgate: cannot start the guard ({e}); if lockgate run dies, the command dies of SIGKILL");
            None
        }
    }
}

/// Spawns the command while the phase is still `Waiting` (an interrupt came first: parks,
/// the signal thread exits), with the job's id, attempt and fencing token in its
/// environment. A command that cannot start fails the job: `Err` holds the exit code then.
fn start_child(
    shared: &Shared,
    args: &Args,
    id: u64,
    attempt: u32,
    token: u64,
    guard: Option<&mut lockgate_client::guard::Guard>,
) -> anyhow::Result<Result<std::process::Child, ExitCode>> {
    let mut phase = shared.phase.lock().expect("phase lock");
    if *phase != Phase::Waiting(id) {
        // Interrupted: the signal thread cancels and exits.
        drop(phase);
        park_forever();
    }
    // With a guard, a dying lockgate run gives the command its stop signal; the guard
    // sends SIGKILL by the lease's expiry. Without one, SIGKILL at once.
    let launcher = match guard {
        Some(_) => child::Launcher::dying_with(args.stop_signal),
        None => child::Launcher::new(),
    };
    let mut cmd = launcher.command(&args.command);
    cmd.env("LOCKGATE_JOB_ID", id.to_string())
        .env("LOCKGATE_ATTEMPT", attempt.to_string())
        .env("LOCKGATE_FENCING_TOKEN", token.to_string());
    if shared.log.load(std::sync::atomic::Ordering::Relaxed) {
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
    }
    let spawned = cmd.spawn();
    match spawned {
        Ok(c) => {
            *phase = Phase::Running(id, c.id() as i32);
            if let Some(g) = guard {
                g.watch(c.id());
            }
            Ok(Ok(c))
        }
        Err(e) => {
            drop(phase);
            eprintln!("lockgate: cannot start {:?}: {e}", args.command[0]);
            let _ = shared.client.finish_job(
                id,
                token,
                Outcome::Failed,
                Some(format!("cannot start: {e}")),
            );
            shared.final_report(id);
            Ok(Err(exit(cannot_start_code(&e))))
        }
    }
}

/// The shell's exit code for a command that could not be started: 127 when it was not
/// found, 126 when it could not be executed.
fn cannot_start_code(e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// The outcome and message to finish the job with, from how the hold ended and the signal
/// lockgate forwarded to the command (0: none); `None` when the lease was lost (there is
/// nothing left to finish). A command that failed after an interrupt was cancelled by
/// whoever interrupted it, on this host: that is not a backup failure.
fn finish_outcome(
    ending: &Ending,
    status: std::process::ExitStatus,
    forwarded: i32,
) -> Option<(Outcome, String)> {
    Some(match ending {
        Ending::Lost(_) => return None,
        Ending::Cancelled => (
            Outcome::Cancelled,
            format!("cancel requested; command exited with {}", describe(status)),
        ),
        Ending::Preempted => (
            Outcome::Cancelled,
            format!("preempted; command exited with {}", describe(status)),
        ),
        Ending::Exited | Ending::Stopped if status.success() => {
            (Outcome::Succeeded, "exit status 0".to_string())
        }
        Ending::Exited | Ending::Stopped if forwarded != 0 => (
            Outcome::Cancelled,
            format!(
                "interrupted on host {} ({} to lockgate run); command exited with {}",
                host(),
                if forwarded == signal_hook::consts::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                },
                describe(status)
            ),
        ),
        Ending::Exited | Ending::Stopped => (
            Outcome::Failed,
            format!("command exited with {}", describe(status)),
        ),
    })
}

/// This host's name, for the record of an interrupt.
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The signal thread owns the exit from here on.
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn kill_group(pid: i32, sig: child::Signal) {
    child::signal_group(pid as u32, sig);
}

fn interrupt(shared: &Shared, id: u64) -> ! {
    if let Ok(job) = shared.client.cancel(id, false) {
        if let (true, Some(l)) = (job.state.is_admitted(), &job.lease) {
            let _ = shared.client.finish_job(
                id,
                l.token,
                Outcome::Cancelled,
                Some("interrupted before the command started".into()),
            );
        }
    }
    shared.final_report(id);
    eprintln!("\nlockgate: interrupted; job {id} cancelled");
    std::process::exit(i32::from(EXIT_INTERRUPTED));
}

fn spawn_signal_thread(shared: Arc<Shared>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            let mut phase = shared.phase.lock().expect("phase lock");
            match *phase {
                Phase::Submitting => *phase = Phase::Interrupted,
                Phase::Waiting(id) => {
                    *phase = Phase::Interrupted;
                    drop(phase);
                    interrupt(&shared, id);
                }
                Phase::Running(_, pid) => {
                    let s = if sig == SIGINT {
                        child::Signal::INT
                    } else {
                        child::Signal::TERM
                    };
                    shared
                        .forwarded
                        .store(sig, std::sync::atomic::Ordering::Relaxed);
                    kill_group(pid, s);
                }
                Phase::Interrupted | Phase::Done => {}
            }
        }
    });
    Ok(())
}
