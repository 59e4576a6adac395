//! `lockgate run`: submit a client job, wait for admission, run the command, hold the
//! lease while it runs, finish with its exit status (api.md, "lockgate run semantics").
//!
//! Threads: the main thread submits, waits and then waits for the child; a signal thread
//! handles SIGINT/SIGTERM (cancel before the start, forward to the child's process group
//! after); a heartbeat thread renews the lease every TTL/3 and stops the child when the
//! lease is lost or cancellation is requested. [`Phase`] under one mutex orders them: the
//! child is spawned only while the phase is still `Waiting`, so an interrupt never races
//! a start.
//!
//! The child is started through `lockgate __exec`, which asks the kernel for
//! `PR_SET_PDEATHSIG` (SIGKILL) and then `exec`s the command: a killed wrapper takes its
//! command with it, so no work runs on a slot the server hands to someone else. The child
//! gets its own process group, so a terminal's Ctrl+C reaches lockgate, which forwards it.

use super::connect;
use crate::GlobalArgs;
use lockgate_agent::child::{self, describe};
use lockgate_api::{Client, ClientError, ExplainView, JobView, SubmitRequest};
use lockgate_core::{JobState, Outcome};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Exit code: the job could not run (expired, cancelled, lease lost).
pub const EXIT_NOT_RUN: u8 = 75;
/// Exit code: the server refused the token.
pub const EXIT_TOKEN: u8 = 77;
/// Exit code: the server could not be reached within `--connect-timeout`.
pub const EXIT_UNREACHABLE: u8 = 69;
/// Exit code: interrupted before the command started.
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;

/// Arguments of `lockgate run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job kind.
    #[arg(long, default_value = "backup")]
    pub kind: String,
    /// Attribute KEY=VALUE (repeatable): datastore=ds1, group=vm/100, ...
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = connect::key_value)]
    pub attrs: Vec<(String, String)>,
    /// Priority (higher runs first).
    #[arg(long)]
    pub priority: Option<i64>,
    /// The node this command runs on (counts against its number).
    #[arg(long)]
    pub node: Option<String>,
    /// Pool cost POOL=N (repeatable).
    #[arg(long = "cost", value_name = "POOL=N", value_parser = connect::cost)]
    pub cost: Vec<(String, u64)>,
    /// Give up (exit 75) after waiting this long: 30s, 10m, 2h.
    #[arg(long, value_parser = connect::duration)]
    pub max_wait: Option<Duration>,
    /// Idempotency key (default: a random one, reused for retries of the submit).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// How long to keep trying to reach the server (exit 69 after that).
    #[arg(long, default_value = "30s", value_parser = connect::duration)]
    pub connect_timeout: Duration,
    /// Write the job's final JSON here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// After SIGTERM to a child that must stop (lease lost, cancel requested), wait this
    /// long before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = connect::duration)]
    pub grace: Duration,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of the hidden `lockgate __exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The command and its arguments.
    #[arg(required = true, last = true)]
    pub command: Vec<String>,
}

/// `lockgate __exec -- CMD...`: sets `PR_SET_PDEATHSIG` and becomes the command.
/// (Shared with the agent: [`child::exec`].)
pub fn exec(args: ExecArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::from(child::exec(&args.command)))
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

fn random_key() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("run-{hex}")
}

/// What to do with an error that is not "unreachable".
fn fatal(e: &ClientError) -> u8 {
    eprintln!("lockgate: {e}");
    match e.status() {
        Some(401) | Some(403) => EXIT_TOKEN,
        Some(s) if (400..500).contains(&s) && s != 404 && s != 409 => EXIT_USAGE,
        _ => EXIT_NOT_RUN,
    }
}

/// Calls `f` until it returns something other than "unreachable", for at most `timeout`
/// of continuous unreachability (`Err(None)` then).
fn retrying<T>(
    timeout: Duration,
    mut f: impl FnMut() -> Result<T, ClientError>,
) -> Result<T, Option<ClientError>> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_unreachable() || e.status() == Some(503) => {
                if start.elapsed() >= timeout {
                    eprintln!("lockgate: {e}; gave up after {:?}", timeout);
                    return Err(None);
                }
                std::thread::sleep(pause.min(timeout.saturating_sub(start.elapsed())));
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(Some(e)),
        }
    }
}

fn status_line(job: &JobView, ex: Option<&ExplainView>) -> String {
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
    format!("waiting: {}", parts.join("; "))
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = connect::client(global)?;
    let shared = Arc::new(Shared {
        phase: Mutex::new(Phase::Submitting),
        client: client.clone(),
        report: args.report.clone(),
    });
    spawn_signal_thread(shared.clone())?;
    let req = SubmitRequest {
        kind: args.kind.clone(),
        attrs: args.attrs.iter().cloned().collect(),
        priority: args.priority,
        node: args.node.clone(),
        executor: Some(lockgate_core::policy::Executor::Client),
        cost: if args.cost.is_empty() {
            None
        } else {
            Some(args.cost.iter().cloned().collect())
        },
        two_stage: Some(false),
        max_wait_s: args.max_wait.map(|d| d.as_secs_f64()),
        idempotency_key: Some(args.idempotency_key.clone().unwrap_or_else(random_key)),
        ..SubmitRequest::default()
    };
    let interrupted = || *shared.phase.lock().expect("phase lock") == Phase::Interrupted;
    let submitted = retrying(args.connect_timeout, || {
        if interrupted() {
            // Stop retrying; one last attempt below finds (or makes) the job to cancel.
            return Err(ClientError::Setup("interrupted".into()));
        }
        client.submit(&req)
    });
    let mut job = match submitted {
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
        Err(None) => return Ok(exit(EXIT_UNREACHABLE)),
        Err(Some(e)) => return Ok(exit(fatal(&e))),
    };
    {
        let mut phase = shared.phase.lock().expect("phase lock");
        if *phase == Phase::Interrupted {
            drop(phase);
            interrupt(&shared, job.id);
        }
        *phase = Phase::Waiting(job.id);
    }
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
            return Ok(exit(EXIT_NOT_RUN));
        }
        if tty && job.state == JobState::Queued {
            let ex = client.explain(job.id).ok();
            eprint!("\r\x1b[2K{}", status_line(&job, ex.as_ref()));
            let _ = std::io::stderr().flush();
            shown = true;
        }
        let from = job.state;
        job = match retrying(args.connect_timeout, || client.wait(job.id, from, poll_s)) {
            Ok(j) => j,
            Err(None) => return Ok(exit(EXIT_UNREACHABLE)),
            Err(Some(e)) => return Ok(exit(fatal(&e))),
        };
    }
    if shown {
        eprint!("\r\x1b[2K");
    }
    let lease = job.lease.clone().expect("an admitted job holds a lease");
    run_admitted(
        &shared,
        &args,
        job,
        lease.token,
        Duration::from_secs_f64(lease.ttl_s.max(0.03)),
    )
}

fn run_admitted(
    shared: &Arc<Shared>,
    args: &Args,
    job: JobView,
    token: u64,
    ttl: Duration,
) -> anyhow::Result<ExitCode> {
    let id = job.id;
    let mut child = {
        let mut phase = shared.phase.lock().expect("phase lock");
        if *phase != Phase::Waiting(id) {
            // Interrupted: the signal thread cancels and exits.
            drop(phase);
            park_forever();
        }
        let spawned = child::Launcher::current_exe()?
            .command(&args.command)
            .env("LOCKGATE_JOB_ID", id.to_string())
            .spawn();
        match spawned {
            Ok(c) => {
                *phase = Phase::Running(id, c.id() as i32);
                c
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
                return Ok(exit(EXIT_NOT_RUN));
            }
        }
    };
    let pid = child.id() as i32;
    let lost = Arc::new(AtomicBool::new(false));
    let cancel = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let hb = {
        let (client, lost, cancel, grace) = (
            shared.client.clone(),
            lost.clone(),
            cancel.clone(),
            args.grace,
        );
        std::thread::spawn(move || {
            heartbeat(client, id, token, ttl, pid, grace, lost, cancel, stop_rx)
        })
    };
    let status = child.wait()?;
    {
        *shared.phase.lock().expect("phase lock") = Phase::Done;
    }
    let _ = stop_tx.send(());
    let _ = hb.join();
    let code = child::exit_code(status);
    if lost.load(Ordering::SeqCst) {
        eprintln!("lockgate: job {id}: lease lost; the command was stopped");
        shared.final_report(id);
        return Ok(exit(EXIT_NOT_RUN));
    }
    let (outcome, message) = if cancel.load(Ordering::SeqCst) {
        (
            Outcome::Cancelled,
            format!("cancel requested; command exited with {}", describe(status)),
        )
    } else if status.success() {
        (Outcome::Succeeded, "exit status 0".to_string())
    } else {
        (
            Outcome::Failed,
            format!("command exited with {}", describe(status)),
        )
    };
    match retrying(ttl, || {
        shared
            .client
            .finish_job(id, token, outcome, Some(message.clone()))
    }) {
        Ok(j) => shared.write_report(Some(&j)),
        Err(e) => {
            if let Some(e) = e {
                eprintln!("lockgate: job {id}: finishing failed: {e}");
            }
            shared.final_report(id);
            return Ok(exit(EXIT_NOT_RUN));
        }
    }
    if outcome == Outcome::Cancelled {
        return Ok(exit(EXIT_NOT_RUN));
    }
    Ok(exit(code.clamp(0, 255) as u8))
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

/// Renews the lease every TTL/3 until told to stop.
///
/// - Cancel requested: SIGTERM to the child's group, SIGKILL after `grace`; the lease is
///   still renewed meanwhile, so the job can end `cancelled`.
/// - Lease lost (409, token refused): SIGTERM, SIGKILL after `grace`.
/// - Server unreachable: renewals are retried (every TTL/10) until the lease may run out on
///   the server: that is TTL after the last successful renewal was *sent*. The child gets
///   SIGTERM a sixth of the TTL before that and SIGKILL at the latest then (`grace` is
///   capped), so it is gone before the server can hand its slot to someone else.
#[allow(clippy::too_many_arguments)]
fn heartbeat(
    client: Client,
    id: u64,
    token: u64,
    ttl: Duration,
    pid: i32,
    grace: Duration,
    lost: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
    stop: mpsc::Receiver<()>,
) {
    let mut renewed = Instant::now();
    let mut every = ttl / 3;
    let mut kill_at: Option<Instant> = None;
    let margin = ttl / 6;
    loop {
        let mut wait = every;
        if let Some(k) = kill_at {
            wait = wait.min(k.saturating_duration_since(Instant::now()));
        }
        match stop.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        if kill_at.is_some_and(|k| Instant::now() >= k) {
            kill_group(pid, rustix::process::Signal::KILL);
            kill_at = None;
        }
        let sent = Instant::now();
        match client.heartbeat(id, token) {
            Ok(job) => {
                renewed = sent;
                every = ttl / 3;
                if job.cancel_requested && !cancel.swap(true, Ordering::SeqCst) {
                    eprintln!("lockgate: job {id}: cancel requested; stopping the command");
                    kill_group(pid, rustix::process::Signal::TERM);
                    kill_at = Some(Instant::now() + grace);
                }
            }
            Err(e)
                if (e.is_unreachable() || e.status() == Some(503))
                    && renewed.elapsed() + margin < ttl =>
            {
                every = (ttl / 10).max(Duration::from_millis(10));
            }
            Err(e) => {
                eprintln!("lockgate: job {id}: {e}; stopping the command");
                lost.store(true, Ordering::SeqCst);
                let grace = if e.is_unreachable() || e.status() == Some(503) {
                    grace.min(ttl.saturating_sub(renewed.elapsed()))
                } else {
                    grace
                };
                kill_group(pid, rustix::process::Signal::TERM);
                if stop.recv_timeout(grace).is_err() {
                    kill_group(pid, rustix::process::Signal::KILL);
                }
                return;
            }
        }
    }
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
                        rustix::process::Signal::INT
                    } else {
                        rustix::process::Signal::TERM
                    };
                    kill_group(pid, s);
                }
                Phase::Interrupted | Phase::Done => {}
            }
        }
    });
    Ok(())
}
