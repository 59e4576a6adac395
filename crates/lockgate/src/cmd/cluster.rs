//! `lockgate cluster status`: the replicas on one PostgreSQL database, which one leads,
//! since when, the term, the database and the last leadership commit's latency
//! (`GET /v1/cluster`, answered by standbys too; docs/cluster.md).

use super::output::{self, or_dash, print_json, table};
use super::session;
use crate::GlobalArgs;
use lockgate_api::ClusterView;
use std::process::ExitCode;

/// Arguments of `lockgate cluster`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// The replicas, the leader, the term and the database (the default).
    Status,
}

const HEADER: &[&str] = &["REPLICA", "URL", "ROLE", "STARTED", "SEEN", "VERSION"];

fn rows(view: &ClusterView) -> Vec<Vec<String>> {
    view.replicas
        .iter()
        .map(|r| {
            vec![
                r.holder.clone(),
                r.url.clone(),
                if r.leader { "leader" } else { "standby" }.into(),
                r.started_at.clone(),
                r.seen_at.clone(),
                or_dash(r.version.clone()),
            ]
        })
        .collect()
}

/// The summary lines above the table.
fn summary(view: &ClusterView) -> Vec<String> {
    let leader = match &view.leader {
        Some(l) => format!(
            "{} ({}) since {}, term {}, lease renewed until {}",
            l.holder, l.url, l.since, l.term, l.expires_at
        ),
        None => format!("none (an election is under way; term {})", view.term),
    };
    let commit = view
        .last_commit_ms
        .map(|ms| format!("{ms:.1} ms"))
        .unwrap_or_else(|| "-".into());
    vec![
        format!("database:  {}", view.database),
        format!("leader:    {leader}"),
        format!(
            "asked:     {} ({}), lease {:.1}s, last leadership commit {commit}, {} changes of role",
            view.me, view.role, view.lease_s, view.leader_changes
        ),
    ]
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command.unwrap_or(Sub::Status) {
        Sub::Status => {
            let view = client.cluster()?;
            if output::json(global) {
                print_json(&view);
            } else {
                for line in summary(&view) {
                    println!("{line}");
                }
                println!();
                table(HEADER, &rows(&view));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
