//! `lockgate policy`: show, check (offline), diff (a dry run) and apply the policy.

use super::output::{self, print_json};
use super::session;
use crate::GlobalArgs;
use lockgate_client::PolicyPut;
use lockgate_core::Policy;
use lockgate_host::policy_files as policy_source;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod assertions;

/// Arguments of `lockgate policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Print the active policy (TOML; -o json: `{digest, policy}`).
    Show,
    /// Check a policy's promises offline: run --workload on --nodes through the engine in
    /// virtual time and judge each `[[assert]]` of --assert FILE (a scope never above N, a
    /// kind's p90 wait, the window done by a time, a kind started within a bound). Exit 0
    /// when all hold, 1 when one fails (with its numbers), 2 for input that cannot be judged.
    Test(assertions::TestArgs),
    /// Validate a policy file, and warn where a valid rule would apply to nothing.
    Check {
        /// Policy file (TOML), or a directory whose *.toml files merge in name order.
        file: PathBuf,
        #[command(flatten)]
        lint: LintFlags,
        /// Judge the rules by the jobs the server saw (`--since`); without it only the
        /// kinds and attributes the policy itself names are known.
        #[arg(long)]
        history: bool,
    },
    /// What applying FILE would change, and which jobs it would admit now (a dry run);
    /// warns where a rule would apply to none of the jobs the server saw.
    Diff {
        /// Policy file (TOML), or a directory whose *.toml files merge in name order.
        file: PathBuf,
        /// Show the changes even when FILE limits nothing where the active policy does.
        #[arg(long)]
        allow_unlimited: bool,
        #[command(flatten)]
        lint: LintFlags,
    },
    /// Apply FILE (with --config, the server rewrites its config file, keeping FILE.bak).
    Apply {
        /// Policy file (TOML), or a directory whose *.toml files merge in name order.
        file: PathBuf,
        /// Apply only if the active policy still has this digest.
        #[arg(long)]
        if_match: Option<String>,
        /// Apply FILE even when it limits nothing (no global, limit, node, pool or
        /// conflict rule) and the active policy limits something.
        #[arg(long)]
        allow_unlimited: bool,
        /// Apply nothing: show the diff, and the server's history replayed under the
        /// active policy and under FILE side by side (docs/simulate.md).
        #[arg(long)]
        dry_run: bool,
        /// With --dry-run: the history's period, back from now.
        #[arg(
            long,
            value_name = "DURATION",
            default_value = "7d",
            requires = "dry_run"
        )]
        since: String,
    },
}

/// How policy warnings are judged.
#[derive(Debug, clap::Args)]
struct LintFlags {
    /// Exit 1 when there is any warning (a rule that matches nothing, a typo, two
    /// conflicts that serialise what one of them shares).
    #[arg(long)]
    strict: bool,
    /// The server's history the rules are judged by, back from now.
    #[arg(long, value_name = "DURATION", default_value = "7d")]
    since: String,
}

/// The most jobs of the history read for the warnings.
const LINT_JOBS: usize = 20_000;

/// The warnings for `policy` (its text `text`), judged by the server's recent jobs when
/// `client` is given; printed on stderr unless `json`. The exit code `--strict` asks for.
fn lint(
    policy: &Policy,
    text: &str,
    client: Option<&lockgate_client::Client>,
    flags: &LintFlags,
) -> anyhow::Result<(Vec<String>, Option<ExitCode>)> {
    use lockgate_core::policy::lint::{lint, Seen, SeenJob};
    let seen = match client {
        Some(c) => {
            let from = super::simulate::parse_since(&flags.since)?;
            let (jobs, truncated) = super::simulate::history::recent(c, from, LINT_JOBS)?;
            let window = if truncated {
                format!("the last {} ({LINT_JOBS} newest)", flags.since)
            } else {
                format!("the last {}", flags.since)
            };
            let jobs = jobs
                .into_iter()
                .map(|j| SeenJob {
                    kind: j.kind,
                    owner: j.owner,
                    node: j.node.filter(|_| j.pinned),
                    attrs: j.attrs,
                })
                .collect();
            Some(Seen { jobs, window })
        }
        None => None,
    };
    let warnings: Vec<String> = lint(policy, Some(text), seen.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect();
    let code = (flags.strict && !warnings.is_empty()).then(|| ExitCode::from(1));
    Ok((warnings, code))
}

fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("lockgate: warning: {w}");
    }
}

/// The policy FILE stands for (a file, or a directory whose `*.toml` merge), and its
/// text (a directory's merged document).
fn load(file: &Path) -> anyhow::Result<(Policy, String)> {
    Ok(policy_source::read(file)?)
}

fn print_answer(global: &GlobalArgs, a: &lockgate_api::PolicyAnswer) {
    if output::json(global) {
        print_json(a);
        return;
    }
    if a.diff.is_empty() {
        println!("no changes");
    }
    for d in &a.diff {
        output::print_text(d);
    }
    if !a.over_limit.is_empty() {
        output::print_text(&format!(
            "over limit (draining): {}",
            a.over_limit.join(", ")
        ));
    }
    let ids: Vec<String> = a.admitted_now.iter().map(u64::to_string).collect();
    let verb = if a.dry_run {
        "would admit now"
    } else {
        "admitted now"
    };
    println!(
        "{verb}: {}",
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    );
    if !a.dry_run {
        println!("digest: {}", a.digest);
    }
}

/// What `policy check` says about each `[[notify]]` target's secrets: their names, as
/// written; nothing is read, and a URL's password shows as `***`.
fn secret_lines(policy: &Policy) -> Vec<String> {
    use lockgate_core::policy::{redact_url, NotifyVia, SECRET_MASK};
    policy
        .notify
        .iter()
        .map(|t| {
            let (to, password) = match &t.via {
                NotifyVia::Webhook { url } => (
                    format!("webhook {}", redact_url(url)),
                    redact_url(url) != *url,
                ),
                NotifyVia::Smtp {
                    host,
                    port,
                    password,
                    ..
                } => (format!("smtp {host}:{port}"), password.is_some()),
            };
            let mut names: Vec<String> = t.secret.iter().map(|s| s.describe()).collect();
            if password {
                names.push(format!("a password in the URL (shown as {SECRET_MASK})"));
            }
            let secrets = if names.is_empty() {
                "no secret".to_string()
            } else {
                format!("secret from {} (not read)", names.join(" and "))
            };
            format!("notify {:?}: {to}, {secrets}", t.name)
        })
        .collect()
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Check {
            file,
            lint: flags,
            history,
        } => match policy_source::read(&file) {
            Ok((policy, text)) => {
                let secrets = secret_lines(&policy);
                let client = history.then(|| session::client(global)).transpose()?;
                let (warnings, code) = lint(&policy, &text, client.as_ref(), &flags)?;
                if output::json(global) {
                    print_json(
                        &serde_json::json!({"valid": true, "file": file, "secrets": secrets, "warnings": warnings}),
                    );
                } else {
                    println!("{}: valid", file.display());
                    for line in &secrets {
                        println!("  {line}");
                    }
                    print_warnings(&warnings);
                }
                Ok(code.unwrap_or(ExitCode::SUCCESS))
            }
            Err(policy_source::ReadError::Policy(e)) => {
                if output::json(global) {
                    print_json(
                        &serde_json::json!({"valid": false, "file": e.file.as_deref().unwrap_or_default(), "line": e.line, "field": e.field, "message": e.to_string()}),
                    );
                }
                eprintln!("lockgate: {e}");
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(e.into()),
        },
        Sub::Test(t) => Ok(assertions::run(global, &t)),
        Sub::Show => {
            let view = session::client(global)?.policy()?;
            if output::json(global) {
                print_json(&view);
            } else {
                let text = serde_json::to_string(&view.policy)?;
                let policy = Policy::from_json(&text)
                    .map_err(|e| anyhow::anyhow!("the server's policy does not parse here: {e}"))?;
                println!("# digest {}", view.digest);
                output::print_text(&policy.to_toml_string());
            }
            Ok(ExitCode::SUCCESS)
        }
        Sub::Diff {
            file,
            allow_unlimited,
            lint: flags,
        } => {
            let (policy, text) = load(&file)?;
            let opts = PolicyPut {
                dry_run: true,
                if_match: None,
                allow_unlimited,
            };
            let client = session::client(global)?;
            let a = client.put_policy_with(&text, &opts)?;
            let (warnings, code) = lint(&policy, &text, Some(&client), &flags)?;
            if output::json(global) {
                // The answer's own keys, and the warnings beside them.
                let mut v = serde_json::to_value(&a)?;
                v["warnings"] = serde_json::json!(warnings);
                print_json(&v);
            } else {
                print_answer(global, &a);
                print_warnings(&warnings);
            }
            Ok(code.unwrap_or(ExitCode::SUCCESS))
        }
        Sub::Apply {
            file,
            if_match,
            allow_unlimited,
            dry_run: true,
            since,
        } => dry_run(global, &file, if_match.as_deref(), allow_unlimited, &since),
        Sub::Apply {
            file,
            if_match,
            allow_unlimited,
            dry_run: false,
            ..
        } => {
            let (_, text) = load(&file)?;
            let opts = PolicyPut {
                dry_run: false,
                if_match: if_match.as_deref(),
                allow_unlimited,
            };
            let a = session::client(global)?.put_policy_with(&text, &opts)?;
            print_answer(global, &a);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `policy apply --dry-run`: the diff `policy diff` shows, then the history since `since`
/// replayed under the active policy and FILE (`-o json`: `{"diff": .., "history": ..}`).
fn dry_run(
    global: &GlobalArgs,
    file: &Path,
    if_match: Option<&str>,
    allow_unlimited: bool,
    since: &str,
) -> anyhow::Result<ExitCode> {
    let (candidate, text) = load(file)?;
    let since = super::simulate::parse_since(since)?;
    let opts = PolicyPut {
        dry_run: true,
        if_match,
        allow_unlimited,
    };
    let client = session::client(global)?;
    let a = client.put_policy_with(&text, &opts)?;
    let c = super::simulate::compare_history(&client, Some(&candidate), since, None, 100_000)?;
    if output::json(global) {
        print_json(&serde_json::json!({"diff": a, "history": c.comparison}));
    } else {
        print_answer(global, &a);
        println!();
        print!("{}", c.comparison.to_table());
    }
    Ok(ExitCode::SUCCESS)
}
