//! `lockgate token`: create, list and revoke API tokens (admin).

use super::output::{self, or_dash, print_json, table};
use super::session;
use crate::GlobalArgs;
use lockgate_api::{Role, TokenCreate};
use std::process::ExitCode;

/// Arguments of `lockgate token`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Create a token; it is shown only now.
    Create {
        /// The principal's name (the owner of the jobs it submits).
        #[arg(long)]
        name: String,
        /// admin, submitter, agent or viewer.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The node an agent token is bound to.
        #[arg(long)]
        node: Option<String>,
    },
    /// List tokens (never the secrets).
    Ls,
    /// Revoke a token by name.
    Revoke {
        /// Token name.
        name: String,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text)
        .ok_or_else(|| format!("unknown role {text:?}: expected admin, submitter, agent or viewer"))
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Create { name, role, node } => {
            let t = client.create_token(&TokenCreate { name, role, node })?;
            if output::json(global) {
                print_json(&t);
            } else {
                eprintln!("token for {} ({}); it is shown only now:", t.name, t.role);
                println!("{}", t.token);
            }
        }
        Sub::Ls => {
            let list = client.tokens()?;
            if output::json(global) {
                print_json(&list);
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|t| {
                        vec![
                            t.name.clone(),
                            t.role.to_string(),
                            or_dash(t.node.as_ref()),
                            t.created_at.clone(),
                        ]
                    })
                    .collect();
                table(&["NAME", "ROLE", "NODE", "CREATED"], &rows);
            }
        }
        Sub::Revoke { name } => {
            let v = client.revoke_token(&name)?;
            if output::json(global) {
                print_json(&v);
            } else {
                println!("revoked {name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
