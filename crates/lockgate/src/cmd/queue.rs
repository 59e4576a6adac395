//! `lockgate queue`: pause and resume admission (admin), and list the pauses.

use super::output::{self, or_dash, print_json, table};
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::{PauseRequest, PauseView};
use std::process::ExitCode;

/// Arguments of `lockgate queue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Admit nothing the match selects (everything without --match); running jobs go on.
    /// Prints the pause id.
    Pause {
        /// Match expression over kind, owner, node and attributes: "repo=main",
        /// "kind in (prune, check)".
        #[arg(long = "match", value_name = "EXPR")]
        selector: Option<String>,
        /// End by itself at this time: RFC 3339, or a duration from now (30m, 2h).
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Why (shown by `job explain`).
        #[arg(long)]
        reason: String,
    },
    /// End a pause (or every pause with --all): what it held is admitted again.
    Resume {
        /// The pause id.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<u64>,
        /// Every pause.
        #[arg(long)]
        all: bool,
    },
    /// List the active pauses.
    #[command(alias = "ls")]
    Pauses,
}

/// `--until`: RFC 3339 as given, or now plus a duration.
pub(super) fn until_text(text: &str) -> anyhow::Result<String> {
    if lockgate_api::time::parse(text).is_ok() {
        return Ok(text.to_string());
    }
    let d = flags::duration(text).map_err(|e| {
        anyhow::anyhow!(
            "--until: expected an RFC 3339 time or a duration (30m, 2h), got {text:?}: {e}"
        )
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let at = lockgate_core::Timestamp((now + d).as_millis() as u64);
    Ok(lockgate_api::time::format(at))
}

fn rows(pauses: &[PauseView]) -> Vec<Vec<String>> {
    pauses
        .iter()
        .map(|p| {
            vec![
                p.id.to_string(),
                p.selector.clone().unwrap_or_else(|| "(everything)".into()),
                p.by.clone(),
                p.created_at.clone(),
                or_dash(p.until.as_ref()),
                p.reason.clone(),
            ]
        })
        .collect()
}

const HEADER: &[&str] = &["ID", "MATCH", "BY", "SINCE", "UNTIL", "REASON"];

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Pause {
            selector,
            until,
            reason,
        } => {
            let until = until.as_deref().map(until_text).transpose()?;
            let p = client.pause(&PauseRequest {
                selector,
                until,
                reason,
            })?;
            if output::json(global) {
                print_json(&p);
            } else {
                println!("{}", p.id);
            }
        }
        Sub::Resume { id, all } => {
            let ended = match (id, all) {
                (Some(id), _) => vec![client.resume(id)?],
                (None, _) => client.resume_all()?.resumed,
            };
            if output::json(global) {
                print_json(&ended);
            } else {
                for p in &ended {
                    println!("resumed pause {}", p.id);
                }
            }
        }
        Sub::Pauses => {
            let list = client.pauses()?;
            if output::json(global) {
                print_json(&list);
            } else {
                table(HEADER, &rows(&list.pauses));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
