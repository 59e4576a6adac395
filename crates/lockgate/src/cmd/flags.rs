//! The flags several subcommands share, and the value parsers of all of them.
//!
//! [`JobFlags`] is what a job takes and where it is pinned: `job submit`, `schedule add`
//! and `lockgate run` flatten it, so a flag spelled or parsed one way for one of them is
//! spelled and parsed that way for all three (`--priority -1` included). [`JobShape`] adds
//! what only server-run jobs have (`job submit`, `schedule add`). [`ItemFilters`] is which
//! Kubernetes items `backup create` takes and `restore create` restores.

use lockgate_core::policy::Executor;
use std::time::Duration;

/// Which items of a set of Kubernetes manifests to take (Velero's filters).
#[derive(Debug, Clone, clap::Args)]
pub struct ItemFilters {
    /// Namespaces to take (default: all).
    #[arg(long, value_delimiter = ',', value_name = "NS,..")]
    pub include_namespaces: Vec<String>,
    /// Namespaces to leave out.
    #[arg(long, value_delimiter = ',', value_name = "NS,..")]
    pub exclude_namespaces: Vec<String>,
    /// Resources to take (`pods`, `deployments.apps`, `Deployment`; default: all).
    #[arg(long, value_delimiter = ',', value_name = "RESOURCE,..")]
    pub include_resources: Vec<String>,
    /// Resources to leave out.
    #[arg(long, value_delimiter = ',', value_name = "RESOURCE,..")]
    pub exclude_resources: Vec<String>,
    /// Take every cluster-scoped item (`=false`: none). Default: all of them without a
    /// namespace filter, only those a taken item relates to under one.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub include_cluster_resources: Option<bool>,
    /// Only items whose labels match (kubectl's -l syntax).
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    pub selector: Option<String>,
}

impl ItemFilters {
    /// The filters as `lockgate-blocks` takes them, the selector parsed.
    ///
    /// # Errors
    /// A selector that does not parse, with the character it stops at.
    pub fn filters(&self) -> anyhow::Result<lockgate_blocks::Filters> {
        let label_selector = match self.selector.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                lockgate_core::selector::Selector::parse_labels(text).map_err(|e| {
                    anyhow::anyhow!(
                        "--selector {text:?}: {} (at character {})",
                        e.message,
                        e.position
                    )
                })?,
            ),
        };
        Ok(lockgate_blocks::Filters {
            include_namespaces: self.include_namespaces.clone(),
            exclude_namespaces: self.exclude_namespaces.clone(),
            include_resources: self.include_resources.clone(),
            exclude_resources: self.exclude_resources.clone(),
            label_selector,
            include_cluster_resources: self.include_cluster_resources,
        })
    }
}

/// What a job takes and where it is pinned.
#[derive(Debug, Clone, clap::Args)]
pub struct JobFlags {
    /// Attribute KEY=VALUE (repeatable): datastore=ds1, group=vm/100, ...
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = key_value)]
    pub attrs: Vec<(String, String)>,
    /// Priority (higher runs first; default: the kind's; may be negative).
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<i64>,
    /// Pin to a node (counts against its number).
    #[arg(long)]
    pub node: Option<String>,
    /// Pool cost POOL=N (repeatable).
    #[arg(long = "cost", value_name = "POOL=N", value_parser = cost)]
    pub cost: Vec<(String, u64)>,
}

impl JobFlags {
    /// The attributes as the API takes them.
    pub fn attr_map(&self) -> std::collections::BTreeMap<String, String> {
        self.attrs.iter().cloned().collect()
    }

    /// The costs as the API takes them (`None`: the kind's).
    pub fn cost_map(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        (!self.cost.is_empty()).then(|| self.cost.iter().cloned().collect())
    }
}

/// Dependencies: the flags `job submit` and `run` share.
#[derive(Debug, Default, clap::Args)]
pub struct DepFlags {
    /// Wait until this job has ended, in any state (repeatable).
    #[arg(long = "after", value_name = "ID")]
    pub after: Vec<u64>,
    /// Wait until this job has succeeded; if it ends otherwise, this job is cancelled
    /// (repeatable).
    #[arg(long = "after-ok", value_name = "ID")]
    pub after_ok: Vec<u64>,
}

/// A job its caller holds, and how long to wait for the server: the flags `lockgate run`,
/// `hold acquire` and `hook vzdump` share.
#[derive(Debug, clap::Args)]
pub struct ClientJobFlags {
    /// Job kind.
    #[arg(long, default_value = "backup")]
    pub kind: String,
    #[command(flatten)]
    pub job: JobFlags,
    /// Give up (exit 75) after waiting this long: 30s, 10m, 2h.
    #[arg(long, value_parser = duration)]
    pub max_wait: Option<Duration>,
    /// Idempotency key (default: a random one, reused for retries of the submit).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub deps: DepFlags,
    /// How long to keep trying to reach the server (exit 69 after that; `lockgate run
    /// --if-unreachable run` runs the command instead).
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub connect_timeout: Duration,
}

impl ClientJobFlags {
    /// The submit request: one stage, held by the caller (`executor = client`), with the
    /// given idempotency key or a random one (the same for every retry of this request).
    pub fn request(&self) -> lockgate_api::SubmitRequest {
        lockgate_api::SubmitRequest {
            kind: self.kind.clone(),
            attrs: self.job.attr_map(),
            priority: self.job.priority,
            node: self.job.node.clone(),
            executor: Some(Executor::Client),
            cost: self.job.cost_map(),
            two_stage: Some(false),
            max_wait_s: self.max_wait.map(|d| d.as_secs_f64()),
            idempotency_key: Some(self.idempotency_key.clone().unwrap_or_else(random_key)),
            after: self.deps.after.clone(),
            after_ok: self.deps.after_ok.clone(),
            ..lockgate_api::SubmitRequest::default()
        }
    }
}

/// A random idempotency key (`run-` and 32 hex digits).
fn random_key() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("run-{hex}")
}

/// A server-run job: the flags `job submit` and `schedule add` share.
#[derive(Debug, clap::Args)]
pub struct JobShape {
    /// Job kind.
    #[arg(long)]
    pub kind: String,
    #[command(flatten)]
    pub job: JobFlags,
    /// Let lockgate place it on a node matching this label selector ("" = any node).
    #[arg(long, conflicts_with = "node")]
    pub node_selector: Option<String>,
    /// Who runs it. `job submit`: agent with a node selector, else client. `schedule add`:
    /// always agent (on any node unless --node or --node-selector; client is refused).
    #[arg(long, value_enum)]
    pub executor: Option<ExecutorArg>,
    /// Prepare/expose step before the run.
    #[arg(long)]
    pub two_stage: bool,
    /// Request cancellation after running this long.
    #[arg(long, value_parser = duration)]
    pub max_run: Option<Duration>,
}

impl JobShape {
    /// The executor as the API writes it.
    pub fn executor(&self) -> Option<Executor> {
        self.executor.map(|e| match e {
            ExecutorArg::Client => Executor::Client,
            ExecutorArg::Agent => Executor::Agent,
        })
    }
}

/// `--executor` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExecutorArg {
    /// The submitter runs it.
    Client,
    /// The agent on its node runs it.
    Agent,
}

/// Parses `k=v`.
///
/// # Errors
/// A message naming the argument.
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Parses a node label `KEY=VALUE`, checked against Kubernetes label syntax (a qualified
/// name as key; a value of at most 63 characters, `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`).
///
/// # Errors
/// A message naming the label and what was expected.
pub fn label(text: &str) -> Result<(String, String), String> {
    use lockgate_core::selector::{validate_label_key, validate_label_value};
    let (k, v) = key_value(text)?;
    validate_label_key(&k).map_err(|m| format!("label key {k:?}: {m}"))?;
    validate_label_value(&v).map_err(|m| format!("value {v:?} of label {k:?}: {m}"))?;
    Ok((k, v))
}

/// Parses `pool=n`.
///
/// # Errors
/// A message naming the argument.
pub fn cost(text: &str) -> Result<(String, u64), String> {
    let (k, v) = key_value(text)?;
    let n = v
        .parse()
        .map_err(|_| format!("expected POOL=N with a whole number N, got {text:?}"))?;
    Ok((k, n))
}

/// Parses a policy-style duration (`250ms`, `30s`, `2h`).
///
/// # Errors
/// What was expected.
pub fn duration(text: &str) -> Result<Duration, String> {
    lockgate_core::time::parse_duration(text)
}

#[cfg(test)]
mod tests {
    use crate::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lockgate").chain(args.iter().copied()))
    }

    #[test]
    fn run_takes_a_negative_priority_like_job_submit_and_schedule_add() {
        // Regression: `lockgate run --priority -1` was refused by the argument parser.
        for args in [
            &["run", "--priority", "-1", "--", "true"][..],
            &["run", "--priority=-1", "--", "true"],
        ] {
            let Command::Run(a) = parse(args).unwrap().command else {
                panic!("{args:?} is not run")
            };
            assert_eq!(
                (a.wait.job.priority, a.command.as_slice()),
                (Some(-1), &["true".to_string()][..])
            );
        }
        let submit = parse(&["job", "submit", "--kind", "backup", "--priority", "-5"]);
        assert!(submit.is_ok(), "{submit:?}");
        let add = parse(&[
            "schedule",
            "add",
            "n",
            "--when",
            "daily",
            "--kind",
            "b",
            "--priority",
            "-2",
        ]);
        assert!(add.is_ok(), "{add:?}");
    }

    #[test]
    fn flag_errors_users_see() {
        let cases: [&[&str]; 4] = [
            &["run", "--attr", "datastore", "--", "true"],
            &["run", "--cost", "io=lots", "--", "true"],
            &["job", "submit", "--kind", "b", "--max-run", "5 minutes"],
            &[
                "job",
                "submit",
                "--kind",
                "b",
                "--node",
                "n1",
                "--node-selector",
                "zone=west",
            ],
        ];
        let text: Vec<String> = cases
            .iter()
            .map(|args| {
                let e = parse(args).expect_err("refused");
                format!("$ lockgate {}\n{}", args.join(" "), e.render())
            })
            .collect();
        insta::assert_snapshot!(text.join("\n"));
    }

    /// `-h` of a subcommand keeps its own flags apart from the global ones, and the
    /// environment variables are named without a stray `=` (set or unset).
    #[test]
    fn help_groups_the_global_options() {
        let help = |args: &[&str]| {
            let e = parse(args).expect_err("help");
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp);
            format!("$ lockgate {}\n{}", args.join(" "), e.render())
        };
        let text = [help(&["server", "-h"]), help(&["simulate", "-h"])].join("\n");
        assert!(!text.contains("LOCKGATE_SERVER=") && !text.contains("LOCKGATE_TOKEN="));
        insta::assert_snapshot!(text);
    }

    /// Every subcommand, at every level, takes the global flags under "Global options",
    /// before its name and after it, those that ignore them too.
    #[test]
    fn every_subcommand_accepts_the_global_options() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
            for id in ["server", "token", "output"] {
                let arg = cmd.get_arguments().find(|a| a.get_id() == id);
                let heading = arg.and_then(|a| a.get_help_heading());
                if heading != Some("Global options") {
                    out.push(format!("{path}: --{id} under {heading:?}"));
                }
            }
            // clap's own `help` subcommand takes no flags.
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "lockgate", &mut missing);
        assert_eq!(missing, Vec::<String>::new());
        for args in [
            &[
                "--server",
                "http://h:1",
                "--token",
                "t",
                "-o",
                "json",
                "schedule",
                "next",
                "daily",
            ][..],
            &[
                "schedule",
                "next",
                "daily",
                "--server",
                "http://h:1",
                "--token",
                "t",
                "-o",
                "json",
            ],
            &[
                "server",
                "--server",
                "http://h:1",
                "--token",
                "t",
                "--listen",
                "127.0.0.1:0",
            ],
            &[
                "simulate",
                "--policy",
                "p",
                "--nodes",
                "n",
                "--workload",
                "w",
                "--token",
                "t",
                "--server",
                "http://h:1",
            ],
        ] {
            let cli = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(
                (cli.global.server.as_str(), cli.global.token.as_deref()),
                ("http://h:1", Some("t")),
                "{args:?}"
            );
        }
    }
}
