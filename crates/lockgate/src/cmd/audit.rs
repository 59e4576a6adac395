//! `lockgate audit ls`: the audit log (admins only), newest first.
//!
//! The server pages oldest first (`GET /v1/audit?after=`); this command reads every page
//! that matches the filters and prints them newest first, so the latest acts come first
//! in a terminal and `-o json` is the same list (newest first) for scripts.

use super::output::{self, escape, or_dash, print_json, table};
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::AuditEntry;
use lockgate_client::AuditQuery;
use std::process::ExitCode;

/// Entries per page asked of the server (its largest).
const PAGE: usize = 1000;

/// Arguments of `lockgate audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List who changed or tried to change what, newest first.
    #[command(alias = "list")]
    Ls {
        /// Only entries since this: a duration back from now (1h, 7d) or an RFC 3339 time.
        #[arg(long, value_name = "DURATION|TIME")]
        since: Option<String>,
        /// Only this token name's entries.
        #[arg(long, value_name = "NAME")]
        principal: Option<String>,
    },
}

/// `--since`: RFC 3339 as given, or now minus a duration.
fn since_text(text: &str) -> anyhow::Result<String> {
    if lockgate_api::time::parse(text).is_ok() {
        return Ok(text.to_string());
    }
    let d = flags::duration(text).map_err(|e| {
        anyhow::anyhow!(
            "--since: expected a duration (30m, 7d) or an RFC 3339 time, got {text:?}: {e}"
        )
    })?;
    let now = output::now();
    let at = lockgate_core::Timestamp(now.0.saturating_sub(d.as_millis() as u64));
    Ok(lockgate_api::time::format(at))
}

fn rows(entries: &[AuditEntry]) -> Vec<Vec<String>> {
    entries
        .iter()
        .map(|e| {
            let who = match (&e.principal, e.role) {
                (Some(p), Some(r)) => format!("{p} ({r})"),
                (Some(p), None) => p.clone(),
                _ => "(no token)".into(),
            };
            let request = if e.summary.is_empty() {
                format!("{} {}", e.method, e.path)
            } else {
                format!("{} {} {}", e.method, e.path, e.summary)
            };
            vec![
                output::time(&e.at),
                escape(&who),
                e.outcome.to_string(),
                escape(&request),
                escape(&or_dash(e.error.as_ref())),
            ]
        })
        .collect()
}

const HEADER: &[&str] = &["TIME", "PRINCIPAL", "OUTCOME", "REQUEST", "ERROR"];

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let Sub::Ls { since, principal } = args.command;
    let mut q = AuditQuery {
        since: since.as_deref().map(since_text).transpose()?,
        principal,
        after: 0,
        limit: Some(PAGE),
    };
    let mut all = Vec::new();
    loop {
        let page = client.audit(&q)?.entries;
        let full = page.len() == PAGE;
        if let Some(last) = page.last() {
            q.after = last.seq;
        }
        all.extend(page);
        if !full {
            break;
        }
    }
    all.reverse();
    if output::json(global) {
        print_json(&all);
    } else {
        table(HEADER, &rows(&all));
    }
    Ok(ExitCode::SUCCESS)
}
