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

/// Arguments of `lockgate simulate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The policy (TOML).
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// The nodes: a JSON array of `{"name": "n1", "labels": {"zone": "eu-1"}}`.
    #[arg(long, value_name = "FILE")]
    pub nodes: PathBuf,
    /// The workload: one JSON job a line (`{"at": 0.0, "kind": "backup", "run_s": 60.0}`).
    #[arg(long, value_name = "FILE")]
    pub workload: PathBuf,
    /// Also run a baseline model on the same input (`velero`, `velero-1.17`, `pbs`,
    /// `bacula`, `unlimited`; repeatable).
    #[arg(long, value_name = "BASELINE", value_parser = parse_baseline)]
    pub compare: Vec<Baseline>,
    /// Shared resources (TOML `[[resource]]`: `name`, `capacity_mb_s`, `match`,
    /// `job_max_mb_s`, `loss_per_job`): run times come from the contention model.
    #[arg(long, value_name = "FILE")]
    pub contention: Option<PathBuf>,
    /// Run once per value of one number and name the best: `limit:NAME=A..B`,
    /// `global=A..B` or `pool:NAME=A..B`.
    #[arg(long, value_name = "SPEC", conflicts_with = "compare")]
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

fn read(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} file {}", path.display()))
}

/// Runs the subcommand.
///
/// # Errors
/// An unreadable or invalid input file (the message names the file, line and field), or a
/// job the engine refuses.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let policy_name = args.policy.display().to_string();
    let policy = Policy::from_toml(&read(&args.policy, "policy")?, Some(&policy_name))?;
    let nodes = lockgate_sim::parse_nodes(
        &read(&args.nodes, "nodes")?,
        &args.nodes.display().to_string(),
    )?;
    let jobs = lockgate_sim::parse_workload(
        &read(&args.workload, "workload")?,
        &args.workload.display().to_string(),
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
            .with_context(|| format!("sweeping {}", args.workload.display()))?;
        match global.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
            Output::Table => print!("{}", report.to_table()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut compare = args.compare;
    compare.sort();
    compare.dedup();
    let report = lockgate_sim::run_with(&policy, &nodes, &jobs, &compare, contention.as_ref())
        .with_context(|| format!("simulating {}", args.workload.display()))?;
    match global.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Table => print!("{}", report.to_table()),
    }
    Ok(ExitCode::SUCCESS)
}
