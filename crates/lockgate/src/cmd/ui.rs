//! `lockgate ui code` (admin): a one-time sign-in code for the dashboard at `/ui/`, valid
//! 10 minutes and once (docs/dashboard.md). The admin token itself never goes into a URL.

use super::output::{self, print_json};
use super::session;
use crate::GlobalArgs;
use std::process::ExitCode;

/// Arguments of `lockgate ui`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Print the dashboard's address and a one-time sign-in code (admin; valid 10 minutes,
    /// works once).
    Code,
}

/// Runs the subcommand.
///
/// # Errors
/// A server that does not answer, or a token that is not an admin's.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Code => {
            let code = client.ui_code()?;
            if output::json(global) {
                print_json(&code);
            } else {
                println!("{}", code.code);
                eprintln!(
                    "sign in at {}/ui/ with this code (valid until {}, once)",
                    global.server.trim_end_matches('/'),
                    code.expires
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
