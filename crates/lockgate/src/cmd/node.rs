//! `lockgate node`: list, show, cordon, uncordon and remove nodes.

use super::output::{self, or_dash, print_json, table};
use super::session;
use crate::GlobalArgs;
use lockgate_api::NodeView;
use std::process::ExitCode;

/// Arguments of `lockgate node`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Every node with its state, number and counts.
    Ls,
    /// One node.
    Show {
        /// Node name.
        name: String,
    },
    /// Stop admitting jobs to the node (running work finishes).
    Cordon {
        /// Node name.
        name: String,
    },
    /// Resume admitting jobs to the node.
    Uncordon {
        /// Node name.
        name: String,
    },
    /// Forget the node (its admitted jobs are lost; pinned queued jobs wait for it).
    Rm {
        /// Node name.
        name: String,
    },
}

fn rows(nodes: &[NodeView]) -> Vec<Vec<String>> {
    let join = |items: Vec<String>| or_dash((!items.is_empty()).then(|| items.join(",")));
    nodes
        .iter()
        .map(|n| {
            let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                n.name.clone(),
                n.state.clone(),
                or_dash(n.number),
                or_dash(n.rule.as_ref()),
                n.running.to_string(),
                n.preparing.to_string(),
                n.prepared.to_string(),
                join(n.kinds.iter().cloned().collect()),
                output::time(&n.last_seen),
                join(labels),
            ]
        })
        .collect()
}

/// `RULE` is the selector of the `[[nodes.rule]]` that set `NUMBER` (`-`: the default);
/// `KINDS` the job kinds its agent has handlers for.
const HEADER: &[&str] = &[
    "NAME",
    "STATE",
    "NUMBER",
    "RULE",
    "RUNNING",
    "PREPARING",
    "PREPARED",
    "KINDS",
    "LAST SEEN",
    "LABELS",
];

fn show(global: &GlobalArgs, n: &NodeView) {
    if output::json(global) {
        print_json(n);
    } else {
        table(HEADER, &rows(std::slice::from_ref(n)));
        if let Some(s) = &n.sample {
            output::print_text(&format!("{}\n", sample_line(s)));
        }
        if let (Some(g), Some(number)) = (n.guarded, n.number) {
            output::print_text(&format!(
                "Guard: {g} of {number} slots while its pressure passes the rule's guard\n"
            ));
        }
    }
}

/// A node's last sample for people: pressure per resource and the network rates.
fn sample_line(v: &lockgate_api::NodeSampleView) -> String {
    use lockgate_core::usage::format_bytes as b;
    let s = &v.sample;
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}%"));
    let rate = |x: Option<u64>| x.map_or("-".to_string(), |x| format!("{}/s", b(x)));
    format!(
        "Pressure: cpu {}, io {} (full {}), memory {} (full {}); network in {}, out {} (at {})",
        pct(s.cpu_some),
        pct(s.io_some),
        pct(s.io_full),
        pct(s.memory_some),
        pct(s.memory_full),
        rate(v.net_rx_per_s),
        rate(v.net_tx_per_s),
        output::time(&v.at)
    )
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Ls => {
            let list = client.nodes()?;
            if output::json(global) {
                print_json(&list);
            } else {
                table(HEADER, &rows(&list.nodes));
            }
        }
        Sub::Show { name } => show(global, &client.node(&name)?),
        Sub::Cordon { name } => show(global, &client.cordon(&name, true)?),
        Sub::Uncordon { name } => show(global, &client.cordon(&name, false)?),
        Sub::Rm { name } => {
            let v = client.remove_node(&name)?;
            if output::json(global) {
                print_json(&v);
            } else {
                println!("removed {name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::output::render_table;

    #[test]
    fn node_ls_table() {
        insta::assert_snapshot!(render_table(HEADER, &rows(&crate::cmd::testdata::nodes())));
    }
}
