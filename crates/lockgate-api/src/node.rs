//! Nodes as JSON: registration, the node view, and the assignments an agent long-polls.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `PUT /v1/nodes/{name}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeRegister {
    /// Labels (Kubernetes syntax).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Per-node pool capacities.
    #[serde(default)]
    pub resources: BTreeMap<String, u64>,
    /// Job kinds its agent has handlers for (a set: a repeated kind counts once).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub kinds: BTreeSet<String>,
    /// The agent process's own id, new at each start (`lockgate agent` sends one). A
    /// registration with another id than the node's last one is a new process: every job
    /// admitted on the node is lost at once and retried under a new lease, so the new
    /// process never runs a lease the old one held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// A node as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The node's pressure and network rates, as the last holder on it reported them
    /// (absent until one did, and once that is more than two minutes old).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<crate::NodeSampleView>,
    /// The slots its rule's pressure guard leaves it now, where fewer than `number`
    /// (policy.md, "Limits that set themselves").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarded: Option<u32>,
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
            sample: None,
            guarded: None,
        }
    }
}

/// `GET /v1/nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeList {
    /// Every node, by name.
    pub nodes: Vec<NodeView>,
}

/// One assignment offered to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssignmentList {
    /// Jobs admitted on the node that its agent has not acknowledged.
    pub assignments: Vec<Assignment>,
}
