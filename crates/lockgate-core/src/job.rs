//! Jobs: what is submitted, what the engine keeps, and their life cycle.
//!
//! Life cycle: `queued -> [preparing -> prepared ->] running -> succeeded | failed |
//! cancelled | lost | expired`. A retried job goes from `failed` or `lost` back to `queued`
//! with `attempt + 1` and keeps its id. A preempted job (`cancel_reason = preempted`) that
//! stops goes from `prepared` or `running` straight back to `queued`, with `attempt + 1`
//! and `preemptions + 1`, and keeps its id: preemption is not an end.
//!
//! One definition of a valid job: [`JobSpec::check`] is the only place a submitted spec is
//! checked and given its kind's defaults; the engine's submit, a schedule's job in the
//! policy and the simulator's workload all go through it. Invariants of a [`Job`] that
//! follow: its kind and attribute names are in Kubernetes label-key syntax (so hold no
//! whitespace, NUL, `=` or `,`); no attribute is named `kind`, `owner` or `node`; values
//! hold no whitespace nor control character; the attributes fit `[quotas]` (see `check`); a
//! movable job's selector is parsed (so placement never reads it again); every pool in its
//! cost is declared in the policy it was checked against.

mod check;

use crate::policy::{Executor, Policy};
use crate::selector::Selector;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A job's id; ids grow with every submit.
pub type JobId = u64;

/// A job's state (api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for admission.
    Queued,
    /// Admitted to prepare (two-stage jobs).
    Preparing,
    /// Prepare step done, waiting for its node's run slot.
    Prepared,
    /// Admitted to run.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Finished with a failure (or a prepare timeout, or `max_run` exceeded).
    Failed,
    /// Cancelled.
    Cancelled,
    /// Its lease ran out.
    Lost,
    /// Waited longer than `max_wait`.
    Expired,
}

impl JobState {
    /// Every state, in life-cycle order.
    pub const ALL: [JobState; 9] = [
        JobState::Queued,
        JobState::Preparing,
        JobState::Prepared,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Lost,
        JobState::Expired,
    ];

    /// The state's name as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Preparing => "preparing",
            JobState::Prepared => "prepared",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Lost => "lost",
            JobState::Expired => "expired",
        }
    }

    /// Parses an API state name.
    pub fn parse(text: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Holding slots: admitted and not yet ended.
    pub fn is_admitted(self) -> bool {
        matches!(
            self,
            JobState::Preparing | JobState::Prepared | JobState::Running
        )
    }

    /// Ended (a failed or lost job may still be retried).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded
                | JobState::Failed
                | JobState::Cancelled
                | JobState::Lost
                | JobState::Expired
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a holder ends its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The work succeeded.
    Succeeded,
    /// The work failed.
    Failed,
    /// The holder gave up on request.
    Cancelled,
}

impl Outcome {
    /// The state a job ends in with this outcome.
    pub fn state(self) -> JobState {
        match self {
            Outcome::Succeeded => JobState::Succeeded,
            Outcome::Failed => JobState::Failed,
            Outcome::Cancelled => JobState::Cancelled,
        }
    }
}

/// A lease: the right to hold a job's slots until `expires_at` unless renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Fencing token; grows with every grant, so a stale holder is always told apart.
    pub token: u64,
    /// When the lease runs out unless renewed.
    pub expires_at: Timestamp,
}

/// What a submitter asks for. Fields left `None` take the kind's defaults from the policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Job kind (`backup`, `data-upload`, ...).
    pub kind: String,
    /// Attributes (`datastore`, `group`, ...).
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// The authenticated principal; set by the server from the token, never from a body.
    #[serde(default)]
    pub owner: String,
    /// Priority; default from `[kinds.<kind>]`, else 0.
    #[serde(default)]
    pub priority: Option<i64>,
    /// Pinned node.
    #[serde(default)]
    pub node: Option<String>,
    /// Node selector of a movable job (`""` means any node).
    #[serde(default)]
    pub node_selector: Option<String>,
    /// Who runs it; default: `agent` with a node selector, else `client`.
    #[serde(default)]
    pub executor: Option<Executor>,
    /// Pool costs; default from the kind.
    #[serde(default)]
    pub cost: Option<BTreeMap<String, u64>>,
    /// Two-stage; default from the kind.
    #[serde(default)]
    pub two_stage: Option<bool>,
    /// Do not start before.
    #[serde(default)]
    pub not_before: Option<Timestamp>,
    /// Give up (`expired`) after waiting this many milliseconds.
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    /// Request cancellation after running this many milliseconds.
    #[serde(default)]
    pub max_run_ms: Option<u64>,
    /// Per owner: a resubmission with the same key returns the existing job.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Retries of this job, overriding the kind's `retry` (schedules set it).
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Jobs that must have ended (in any state, no retry left) before this one is queued.
    #[serde(default)]
    pub after: Vec<JobId>,
    /// Jobs that must have `succeeded` before this one is queued; if one ends otherwise,
    /// this job ends `cancelled`.
    #[serde(default)]
    pub after_ok: Vec<JobId>,
}

/// A job-level retry rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// How many times a failed or lost run is queued again.
    pub times: u32,
    /// Milliseconds between the failure and the retry.
    pub interval_ms: u64,
}

/// Why a job spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// A field is invalid; `field` names it.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field (`kind`, `attrs.kind`, `node_selector`, `cost.gpus`, ...).
        field: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> SubmitError {
    SubmitError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

impl JobSpec {
    /// Checks a spec against `policy` and fills in its kind's defaults (priority, cost,
    /// stage) and the default executor (`agent` for a movable job, else `client`).
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] names the first offending field: a kind or attribute name
    /// that is not in Kubernetes label-key syntax; a reserved attribute name (`kind`,
    /// `owner`, `node`); a value with whitespace or a control character; more attributes or
    /// a longer value than `[quotas]` allows; a priority, key, node, selector or duration
    /// past its written limit ([`crate::limits`]); an empty node; both `node`
    /// and `node_selector`; an invalid selector; a pool the policy does not declare.
    pub fn check(self, policy: &Policy) -> Result<CheckedJob, SubmitError> {
        check::kind(&self.kind)?;
        check::bounds(&self)?;
        check::attrs(&self.attrs, &policy.quotas)?;
        let placement = match (self.node, self.node_selector) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "node_selector",
                    "a job is either pinned (`node`) or movable (`node_selector`), expected only one of them",
                ))
            }
            (Some(node), None) if node.trim().is_empty() => {
                return Err(invalid("node", "expected a node name, got an empty string"))
            }
            (Some(node), None) => Placement::Pinned(node),
            (None, Some(text)) => Placement::Movable {
                selector: Selector::parse_labels(&text).map_err(|e| {
                    invalid(
                        "node_selector",
                        format!("invalid label selector {text:?}: {e}"),
                    )
                })?,
                placed_on: None,
            },
            (None, None) => Placement::Anywhere,
        };
        let cost = self.cost.unwrap_or_else(|| policy.kind_cost(&self.kind));
        for pool in cost.keys() {
            if !policy.resources.contains_key(pool)
                && !policy.value_pools.contains_key(pool)
                && !policy.nodes.resources.contains_key(pool)
            {
                return Err(invalid(
                    format!("cost.{pool}"),
                    format!("pool {pool:?} is not declared in [resources] or [nodes.resources]"),
                ));
            }
        }
        let attrs = Attrs::pack(&self.attrs).map_err(|k| {
            invalid(
                format!("attrs.{k}"),
                "attribute names may not contain '=' and values no newline",
            )
        })?;
        let (after, after_ok) = check::deps(self.after, self.after_ok)?;
        let executor = self.executor.unwrap_or(match placement {
            Placement::Movable { .. } => Executor::Agent,
            _ => Executor::Client,
        });
        Ok(CheckedJob(Job {
            id: 0,
            priority: self
                .priority
                .unwrap_or_else(|| policy.kind_priority(&self.kind)),
            two_stage: self
                .two_stage
                .unwrap_or_else(|| policy.kind_two_stage(&self.kind)),
            kind: self.kind,
            attrs,
            owner: self.owner,
            executor,
            state: JobState::Queued,
            placement,
            cost,
            attempt: 1,
            lease: None,
            cancel_requested: false,
            submitted_at: Timestamp(0),
            queued_at: Timestamp(0),
            prepare_started_at: None,
            prepared_at: None,
            started_at: None,
            finished_at: None,
            outcome: None,
            message: None,
            not_before: self.not_before,
            max_wait_ms: self.max_wait_ms,
            max_run_ms: self.max_run_ms,
            idempotency_key: self.idempotency_key,
            retry_at: None,
            retry: self.retry.map(Box::new),
            cancel_reason: None,
            preemptions: 0,
            unadmitted: false,
            cancel_by: None,
            usage: None,
            after,
            after_ok,
        }))
    }
}

/// A spec that passed [`JobSpec::check`]: every default filled in, the selector parsed. It
/// becomes a [`Job`] once the engine gives it an id and a submit time.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedJob(Job);

impl CheckedJob {
    /// The job as it will be queued (id 0 and submit time 0 until [`CheckedJob::into_job`]).
    pub fn job(&self) -> &Job {
        &self.0
    }

    /// The queued job with its id, submitted (and queued) at `now`.
    pub fn into_job(self, id: JobId, now: Timestamp) -> Job {
        Job {
            id,
            submitted_at: now,
            queued_at: now,
            ..self.0
        }
    }
}

/// Where a job runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// On no node: it takes only global scopes (limits, pools, conflicts).
    Anywhere,
    /// On the node the submitter named.
    Pinned(String),
    /// On a ready node that matches `selector`, chosen at admission.
    Movable {
        /// Node selector (label-selector syntax; the empty selector matches every node).
        selector: Selector,
        /// The node it was placed on, while admitted.
        placed_on: Option<String>,
    },
}

impl Placement {
    /// The pinned node.
    pub fn pinned(&self) -> Option<&str> {
        match self {
            Placement::Pinned(n) => Some(n),
            _ => None,
        }
    }

    /// The node it runs on: the pinned node, or where a movable job was placed.
    pub fn node(&self) -> Option<&str> {
        match self {
            Placement::Anywhere => None,
            Placement::Pinned(n) => Some(n),
            Placement::Movable { placed_on, .. } => placed_on.as_deref(),
        }
    }

    /// The selector of a movable job.
    pub fn selector(&self) -> Option<&Selector> {
        match self {
            Placement::Movable { selector, .. } => Some(selector),
            _ => None,
        }
    }
}

/// How a [`Placement`] is stored and shown: the three fields `node`, `pinned` and
/// `node_selector` of api.md (flattened into the job).
#[derive(Serialize)]
struct PlacementFields<'a> {
    node: Option<&'a str>,
    pinned: bool,
    node_selector: Option<&'a str>,
}

#[derive(Deserialize)]
struct OwnedPlacementFields {
    node: Option<String>,
    pinned: bool,
    node_selector: Option<String>,
}

impl Serialize for Placement {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PlacementFields {
            node: self.node(),
            pinned: self.pinned().is_some(),
            node_selector: self.selector().map(Selector::text),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Placement {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Placement, D::Error> {
        let f = OwnedPlacementFields::deserialize(deserializer)?;
        Ok(match (f.pinned, f.node_selector) {
            (true, _) => Placement::Pinned(f.node.unwrap_or_default()),
            (false, Some(text)) => Placement::Movable {
                selector: Selector::parse_labels(&text).map_err(|e| {
                    serde::de::Error::custom(format!("node_selector {text:?}: {e}"))
                })?,
                placed_on: f.node,
            },
            (false, None) => Placement::Anywhere,
        })
    }
}

/// A job as the engine keeps it (and as the API shows it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Id.
    pub id: JobId,
    /// Kind.
    pub kind: String,
    /// Attributes.
    pub attrs: Attrs,
    /// Owner (principal).
    pub owner: String,
    /// Priority after defaults.
    pub priority: i64,
    /// Who runs it.
    pub executor: Executor,
    /// Current state.
    pub state: JobState,
    /// Where it runs (serialized as `node`, `pinned` and `node_selector`).
    #[serde(flatten)]
    pub placement: Placement,
    /// Pool costs after defaults.
    pub cost: BTreeMap<String, u64>,
    /// Two-stage job.
    pub two_stage: bool,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// The current lease, while admitted.
    pub lease: Option<Lease>,
    /// The holder has been asked to stop.
    pub cancel_requested: bool,
    /// Submit time.
    pub submitted_at: Timestamp,
    /// When it last entered `queued` (ranking and waits count from here).
    pub queued_at: Timestamp,
    /// When it was admitted to prepare.
    pub prepare_started_at: Option<Timestamp>,
    /// When it reported `prepared`.
    pub prepared_at: Option<Timestamp>,
    /// When it was admitted to run.
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
    /// How it ended.
    pub outcome: Option<JobState>,
    /// Last message (failure reason, holder message).
    pub message: Option<String>,
    /// Do not start before.
    pub not_before: Option<Timestamp>,
    /// Waiting bound in milliseconds.
    pub max_wait_ms: Option<u64>,
    /// Run-time bound in milliseconds.
    pub max_run_ms: Option<u64>,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// When a pending retry will queue it again.
    pub retry_at: Option<Timestamp>,
    /// Job-level retry rule overriding the kind's (boxed: most jobs have none).
    #[serde(default)]
    pub retry: Option<Box<RetrySpec>>,
    /// Jobs it waits for to end in any state (`after`), as submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<JobId>,
    /// Jobs it waits for to succeed (`after_ok`), as submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ok: Vec<JobId>,
    /// Why the holder was asked to stop, while `cancel_requested` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<CancelReason>,
    /// How many of its attempts ended by preemption (they do not count against its
    /// retries: the retry rule sees `attempt - preemptions`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preemptions: u32,
    /// It ran without admission (the server could not be reached and the holder was told
    /// to run anyway, `lockgate run --if-unreachable run`) and was reported afterwards.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unadmitted: bool,
    /// Who asked its holder to stop (`cancel` by a user): named in the message the job ends
    /// with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_by: Option<String>,
    /// What the current (or last) attempt's processes used, as its holder last reported
    /// (`usage.rs`; boxed: most jobs in a queue have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<crate::Usage>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why a holder is asked to stop (`cancel_requested`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// A user or a schedule cancelled it: the job ends `cancelled`.
    Cancel,
    /// It ran past `max_run`: it ends, and its lease is revoked one TTL later.
    MaxRun,
    /// A job of higher priority needs its room: once it stops, it is queued again (same id,
    /// `attempt + 1`), and the attempt does not count against its retries.
    Preempted,
}

impl CancelReason {
    /// The reason as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Cancel => "cancel",
            CancelReason::MaxRun => "max_run",
            CancelReason::Preempted => "preempted",
        }
    }
}

impl Job {
    /// The value a `per` key or selector key has for this job: `kind`, `owner`, `node` (the
    /// pinned node) or an attribute.
    pub fn key_value(&self, key: &str) -> Option<&str> {
        match key {
            "kind" => Some(&self.kind),
            "owner" => Some(&self.owner),
            "node" => self.placement.pinned(),
            attr => self.attrs.get(attr),
        }
    }

    /// The node it runs on: the pinned node, or where a movable job was placed.
    pub fn node(&self) -> Option<&str> {
        self.placement.node()
    }

    /// Whether the job runs on a node at all (pinned or movable).
    pub fn on_node(&self) -> bool {
        !matches!(self.placement, Placement::Anywhere)
    }
}

/// A job's attributes, packed into one buffer (`key=value` lines in key order): a queued
/// job should cost little memory, and most jobs have a handful of short attributes.
/// Serialized as a JSON object. Keys never contain `=` or a newline and values never
/// contain a newline (the engine refuses such attributes at submit; deserializing one is an
/// error).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attrs(Box<str>);

impl Attrs {
    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .split('\n')
            .filter(|l| !l.is_empty())
            .map(|l| l.split_once('=').unwrap_or((l, "")))
    }

    /// The value of an attribute.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Whether the attribute is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Attributes in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs()
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.pairs().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attributes as an ordered map.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Packs a map, refusing keys with `=` or a newline and values with a newline.
    ///
    /// # Errors
    /// The offending key.
    pub fn pack(map: &BTreeMap<String, String>) -> Result<Attrs, String> {
        let mut buf = String::new();
        for (k, v) in map {
            if k.contains(['=', '\n']) || v.contains('\n') {
                return Err(k.clone());
            }
            buf.push_str(k);
            buf.push('=');
            buf.push_str(v);
            buf.push('\n');
        }
        Ok(Attrs(buf.into_boxed_str()))
    }
}

impl From<&Attrs> for BTreeMap<String, String> {
    fn from(attrs: &Attrs) -> BTreeMap<String, String> {
        attrs.to_map()
    }
}

impl std::ops::Index<&str> for Attrs {
    type Output = str;
    fn index(&self, key: &str) -> &str {
        self.get(key)
            .unwrap_or_else(|| panic!("no attribute {key:?}"))
    }
}

impl Serialize for Attrs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Attrs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Attrs, D::Error> {
        let map = BTreeMap::<String, String>::deserialize(deserializer)?;
        Attrs::pack(&map).map_err(|k| {
            serde::de::Error::custom(format!(
                "attribute {k:?}: keys may not contain '=' or a newline, values no newline"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_pack_and_read_back() {
        let map: BTreeMap<String, String> =
            [("datastore", "ds1"), ("group", "vm/100"), ("q", "a=b")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let a = Attrs::pack(&map).unwrap();
        assert_eq!(a.get("group"), Some("vm/100"));
        assert_eq!(a.get("q"), Some("a=b"));
        assert_eq!(a.get("grou"), None);
        assert_eq!(a.len(), 3);
        assert_eq!(a.to_map(), map);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Attrs>(&json).unwrap(), a);
        assert!(Attrs::pack(&[("a=b".to_string(), "x".to_string())].into()).is_err());
        assert!(Attrs::default().is_empty());
    }
}
