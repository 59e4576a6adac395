//! `lockgate agent`: the node agent (the work is done by the `lockgate-agent` library).
//!
//! Registers `--node` with its `--label`s and the kinds `--config agent.toml` has handlers
//! for, then runs the jobs placed on the node until SIGINT or SIGTERM; then it stops the
//! running handlers (SIGTERM, SIGKILL after `[agent].grace`) and reports their jobs
//! `failed`, so they are retried as their kind says. A second signal exits at once (the
//! handlers die with the agent: `PR_SET_PDEATHSIG`).
//!
//! Exit codes: 0 after a signal, 77 when the server refused the token, 1 for other errors.

use super::{flags, session};
use crate::GlobalArgs;
use lockgate_agent::{Agent, AgentConfig, AgentOptions, Shutdown};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `lockgate agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node this agent runs on (its token must be bound to it).
    #[arg(long)]
    pub node: String,
    /// Node label KEY=VALUE (repeatable), matched by `[[nodes.rule]]` selectors and job
    /// node selectors.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = flags::label)]
    pub labels: Vec<(String, String)>,
    /// Per-node pool capacity POOL=N (repeatable; `[nodes.resources]`).
    #[arg(long = "resource", value_name = "POOL=N", value_parser = flags::cost)]
    pub resources: Vec<(String, u64)>,
    /// The handlers: one `[handlers.KIND]` table per job kind this agent runs. Without it
    /// the agent runs no kind.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Runs the subcommand.
///
/// # Errors
/// An invalid configuration (the message names the file, line and key), or a refused
/// token or registration.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    super::server::init_logs();
    let config = match &args.config {
        Some(path) => AgentConfig::load(path)?,
        None => {
            eprintln!("lockgate: no --config: this agent has no handlers and runs no job kind");
            AgentConfig::default()
        }
    };
    let mut opts = AgentOptions::new(&global.server, session::token(global), &args.node, config);
    opts.labels = args.labels.into_iter().collect();
    opts.resources = args.resources.into_iter().collect();
    let shutdown = Shutdown::new();
    spawn_signal_thread(shutdown.clone())?;
    let agent = Agent::new(opts, shutdown)?;
    match agent.run() {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("lockgate: {e}");
            Ok(ExitCode::from(e.exit_code()))
        }
    }
}

fn spawn_signal_thread(shutdown: Shutdown) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        for _ in signals.forever() {
            if shutdown.is_triggered() {
                std::process::exit(130);
            }
            shutdown.trigger();
        }
    });
    Ok(())
}
