//! `lockgate hold acquire` and `lockgate hold release`: a slot taken in one process and
//! given back from another, for tools whose "before" and "after" hooks run apart (vzdump's
//! hook script, borgmatic's command hooks). docs/api.md, "lockgate hold".
//!
//! `acquire` submits a client job and waits for admission as `lockgate run` does (same
//! job flags, same exit codes, the reason it waits on stderr), then starts a keeper
//! (`lockgate __hold-keeper`, in its own process group, writing only to its log file) and
//! exits 0. The keeper renews the lease until one of:
//! - `release` connects to its socket: it finishes the job (exit code 0: succeeded, else
//!   failed) and answers;
//! - the bound process (the tool that called the hook) ends: it finishes the job failed at
//!   once, so the slot returns without waiting for the lease to run out;
//! - the server refuses the lease: it writes why to `NAME.ended` for `release` to say.
//!
//! # Invariants
//! - One keeper per name: it holds `NAME.lock` (flock) for its whole life; `acquire`
//!   checks the lock before it submits, and a keeper that loses the race gives its job
//!   back (cancelled) before the acquire exits 75.
//! - The bound process is named by pid and start time (`/proc/PID/stat`), and the keeper
//!   watches it through a pidfd opened and then checked against that start time: a pid
//!   reused by another process is never mistaken for the caller.
//! - The keeper never writes to the acquire's stdout or stderr after it said it is ready,
//!   so a hook runner that reads the hook's output to its end (vzdump) is not held open.

mod keeper;

use super::exit::Exit;
use super::run::{fatal, retrying, status_line};
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::JobView;
use lockgate_core::JobState;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `lockgate hold`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Wait for admission, then leave a keeper holding the slot until `hold release` or
    /// until the calling process ends (exit 0 once admitted; the codes of `lockgate run`).
    Acquire(AcquireArgs),
    /// Give the slot of `hold acquire --name NAME` back, finishing its job with the exit
    /// code (0 succeeded, anything else failed).
    Release(ReleaseArgs),
}

/// Arguments of `lockgate hold acquire`.
#[derive(Debug, clap::Args)]
pub struct AcquireArgs {
    /// The hold's name, used again by `hold release` (letters, digits, `.`, `_`, `-`; at
    /// most 128): for vzdump `vzdump-VMID`, for borgmatic the repository's label.
    #[arg(long)]
    pub name: String,
    /// The process the hold belongs to: when it ends without a release, the job fails and
    /// the slot returns at once. Default: the nearest ancestor that is not a shell (the
    /// tool that ran the hook).
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub wait: flags::ClientJobFlags,
}

/// Arguments of `lockgate hold release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The name given to `hold acquire`.
    #[arg(long)]
    pub name: String,
    /// The tool's exit code: 0 finishes the job succeeded, anything else failed.
    #[arg(long, default_value_t = 0)]
    pub exit_code: i32,
    /// A message recorded with the job's end.
    #[arg(long)]
    pub message: Option<String>,
}

/// What `acquire` hands its keeper on stdin (one JSON document).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Handover {
    name: String,
    job: JobView,
    pid: u32,
    start_time: u64,
}

/// Runs `lockgate hold`.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Acquire(a) => acquire(global, a),
        Command::Release(r) => release(r),
    }
}

/// Where holds keep their lock, socket, log and end note: `$LOCKGATE_HOLDS`, else
/// `$XDG_RUNTIME_DIR/lockgate/holds`, else `/run/lockgate/holds` for root, else
/// `/tmp/lockgate-holds-UID`.
pub fn holds_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = env("LOCKGATE_HOLDS") {
        return PathBuf::from(d);
    }
    if let Some(d) = env("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("lockgate/holds");
    }
    let uid = rustix::process::geteuid().as_raw();
    if uid == 0 {
        PathBuf::from("/run/lockgate/holds")
    } else {
        PathBuf::from(format!("/tmp/lockgate-holds-{uid}"))
    }
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    anyhow::ensure!(
        ok,
        "--name {name:?}: expected 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'"
    );
    Ok(())
}

fn path(name: &str, ext: &str) -> PathBuf {
    holds_dir().join(format!("{name}.{ext}"))
}

fn open_lock(name: &str) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path(name, "lock"))
}

/// Field `n` (1-based, as proc(5) counts) of `/proc/PID/stat`, from field 3 on; `None`
/// when the process is gone.
fn stat_field(pid: u32, n: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

/// The start time of process `pid` (clock ticks since boot, field 22).
pub fn start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 22)
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_field(pid, 4).and_then(|p| u32::try_from(p).ok())
}

const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"];

/// The nearest ancestor of this process that is not a shell: the tool that ran the hook.
fn caller() -> Option<u32> {
    let mut pid = rustix::process::getppid()?.as_raw_nonzero().get() as u32;
    for _ in 0..16 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        if !SHELLS.contains(&comm.trim()) {
            return Some(pid);
        }
        pid = parent_of(pid).filter(|&p| p > 1)?;
    }
    None
}

/// `hold acquire`; also the vzdump hook's `backup-start`.
pub fn acquire(global: &GlobalArgs, args: AcquireArgs) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    let pid = match args.pid {
        Some(p) => p,
        None => caller().ok_or_else(|| {
            anyhow::anyhow!("no calling process to bind the hold to (pass --pid PID)")
        })?,
    };
    let Some(start_time) = start_time(pid) else {
        eprintln!("lockgate: the process {pid} the hold would belong to is already gone; nothing was submitted");
        return Ok(Exit::NotRun.into());
    };
    std::fs::create_dir_all(holds_dir())?;
    if let Some(taken) = taken_by(&args.name)? {
        eprintln!(
            "lockgate: a hold named {} is already taken{taken}; give it back first: lockgate hold release --name {} --exit-code N",
            args.name, args.name
        );
        return Ok(Exit::NotRun.into());
    }
    let client = session::client(global)?;
    let w = &args.wait;
    let req = w.request();
    let job = match retrying(w.connect_timeout, || client.submit(&req)) {
        Ok((job, _)) => job,
        Err(None) => return Ok(Exit::Unreachable.into()),
        Err(Some(e)) => return Ok(ExitCode::from(fatal(&e))),
    };
    let stop = interrupts()?;
    let job = match wait(&client, w, job, pid, start_time, &stop) {
        Ok(job) => job,
        Err(code) => return Ok(ExitCode::from(code)),
    };
    let id = job.id;
    let handover = Handover {
        name: args.name.clone(),
        job,
        pid,
        start_time,
    };
    match start_keeper(global, &handover) {
        Ok(()) => {
            eprintln!(
                "lockgate: job {id} admitted; hold {} kept until `lockgate hold release --name {}` or until process {pid} ends",
                args.name, args.name
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("lockgate: job {id}: {why}; giving the slot back");
            let _ = client.cancel(id, true);
            Ok(Exit::NotRun.into())
        }
    }
}

/// A flag set by SIGINT, SIGTERM or SIGHUP: an acquire stopped while it waits cancels its
/// job instead of leaving it to be admitted with no one holding it.
fn interrupts() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}

/// `Some(" by job N")` (or `Some("")`) when a keeper holds `name`'s lock.
fn taken_by(name: &str) -> anyhow::Result<Option<String>> {
    let lock = open_lock(name)?;
    match lock.try_lock() {
        Ok(()) => Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => Ok(Some(
            std::fs::read_to_string(path(name, "job"))
                .map(|j| format!(" by job {}", j.trim()))
                .unwrap_or_default(),
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Waits for admission, saying why it waits (once per change of reason); cancels the job
/// and returns 75 if the bound process ends first.
fn wait(
    client: &lockgate_client::Client,
    args: &flags::ClientJobFlags,
    mut job: JobView,
    pid: u32,
    start_time: u64,
    interrupted: &AtomicBool,
) -> Result<JobView, u8> {
    let mut said = String::new();
    loop {
        if interrupted.load(Ordering::Relaxed) {
            eprintln!(
                "lockgate: job {}: interrupted while waiting; cancelling the job",
                job.id
            );
            let _ = client.cancel(job.id, true);
            return Err(Exit::Interrupted.code());
        }
        if job.state.is_admitted() && job.state != JobState::Preparing {
            return Ok(job);
        }
        if job.is_final() {
            eprintln!(
                "lockgate: job {} {}{}",
                job.id,
                job.state,
                job.message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
            return Err(Exit::NotRun.code());
        }
        if self::start_time(pid) != Some(start_time) {
            eprintln!(
                "lockgate: job {}: process {pid} ended while its hold waited; cancelling the job",
                job.id
            );
            let _ = client.cancel(job.id, true);
            return Err(Exit::NotRun.code());
        }
        if job.state == JobState::Queued {
            let line = status_line(&job, client.explain(job.id).ok().as_ref());
            // Said again only when the reason changes, not for every poll.
            let reason: String = line.split("; start").next().unwrap_or(&line).to_string();
            if reason != said {
                eprintln!("lockgate: job {}: {line}", job.id);
                said = reason;
            }
        }
        let from = job.state;
        job = match retrying(args.connect_timeout, || client.wait(job.id, from, 2)) {
            Ok(j) => j,
            Err(None) => return Err(Exit::Unreachable.code()),
            Err(Some(e)) => return Err(fatal(&e)),
        };
    }
}

/// Starts the keeper and waits for its word: `Ok` once it holds the name and the lease.
fn start_keeper(global: &GlobalArgs, handover: &Handover) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find lockgate itself: {e}"))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path(&handover.name, "log"))
        .map_err(|e| format!("cannot open the hold's log: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__hold-keeper")
        .env("LOCKGATE_SERVER", &global.server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0);
    if let Some(token) = session::token(global) {
        cmd.env("LOCKGATE_TOKEN", token);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the keeper: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    serde_json::to_writer(&mut stdin, handover).expect("serializes");
    let _ = stdin.write_all(b"\n");
    drop(stdin);
    let mut word = String::new();
    let _ = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut word);
    match word.trim().split_once(' ') {
        Some(("ready", _)) => Ok(()),
        Some(("refused", why)) => {
            let _ = child.wait();
            Err(why.to_string())
        }
        _ => {
            let _ = child.wait();
            Err(format!(
                "the keeper did not start (see {})",
                path(&handover.name, "log").display()
            ))
        }
    }
}

/// The keeper process (`lockgate __hold-keeper`): see the module docs.
pub fn keep(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    keeper::run(global)
}

/// `hold release`; also the vzdump hook's `backup-end` and `backup-abort`.
pub fn release(args: ReleaseArgs) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    let sock = path(&args.name, "sock");
    let ended = path(&args.name, "ended");
    let stream = match std::os::unix::net::UnixStream::connect(&sock) {
        Ok(s) => s,
        Err(_) => {
            match std::fs::read_to_string(&ended) {
                Ok(why) => eprintln!(
                    "lockgate: the hold named {} had already ended: {}",
                    args.name,
                    why.trim()
                ),
                Err(_) => eprintln!(
                    "lockgate: no hold named {} is kept here ({}): nothing to release",
                    args.name,
                    holds_dir().display()
                ),
            }
            return Ok(Exit::NotRun.into());
        }
    };
    let request = keeper::Release {
        exit_code: args.exit_code,
        message: args.message,
    };
    let mut writer = &stream;
    serde_json::to_writer(&mut writer, &request).expect("serializes");
    writer.write_all(b"\n")?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer)?;
    match answer.trim().split_once(' ') {
        Some(("ok", text)) => {
            eprintln!("lockgate: {text}");
            Ok(ExitCode::SUCCESS)
        }
        Some((_, text)) => {
            eprintln!("lockgate: {text}");
            Ok(Exit::NotRun.into())
        }
        None => {
            eprintln!(
                "lockgate: the keeper of {} ended without an answer (see {})",
                args.name,
                path(&args.name, "log").display()
            );
            Ok(Exit::NotRun.into())
        }
    }
}
