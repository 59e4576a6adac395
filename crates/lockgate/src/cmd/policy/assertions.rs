//! `lockgate policy test`: a policy's promises, checked in CI before it ships. The
//! workload runs through the real engine in virtual time (as `lockgate simulate`), and
//! each assertion of `--assert FILE` (`lockgate_sim::assert`) is judged on that run.
//!
//! Exit codes: 0 every assertion held, 1 at least one failed (each failure printed with
//! its numbers), 2 an input that cannot be judged (the message names the file and line).

use super::super::exit::Exit;
use super::super::output::{self, print_json};
use crate::GlobalArgs;
use lockgate_sim::assert::{self, Verdict};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `lockgate policy test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The policy under test (TOML).
    policy: PathBuf,
    /// The nodes: a JSON array as `lockgate simulate --nodes` reads it.
    #[arg(long, value_name = "FILE")]
    nodes: PathBuf,
    /// The workload: one JSON job a line, as `lockgate simulate --workload` reads it.
    #[arg(long, value_name = "FILE")]
    workload: PathBuf,
    /// The assertions: `[[assert]]` tables (docs/simulate.md, "Testing a policy").
    #[arg(long = "assert", value_name = "FILE")]
    asserts: PathBuf,
}

/// What the run judged, or why nothing could be.
fn judge(args: &TestArgs) -> anyhow::Result<Vec<Verdict>> {
    use super::super::simulate::read;
    let name = |p: &PathBuf| p.display().to_string();
    let (policy, _) = lockgate_host::policy_files::read(&args.policy)?;
    let nodes = lockgate_sim::parse_nodes(&read(&args.nodes, "nodes")?, &name(&args.nodes))?;
    let jobs =
        lockgate_sim::parse_workload(&read(&args.workload, "workload")?, &name(&args.workload))?;
    let file = name(&args.asserts);
    let asserts = assert::parse(&read(&args.asserts, "assertions")?, &file)?;
    let run = lockgate_sim::simulate(&policy, &nodes, &jobs)?;
    assert::check_names(&asserts, &jobs, &run.scopes, &file)?;
    Ok(assert::judge(&asserts, &jobs, &run))
}

/// Runs `lockgate policy test`.
pub fn run(global: &GlobalArgs, args: &TestArgs) -> ExitCode {
    let verdicts = match judge(args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("lockgate: {e:#}");
            return Exit::Usage.into();
        }
    };
    let failed = verdicts.iter().filter(|v| !v.ok).count();
    if output::json(global) {
        print_json(&serde_json::json!({
            "passed": failed == 0,
            "failed": failed,
            "assertions": verdicts,
        }));
    } else {
        for v in &verdicts {
            let mark = if v.ok { "ok  " } else { "FAIL" };
            output::print_text(&format!(
                "{mark} {}:{} {}: {}",
                args.asserts.display(),
                v.assertion.line,
                v.assertion.name,
                v.measured
            ));
        }
        println!(
            "{} of {} assertions held",
            verdicts.len() - failed,
            verdicts.len()
        );
    }
    if failed == 0 {
        Exit::Success.into()
    } else {
        Exit::Failure.into()
    }
}
