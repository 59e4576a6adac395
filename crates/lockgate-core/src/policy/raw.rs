//! The policy document as written: serde structs that mirror the TOML/JSON document of
//! design `policy.md` key for key; the document form back out
//! ([`RawPolicy::to_toml_string`], [`RawPolicy::diff`]); and, privately, the map from
//! positions in a TOML text to field paths that validation errors use for their lines.
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
    /// `[resources]`: global pool name -> capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, i64>,
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
    /// The number for a partition without an override. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// Per-value overrides; a key holds one value per `per` key, comma-joined.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, i64>,
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
}

/// `[retention]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawRetention {
    /// Days finished jobs, events and idempotency keys are kept. Default 14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<i64>,
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
    /// `[[blocks.rule]]`, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<RawBlockRule>,
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

pub(crate) use spans::{line_of, FieldPath, SpanTree};

impl RawPolicy {
    /// Human-readable differences from `self` to `new`, one per line, in document order:
    /// `global: max_running 8 -> 10`, `limit "per-datastore": max 2 -> 3`, `+ limit
    /// "restores": match = "kind=restore", max = 4`, `- limit "old"`, `nodes.rule[1]:
    /// removed`, `nodes.rule[2]: added (selector = "role=db", max_running = 0)`. A key that
    /// is not written shows as `unset`. Empty when the documents are equal.
    pub fn diff(&self, new: &RawPolicy) -> Vec<String> {
        diff::diff(&diff::items(self), &diff::items(new))
    }
}

impl RawPolicy {
    /// The document as TOML in the style of design `policy.md`: sections and `[[..]]`
    /// tables as headers, everything below them (`values`, `cost`, `retry`, `job`) as
    /// inline tables, keys in the order the design lists them.
    pub fn to_toml_string(&self) -> String {
        match toml::Value::try_from(self) {
            Ok(toml::Value::Table(root)) => emit::document(&root),
            _ => String::new(),
        }
    }
}

/// Implementation details of [`RawPolicy::to_toml_string`].
mod emit {
    use std::fmt::Write as _;
    use toml::{Table, Value};

    /// Keys of the structs, in the order they are written; other keys (pool, attribute,
    /// owner and kind names) follow in byte order.
    const ORDER: &[&str] = &[
        "global",
        "limit",
        "nodes",
        "resources",
        "conflict",
        "leases",
        "queue",
        "owners",
        "kinds",
        "retention",
        "schedule",
        "blocks",
        "rule",
        "name",
        "selector",
        "when",
        "job",
        "kind",
        "per",
        "keys",
        "overlap",
        "match",
        "group_by",
        "max",
        "max_running",
        "prepare_queue",
        "ttl",
        "values",
        "attrs",
        "priority",
        "node",
        "node_selector",
        "executor",
        "cost",
        "two_stage",
        "max_wait",
        "max_run",
        "prepare_timeout",
        "retry",
        "coordinator",
        "times",
        "interval",
        "duplicates",
        "misfire",
        "max_start_delay",
        "jitter",
        "aging",
        "strict",
        "reserve_after",
        "fair_share",
        "weight",
        "max_priority",
        "days",
        "exec_template",
        "volume_group_label",
        "data_upload_selector",
    ];

    fn sorted(t: &Table) -> Vec<(&String, &Value)> {
        let mut v: Vec<_> = t.iter().collect();
        let rank = |k: &str| ORDER.iter().position(|o| *o == k).unwrap_or(ORDER.len());
        v.sort_by(|a, b| (rank(a.0), a.0).cmp(&(rank(b.0), b.0)));
        v
    }

    fn key(k: &str) -> String {
        let bare = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if bare {
            k.to_string()
        } else {
            Value::String(k.to_string()).to_string()
        }
    }

    /// A table written as a `[header]`: top-level sections, and `[owners.x]`, `[kinds.x]`,
    /// `[nodes.resources]`.
    fn is_section(path: &[&str]) -> bool {
        matches!(path, [_] | ["owners" | "kinds" | "nodes", _])
    }

    /// An array written as `[[header]]` tables: `[[limit]]`, `[[nodes.rule]]`, ...
    fn is_table_array(path: &[&str], v: &Value) -> bool {
        let tables = v.as_array().is_some_and(|a| a.iter().all(Value::is_table));
        tables && matches!(path, [_] | ["nodes" | "blocks", _])
    }

    fn inline(v: &Value) -> String {
        match v {
            Value::Table(t) if t.is_empty() => "{}".into(),
            Value::Table(t) => {
                let parts: Vec<String> = sorted(t)
                    .into_iter()
                    .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                    .collect();
                format!("{{ {} }}", parts.join(", "))
            }
            Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
            other => other.to_string(),
        }
    }

    pub(super) fn document(root: &Table) -> String {
        let mut out = String::new();
        body(&mut out, &[], root);
        out
    }

    fn child<'a>(path: &[&'a str], k: &'a str) -> Vec<&'a str> {
        path.iter().copied().chain([k]).collect()
    }

    /// Whether the value at `path` is written as `key = value` (not under a header).
    fn is_inline(path: &[&str], v: &Value) -> bool {
        let section = v.is_table() && is_section(path);
        !section && !is_table_array(path, v)
    }

    fn body(out: &mut String, path: &[&str], t: &Table) {
        for (k, v) in sorted(t) {
            if is_inline(&child(path, k), v) {
                let _ = writeln!(out, "{} = {}", key(k), inline(v));
            }
        }
        for (k, v) in sorted(t) {
            let p = child(path, k);
            let header = p.iter().map(|s| key(s)).collect::<Vec<_>>().join(".");
            if let (Some(sub), true) = (v.as_table(), is_section(&p)) {
                let has_values = sub.iter().any(|(k2, v2)| is_inline(&child(&p, k2), v2));
                if has_values || sub.is_empty() {
                    let _ = writeln!(out, "{}[{header}]", if out.is_empty() { "" } else { "\n" });
                }
                body(out, &p, sub);
            } else if is_table_array(&p, v) {
                for item in v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_table)
                {
                    let _ = writeln!(
                        out,
                        "{}[[{header}]]",
                        if out.is_empty() { "" } else { "\n" }
                    );
                    body(out, &p, item);
                }
            }
        }
    }
}

/// Implementation details of [`RawPolicy::diff`]: both documents are flattened into items
/// (a section, a named or numbered table) holding `field -> rendered value`, then compared
/// item by item.
mod diff {
    use super::RawPolicy;
    use serde_json::Value;
    use std::collections::BTreeMap;

    /// How an item appears or disappears as a whole.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Whole {
        /// A section (`[global]`): only its fields are compared.
        Section,
        /// A named entry (`limit "x"`, `kinds.backup`): `+ label` / `- label`.
        Named,
        /// A numbered entry (`nodes.rule[1]`): `label: added` / `label: removed`.
        Numbered,
    }

    pub(super) struct Item {
        label: String,
        whole: Whole,
        fields: BTreeMap<String, String>,
    }

    /// Items by (section order, key within the section).
    pub(super) type Items = BTreeMap<(usize, String), Item>;

    fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, v, out);
                }
            }
            Value::Null => {}
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }

    fn fields(v: &Value, skip: &[&str]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Value::Object(map) = v {
            for (k, v) in map.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
                flatten(k, v, &mut out);
            }
        }
        out
    }

    pub(super) fn items(raw: &RawPolicy) -> Items {
        let doc = serde_json::to_value(raw).unwrap_or(Value::Null);
        let mut out = Items::new();
        let mut add =
            |order: usize, key: String, label: String, whole: Whole, v: &Value, skip: &[&str]| {
                out.insert(
                    (order, key),
                    Item {
                        label,
                        whole,
                        fields: fields(v, skip),
                    },
                );
            };
        let get = |k: &str| doc.get(k).unwrap_or(&Value::Null);
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let name_of = |v: &Value| {
            v.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let table = |v: &Value| v.as_object().cloned().unwrap_or_default();

        add(
            0,
            String::new(),
            "global".into(),
            Whole::Section,
            get("global"),
            &[],
        );
        for v in list(get("limit")) {
            add(
                1,
                name_of(&v),
                format!("limit {:?}", name_of(&v)),
                Whole::Named,
                &v,
                &["name"],
            );
        }
        let nodes = get("nodes");
        add(
            2,
            String::new(),
            "nodes".into(),
            Whole::Section,
            nodes,
            &["rule", "resources"],
        );
        for (i, v) in list(nodes.get("rule").unwrap_or(&Value::Null))
            .iter()
            .enumerate()
        {
            add(
                3,
                format!("{i:010}"),
                format!("nodes.rule[{i}]"),
                Whole::Numbered,
                v,
                &[],
            );
        }
        let node_pools = Value::Object(table(nodes.get("resources").unwrap_or(&Value::Null)));
        add(
            4,
            String::new(),
            "nodes.resources".into(),
            Whole::Section,
            &node_pools,
            &[],
        );
        add(
            5,
            String::new(),
            "resources".into(),
            Whole::Section,
            get("resources"),
            &[],
        );
        for (i, v) in list(get("conflict")).iter().enumerate() {
            add(
                6,
                format!("{i:010}"),
                format!("conflict[{i}]"),
                Whole::Numbered,
                v,
                &[],
            );
        }
        add(
            7,
            String::new(),
            "leases".into(),
            Whole::Section,
            get("leases"),
            &[],
        );
        add(
            8,
            String::new(),
            "queue".into(),
            Whole::Section,
            get("queue"),
            &[],
        );
        for (k, v) in table(get("owners")) {
            add(9, k.clone(), format!("owners.{k}"), Whole::Named, &v, &[]);
        }
        for (k, v) in table(get("kinds")) {
            add(10, k.clone(), format!("kinds.{k}"), Whole::Named, &v, &[]);
        }
        add(
            11,
            String::new(),
            "retention".into(),
            Whole::Section,
            get("retention"),
            &[],
        );
        for v in list(get("schedule")) {
            add(
                12,
                name_of(&v),
                format!("schedule {:?}", name_of(&v)),
                Whole::Named,
                &v,
                &["name"],
            );
        }
        let blocks = get("blocks");
        add(
            13,
            String::new(),
            "blocks".into(),
            Whole::Section,
            blocks,
            &["rule"],
        );
        for (i, v) in list(blocks.get("rule").unwrap_or(&Value::Null))
            .iter()
            .enumerate()
        {
            add(
                14,
                format!("{i:010}"),
                format!("blocks.rule[{i}]"),
                Whole::Numbered,
                v,
                &[],
            );
        }
        out
    }

    fn summary(fields: &BTreeMap<String, String>) -> String {
        fields
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn diff(old: &Items, new: &Items) -> Vec<String> {
        let mut keys: Vec<&(usize, String)> = old.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        let empty = BTreeMap::new();
        for key in keys {
            let (o, n) = (old.get(key), new.get(key));
            let Some(item) = n.or(o) else { continue };
            match (o.is_some(), n.is_some(), item.whole) {
                (false, true, Whole::Named) if item.fields.is_empty() => {
                    out.push(format!("+ {}", item.label))
                }
                (false, true, Whole::Named) => {
                    out.push(format!("+ {}: {}", item.label, summary(&item.fields)))
                }
                (false, true, Whole::Numbered) => {
                    out.push(format!("{}: added ({})", item.label, summary(&item.fields)))
                }
                (true, false, Whole::Named) => out.push(format!("- {}", item.label)),
                (true, false, Whole::Numbered) => out.push(format!("{}: removed", item.label)),
                _ => {
                    let (a, b) = (
                        o.map_or(&empty, |i| &i.fields),
                        n.map_or(&empty, |i| &i.fields),
                    );
                    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
                    names.sort();
                    names.dedup();
                    for f in names {
                        let (x, y) = (a.get(f), b.get(f));
                        if x != y {
                            let show =
                                |v: Option<&String>| v.cloned().unwrap_or_else(|| "unset".into());
                            out.push(format!("{}: {f} {} -> {}", item.label, show(x), show(y)));
                        }
                    }
                }
            }
        }
        out
    }
}

/// Where things are in a TOML document: a tree of value spans, to turn a field path into
/// a line and an error position into a field path.
///
/// Implementation details: toml 0.8 reports spans through `serde_spanned`'s private
/// protocol (a struct with magic name and fields). [`Node`]'s `Deserialize` speaks that
/// protocol itself instead of using `toml::Spanned<T>`, because tables that only exist
/// implicitly (`kinds` in `[kinds.backup]`) have no span and `Spanned` fails on them.
mod spans {
    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::fmt;
    use std::ops::Range;

    const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
    const START: &str = "$__serde_spanned_private_start";
    const END: &str = "$__serde_spanned_private_end";
    const VALUE: &str = "$__serde_spanned_private_value";
    static FIELDS: [&str; 3] = [START, END, VALUE];

    /// One step of a field path.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Seg {
        Key(String),
        Index(usize),
    }

    /// A field path such as `limit[1].max` or `kinds.tape-backup.cost.threads`.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub(crate) struct FieldPath(pub(crate) Vec<Seg>);

    impl FieldPath {
        pub(crate) fn root() -> FieldPath {
            FieldPath(Vec::new())
        }
        /// This path followed by a key.
        pub(crate) fn key(&self, key: &str) -> FieldPath {
            let mut p = self.clone();
            p.0.push(Seg::Key(key.to_string()));
            p
        }
        /// This path followed by an array index.
        pub(crate) fn at(&self, index: usize) -> FieldPath {
            let mut p = self.clone();
            p.0.push(Seg::Index(index));
            p
        }
    }

    impl fmt::Display for FieldPath {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            for (i, seg) in self.0.iter().enumerate() {
                match seg {
                    Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                    Seg::Key(k) => write!(f, ".{k}")?,
                    Seg::Index(n) => write!(f, "[{n}]")?,
                }
            }
            Ok(())
        }
    }

    #[derive(Debug, Default)]
    enum Children {
        #[default]
        Leaf,
        Array(Vec<Node>),
        Table(Vec<(String, Node)>),
    }

    #[derive(Debug, Default)]
    struct Node {
        span: Option<Range<usize>>,
        children: Children,
    }

    impl Node {
        /// The node's own span, else the smallest range covering its children's.
        fn start(&self) -> Option<usize> {
            if let Some(s) = &self.span {
                return Some(s.start);
            }
            self.kids().filter_map(|(_, n)| n.start()).min()
        }

        fn kids(&self) -> Box<dyn Iterator<Item = (Seg, &Node)> + '_> {
            match &self.children {
                Children::Leaf => Box::new(std::iter::empty()),
                Children::Array(v) => {
                    Box::new(v.iter().enumerate().map(|(i, n)| (Seg::Index(i), n)))
                }
                Children::Table(v) => Box::new(v.iter().map(|(k, n)| (Seg::Key(k.clone()), n))),
            }
        }

        /// The deepest node whose span contains `offset`, as (path, span length, start). A
        /// table without a span of its own (dotted keys such as `retry.times = 3`) holds
        /// what is written on its children's lines before them.
        fn find(
            &self,
            text: &str,
            offset: usize,
            path: &mut Vec<Seg>,
            best: &mut Option<(Vec<Seg>, usize, usize)>,
        ) {
            let hit = match &self.span {
                Some(s) => (s.contains(&offset) || (s.is_empty() && s.start == offset))
                    .then_some((s.len(), s.start)),
                None if path.is_empty() => None,
                None => self
                    .kids()
                    .filter_map(|(_, kid)| kid.start())
                    .find(|&start| offset < start && line_of(text, start) == line_of(text, offset))
                    .map(|start| (start - offset, offset)),
            };
            if let Some((len, start)) = hit {
                let better = match best {
                    None => true,
                    Some((p, l, _)) => path.len() > p.len() || (path.len() == p.len() && len < *l),
                };
                if better {
                    *best = Some((path.clone(), len, start));
                }
            }
            for (seg, kid) in self.kids() {
                path.push(seg);
                kid.find(text, offset, path, best);
                path.pop();
            }
        }
    }

    /// The span tree of one TOML document, with its text for line numbers.
    #[derive(Debug)]
    pub(crate) struct SpanTree<'t> {
        text: &'t str,
        root: Node,
    }

    impl<'t> SpanTree<'t> {
        /// Builds the tree; `None` when the text is not valid TOML.
        pub(crate) fn parse(text: &'t str) -> Option<SpanTree<'t>> {
            let children: Children = toml::from_str(text).ok()?;
            Some(SpanTree {
                text,
                root: Node {
                    span: None,
                    children,
                },
            })
        }

        /// 1-based line of a byte offset.
        pub(crate) fn line_of_offset(&self, offset: usize) -> usize {
            line_of(self.text, offset)
        }

        /// The line of the deepest existing node along `path` (a missing key is reported
        /// at its table).
        pub(crate) fn line(&self, path: &FieldPath) -> Option<usize> {
            let mut node = &self.root;
            let mut start = None;
            for seg in &path.0 {
                let next = node.kids().find(|(s, _)| s == seg).map(|(_, n)| n);
                match next {
                    Some(n) => {
                        node = n;
                        start = n.start().or(start);
                    }
                    None => break,
                }
            }
            start.map(|s| self.line_of_offset(s))
        }

        /// The path of the deepest value whose span contains `offset`.
        pub(crate) fn path_at(&self, offset: usize) -> FieldPath {
            let mut best = None;
            self.root
                .find(self.text, offset, &mut Vec::new(), &mut best);
            FieldPath(best.map(|(p, _, _)| p).unwrap_or_default())
        }

        /// The path of an unknown `key` written at `offset`: in a table's body it belongs
        /// to the deepest table around it; in a table header (`[global.bogus]`) the
        /// header's own path ends at it.
        pub(crate) fn key_path_at(&self, offset: usize, key: &str) -> FieldPath {
            let mut best = None;
            self.root
                .find(self.text, offset, &mut Vec::new(), &mut best);
            let Some((mut path, _, start)) = best else {
                return FieldPath::root().key(key);
            };
            let in_header = self.text[start..].starts_with('[')
                && line_of(self.text, start) == line_of(self.text, offset);
            if in_header {
                if let Some(i) = path.iter().rposition(|s| *s == Seg::Key(key.to_string())) {
                    path.truncate(i + 1);
                    return FieldPath(path);
                }
            }
            FieldPath(path).key(key)
        }
    }

    /// 1-based line of a byte offset in `text`.
    pub(crate) fn line_of(text: &str, offset: usize) -> usize {
        let end = offset.min(text.len());
        text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    impl<'de> Deserialize<'de> for Node {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
            d.deserialize_struct(SPANNED_NAME, &FIELDS, NodeVisitor)
        }
    }

    impl<'de> Deserialize<'de> for Children {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Children, D::Error> {
            d.deserialize_any(ChildrenVisitor)
        }
    }

    struct NodeVisitor;
    struct ChildrenVisitor;

    macro_rules! leaf_visits {
        ($out:expr) => {
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok($out)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok($out)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok($out)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok($out)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok($out)
            }
        };
    }

    impl<'de> Visitor<'de> for ChildrenVisitor {
        type Value = Children;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any TOML value")
        }
        leaf_visits!(Children::Leaf);
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Children, A::Error> {
            let mut v = Vec::new();
            while let Some(n) = seq.next_element::<Node>()? {
                v.push(n);
            }
            Ok(Children::Array(v))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Children, A::Error> {
            let mut v = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                v.push((k, map.next_value::<Node>()?));
            }
            Ok(Children::Table(v))
        }
    }

    impl<'de> Visitor<'de> for NodeVisitor {
        type Value = Node;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any TOML value")
        }
        leaf_visits!(Node::default());
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Node, A::Error> {
            let children = ChildrenVisitor.visit_seq(seq)?;
            Ok(Node {
                span: None,
                children,
            })
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
            let Some(first) = map.next_key::<String>()? else {
                return Ok(Node {
                    span: None,
                    children: Children::Table(Vec::new()),
                });
            };
            if ![START, END, VALUE].contains(&first.as_str()) {
                // A table without a span of its own (implicit): an ordinary map.
                let mut v = vec![(first, map.next_value::<Node>()?)];
                while let Some(k) = map.next_key::<String>()? {
                    v.push((k, map.next_value::<Node>()?));
                }
                return Ok(Node {
                    span: None,
                    children: Children::Table(v),
                });
            }
            let (mut start, mut end, mut children) = (None, None, Children::Leaf);
            let mut key = Some(first);
            while let Some(k) = key {
                match k.as_str() {
                    START => start = Some(map.next_value::<usize>()?),
                    END => end = Some(map.next_value::<usize>()?),
                    _ => children = map.next_value::<Children>()?,
                }
                key = map.next_key::<String>()?;
            }
            let span = match (start, end) {
                (Some(s), Some(e)) => Some(s..e),
                _ => None,
            };
            Ok(Node { span, children })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn path(segs: &[&str]) -> FieldPath {
            let mut p = FieldPath::root();
            for s in segs {
                p = match s.parse::<usize>() {
                    Ok(i) => p.at(i),
                    Err(_) => p.key(s),
                };
            }
            p
        }

        const DOC: &str = "[global]\nmax_running = 1\n\n[[limit]]\nname = 'a'\n\n[[limit]]\nname = 'b'\nper = ['x', 'y']\nvalues = { 'p,q' = 2 }\n\n[kinds.tape-backup]\ncost = { threads = 4 }\n[kinds.backup]\ncost.threads = 1\nwhen = 1979-05-27T07:32:00Z\n";

        #[test]
        fn finds_lines_of_paths() {
            let tree = SpanTree::parse(DOC).unwrap();
            for (segs, line) in [
                (&["global", "max_running"][..], 2),
                (&["global"][..], 1),
                (&["limit", "0", "name"][..], 5),
                (&["limit", "1", "name"][..], 8),
                (&["limit", "1", "per", "1"][..], 9),
                (&["limit", "1", "values", "p,q"][..], 10),
                (&["limit", "1", "max"][..], 7),
                (&["kinds", "tape-backup", "cost", "threads"][..], 13),
                (&["kinds", "backup", "cost", "threads"][..], 15),
                (&["kinds", "backup", "when"][..], 16),
            ] {
                let p = path(segs);
                assert_eq!(tree.line(&p), Some(line), "{p}");
            }
        }

        #[test]
        fn finds_paths_of_offsets() {
            let tree = SpanTree::parse(DOC).unwrap();
            let at = |needle: &str| tree.path_at(DOC.find(needle).unwrap()).to_string();
            assert_eq!(at("1\n\n"), "global.max_running");
            assert_eq!(at("'y'"), "limit[1].per[1]");
            assert_eq!(at("4 }"), "kinds.tape-backup.cost.threads");
            assert_eq!(at("1\nwhen"), "kinds.backup.cost.threads");
        }
    }
}
