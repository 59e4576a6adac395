//! `lockgate rpo`: each `[[rpo]]` rule's values with their last success, age and status;
//! `lockgate rpo forget RULE VALUE...` (admin) retires a value.

use super::output::{self, or_dash, print_json, table, time_or_dash};
use super::session;
use crate::GlobalArgs;
use lockgate_api::{RpoList, RpoStatus};
use std::process::ExitCode;

/// Arguments of `lockgate rpo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List each rule's values: last success, age, max_age, status (the default).
    #[command(alias = "ls")]
    List,
    /// Stop tracking a value (a retired VM group, a removed repository) until its next
    /// job. Prints what was forgotten.
    Forget {
        /// The rule's name (`lockgate rpo` shows it).
        rule: String,
        /// The value's values, in the rule's `per` order (none for a rule without `per`).
        values: Vec<String>,
    },
}

const HEADER: &[&str] = &[
    "RULE",
    "VALUE",
    "LAST SUCCESS",
    "AGE",
    "MAX AGE",
    "STATUS",
    "LAST JOB",
];

fn rows(list: &RpoList) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for rule in &list.rules {
        for v in &rule.values {
            let last = v
                .last_job
                .map(|id| format!("{id} ({})", v.last_state.as_deref().unwrap_or("?")));
            out.push(vec![
                rule.name.clone(),
                if v.label.is_empty() {
                    "-".into()
                } else {
                    v.label.clone()
                },
                time_or_dash(v.last_success.as_ref()),
                output::duration(v.age_s * 1000),
                output::duration(rule.max_age_s * 1000),
                v.status.as_str().to_string(),
                or_dash(last),
            ]);
        }
    }
    out
}

/// Runs the subcommand. Exits 0 also when values are overdue: alerting is the metrics'
/// and the events' job; `-o json` gives each value's `status` to scripts.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command.unwrap_or(Sub::List) {
        Sub::List => {
            let list = client.rpo()?;
            if output::json(global) {
                print_json(&list);
            } else if list.rules.is_empty() {
                println!("no [[rpo]] rules in the policy");
            } else {
                table(HEADER, &rows(&list));
                let overdue = list
                    .rules
                    .iter()
                    .flat_map(|r| &r.values)
                    .filter(|v| v.status == RpoStatus::Overdue)
                    .count();
                if overdue > 0 {
                    println!("{overdue} value(s) overdue");
                }
            }
        }
        Sub::Forget { rule, values } => {
            let gone = client.rpo_forget(&rule, &values)?;
            if output::json(global) {
                print_json(&gone);
            } else {
                for v in &gone.forgotten {
                    println!(
                        "forgot {} {}",
                        v.rule,
                        if v.label.is_empty() { "-" } else { &v.label }
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
