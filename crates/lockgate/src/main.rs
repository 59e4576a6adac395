//! The `lockgate` command: a thin binary over the lockgate libraries. Each subcommand
//! lives in its own module under `cmd/`.
//!
//! # Invariants
//! - Every `print!`/`println!` of this crate is the pair defined here, which writes through
//!   [`cmd::output::write_stdout`]: when the reader of stdout has gone (`lockgate events |
//!   head -1`), the command exits 0 silently instead of panicking (exit 101). The macros
//!   are defined before `mod cmd`, so their textual scope covers every module.
//! - Every command's exit code comes from the one table in [`cmd::exit`].

/// `print!` for the whole crate: a closed stdout exits 0 ([`cmd::output::write_stdout`]).
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::cmd::output::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for the whole crate: a closed stdout exits 0 ([`cmd::output::write_stdout`]).
macro_rules! println {
    () => {
        $crate::cmd::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cmd::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod cmd;

/// The server's allocator (`lockgate_server::alloc`), for every command of the binary.
#[global_allocator]
static ALLOC: lockgate_server::alloc::Allocator = lockgate_server::alloc::Allocator;

use cmd::exit::Exit;
use cmd::session::{self, TokenSource};
use lockgate_client::ClientError;

use clap::{Parser, Subcommand, ValueEnum};

/// lockgate: the scheduler that decides which backup work may run now, where, and why
/// everything else waits.
#[derive(Debug, Parser)]
#[command(name = "lockgate", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand takes (before or after its name), shown under their own heading;
/// the subcommands that need no server (`simulate`, `server`, `schedule next EXPR`) accept
/// and ignore `--server` and `--token`.
///
/// `hide_env_values`: clap prints `[env: NAME=VALUE]` with the variable's current value,
/// and `NAME=` with nothing after it when the variable is unset; hidden, the help says
/// `[env: NAME]` whatever the environment (and never shows a token).
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// The server's URL; for several replicas of one cluster, their URLs comma-separated
    /// (calls follow the leader).
    #[arg(
        long,
        global = true,
        env = "LOCKGATE_SERVER",
        hide_env_values = true,
        default_value = "http://127.0.0.1:7400",
        help_heading = GLOBAL
    )]
    pub server: String,
    /// Bearer token (default: the admin token file in the default data dir).
    #[arg(
        long,
        global = true,
        env = "LOCKGATE_TOKEN",
        hide_env_values = true,
        help_heading = GLOBAL
    )]
    pub token: Option<String>,
    /// Output format: tables for people, JSON for scripts.
    #[arg(
        short = 'o',
        long = "output",
        global = true,
        value_enum,
        default_value_t = Output::Table,
        help_heading = GLOBAL
    )]
    pub output: Output,
}

/// The help heading of the [`GlobalArgs`].
const GLOBAL: &str = "Global options";

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable tables.
    Table,
    /// JSON on stdout and nothing else.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a workload against a policy in virtual time and report what it would do.
    Simulate(cmd::simulate::Args),
    /// Run the scheduler (HTTP API, event loop, durable store).
    Server(cmd::server::Args),
    /// Wait for admission, run a command, release the slot with its exit status.
    Run(cmd::run::Args),
    /// Submit, list, show, explain, wait for and cancel jobs.
    Job(cmd::job::Args),
    /// Show, check, diff and apply the policy.
    Policy(cmd::policy::Args),
    /// Create, list and revoke API tokens.
    Token(cmd::token::Args),
    /// Print the event log; --follow streams it.
    Events(cmd::events::Args),
    /// List, show, cordon, uncordon and remove nodes.
    Node(cmd::node::Args),
    /// Periodic schedules: add, list, show, remove; the next times of an expression.
    Schedule(cmd::schedule::Args),
    /// Run the jobs placed on this node with the handlers of --config agent.toml.
    Agent(cmd::agent::Args),
    /// Take a slot in one process and give it back from another: `hold acquire` in a
    /// tool's "before" hook, `hold release` in its "after" hook (vzdump, borgmatic).
    Hold(cmd::hold::Args),
    /// Hook scripts of the tools that schedule backups themselves: `hook vzdump PHASE
    /// [MODE VMID]` gates each guest of Proxmox VE's backup jobs.
    Hook(cmd::hook::Args),
    /// A server, three agents and a sample workload, with live output (a minute at most).
    Demo(cmd::demo::Args),
    /// Measure the server and `lockgate run` on this machine (in-process server, temp store).
    Bench(cmd::bench::Args),
    /// Item-block backups of Kubernetes manifests: create (or --dry-run), ls, describe, cancel.
    Backup(cmd::backup::Args),
    /// Restores of item-block backups: manifests in apply order (create or --dry-run, ls, describe).
    Restore(cmd::restore::Args),
    /// Shell completions on stdout: `lockgate completions bash > /etc/bash_completion.d/lockgate`.
    Completions(cmd::completions::Args),
    /// Internal: write one man page per subcommand into DIR (the package build).
    #[command(name = "__man", hide = true)]
    Man(cmd::completions::ManArgs),
    /// Pause and resume admission (admin); list the pauses.
    Queue(cmd::queue::Args),
    /// The server's own store: `backup-db FILE` copies it while the server runs,
    /// `restore-db FILE` puts a copy back into a stopped server's data dir.
    Admin(cmd::admin::Args),
    /// Each `[[rpo]]` rule's values: last success, age, status; `rpo forget` (admin).
    Rpo(cmd::rpo::Args),
    /// The audit log (admin): who changed or tried to change what, newest first.
    Audit(cmd::audit::Args),
    /// Several servers on one database: `cluster status` (the replicas, the leader, the term).
    Cluster(cmd::cluster::Args),
    /// Notification targets (`[[notify]]` in the policy): send a test message (admin).
    Notify(cmd::notify::Args),
    /// When the queue and the scheduled runs are done (p50/p90), what misses --until, the bottleneck.
    Forecast(cmd::forecast::Args),
    /// A live terminal view: scopes, nodes, the queue and why each job waits (q quits).
    ///
    /// Three screens: 1 overview (every scope against its limit with the prepared and
    /// preparing share apart, nodes with their slots and the rule that set the number,
    /// queue depth by kind and owner, the oldest waiting job, recent events), 2 queue
    /// (s/k/o/a filter by state, kind, owner, attribute; S sorts, r reverses; Enter
    /// explains the selected job), 3 nodes. `?` lists every key. It redraws on the
    /// server's event stream, not on a timer; it only reads, so any role's token will do.
    Top(cmd::top::Args),
    /// The web dashboard at /ui/: `ui code` prints a one-time sign-in code (admin).
    Ui(cmd::ui::Args),
    /// Internal: the handler program of `lockgate demo` and the agent tests.
    #[command(name = "__demo-task", hide = true)]
    DemoTask(cmd::demo::task::TaskArgs),
    /// Internal: the keeper `lockgate hold acquire` leaves holding the slot.
    #[command(name = "__hold-keeper", hide = true)]
    HoldKeeper,
    /// Internal: the guard `lockgate run` starts beside its command (stops the command's
    /// group if `lockgate run` dies; lockgate_client::guard).
    #[command(name = "__guard", hide = true)]
    Guard(cmd::run::GuardArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => cmd::simulate::run(&cli.global, args),
        Command::Server(args) => cmd::server::run(&cli.global, args),
        Command::Run(args) => cmd::run::run(&cli.global, args),
        Command::Job(args) => cmd::job::run(&cli.global, args),
        Command::Queue(args) => cmd::queue::run(&cli.global, args),
        Command::Admin(args) => cmd::admin::run(&cli.global, args),
        Command::Rpo(args) => cmd::rpo::run(&cli.global, args),
        Command::Audit(args) => cmd::audit::run(&cli.global, args),
        Command::Cluster(args) => cmd::cluster::run(&cli.global, args),
        Command::Notify(args) => cmd::notify::run(&cli.global, args),
        Command::Forecast(args) => cmd::forecast::run(&cli.global, args),
        Command::Top(args) => cmd::top::run(&cli.global, args),
        Command::Ui(args) => cmd::ui::run(&cli.global, args),
        Command::Policy(args) => cmd::policy::run(&cli.global, args),
        Command::Token(args) => cmd::token::run(&cli.global, args),
        Command::Events(args) => cmd::events::run(&cli.global, args),
        Command::Node(args) => cmd::node::run(&cli.global, args),
        Command::Schedule(args) => cmd::schedule::run(&cli.global, args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Backup(args) => cmd::backup::run(&cli.global, args),
        Command::Restore(args) => cmd::restore::run(&cli.global, args),
        Command::Agent(args) => cmd::agent::run(&cli.global, args),
        Command::Demo(args) => cmd::demo::run(&cli.global, args),
        Command::DemoTask(args) => cmd::demo::task::run(args),
        Command::Guard(args) => cmd::run::guard(args),
        Command::Hold(args) => cmd::hold::run(&cli.global, args),
        Command::Hook(args) => cmd::hook::run(&cli.global, args),
        Command::HoldKeeper => cmd::hold::keep(&cli.global),
        Command::Completions(args) => cmd::completions::run(args),
        Command::Man(args) => cmd::completions::man(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let source = session::find_token(&cli.global).1;
            eprintln!("{}", cmd::output::escape_lines(&error_text(&err, &source)));
            Exit::of_error(&err).into()
        }
    }
}

/// How a failed subcommand's error is printed: `lockgate: ` and the chain of causes; a
/// refused token is explained in the CLI's terms ([`session::token_advice`]): with no token
/// at all, only that advice.
fn error_text(err: &anyhow::Error, source: &TokenSource) -> String {
    let advice = err
        .chain()
        .find_map(|e| e.downcast_ref::<ClientError>())
        .and_then(|e| session::token_advice(e, source));
    match advice {
        Some(advice) if matches!(source, TokenSource::Missing(_)) => format!("lockgate: {advice}"),
        Some(advice) => format!("lockgate: {err:#}\nlockgate: {advice}"),
        None => format!("lockgate: {err:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::ErrorDetail;
    use lockgate_client::ClientError;

    #[test]
    fn error_texts_users_see() {
        let api = |status, code: &str, message: &str, field: Option<&str>| ClientError::Api {
            status,
            detail: ErrorDetail {
                code: code.into(),
                message: message.into(),
                field: field.map(str::to_string),
                line: None,
                leader: None,
            },
        };
        let errors = [
            api(409, "lease_lost", "job 7 has no lease with token 3", None),
            api(
                422,
                "invalid_field",
                "attrs.owner: expected an attribute the policy does not reserve, got \"owner\"",
                Some("attrs.owner"),
            ),
            api(401, "unauthorized", "missing or unknown bearer token", None),
            ClientError::Unreachable {
                url: "http://127.0.0.1:9/v1/jobs".into(),
                message: "Connection Failed: Connect error: Connection refused (os error 111)"
                    .into(),
            },
            ClientError::Decode {
                url: "http://127.0.0.1:7400/v1/jobs/1".into(),
                message: "expected value at line 1 column 1: <html>".into(),
            },
        ];
        let mut text: Vec<String> = errors
            .into_iter()
            .map(|e| error_text(&anyhow::Error::from(e), &TokenSource::Given))
            .collect();
        text.push(error_text(
            &anyhow::anyhow!("--from: unknown state \"paused\"").context("job wait"),
            &TokenSource::Given,
        ));
        insta::assert_snapshot!(text.join("\n"));
    }
}
