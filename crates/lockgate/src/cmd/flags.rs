//! The flags several subcommands share, and the value parsers of all of them.
//!
//! [`JobFlags`] is what a job takes and where it is pinned: `job submit`, `schedule add`
//! and `lockgate run` flatten it, so a flag spelled or parsed one way for one of them is
//! spelled and parsed that way for all three (`--priority -1` included). [`JobShape`] adds
//! what only server-run jobs have (`job submit`, `schedule add`).

use lockgate_core::policy::Executor;
use std::time::Duration;

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
    /// Who runs it (default: agent with a node selector, else client).
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
