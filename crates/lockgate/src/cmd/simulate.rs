//! `lockgate simulate`: replays a workload against a policy in virtual time
//! (the work is done by the `lockgate-sim` library).
//!
//! Table output for people: makespan, waits, per-node busy, per-scope peak/limit and the
//! lower bound with lockgate's ratio to it. `-o json` prints the JSON of api.md ("File
//! formats") and nothing else on stdout, with the additive keys `nodes`, `unfinished`,
//! `lower_bound_s`, `lower_bound_by` and, with `--compare`, `compare`.
//!
//! `--contention FILE` takes run times from the contention model (docs/simulate.md) and
//! adds `slowdown` to each summary; `--sweep SPEC` prints the sweep's table (or its JSON:
//! `{sweep, points: [{value, makespan_s, wait_s, slowdown, unfinished}], best}`) instead.

use crate::{GlobalArgs, Output};
use anyhow::Context as _;
use lockgate_core::Policy;
use lockgate_sim::Baseline;
use std::path::PathBuf;
use std::process::ExitCode;

pub(crate) mod history;
mod pictures;

/// Arguments of `lockgate simulate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The policy (TOML); with --from-server, the candidate (optional).
    #[arg(long, value_name = "FILE", required_unless_present = "from_server")]
    pub policy: Option<PathBuf>,
    /// The nodes: a JSON array of `{"name": "n1", "labels": {"zone": "eu-1"}}`.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "from_server",
        conflicts_with = "from_server"
    )]
    pub nodes: Option<PathBuf>,
    /// The workload: one JSON job a line (`{"at": 0.0, "kind": "backup", "run_s": 60.0}`).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "from_server",
        conflicts_with = "from_server"
    )]
    pub workload: Option<PathBuf>,
    /// Also run a baseline model on the same input (`velero`, `velero-1.17`, `pbs`,
    /// `bacula`, `unlimited`; repeatable).
    #[arg(long, value_name = "BASELINE", value_parser = parse_baseline)]
    pub compare: Vec<Baseline>,
    /// Replay the server's own finished jobs (docs/simulate.md) under the active policy
    /// and, with --policy, a candidate, beside what really happened.
    #[arg(long, conflicts_with = "compare")]
    pub from_server: bool,
    /// With --from-server: the period, back from now (`7d`, `12h`, `30m`).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "7d",
        requires = "from_server"
    )]
    pub since: String,
    /// With --from-server: count the jobs that would end after TIME (RFC 3339, or a
    /// duration after the period's first arrival such as `6h`).
    #[arg(long, value_name = "TIME", requires = "from_server")]
    pub deadline: Option<String>,
    /// With --from-server: read at most this many jobs (the newest).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100_000,
        requires = "from_server"
    )]
    pub max_jobs: usize,
    /// Draw the run as an SVG Gantt chart (with --from-server: the candidate's, else the
    /// active policy's).
    #[arg(long, value_name = "FILE")]
    pub gantt: Option<PathBuf>,
    /// Write a self-contained HTML report: the tables and every run's chart.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Shared resources (TOML `[[resource]]`: `name`, `capacity_mb_s`, `match`,
    /// `job_max_mb_s`, `loss_per_job`): run times come from the contention model.
    #[arg(long, value_name = "FILE", conflicts_with = "from_server")]
    pub contention: Option<PathBuf>,
    /// Run once per value of one number and name the best: `limit:NAME=A..B`,
    /// `global=A..B` or `pool:NAME=A..B`.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["compare", "from_server"])]
    pub sweep: Option<String>,
}

fn parse_baseline(text: &str) -> Result<Baseline, String> {
    Baseline::parse(text).ok_or_else(|| {
        format!(
            "unknown baseline {text:?}; expected one of: {}",
            lockgate_sim::BASELINES
        )
    })
}

pub(super) fn read(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} file {}", path.display()))
}

/// Runs the subcommand.
///
/// # Errors
/// An unreadable or invalid input file (the message names the file, line and field), or a
/// job the engine refuses.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    if args.from_server {
        return from_server(global, &args);
    }
    let (Some(policy_path), Some(nodes_path), Some(workload_path)) =
        (&args.policy, &args.nodes, &args.workload)
    else {
        anyhow::bail!("--policy, --nodes and --workload are required without --from-server");
    };
    let policy_name = policy_path.display().to_string();
    let (policy, _) = lockgate_host::policy_files::read(policy_path)?;
    let nodes = lockgate_sim::parse_nodes(
        &read(nodes_path, "nodes")?,
        &nodes_path.display().to_string(),
    )?;
    let jobs = lockgate_sim::parse_workload(
        &read(workload_path, "workload")?,
        &workload_path.display().to_string(),
    )?;
    let contention = match &args.contention {
        Some(path) => Some(lockgate_sim::parse_contention(
            &read(path, "contention")?,
            &path.display().to_string(),
        )?),
        None => None,
    };
    if let Some(spec) = &args.sweep {
        let spec = lockgate_sim::SweepSpec::parse(spec)?;
        let report = lockgate_sim::sweep(&policy, &nodes, &jobs, &spec, contention.as_ref())
            .with_context(|| format!("sweeping {}", workload_path.display()))?;
        match global.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
            Output::Table => print!("{}", report.to_table()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut compare = args.compare.clone();
    compare.sort();
    compare.dedup();
    let (report, run) =
        lockgate_sim::run_keeping_records(&policy, &nodes, &jobs, &compare, contention.as_ref())
            .with_context(|| format!("simulating {}", workload_path.display()))?;
    match global.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Table => print!("{}", report.to_table()),
    }
    let outputs = outputs(&args);
    if outputs.any() {
        let drawn = [pictures::Drawn {
            title: format!("{} under {policy_name}", workload_path.display()),
            policy: &policy,
            run: &run,
        }];
        pictures::write(&outputs, &jobs, &drawn, &policy_name, &report.to_table())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn outputs(args: &Args) -> pictures::Outputs {
    pictures::Outputs {
        gantt: args.gantt.clone(),
        report: args.report.clone(),
    }
}

/// A `--since` duration back from now, as ms since the epoch.
fn since_ms(text: &str) -> anyhow::Result<u64> {
    let d =
        lockgate_core::time::parse_duration(text).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    Ok(super::output::now().0.saturating_sub(d.as_millis() as u64))
}

/// `--deadline`: RFC 3339, or a duration after `origin` (ms since the epoch).
fn deadline_ms(text: &str, origin: u64) -> anyhow::Result<u64> {
    if let Ok(d) = lockgate_core::time::parse_duration(text) {
        return Ok(origin + d.as_millis() as u64);
    }
    lockgate_api::time::parse(text)
        .map(|t| t.0)
        .map_err(|e| anyhow::anyhow!("--deadline: {e}, or a duration such as \"6h\""))
}

/// `--from-server`: the recorded history beside its replays ([`history`]).
fn from_server(global: &GlobalArgs, args: &Args) -> anyhow::Result<ExitCode> {
    let candidate = match &args.policy {
        Some(p) => Some(lockgate_host::policy_files::read(p)?.0),
        None => None,
    };
    let since = since_ms(&args.since)?;
    let client = super::session::client(global)?;
    let c = compare_history(
        &client,
        candidate.as_ref(),
        since,
        args.deadline.as_deref(),
        args.max_jobs,
    )?;
    match global.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&c.comparison)?),
        Output::Table => print!("{}", c.comparison.to_table()),
    }
    let outputs = outputs(args);
    if outputs.any() {
        let drawn: Vec<pictures::Drawn<'_>> = c
            .replays
            .iter()
            .map(|r| pictures::Drawn {
                title: format!(
                    "{} ({} jobs since {})",
                    r.name,
                    r.run.jobs.len(),
                    c.comparison.since
                ),
                policy: &r.policy,
                run: &r.run,
            })
            .collect();
        let context = format!("history of {} since {}", global.server, c.comparison.since);
        pictures::write(
            &outputs,
            &c.history.jobs,
            &drawn,
            &context,
            &c.comparison.to_table(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What [`compare_history`] found.
pub struct Compared {
    /// The history read.
    pub history: history::History,
    /// The runs: recorded, active, candidate.
    pub replays: Vec<history::Replay>,
    /// Their summaries.
    pub comparison: history::Comparison,
}

/// Reads the history since `since` and replays it under the active policy and `candidate`
/// (`policy apply --dry-run` shows the same).
///
/// # Errors
/// A failed call, a bad `deadline`, a job the engine refuses under a policy.
pub fn compare_history(
    client: &lockgate_client::Client,
    candidate: Option<&Policy>,
    since: u64,
    deadline: Option<&str>,
    max_jobs: usize,
) -> anyhow::Result<Compared> {
    let active = history::active_policy(client)?;
    let h = history::fetch(client, &active, since, max_jobs)?;
    if h.left_out.truncated {
        eprintln!("lockgate: --max-jobs {max_jobs} reached: older jobs of the period are left out");
    }
    let deadline = deadline.map(|d| deadline_ms(d, h.origin.0)).transpose()?;
    let replays = history::replays(&h, &active, candidate)?;
    let comparison = history::Comparison::new(&h, since, deadline, &replays);
    Ok(Compared {
        history: h,
        replays,
        comparison,
    })
}

/// `--since` for `policy apply --dry-run`.
///
/// # Errors
/// Not a duration.
pub fn parse_since(text: &str) -> anyhow::Result<u64> {
    since_ms(text)
}
