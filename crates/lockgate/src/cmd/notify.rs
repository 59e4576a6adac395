//! `lockgate notify`: the `[[notify]]` targets of the policy; `test` sends a test message.

use super::output::{self, print_json};
use super::session;
use crate::GlobalArgs;
use std::process::ExitCode;

/// Arguments of `lockgate notify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Send a test event through the target now (admin) and print what the receiver
    /// answered; exits 1 when it was not delivered.
    Test {
        /// The target's name (`name` of its `[[notify]]` table).
        name: String,
    },
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Test { name } => {
            let r = client.notify_test(&name)?;
            if output::json(global) {
                print_json(&r);
            } else if r.ok {
                println!(
                    "{}: delivered in {} ms: {}",
                    r.target, r.elapsed_ms, r.detail
                );
            } else {
                eprintln!(
                    "lockgate: {}: not delivered ({} ms): {}",
                    r.target, r.elapsed_ms, r.detail
                );
            }
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
