//! Errors, tokens, policy, nodes and events as JSON.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The body of every 4xx/5xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable machine-readable code (`malformed_json`, `invalid_field`, `unauthorized`,
    /// `forbidden`, `not_found`, `lease_lost`, `invalid_policy`, `stale_policy`, ...).
    pub code: String,
    /// What happened and what was expected, for people.
    pub message: String,
    /// The offending JSON path or config key, where there is one.
    pub field: Option<String>,
    /// The line in a policy document, where there is one (an addition to api.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)?;
        if let Some(field) = &self.field {
            write!(f, " [field {field}]")?;
        }
        Ok(())
    }
}

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything.
    Admin,
    /// Submits and manages its own jobs.
    Submitter,
    /// Bound to one node: that node and the jobs placed on it.
    Agent,
    /// Read only.
    Viewer,
}

impl Role {
    /// The name as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Submitter => "submitter",
            Role::Agent => "agent",
            Role::Viewer => "viewer",
        }
    }

    /// Parses a role name.
    pub fn parse(text: &str) -> Option<Role> {
        [Role::Admin, Role::Submitter, Role::Agent, Role::Viewer]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `POST /v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenCreate {
    /// The principal's name (a job's owner).
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The node an agent token is bound to (required for `agent`, refused otherwise).
    #[serde(default)]
    pub node: Option<String>,
}

/// `POST /v1/tokens` answer: the only time the token is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCreated {
    /// Principal.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Bound node.
    pub node: Option<String>,
    /// The secret.
    pub token: String,
}

/// `GET /v1/tokens` entry (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Principal.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Bound node.
    pub node: Option<String>,
    /// Created (RFC 3339).
    pub created_at: String,
}

/// `GET /v1/policy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyView {
    /// SHA-256 of the canonical JSON document, hex; send it as `If-Match`.
    pub digest: String,
    /// The document as JSON (durations as strings, as in TOML).
    pub policy: serde_json::Value,
}

/// `PUT /v1/policy` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyAnswer {
    /// Digest of the new policy.
    pub digest: String,
    /// Differences from the active policy, one per line.
    pub diff: Vec<String>,
    /// Jobs the new policy admits at once.
    pub admitted_now: Vec<u64>,
    /// Scopes left over their new limit (they drain).
    #[serde(default)]
    pub over_limit: Vec<String>,
    /// True when nothing was applied.
    #[serde(default)]
    pub dry_run: bool,
}

/// `PUT /v1/nodes/{name}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRegister {
    /// Labels (Kubernetes syntax).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Per-node pool capacities.
    #[serde(default)]
    pub resources: BTreeMap<String, u64>,
    /// Job kinds its agent has handlers for.
    #[serde(default)]
    pub kinds: BTreeSet<String>,
}

/// A node as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `ready`, `cordoned` or `lost`.
    pub state: String,
    /// Cordoned.
    pub cordoned: bool,
    /// Its number (`max_running`); `null`: unlimited.
    pub number: Option<u32>,
    /// The selector of the `[[nodes.rule]]` that set the number.
    pub rule: Option<String>,
    /// Jobs holding a run slot.
    pub running: u32,
    /// Two-stage jobs preparing.
    pub preparing: u32,
    /// Two-stage jobs prepared, waiting for a run slot.
    pub prepared: u32,
    /// Kinds its agent runs.
    pub kinds: BTreeSet<String>,
    /// Reported pool capacities.
    pub resources: BTreeMap<String, u64>,
    /// Last heartbeat or registration (RFC 3339).
    pub last_seen: String,
}

impl NodeView {
    /// The API view of an engine node.
    pub fn from_node(n: &lockgate_core::engine::Node) -> NodeView {
        NodeView {
            name: n.name.clone(),
            labels: n.labels.clone(),
            state: n.state_name().to_string(),
            cordoned: n.cordoned,
            number: n.number,
            rule: n.rule.clone(),
            running: n.running,
            preparing: n.preparing,
            prepared: n.prepared,
            kinds: n.kinds.clone(),
            resources: n.resources.clone(),
            last_seen: crate::time::format(n.last_seen),
        }
    }
}

/// `GET /v1/nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    /// Every node, by name.
    pub nodes: Vec<NodeView>,
}

/// One event (`GET /v1/events`, and the data of each SSE message): `seq`, `at` and the
/// event's own fields: `type` (`job`, `node_changed`, `node_lost`, `node_removed`,
/// `policy_applied`), and for `job` the `change` and the `job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// Sequence number, growing by one.
    pub seq: u64,
    /// When it happened (RFC 3339).
    pub at: String,
    /// The event.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// `GET /v1/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventList {
    /// Events after the requested sequence number, oldest first.
    pub events: Vec<EventView>,
}

/// One assignment offered to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// `prepare` or `run`.
    pub stage: String,
    /// The lease token to renew and finish with.
    pub token: u64,
    /// The job.
    pub job: crate::JobView,
}

/// `GET /v1/nodes/{name}/assignments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssignmentList {
    /// Jobs admitted on the node that its agent has not acknowledged.
    pub assignments: Vec<Assignment>,
}
