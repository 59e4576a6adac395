//! The policy document as written: serde structs that mirror the TOML/JSON document of
//! design `policy.md` key for key. The document form back out ([`RawPolicy::to_toml_string`],
//! [`RawPolicy::diff`]) is laid out by `policy/document.rs`; where errors are is found by
//! `policy/locate.rs`.
//!
//! Nothing here checks meaning: numbers are `i64` so that `-1` reaches validation (which
//! says "expected a whole number >= 0, got -1") instead of failing as a type error;
//! durations and enumerations are strings for the same reason. Every struct denies unknown
//! keys. [`super::Policy::from_raw`] turns a [`RawPolicy`] into a [`super::Policy`].
//!
//! Field names are the document's keys; `match` is spelled `r#match`. Absent optional keys
//! are `None` or empty and are not written back when serialized, so a document read and
//! written again keeps only what its author wrote.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole policy document. The empty document is valid: nothing is limited.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawPolicy {
    /// `[global]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<RawGlobal>,
    /// `[[limit]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limit: Vec<RawLimit>,
    /// `[nodes]` with `[[nodes.rule]]` and `[nodes.resources]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<RawNodes>,
    /// `[resources]`: global pool name -> capacity, or a pool per attribute value
    /// (`[resources.repo-io] per = ["repo"] capacity = 4`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, RawResource>,
    /// `[[conflict]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflict: Vec<RawConflict>,
    /// `[leases]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<RawLeases>,
    /// `[queue]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<RawQueue>,
    /// `[owners.<name>]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub owners: BTreeMap<String, RawOwner>,
    /// `[kinds.<kind>]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kinds: BTreeMap<String, RawKind>,
    /// `[retention]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RawRetention>,
    /// `[[schedule]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<RawSchedule>,
    /// `[blocks]` with `[[blocks.rule]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<RawBlocks>,
    /// `[quotas]`: what one submitter may put into the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<RawQuotas>,
    /// `[[maintenance]]`, in document order: recurring windows that admit nothing they
    /// match. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance: Vec<RawMaintenance>,
    /// `[[rpo]]`, in document order: recovery-point rules, the age of each value's last
    /// successful job. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpo: Vec<RawRpo>,
    /// `[[notify]]`, in document order: where events are sent (webhooks, e-mail). Default:
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<RawNotify>,
    /// `[forecast]`: how durations are learned. Default: per kind, no default duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<RawForecast>,
    /// `[[deadline]]`, in document order: backup windows whose forecast is exported as
    /// metrics. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadline: Vec<RawDeadline>,
}

/// One `[[rpo]]`: for each value of `per` among the jobs `match` selects, the time of the
/// last successful one; a value whose last success is older than `max_age` is overdue.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawRpo {
    /// Unique name. Default: derived from `match` and `per` (`kind=backup:group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Job selector of the jobs that count. Default: every job.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// Keys (`kind`, `owner` or attribute names) whose values each get their own age; a
    /// job without one of them is not counted. Default: one value for the whole rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per: Vec<String>,
    /// The age of the last success past which a value is overdue (required; a duration).
    pub max_age: String,
}

/// `[global]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawGlobal {
    /// At most this many jobs hold slots at once. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<i64>,
    /// Cluster-wide cap on jobs in `preparing` or `prepared`. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare_queue: Option<i64>,
    /// Time windows with their own `max_running`; the smallest active one holds. Default:
    /// none (`max_running` holds at all times).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<RawWindow>,
}

/// One `[[limit]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawLimit {
    /// Unique name (required).
    pub name: String,
    /// Partition keys (`kind`, `owner` or attribute names). Default: one counter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per: Vec<String>,
    /// Job selector; default: every job except coordinator kinds.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// The number for a partition without an override, or a range the number sets itself
    /// in (`{ auto = "throughput", min = 1, max = 12 }`). Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<RawMax>,
    /// Per-value overrides; a key holds one value per `per` key, comma-joined.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, i64>,
    /// A job this limit holds reserves its partition after waiting this long. Default: the
    /// `[queue]` value. Shorter bounds the wait of big jobs, at the price of idle room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_after: Option<String>,
    /// Strict order on this limit's partitions. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Time windows with their own number for every partition; the smallest active one
    /// holds. Default: none (`max` and `values` hold at all times).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<RawWindow>,
}

/// `{ when = "mon..fri 08:00-18:00", max = 1 }` in a `windows` list.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawWindow {
    /// A daily duration, [`crate::daily`] (required).
    pub when: String,
    /// The number while the window is active (required; 0 admits nothing).
    pub max: i64,
}

/// One entry of `[resources]`: a whole number, or a table with `per` (read by hand so a
/// wrong type says "expected a whole number, got ..", as every other number does).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RawResource {
    /// `threads = 10`: one pool.
    Capacity(i64),
    /// `[resources.repo-io] per = ["repo"] capacity = 4`: one pool per value; without
    /// `per`, one pool with reservation settings.
    PerValue(RawValuePool),
}

impl<'de> Deserialize<'de> for RawResource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawResource;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawResource, E> {
                Ok(RawResource::Capacity(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawResource, E> {
                i64::try_from(v)
                    .map(RawResource::Capacity)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawResource, A::Error> {
                RawValuePool::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawResource::PerValue)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `[resources.<name>]` as a table: with `per`, one pool per value of the `per` keys;
/// without, one pool (as `name = N`) that can carry reservation settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawValuePool {
    /// Keys (`kind`, `owner` or attribute names) whose values each get a pool (non-empty
    /// when given). Default: one pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<Vec<String>>,
    /// Each value's capacity (required).
    pub capacity: i64,
    /// A job this pool holds reserves it (its value's pool) after waiting this long.
    /// Default: the `[queue]` value. Shorter bounds the wait of big jobs, at the price of
    /// idle room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_after: Option<String>,
    /// Strict order on this pool. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One `[[maintenance]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawMaintenance {
    /// Unique name (required); the scope is `maintenance:<name>`.
    pub name: String,
    /// A daily duration, [`crate::daily`] (required).
    pub when: String,
    /// Job selector of the jobs it holds. Default: every job.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
}

/// One `[[notify]]` target: a webhook (`url`) or an SMTP server (`smtp`, `to`, `from`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawNotify {
    /// Unique name (required).
    pub name: String,
    /// `http://` or `https://` webhook URL; a password in it is a secret (shown as `***`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `smtp://host:port` (user and password in the URL log in; shown as `***`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp: Option<String>,
    /// E-mail recipients (required with `smtp`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// E-mail sender. Default `lockgate@<host of smtp>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Upgrade the SMTP connection with STARTTLS. Default true (`false` sends in clear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starttls: Option<bool>,
    /// File holding the secret (read when sending, never stored in the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<String>,
    /// Environment variable holding the secret (read when sending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Event selector. Default `severity!=info`: failures and alerts.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// One attempt's timeout. Default "10s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Attempts after the first before a notification is given up. Default 12 (back-off
    /// from 0.5 s doubling to at most 5 min: about 30 minutes of trying).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
}

/// `[nodes]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawNodes {
    /// Every node's number unless a rule matches. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<i64>,
    /// Per node: jobs that may hold prepared resources beyond `max_running`. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare_queue: Option<i64>,
    /// A node whose agent is silent this long is lost. Default `"30s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// `[[nodes.rule]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<RawNodeRule>,
    /// `[nodes.resources]`: per-node pool name -> default capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, i64>,
}

/// One `[[nodes.rule]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawNodeRule {
    /// Kubernetes label selector over the node's labels (required; `""` matches every node).
    pub selector: String,
    /// The node's number when this is the smallest matching rule (required; 0 allowed).
    pub max_running: i64,
    /// Fewer slots while the node's pressure passes these (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<RawGuard>,
}

/// A limit's `max`: a number, or a range with a goal. Read by hand rather than as an
/// untagged enum, so a wrong number keeps its own message (`expected a whole number, got
/// "x"`) and a wrong range names its field (`unknown field`, `missing field`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum RawMax {
    /// `max = 4`.
    Number(i64),
    /// `max = { auto = "throughput", min = 1, max = 12 }`.
    Auto(RawAuto),
}

impl<'de> Deserialize<'de> for RawMax {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawMax, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawMax;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawMax, E> {
                Ok(RawMax::Number(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawMax, E> {
                i64::try_from(v)
                    .map(RawMax::Number)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawMax, A::Error> {
                RawAuto::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawMax::Auto)
            }
        }
        d.deserialize_any(Visit)
    }
}

impl From<i64> for RawMax {
    fn from(n: i64) -> RawMax {
        RawMax::Number(n)
    }
}

/// A number that sets itself (`max = { auto = .., min = .., max = .. }`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawAuto {
    /// The goal: `throughput`.
    pub auto: String,
    /// The lowest number (at least 1).
    pub min: i64,
    /// The highest number.
    pub max: i64,
    /// The least growth of the scope's total rate, in percent, one more job must bring to
    /// be kept. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<i64>,
    /// How often the number is judged. Default `"10s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Holds the number here (within `min`-`max`) until removed; what was learned is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<i64>,
}

/// A node rule's guard on the node's pressure (`guard = { memory = 20, io = 40 }`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawGuard {
    /// CPU pressure (PSI `some avg10`, percent) above which the node gets one slot fewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<i64>,
    /// IO pressure above which the node gets one slot fewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<i64>,
    /// Memory pressure above which the node gets one slot fewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<i64>,
}

/// One `[[conflict]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawConflict {
    /// Jobs with equal values for all keys conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// A list-valued attribute; jobs whose sets overlap conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// Job selector of the jobs that take part. Default: every job with the keys.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// Job selector (within `match`) of the jobs that need the key alone; the others share
    /// it. Default: every job needs it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<String>,
    /// Shared jobs may pass a waiting exclusive job for this long after it was queued.
    /// Default `"0s"`: none may (no writer starvation), at the price of shared throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_delay: Option<String>,
    /// A job this conflict holds reserves its key after waiting this long. Default: the
    /// `[queue]` value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_after: Option<String>,
    /// Strict order on this conflict's keys. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// The job kind that recovers a key whose holder was lost (its lease expired, its node
    /// was lost): submitted at once, ahead of the queue, and run alone on the key by an
    /// agent with a handler for the kind (`restic unlock --remove-all`, `borg break-lock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover: Option<String>,
}

/// `[leases]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawLeases {
    /// A holder must renew within this. Default `"30s"`: shorter frees a crashed holder's
    /// slots sooner, at the price of more renewals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

/// `[queue]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawQueue {
    /// Adds 1 to the effective priority per `aging` of waiting. Default: no aging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aging: Option<String>,
    /// StrictFIFO instead of best effort. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// A capacity-blocked top job reserves its scope after waiting this long. Default `"5m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_after: Option<String>,
    /// `"owner"` turns on fair share between owners. Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<String>,
    /// `"fifo"` or `"window"` (pack the window by expected run times). Default `"fifo"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// How far `order = "window"` may move a job back from its arrival. Default `"4h"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_horizon: Option<String>,
}

/// `[owners.<name>]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawOwner {
    /// Fair-share weight, at least 1. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// Highest priority the owner may submit with. Default: the role's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority: Option<i64>,
    /// Whether the owner's (non-admin) backups run the hooks their manifests annotate.
    /// Default false: a hook runs a command with the server's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_hooks: Option<bool>,
    /// Namespaces the owner's (non-admin) backups may take. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_namespaces: Option<Vec<String>>,
}

/// `retry = { times = 3, interval = "30s" }`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawRetry {
    /// How many times a failed or lost job is queued again. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<i64>,
    /// Delay before it is queued again (required when `times` > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// `[kinds.<kind>]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawKind {
    /// Default priority of jobs of the kind. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Default cost: pool name -> units.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost: BTreeMap<String, i64>,
    /// Two-stage by default. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_stage: Option<bool>,
    /// Bound on `preparing`. Default `"30m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare_timeout: Option<String>,
    /// Retries of failed or lost jobs. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    /// Coordinator kind. Default: true for `resource-backup` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<bool>,
    /// A queued job of this kind may stop running or prepared jobs of lower priority to
    /// take their room (policy.md, Preemption). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<bool>,
    /// Jobs of this kind may be stopped by a preempting job. Default true; `false` protects
    /// work that must not be interrupted (a tape write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptible: Option<bool>,
    /// `lockgate run` sends the command's output to the server for jobs of this kind
    /// without `--log` (docs `operations.md`, "Job logs"); `--no-log` still wins. Default
    /// false: a command's output may hold what its owner does not want stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<bool>,
    /// What `lockgate run` without `--if-unreachable` does with a job of this kind when the
    /// server cannot be reached: `"fail"` (exit 69) or `"run"` (run it without admission
    /// and report it later). The wrapper learns it from a submit answer and keeps it for
    /// the times the server is away. Default `"fail"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_unreachable: Option<String>,
}

/// `[retention]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawRetention {
    /// Days finished jobs, events and idempotency keys are kept. Default 14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<i64>,
    /// Bytes of output kept per job: the oldest lines go first, with a marker. Default
    /// `"4MiB"`; more keeps more of a chatty command at the price of disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_log_bytes: Option<RawSize>,
    /// Bytes of output kept for all jobs together: the oldest jobs' logs go first. Default
    /// `"1GiB"`; at least `job_log_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_logs_total_bytes: Option<RawSize>,
}

/// `job = { .. }` of a `[[schedule]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawJob {
    /// Job kind (required).
    pub kind: String,
    /// Attributes (not `kind`, `owner` or `node`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
    /// Priority. Default: the kind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Pinned node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node label selector of a movable job (`""`: any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,
    /// `client` or `agent`. Default: `agent` with a `node_selector`, else `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// Cost: pool name -> units. Default: the kind's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost: BTreeMap<String, i64>,
    /// Two-stage. Default: the kind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_stage: Option<bool>,
    /// Give up after waiting this long. Default: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
    /// Request cancellation after running this long. Default: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run: Option<String>,
}

/// One `[[schedule]]` (design `schedules.md`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawSchedule {
    /// Unique name (required).
    pub name: String,
    /// Calendar event or cron expression (required).
    pub when: String,
    /// The job each run submits (required).
    pub job: RawJob,
    /// `skip`, `queue`, `cancel-queued` or `cancel-running`. Default `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<String>,
    /// `run-once` or `skip`. Default `run-once`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// A run not admitted by then ends `expired`. Default: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_start_delay: Option<String>,
    /// Spread runs by up to this much. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// Retries of failed runs. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    /// Another schedule's name: each run waits for that schedule's latest run planned at
    /// or before it. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// `[blocks]` (design `item-blocks.md`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawBlocks {
    /// Hook exec template as an argv. Default `kubectl exec -n {namespace} {pod} -c
    /// {container} -- {command}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_template: Option<Vec<String>>,
    /// PVCs sharing this label's value form one block. Default `lockgate.io/volume-group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_label: Option<String>,
    /// Node selector of data-upload jobs. Default `""` (any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_upload_selector: Option<String>,
    /// Container image (with `lockgate` on its path) of the wait container a restore puts
    /// first in a restored pod whose volumes it copies back. Default: none, no container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_wait_image: Option<String>,
    /// Directories (absolute) a non-admin's backup input must lie in, added to the
    /// server's `--backup-input-root`s. Default: none, so only an admin may back up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_roots: Option<Vec<String>>,
    /// Largest input file read whole. Default `"64MiB"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<RawSize>,
    /// Bytes one plan reads in total. Default `"2GiB"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_bytes: Option<RawSize>,
    /// Items one plan may find. Default 500000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<i64>,
    /// Directory entries one plan may examine. Default 1000000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<i64>,
    /// `[[blocks.rule]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<RawBlockRule>,
}

/// A size as written: a whole number of bytes or a string such as `"64MiB"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a size: a whole number of bytes or a string such as \"64MiB\""
)]
pub enum RawSize {
    /// `max_file_bytes = 1048576`.
    Bytes(i64),
    /// `max_file_bytes = "64MiB"`.
    Text(String),
}

/// One `[[blocks.rule]]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawBlockRule {
    /// Job-style selector over an item's `kind` and labels (required).
    #[serde(rename = "match")]
    pub r#match: String,
    /// `label:<name>` or `field:<dotted.path>` entries (required, non-empty).
    pub group_by: Vec<String>,
}

/// `[quotas]` (docs `security.md`, "Quotas"): bounds on what a submitter may store.
/// Smaller numbers bound the server's memory, disk and answers more tightly, at the price
/// of refusing larger jobs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawQuotas {
    /// Attributes per job. Default 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attrs: Option<i64>,
    /// Bytes per attribute value. Default 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attr_value_bytes: Option<i64>,
    /// Bytes of a holder's message (finish); longer ones are cut, with a marker. Default
    /// 65536.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<i64>,
    /// Jobs a submitter token's owner may have that have not ended (queued or admitted);
    /// admin tokens and the server's own owners are exempt. Default 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queued_per_owner: Option<i64>,
}

/// `[forecast]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawForecast {
    /// What, beside the kind, splits the history (`kind`, `owner` or attribute names).
    /// Default `[]`: one history per kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Vec<String>>,
    /// Run time assumed for a kind with no history yet. Default: none (no estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_run: Option<String>,
    /// Prepare time assumed for a two-stage kind with no history yet. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_prepare: Option<String>,
    /// Successful runs kept per key; the quantiles are taken over them. Default 20: small
    /// enough to follow a change in the data, large enough for a stable p90.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<i64>,
}

/// One `[[deadline]]`: everything matching `match` should be done by `by`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawDeadline {
    /// Unique name (required); the `window` label of its metrics.
    pub name: String,
    /// Job selector of the jobs it covers. Default: every job.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// A calendar event (`"06:00"`, `"mon..fri 06:00"`, a cron line): the next time after
    /// now is the deadline (required).
    pub by: String,
}

impl RawPolicy {
    /// The document as TOML in the style of design `policy.md`: sections and `[[..]]`
    /// tables as headers, everything below them (`values`, `cost`, `retry`, `job`) as
    /// inline tables, keys in the order the design lists them (the order of
    /// `policy/document.rs`), names the user chose in byte order.
    pub fn to_toml_string(&self) -> String {
        super::write::document(self)
    }

    /// Human-readable differences from `self` to `new`, one per line, in document order:
    /// `global: max_running 8 -> 10`, `limit "per-datastore": max 2 -> 3`, `+ limit
    /// "restores": match = "kind=restore", max = 4`, `- limit "old"`, `nodes.rule[1]:
    /// removed`, `nodes.rule[2]: added (max_running = 0, selector = "role=db")`. A key
    /// that is not written shows as `unset`. Empty when the documents are equal.
    pub fn diff(&self, new: &RawPolicy) -> Vec<String> {
        super::diff::diff(self, new)
    }
}
