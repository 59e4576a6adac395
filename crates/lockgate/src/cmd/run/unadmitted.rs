//! `lockgate run --if-unreachable run`: when the server cannot be reached within
//! `--connect-timeout`, run the command anyway, without admission, and report the run to
//! the server (`POST /v1/jobs/unadmitted`) so it is on record, marked `unadmitted`.
//!
//! A missed backup can be worse than an uncoordinated one; this is the admin's choice,
//! never the default, and never silent: the run is announced on stderr, and the report
//! goes to the server when the command ends. If the server is still away then, the report
//! is kept in the spool directory ([`spool_dir`]) and sent by the next `lockgate run` that
//! reaches the server. The job's idempotency key makes a report that is sent twice (an
//! answer lost on the way back) recorded once.
//!
//! Without the flag, the policy decides per kind (`[kinds.NAME].if_unreachable`). A server
//! that is away cannot be asked, so every submit answer's `run_if_unreachable` is kept in
//! the spool directory (`kinds.cache`, per server list) and read when the server is away:
//! a kind the wrapper never submitted to that server fails, as without a policy.

use super::{host, retrying, Shared};
use lockgate_api::{JobView, SubmitRequest, UnadmittedReport};
use lockgate_client::child::{self, describe};
use lockgate_client::Client;
use lockgate_core::Outcome;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What `lockgate run` does when the server cannot be reached within `--connect-timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IfUnreachable {
    /// Do not run the command; exit 69.
    Fail,
    /// Run it without admission, and report the run to the server once it is back.
    Run,
}

/// Most spooled reports sent by one `lockgate run`.
const FLUSH_MAX: usize = 100;

/// Where reports wait for a server: `$LOCKGATE_SPOOL`, else
/// `$XDG_STATE_HOME/lockgate/unadmitted`, else `~/.local/state/lockgate/unadmitted`.
pub fn spool_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = env("LOCKGATE_SPOOL") {
        return PathBuf::from(d);
    }
    let state = env("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/var/tmp"));
    state.join("lockgate/unadmitted")
}

/// `kinds.cache`: server list -> kind -> whether the policy runs it when unreachable.
type KindCache = BTreeMap<String, BTreeMap<String, bool>>;

fn kind_cache_path() -> PathBuf {
    spool_dir().join("kinds.cache")
}

fn read_kind_cache() -> KindCache {
    std::fs::read(kind_cache_path())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Keeps the policy's answer for `job`'s kind from a submit answer; writes the cache only
/// when the answer changed (written whole then renamed, so a reader never sees half).
pub fn remember(client: &Client, job: &JobView) {
    let servers = client.servers().join(",");
    let mut cache = read_kind_cache();
    let known = cache.get(&servers).and_then(|k| k.get(&job.kind)).copied();
    if known == Some(job.run_if_unreachable) || (known.is_none() && !job.run_if_unreachable) {
        return;
    }
    cache
        .entry(servers)
        .or_default()
        .insert(job.kind.clone(), job.run_if_unreachable);
    let write = || -> std::io::Result<()> {
        let dir = spool_dir();
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(".kinds.cache.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&cache).expect("serializes"))?;
        std::fs::rename(&tmp, kind_cache_path())
    };
    if let Err(e) = write() {
        eprintln!(
            "lockgate: could not keep the policy's if_unreachable for kind {} in {}: {e}",
            job.kind,
            kind_cache_path().display()
        );
    }
}

/// What the policy said for `kind` the last time this client reached these servers.
pub fn remembered(client: &Client, kind: &str) -> bool {
    read_kind_cache()
        .get(&client.servers().join(","))
        .and_then(|k| k.get(kind))
        .copied()
        .unwrap_or(false)
}

fn wall_now() -> String {
    lockgate_api::time::format(super::super::output::now())
}

/// Runs the command without admission (the signal thread forwards SIGINT/SIGTERM to it),
/// then reports the run; returns the command's exit code. `why` names who chose to run.
pub fn run(
    shared: &Shared,
    command: &[String],
    req: &SubmitRequest,
    waited: Duration,
    why: &str,
) -> anyhow::Result<u8> {
    eprintln!(
        "lockgate: the server could not be reached for {waited:?}; {why}: \
         running the command WITHOUT admission (no limit or conflict holds it); \
         the run is reported to the server once it is back"
    );
    let started = wall_now();
    let mut cmd = child::Launcher::new().command(command);
    let mut c = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lockgate: cannot start {:?}: {e}", command[0]);
            return Ok(super::cannot_start_code(&e));
        }
    };
    {
        let mut phase = shared.phase.lock().expect("phase lock");
        *phase = super::Phase::Running(0, c.id() as i32);
    }
    let status = c.wait()?;
    *shared.phase.lock().expect("phase lock") = super::Phase::Done;
    let forwarded = shared.forwarded.load(Ordering::Relaxed);
    let outcome = if status.success() {
        Outcome::Succeeded
    } else if forwarded != 0 {
        Outcome::Cancelled
    } else {
        Outcome::Failed
    };
    let report = UnadmittedReport {
        job: req.clone(),
        started_at: started,
        finished_at: wall_now(),
        outcome,
        message: Some(format!(
            "ran without admission on host {}: the server could not be reached for {waited:?}; command exited with {}",
            host(),
            describe(status)
        )),
    };
    send_or_spool(&shared.client, &report, waited);
    Ok(child::exit_code(status).clamp(0, 255) as u8)
}

/// Sends the report, trying for up to `patience`; keeps it in the spool when that fails.
fn send_or_spool(client: &Client, report: &UnadmittedReport, patience: Duration) {
    match retrying(patience, || client.report_unadmitted(report)) {
        Ok((job, _)) => eprintln!(
            "lockgate: the run is on record as job {} ({}, unadmitted)",
            job.id, job.state
        ),
        Err(e) => {
            if let Some(e) = e {
                eprintln!("lockgate: the server refused the report: {e}");
            }
            match spool(report) {
                Ok(path) => eprintln!(
                    "lockgate: the report is kept in {}; the next lockgate run that reaches the server sends it",
                    path.display()
                ),
                Err(e) => eprintln!("lockgate: the report could not be kept ({e}); the run is not on record"),
            }
        }
    }
}

/// Writes the report to the spool (`<idempotency key>.json`, written whole then renamed).
fn spool(report: &UnadmittedReport) -> std::io::Result<PathBuf> {
    let dir = spool_dir();
    std::fs::create_dir_all(&dir)?;
    let key = report
        .job
        .idempotency_key
        .clone()
        .unwrap_or_else(|| "run".into());
    let name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{name}.json"));
    let tmp = dir.join(format!(".{name}.json.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(report).expect("serializes"))?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Sends the spooled reports (at most [`FLUSH_MAX`]), now that the server answered: a
/// report the server took, or refused for good (it is renamed `.refused`), leaves the spool.
pub fn flush(client: &Client) {
    let Ok(entries) = std::fs::read_dir(spool_dir()) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths.into_iter().take(FLUSH_MAX) {
        let Some(report) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<UnadmittedReport>(&b).ok())
        else {
            let _ = std::fs::rename(&path, path.with_extension("unreadable"));
            continue;
        };
        match client.report_unadmitted(&report) {
            Ok((job, _)) => {
                let _ = std::fs::remove_file(&path);
                eprintln!(
                    "lockgate: sent a run kept while the server was away: job {} ({}, unadmitted)",
                    job.id, job.state
                );
            }
            Err(e) if e.is_temporary() => return,
            Err(e) => {
                eprintln!(
                    "lockgate: the server refused the kept report {}: {e}",
                    path.display()
                );
                let _ = std::fs::rename(&path, path.with_extension("refused"));
            }
        }
    }
}
