//! The validated policy: what a limit means (design `policy.md`).
//!
//! A policy document is parsed in two phases. [`raw`] holds serde structs that mirror the
//! TOML/JSON document key for key (`deny_unknown_fields`, snake_case); `validate` turns a
//! raw document into a [`Policy`], checking every field and reporting the first problem as a
//! [`PolicyError`] that names the file, line, field, the value given and what was expected.
//! Everything downstream (the engine, the simulator, the server) takes only [`Policy`], so an
//! invalid policy can never reach the engine.
//!
//! Private helpers: `locate` finds where an error is (field paths from
//! `serde_path_to_error`, lines from `toml_edit` spans); `document` describes the document's
//! layout once, and both `write` (the TOML writer) and `diff` walk that description.
//!
//! Invariants of a [`Policy`]:
//! - limit names are unique; a limit with `values` has a non-empty `per`; `per` never holds
//!   `node`;
//! - every selector parsed (label selectors for node rules, job selectors for `match`);
//! - every pool named in a `cost` is declared in `[resources]` or `[nodes.resources]`;
//! - owner weights are at least 1;
//! - `[blocks] input_roots` are absolute, `backup_namespaces` are namespace names, and the
//!   `[blocks]` caps are at least 1.
//! - `[quotas]` numbers are at least 1 (`max_attrs` at least 0).
//! - `[[rpo]]` names (given or derived) are unique and valid scope names; `max_age` is
//!   greater than zero.

mod diff;
mod document;
pub mod lint;
mod locate;
mod notify;
mod parts;
mod quotas;
pub mod raw;
mod rpo;
mod validate;
mod windows;
mod write;

use crate::selector::Selector;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

pub use notify::{
    redact_url, NotifyTarget, NotifyVia, SecretRef, DEFAULT_NOTIFY_MATCH, DEFAULT_NOTIFY_RETRIES,
    DEFAULT_NOTIFY_TIMEOUT, SECRET_MASK,
};
pub use quotas::{
    QuotasPolicy, DEFAULT_MAX_ATTRS, DEFAULT_MAX_ATTR_VALUE_BYTES, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_QUEUED_PER_OWNER,
};
pub use rpo::RpoRule;
pub use validate::PolicyError;
pub use windows::{LimitWindow, Maintenance, ValuePool};

/// Default lease TTL (`[leases].ttl`).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// Default node TTL (`[nodes].ttl`).
pub const DEFAULT_NODE_TTL: Duration = Duration::from_secs(30);
/// Default `[queue].reserve_after`.
pub const DEFAULT_RESERVE_AFTER: Duration = Duration::from_secs(300);
/// Default per-kind `prepare_timeout`.
pub const DEFAULT_PREPARE_TIMEOUT: Duration = Duration::from_secs(1800);
/// Default `[retention].days`.
pub const DEFAULT_RETENTION_DAYS: u32 = 14;
/// The kind of an item-block backup; a coordinator kind unless the policy says otherwise.
pub const RESOURCE_BACKUP_KIND: &str = "resource-backup";
/// The kind of a restore of an item-block backup; a coordinator kind unless the policy
/// says otherwise.
pub const RESOURCE_RESTORE_KIND: &str = "resource-restore";
/// Restores first: the priority of a restore's kinds (`resource-restore`, and the
/// `data-download` and `pod-volume-restore` that move its data back) when the policy gives
/// them none, so a restore queued behind a night of backups (priority 0 unless set) takes
/// the next slot that frees.
pub const RESTORE_KINDS_PRIORITY: i64 = 100;
/// The kinds [`RESTORE_KINDS_PRIORITY`] applies to.
pub const RESTORE_KINDS: &[&str] = &[RESOURCE_RESTORE_KIND, "data-download", "pod-volume-restore"];
/// The attributes of a `resource-restore` job that list what it writes: the namespaces,
/// and the persistent volumes (cluster-wide names). Restores whose lists of either
/// overlap never run at once ([`Conflict::restores`]).
pub const RESTORE_OVERLAPS: [&str; 2] = ["namespaces", "volumes"];

/// A validated policy. Build one with [`Policy::from_toml`] or [`Policy::from_json`].
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `[global]`.
    pub global: GlobalPolicy,
    /// `[[limit]]`, in document order.
    pub limits: Vec<Limit>,
    /// `[nodes]` with its rules.
    pub nodes: NodesPolicy,
    /// `[resources]`: global pools and their capacity.
    pub resources: BTreeMap<String, u64>,
    /// `[[conflict]]`, in document order.
    pub conflicts: Vec<Conflict>,
    /// `[leases]`.
    pub leases: LeasesPolicy,
    /// `[queue]`.
    pub queue: QueuePolicy,
    /// `[owners.<name>]`.
    pub owners: BTreeMap<String, OwnerPolicy>,
    /// `[kinds.<kind>]`.
    pub kinds: BTreeMap<String, KindPolicy>,
    /// `[retention]`.
    pub retention: RetentionPolicy,
    /// `[[schedule]]`.
    pub schedules: Vec<ScheduleSpec>,
    /// `[blocks]`.
    pub blocks: BlocksPolicy,
    /// `[quotas]`.
    pub quotas: QuotasPolicy,
    /// `[resources.<name>]` tables with `per`: pools per attribute value.
    pub value_pools: BTreeMap<String, ValuePool>,
    /// `[[maintenance]]`, in document order.
    pub maintenance: Vec<Maintenance>,
    /// `reserve_after` and `strict` of the `[resources.<name>]` tables that set them
    /// (plain and per-value pools alike); a pool not listed takes `[queue]`'s.
    pub pool_reserves: BTreeMap<String, Reserve>,
    /// `[[rpo]]`, in document order (names unique).
    pub rpo: Vec<RpoRule>,
    /// The raw document this policy was validated from (for `policy show` and diffs).
    pub raw: raw::RawPolicy,
    /// `[[notify]]`, in document order.
    pub notify: Vec<NotifyTarget>,
    /// `[forecast]`: how durations are learned.
    pub forecast: crate::durations::ForecastPolicy,
    /// `[[deadline]]`, in document order.
    pub deadlines: Vec<Deadline>,
}

/// One `[[deadline]]`: a backup window, "everything matching `matcher` done by `by`".
#[derive(Debug, Clone, PartialEq)]
pub struct Deadline {
    /// Unique name (the `window` label of its metrics).
    pub name: String,
    /// Which jobs it covers; `None`: every job.
    pub matcher: Option<Selector>,
    /// The deadline: its next time after now.
    pub by: crate::calendar::Schedule,
}

impl Deadline {
    /// Whether the deadline covers `job`.
    pub fn covers(&self, job: &crate::job::Job) -> bool {
        self.matcher
            .as_ref()
            .is_none_or(|s| s.matches(|k| job.key_value(k)))
    }
}

/// `[global]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalPolicy {
    /// At most this many jobs hold slots at once (coordinator kinds excluded). `None`:
    /// unlimited.
    pub max_running: Option<u32>,
    /// Cluster-wide cap on jobs in `preparing` or `prepared` (scope `global-prepare`).
    pub prepare_queue: Option<u32>,
    /// Windows with their own `max_running` (scope `global` while one is active).
    pub windows: Vec<LimitWindow>,
}

/// A key a limit is partitioned by (`per`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PerKey {
    /// The job's kind.
    Kind,
    /// The job's owner.
    Owner,
    /// An attribute by name.
    Attr(String),
}

impl PerKey {
    /// The name as written in the policy (`kind`, `owner` or the attribute's name).
    pub fn name(&self) -> &str {
        match self {
            PerKey::Kind => "kind",
            PerKey::Owner => "owner",
            PerKey::Attr(a) => a,
        }
    }
}

/// One `[[limit]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// Unique name; scopes are `limit:<name>` or `limit:<name>[k=v,..]`.
    pub name: String,
    /// Partition keys; empty means one counter for every matching job.
    pub per: Vec<PerKey>,
    /// Which jobs the limit applies to; `None`: every job except coordinator kinds.
    pub matcher: Option<Selector>,
    /// The number for a partition without an override; `None`: unlimited. With `auto`,
    /// the range's `min`: the number a partition starts at.
    pub max: Option<u32>,
    /// The number sets itself within a range (`max = { auto = .. }`): each partition
    /// without an override has its own controller (`crate::auto`).
    pub auto: Option<crate::auto::AutoConfig>,
    /// How often an automatic number is judged (`interval`, default 10 s).
    pub auto_interval: Duration,
    /// Per-value overrides. The key holds one value per `per` key, in `per` order (the
    /// document writes them comma-joined: `values = { "ds1,backup" = 3 }`).
    pub values: BTreeMap<Vec<String>, u32>,
    /// Reservations on this limit's partitions (`reserve_after`, `strict`).
    pub reserve: Reserve,
    /// Windows with their own number for every partition: while one is active, the
    /// smallest active `max` holds instead of `max` and `values`.
    pub windows: Vec<LimitWindow>,
}

/// How a waiting job holds one rule's scopes for itself (policy.md, "Reservations"):
/// `reserve_after` and `strict` on a `[[limit]]`, `[[conflict]]` or pool; `[queue]` gives the
/// default `reserve_after`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserve {
    /// A job held by this rule reserves its scope after waiting this long; `None`: the
    /// `[queue]` value.
    pub after: Option<Duration>,
    /// Strict order on this rule's scopes: a job it holds reserves them at once, whatever
    /// else holds the job (default false).
    pub strict: bool,
}

impl Limit {
    /// The number for one partition (values in `per` order), `None` when unlimited.
    pub fn limit_for(&self, values: &[String]) -> Option<u32> {
        self.values.get(values).copied().or(self.max)
    }
}

/// `[nodes]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodesPolicy {
    /// Every node's number unless a rule matches; `None`: unlimited.
    pub max_running: Option<u32>,
    /// Per node: jobs that may hold prepared resources beyond `max_running` (default 0).
    pub prepare_queue: u32,
    /// A node whose agent is silent this long is lost (default 30 s).
    pub ttl: Duration,
    /// `[[nodes.rule]]` in document order; the smallest matching number wins.
    pub rules: Vec<NodeRule>,
    /// `[nodes.resources]`: per-node pools with their default capacity; an agent's
    /// registration may report its own capacity.
    pub resources: BTreeMap<String, u64>,
}

impl Default for NodesPolicy {
    fn default() -> Self {
        NodesPolicy {
            max_running: None,
            prepare_queue: 0,
            ttl: DEFAULT_NODE_TTL,
            rules: Vec::new(),
            resources: BTreeMap::new(),
        }
    }
}

/// One `[[nodes.rule]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRule {
    /// Kubernetes label selector over the node's labels.
    pub selector: Selector,
    /// The node's number when this is the smallest matching rule (0 allowed).
    pub max_running: u32,
    /// Fewer slots while the node's pressure passes these.
    pub guard: Option<crate::auto::GuardLimits>,
}

/// One `[[conflict]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// Two jobs with equal values for all keys never hold slots together (`kind`, `owner`
    /// or attribute names). May be empty when `overlap` is set.
    pub keys: Vec<PerKey>,
    /// A list-valued attribute (`"a,b"`, `"*"` for all): jobs whose sets overlap conflict
    /// (and, when `keys` is non-empty, whose keys are also equal).
    pub overlap: Option<String>,
    /// Which jobs take part; `None`: every job that has the keys.
    pub matcher: Option<Selector>,
    /// Which of the taking-part jobs need the key alone (within `matcher`); the others
    /// share it with each other. `None`: every job needs it alone.
    pub exclusive: Option<Selector>,
    /// How long shared jobs ranked below a waiting exclusive job may still pass it (counted
    /// from when it was queued). Default 0: none may.
    pub exclusive_delay: Duration,
    /// Reservations on this conflict's keys (`reserve_after`, `strict`).
    pub reserve: Reserve,
    /// The kind of the job that recovers a key whose holder was lost (`recover`); it needs
    /// the key alone (validated).
    pub recover: Option<String>,
    /// Not written in the policy: one of [`Conflict::restores`], which every policy has
    /// unless one of its own conflicts already does its work. Lints and
    /// [`Policy::limits_anything`] pass over it.
    pub built_in: bool,
}

impl Conflict {
    /// Restores that write the same namespace or the same persistent volume never run at
    /// once: `resource-restore` jobs whose `attr` (one of [`RESTORE_OVERLAPS`]) lists
    /// overlap. Built into every policy (see [`Conflict::built_in`]).
    pub fn restores(attr: &str) -> Conflict {
        Conflict {
            keys: Vec::new(),
            overlap: Some(attr.into()),
            matcher: Some(
                Selector::parse_jobs(&format!("kind={RESOURCE_RESTORE_KIND}"))
                    .expect("a valid job selector"),
            ),
            exclusive: None,
            exclusive_delay: Duration::ZERO,
            reserve: Reserve::default(),
            recover: None,
            built_in: true,
        }
    }

    /// Whether this conflict already keeps any two `resource-restore` jobs whose `attr`
    /// lists overlap apart (so [`Conflict::restores`] would only count twice).
    pub fn keeps_restores_apart(&self, attr: &str) -> bool {
        let restore = |k: &str| (k == "kind").then_some(RESOURCE_RESTORE_KIND);
        self.keys.is_empty()
            && self.overlap.as_deref() == Some(attr)
            && self.matcher.as_ref().is_none_or(|m| m.matches(restore))
            && self.exclusive.as_ref().is_none_or(|m| m.matches(restore))
    }
}

/// `[leases]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasesPolicy {
    /// A holder must renew within this (default 30 s).
    pub ttl: Duration,
}

impl Default for LeasesPolicy {
    fn default() -> Self {
        LeasesPolicy {
            ttl: DEFAULT_LEASE_TTL,
        }
    }
}

/// `[queue]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePolicy {
    /// Adds 1 to the effective priority for every `aging` of waiting; `None`: no aging.
    pub aging: Option<Duration>,
    /// StrictFIFO: a blocked job stops every lower-ranked job (default false).
    pub strict: bool,
    /// A capacity-blocked top job reserves its scope after waiting this long (default 5 min).
    pub reserve_after: Duration,
    /// `fair_share = "owner"`.
    pub fair_share: bool,
    /// The order among jobs of equal base priority (default [`QueueOrder::Fifo`]).
    pub order: QueueOrder,
    /// How far [`QueueOrder::Window`] may move a job back from its arrival (default 4 h).
    pub window_horizon: Duration,
}

/// `[queue] order`: how jobs of equal base priority are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// By arrival (the default).
    #[default]
    Fifo,
    /// By the window plan (`engine/window_order.rs`): weighted longest expected run first,
    /// within `window_horizon` of arrival.
    Window,
}

/// Default `[queue].window_horizon`.
pub const DEFAULT_WINDOW_HORIZON: Duration = Duration::from_secs(4 * 3600);

impl Default for QueuePolicy {
    fn default() -> Self {
        QueuePolicy {
            aging: None,
            strict: false,
            reserve_after: DEFAULT_RESERVE_AFTER,
            fair_share: false,
            order: QueueOrder::Fifo,
            window_horizon: DEFAULT_WINDOW_HORIZON,
        }
    }
}

/// `[owners.<name>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerPolicy {
    /// Fair-share weight (default 1, at least 1).
    pub weight: u32,
    /// Highest priority this owner may submit with; `None`: the role's default.
    pub max_priority: Option<i64>,
    /// Whether this owner's backups (when it is not an admin) run manifest hooks (default
    /// false: a hook is a command run with the server's credentials).
    pub allow_hooks: bool,
    /// Namespaces this owner's backups (when it is not an admin) may take (default none).
    pub backup_namespaces: BTreeSet<String>,
}

impl Default for OwnerPolicy {
    fn default() -> Self {
        OwnerPolicy {
            weight: 1,
            max_priority: None,
            allow_hooks: false,
            backup_namespaces: BTreeSet::new(),
        }
    }
}

/// A retry rule (`retry = { times = 3, interval = "30s" }`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retry {
    /// How many times a failed or lost job is queued again (default 0).
    pub times: u32,
    /// How long after the failure it is queued again.
    pub interval: Duration,
}

/// `[kinds.<kind>]`: defaults for jobs of one kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindPolicy {
    /// Default priority.
    pub priority: Option<i64>,
    /// Default cost per pool.
    pub cost: BTreeMap<String, u64>,
    /// Whether jobs of this kind are two-stage by default.
    pub two_stage: Option<bool>,
    /// Bound on `preparing` (default 30 min).
    pub prepare_timeout: Option<Duration>,
    /// Retries for failed or lost jobs.
    pub retry: Option<Retry>,
    /// Coordinator kind: counted only by limits whose `match` names the kind, and by
    /// conflicts.
    pub coordinator: Option<bool>,
    /// Its queued jobs may preempt lower-priority running or prepared jobs (default false).
    pub preempt: Option<bool>,
    /// Its jobs may be preempted (default true).
    pub preemptible: Option<bool>,
    /// `lockgate run` sends the output of its jobs by default (default false).
    pub log: Option<bool>,
    /// `lockgate run` runs its jobs without admission when the server cannot be reached
    /// (`if_unreachable = "run"`; default false: it exits 69).
    pub run_if_unreachable: bool,
}

/// `[retention]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Finished jobs, events and idempotency keys are kept this many days (default 14).
    pub days: u32,
    /// Bytes of output kept per job (default [`DEFAULT_JOB_LOG_BYTES`]).
    pub job_log_bytes: u64,
    /// Bytes of output kept for all jobs (default [`DEFAULT_JOB_LOGS_TOTAL_BYTES`]).
    pub job_logs_total_bytes: u64,
}

/// Default `[retention].job_log_bytes` (4 MiB).
pub const DEFAULT_JOB_LOG_BYTES: u64 = 4 << 20;
/// Default `[retention].job_logs_total_bytes` (1 GiB).
pub const DEFAULT_JOB_LOGS_TOTAL_BYTES: u64 = 1 << 30;

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            days: DEFAULT_RETENTION_DAYS,
            job_log_bytes: DEFAULT_JOB_LOG_BYTES,
            job_logs_total_bytes: DEFAULT_JOB_LOGS_TOTAL_BYTES,
        }
    }
}

/// What to do when a schedule's previous run is still queued or running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Duplicates {
    /// Record the new run as skipped.
    #[default]
    Skip,
    /// Keep both.
    Queue,
    /// Cancel the queued previous run, submit the new one.
    CancelQueued,
    /// Cancel the previous run even if running, submit the new one.
    CancelRunning,
}

/// What to do after the server was down across planned times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Misfire {
    /// Submit one catch-up run.
    #[default]
    RunOnce,
    /// Wait for the next planned time.
    Skip,
}

/// Who runs a job.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Executor {
    /// The submitter holds the lease and does the work.
    Client,
    /// The agent on the job's node runs its configured handler.
    Agent,
}

/// The job a schedule submits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTemplate {
    /// Job kind.
    pub kind: String,
    /// Attributes.
    pub attrs: BTreeMap<String, String>,
    /// Priority; `None`: the kind's default.
    pub priority: Option<i64>,
    /// Pinned node.
    pub node: Option<String>,
    /// Node selector for a movable job (label-selector syntax, `""` = any node).
    pub node_selector: Option<String>,
    /// Executor; `None`: the default rule of policy.md.
    pub executor: Option<Executor>,
    /// Cost per pool; empty: the kind's default.
    pub cost: BTreeMap<String, u64>,
    /// Two-stage; `None`: the kind's default.
    pub two_stage: Option<bool>,
    /// Give up after waiting this long.
    pub max_wait: Option<Duration>,
    /// Request cancellation after running this long.
    pub max_run: Option<Duration>,
}

/// One `[[schedule]]` (design `schedules.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    /// Unique name; runs are owned by `schedule:<name>`.
    pub name: String,
    /// Calendar event or cron expression, validated by [`crate::calendar`].
    pub when: String,
    /// The job each run submits.
    pub job: JobTemplate,
    /// Default `skip`.
    pub duplicates: Duplicates,
    /// Default `run-once`.
    pub misfire: Misfire,
    /// A run not admitted by then ends `expired`.
    pub max_start_delay: Option<Duration>,
    /// Spread runs by up to this much.
    pub jitter: Option<Duration>,
    /// Retries of failed runs.
    pub retry: Option<Retry>,
    /// Each run waits (a dependency `after`, any end) for the latest run of this schedule
    /// planned at or before its own; none: runs wait for no schedule.
    pub after: Option<String>,
}

/// One `[[blocks.rule]]`: items matching `matcher` are grouped by the `group_by` values.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockRule {
    /// Job-style selector over an item's `kind` and its labels.
    pub matcher: Selector,
    /// `label:<name>` or `field:<dotted.path>` entries; items with equal values form one block.
    pub group_by: Vec<String>,
}

/// `[blocks]` (design `item-blocks.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct BlocksPolicy {
    /// Configured grouping rules.
    pub rules: Vec<BlockRule>,
    /// Hook exec template as an argv; `{namespace}`, `{pod}`, `{container}` are replaced and
    /// `{command}` expands to the hook's own argv.
    pub exec_template: Vec<String>,
    /// PVCs sharing this label's value form one block (default `lockgate.io/volume-group`).
    pub volume_group_label: String,
    /// Node selector of the data-upload jobs (default `""`: any node).
    pub data_upload_selector: String,
    /// The image of a restore's wait container (`restore_wait_image`; default none: a
    /// restored pod's node is told to the restore by hand).
    pub restore_wait_image: Option<String>,
    /// `input_roots`: absolute directories a non-admin's backup input must lie in, added to
    /// the server's `--backup-input-root`s (default none). Whether they exist is checked by
    /// the server, which reads files; the core reads none.
    pub input_roots: Vec<PathBuf>,
    /// Caps on reading one backup's input (defaults [`BlocksPolicy::DEFAULT_MAX_FILE_BYTES`]
    /// and the others).
    pub max_file_bytes: u64,
    /// See [`BlocksPolicy::DEFAULT_MAX_TOTAL_BYTES`].
    pub max_total_bytes: u64,
    /// See [`BlocksPolicy::DEFAULT_MAX_ITEMS`].
    pub max_items: u64,
    /// See [`BlocksPolicy::DEFAULT_MAX_ENTRIES`].
    pub max_entries: u64,
}

impl BlocksPolicy {
    /// Default `max_file_bytes`, 64 MiB: a file read whole is held in memory while it is
    /// indexed; a Kubernetes object is at most 1.5 MiB.
    pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
    /// Default `max_total_bytes`, 2 GiB (etcd's default space quota): bounds planning time.
    pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 2 << 30;
    /// Default `max_items`, 500,000: above Kubernetes' scalability envelope, about 100 MB
    /// of plan.
    pub const DEFAULT_MAX_ITEMS: u64 = 500_000;
    /// Default `max_entries`, 1,000,000 directory entries examined.
    pub const DEFAULT_MAX_ENTRIES: u64 = 1_000_000;
}

impl Default for BlocksPolicy {
    fn default() -> Self {
        BlocksPolicy {
            rules: Vec::new(),
            exec_template: [
                "kubectl",
                "exec",
                "-n",
                "{namespace}",
                "{pod}",
                "-c",
                "{container}",
                "--",
                "{command}",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            volume_group_label: "lockgate.io/volume-group".to_string(),
            data_upload_selector: String::new(),
            restore_wait_image: None,
            input_roots: Vec::new(),
            max_file_bytes: BlocksPolicy::DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: BlocksPolicy::DEFAULT_MAX_TOTAL_BYTES,
            max_items: BlocksPolicy::DEFAULT_MAX_ITEMS,
            max_entries: BlocksPolicy::DEFAULT_MAX_ENTRIES,
        }
    }
}

impl Policy {
    /// The empty policy: no limits at all, every default.
    pub fn unlimited() -> Policy {
        Policy::from_toml("", None).expect("the empty policy is valid")
    }

    /// Whether anything bounds how many jobs hold slots at once. "Every limit" is exactly
    /// this list: a `[global]` `max_running` or `prepare_queue`; a `[[limit]]` with a
    /// `max` or a per-value number; a `[nodes]` `max_running`; a `[[nodes.rule]]`; a
    /// pool in `[resources]` (per value too) or `[nodes.resources]`; a `[[conflict]]`; a
    /// `windows` entry or a `[[maintenance]]`. Priorities, owner
    /// caps on priority, fair share, leases and schedules do not count: they order or time
    /// the work, they do not bound it. The server refuses a `PUT /v1/policy` that turns
    /// this from true to false unless asked to (`removes_all_limits`).
    pub fn limits_anything(&self) -> bool {
        self.global.max_running.is_some()
            || self.global.prepare_queue.is_some()
            || self
                .limits
                .iter()
                .any(|l| l.max.is_some() || !l.values.is_empty())
            || self.nodes.max_running.is_some()
            || !self.nodes.rules.is_empty()
            || !self.resources.is_empty()
            || !self.nodes.resources.is_empty()
            || self.conflicts.iter().any(|c| !c.built_in)
            || !self.value_pools.is_empty()
            || self.has_windows()
    }

    /// The kind's settings, if the policy has a `[kinds.<kind>]` table.
    pub fn kind(&self, kind: &str) -> Option<&KindPolicy> {
        self.kinds.get(kind)
    }

    /// Default priority of a kind: `[kinds.<kind>].priority`, else
    /// [`RESTORE_KINDS_PRIORITY`] for the [`RESTORE_KINDS`], else 0.
    pub fn kind_priority(&self, kind: &str) -> i64 {
        match self.kind(kind).and_then(|k| k.priority) {
            Some(p) => p,
            None if self.restores_first(kind) => RESTORE_KINDS_PRIORITY,
            None => 0,
        }
    }

    /// Restores first: whether `kind` is one of a restore's ([`RESTORE_KINDS`]) and the
    /// policy leaves its priority to the built-in one. Such a kind ranks at
    /// [`RESTORE_KINDS_PRIORITY`], and a blocked job of it reserves what keeps it out at
    /// once (as a `strict` rule's jobs do, when every block is a wait for room) instead of
    /// after its rules' `reserve_after`, so smaller backups do not take the room it waits
    /// for.
    pub fn restores_first(&self, kind: &str) -> bool {
        RESTORE_KINDS.contains(&kind) && self.kind(kind).and_then(|k| k.priority).is_none()
    }

    /// Default cost of a kind (empty when unset).
    pub fn kind_cost(&self, kind: &str) -> BTreeMap<String, u64> {
        self.kind(kind).map(|k| k.cost.clone()).unwrap_or_default()
    }

    /// Whether jobs of this kind are two-stage by default.
    pub fn kind_two_stage(&self, kind: &str) -> bool {
        self.kind(kind).and_then(|k| k.two_stage).unwrap_or(false)
    }

    /// The kind's prepare timeout (default 30 min).
    pub fn prepare_timeout(&self, kind: &str) -> Duration {
        self.kind(kind)
            .and_then(|k| k.prepare_timeout)
            .unwrap_or(DEFAULT_PREPARE_TIMEOUT)
    }

    /// The kind's retry rule (default: no retries).
    pub fn retry(&self, kind: &str) -> Retry {
        self.kind(kind).and_then(|k| k.retry).unwrap_or_default()
    }

    /// Whether the kind is a coordinator kind (`resource-backup` and `resource-restore` are
    /// by default).
    pub fn is_coordinator(&self, kind: &str) -> bool {
        self.kind(kind)
            .and_then(|k| k.coordinator)
            .unwrap_or(kind == RESOURCE_BACKUP_KIND || kind == RESOURCE_RESTORE_KIND)
    }

    /// Whether queued jobs of this kind may preempt (`[kinds.<kind>].preempt`).
    pub fn kind_preempts(&self, kind: &str) -> bool {
        self.kind(kind).and_then(|k| k.preempt).unwrap_or(false)
    }

    /// Whether jobs of this kind may be preempted (`[kinds.<kind>].preemptible`, default
    /// true).
    pub fn kind_preemptible(&self, kind: &str) -> bool {
        self.kind(kind).and_then(|k| k.preemptible).unwrap_or(true)
    }

    /// Whether `lockgate run` sends the output of jobs of this kind by default
    /// (`[kinds.<kind>].log`, default false).
    pub fn kind_log(&self, kind: &str) -> bool {
        self.kind(kind).and_then(|k| k.log).unwrap_or(false)
    }

    /// Whether `lockgate run` without `--if-unreachable` runs jobs of this kind when the
    /// server cannot be reached (`[kinds.<kind>].if_unreachable = "run"`, default false).
    pub fn kind_runs_if_unreachable(&self, kind: &str) -> bool {
        self.kind(kind).is_some_and(|k| k.run_if_unreachable)
    }

    /// Fair-share weight of an owner (default 1).
    pub fn owner_weight(&self, owner: &str) -> u32 {
        self.owners.get(owner).map(|o| o.weight).unwrap_or(1)
    }

    /// Which scopes `job` takes under this policy, apart from its node's (see
    /// [`crate::scope`]). Pure: the engine and the simulator's lower bound both use it.
    pub fn scopes_of(&self, job: &crate::job::Job) -> crate::scope::JobScopes {
        crate::scope::scopes_of(self, job)
    }

    /// A node's number and the index of the rule that set it: the smallest `max_running`
    /// among matching rules, else `[nodes].max_running` (rule `None`), else unlimited.
    pub fn node_number(&self, labels: &BTreeMap<String, String>) -> (Option<u32>, Option<usize>) {
        let mut best: Option<(u32, usize)> = None;
        for (i, rule) in self.nodes.rules.iter().enumerate() {
            if rule.selector.matches_map(labels) && best.is_none_or(|(n, _)| rule.max_running < n) {
                best = Some((rule.max_running, i));
            }
        }
        match best {
            Some((n, i)) => (Some(n), Some(i)),
            None => (self.nodes.max_running, None),
        }
    }
}
