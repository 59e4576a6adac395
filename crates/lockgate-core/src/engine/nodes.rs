//! Nodes: registration, liveness, numbers from the policy's rules, and the placement index.
//!
//! Placement index: for each placement key (selector, agent kind, stage) the engine keeps
//! the eligible nodes (selector matches, ready, not cordoned, and for agent jobs the agent
//! runs the kind) ordered by free room, then fewest jobs, then name (policy.md). Placing a
//! movable job is a walk from the best node that stops at the first node that fits; the
//! first node fits unless a per-node pool is short. A node's entries are re-filed whenever
//! its counts change: O(k log N) for its k placement keys.

use super::{Engine, ScopeId};
use crate::event::Event;
use crate::job::JobId;
use crate::scope::ScopeKey;
use crate::selector::Selector;
use crate::time::Timestamp;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// A node's liveness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Heartbeating.
    Ready,
    /// Silent past the node TTL.
    Lost,
}

/// What an agent (or an admin) registers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRegistration {
    /// Node name.
    #[serde(default)]
    pub name: String,
    /// Labels (Kubernetes syntax).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Per-node pool capacities (`[nodes.resources]`).
    #[serde(default)]
    pub resources: BTreeMap<String, u64>,
    /// Job kinds its agent has handlers for.
    #[serde(default)]
    pub kinds: BTreeSet<String>,
    /// The registering agent process's own id, new at each start (`None`: not an agent
    /// that says). A registration with another id than the node's is a new process: what
    /// the old one held is lost ([`Engine::register_node`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// A registered node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Reported pool capacities.
    pub resources: BTreeMap<String, u64>,
    /// Kinds its agent runs.
    pub kinds: BTreeSet<String>,
    /// The id of the agent process that registered it last (see
    /// [`NodeRegistration::instance`]).
    pub instance: Option<String>,
    /// Liveness.
    pub state: NodeState,
    /// Cordoned: admits nothing new.
    pub cordoned: bool,
    /// Last heartbeat or registration.
    pub last_seen: Timestamp,
    /// Its number (`max_running`); `None`: unlimited.
    pub number: Option<u32>,
    /// The `[[nodes.rule]]` that set the number (its selector), if any.
    pub rule: Option<String>,
    /// Jobs holding a run slot.
    pub running: u32,
    /// Two-stage jobs preparing here.
    pub preparing: u32,
    /// Two-stage jobs prepared here, waiting for a run slot.
    pub prepared: u32,
    /// Prepared jobs in start order (prepared time, id).
    #[serde(skip)]
    pub(crate) prepared_queue: BTreeSet<(Timestamp, JobId)>,
    /// Interned run-slot and prepare-bound scopes.
    #[serde(skip)]
    pub(crate) scope_ids: Option<(ScopeId, ScopeId)>,
    /// Where it is filed in the placement indexes.
    #[serde(skip)]
    pub(crate) filed: Vec<(ScopeId, RoomKey)>,
}

impl Node {
    /// Ready and not cordoned.
    pub fn usable(&self) -> bool {
        self.state == NodeState::Ready && !self.cordoned
    }

    /// `ready`, `cordoned` or `lost`.
    pub fn state_name(&self) -> &'static str {
        match (self.state, self.cordoned) {
            (NodeState::Lost, _) => "lost",
            (NodeState::Ready, true) => "cordoned",
            (NodeState::Ready, false) => "ready",
        }
    }

    /// Jobs holding prepared resources or running here.
    pub fn occupied(&self) -> u32 {
        self.running + self.preparing + self.prepared
    }

    /// Free room for ranking (policy.md): two-stage `max + prepare_queue - occupied`,
    /// otherwise `max - running`; unlimited is `u64::MAX`.
    pub fn free_room(&self, two_stage: bool, prepare_queue: u32) -> u64 {
        match self.number {
            None => u64::MAX,
            Some(max) if two_stage => {
                u64::from(max + prepare_queue).saturating_sub(u64::from(self.occupied()))
            }
            Some(max) => u64::from(max).saturating_sub(u64::from(self.running)),
        }
    }
}

/// What makes nodes eligible for a movable job.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PlacementKey {
    pub selector: Selector,
    pub agent_kind: Option<String>,
    pub two_stage: bool,
}

/// A node's place in a placement index: most room first, then fewest jobs, then name.
pub(crate) type RoomKey = (Reverse<u64>, u32, String);

/// A node as first registered (or restored): ready, seen at `now`, nothing on it.
pub(crate) fn fresh_node(reg: NodeRegistration, cordoned: bool, now: Timestamp) -> Node {
    Node {
        name: reg.name,
        labels: reg.labels,
        resources: reg.resources,
        kinds: reg.kinds,
        instance: reg.instance,
        state: NodeState::Ready,
        cordoned,
        last_seen: now,
        number: None,
        rule: None,
        running: 0,
        preparing: 0,
        prepared: 0,
        prepared_queue: BTreeSet::new(),
        scope_ids: None,
        filed: Vec::new(),
    }
}

impl Engine {
    /// The run-slot and prepare-bound scopes of a node (cached on registered nodes).
    pub(crate) fn node_scopes(&mut self, name: &str) -> (ScopeId, ScopeId) {
        if let Some(ids) = self.nodes.get(name).and_then(|n| n.scope_ids) {
            return ids;
        }
        let run = self.intern(ScopeKey::Node(name.to_string()));
        let prep = self.intern(ScopeKey::NodePrepare(name.to_string()));
        if let Some(n) = self.nodes.get_mut(name) {
            n.scope_ids = Some((run, prep));
        }
        (run, prep)
    }

    pub(crate) fn node_pool_capacity(&self, node: &str, pool: &str) -> u64 {
        let reported = self
            .nodes
            .get(node)
            .and_then(|n| n.resources.get(pool).copied());
        reported
            .or_else(|| self.policy.nodes.resources.get(pool).copied())
            .unwrap_or(0)
    }

    /// Registers a node or updates its labels, resources and kinds. A lost node that
    /// registers again is ready again. A registration from another agent process than the
    /// last one (both saying their [`NodeRegistration::instance`]) means the old process
    /// is gone, and with it the handlers it ran (they die with their agent): every job
    /// admitted on the node is lost at once (retried as its kind says, under a new lease),
    /// so the new process is never handed a lease the old one held.
    pub fn register_node(&mut self, reg: NodeRegistration, now: Timestamp) -> &Node {
        self.handle_timeout(now);
        let name = reg.name.clone();
        let old = self.nodes.get(&name).and_then(|n| n.instance.clone());
        if let (Some(old), Some(new)) = (old, reg.instance.as_ref()) {
            if &old != new {
                self.lose_node_jobs(&name, "the node's agent restarted", now);
            }
        }
        let (number, rule) = self.policy.node_number(&reg.labels);
        let rule = rule.map(|i| self.policy.nodes.rules[i].selector.text().to_string());
        let node = self
            .nodes
            .entry(name.clone())
            .or_insert_with(|| fresh_node(NodeRegistration::default(), false, now));
        node.name = name.clone();
        node.labels = reg.labels;
        node.resources = reg.resources;
        node.kinds = reg.kinds;
        if reg.instance.is_some() {
            node.instance = reg.instance;
        }
        node.state = NodeState::Ready;
        node.last_seen = now;
        node.number = number;
        node.rule = rule;
        let ttl = self.policy.nodes.ttl;
        self.timers
            .arm(now.plus(ttl), super::Timer::NodeTtl(name.clone()));
        self.node_changed(&name);
        self.run_pass(now);
        &self.nodes[&name]
    }

    /// Records a node heartbeat. Returns false for an unknown node (it must register).
    pub fn node_heartbeat(&mut self, name: &str, now: Timestamp) -> bool {
        self.handle_timeout(now);
        let Some(node) = self.nodes.get_mut(name) else {
            return false;
        };
        node.last_seen = now;
        if node.state == NodeState::Lost {
            node.state = NodeState::Ready;
            let ttl = self.policy.nodes.ttl;
            self.timers
                .arm(now.plus(ttl), super::Timer::NodeTtl(name.to_string()));
            self.node_changed(name);
            self.run_pass(now);
        }
        true
    }

    /// Cordons (`true`) or uncordons a node. Returns false for an unknown node.
    pub fn set_cordon(&mut self, name: &str, cordoned: bool, now: Timestamp) -> bool {
        self.handle_timeout(now);
        let Some(node) = self.nodes.get_mut(name) else {
            return false;
        };
        if node.cordoned != cordoned {
            node.cordoned = cordoned;
            self.node_changed(name);
            self.run_pass(now);
        }
        true
    }

    /// Forgets a node; the jobs admitted on it are lost (and retried as their kind says);
    /// its pinned queued jobs wait for it to return. Returns false for an unknown node.
    pub fn remove_node(&mut self, name: &str, now: Timestamp) -> bool {
        self.handle_timeout(now);
        if !self.nodes.contains_key(name) {
            return false;
        }
        self.lose_node_jobs(name, "node removed", now);
        self.unfile_node(name);
        self.nodes.remove(name);
        self.node_changed(name);
        self.events.push_back(Event::NodeRemoved {
            node: name.to_string(),
        });
        self.run_pass(now);
        true
    }

    /// A node went silent: it is lost, and so is every job admitted on it.
    pub(crate) fn node_lost(&mut self, name: &str, now: Timestamp) {
        let Some(node) = self.nodes.get_mut(name) else {
            return;
        };
        node.state = NodeState::Lost;
        self.lose_node_jobs(name, "node lost", now);
        self.node_changed(name);
        self.events.push_back(Event::NodeLost {
            node: name.to_string(),
        });
    }

    fn lose_node_jobs(&mut self, name: &str, why: &str, now: Timestamp) {
        let mut ids: Vec<JobId> = self
            .entries
            .values()
            .filter(|e| e.job.state.is_admitted() && e.job.node() == Some(name))
            .map(|e| e.job.id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            self.note_lost_holder(id);
            self.end_job(id, crate::job::JobState::Lost, Some(why.to_string()), now);
        }
    }

    /// Re-derives everything that depends on a node: its scopes' limits, its entries in
    /// the placement index, and wakes whatever waits on it.
    pub(crate) fn node_changed(&mut self, name: &str) {
        let (run, prep) = self.node_scopes(name);
        for id in [run, prep] {
            self.scopes.states[id as usize].limit =
                self.scope_limit(&self.scopes.interner.key(id).clone());
            self.wake(id, None);
        }
        let pools: Vec<ScopeId> = (0..self.scopes.interner.len() as ScopeId)
            .filter(|&id| matches!(self.scopes.interner.key(id), ScopeKey::NodePool { node, .. } if node == name))
            .collect();
        for id in pools {
            self.scopes.states[id as usize].limit =
                self.scope_limit(&self.scopes.interner.key(id).clone());
            self.wake(id, None);
        }
        self.dirty_nodes.insert(name.to_string());
        let keys: Vec<ScopeId> = self.placement.keys.keys().copied().collect();
        for scope in keys {
            self.refile_node(scope, name);
        }
    }

    /// Counts on a node changed (admission or release): re-file it where it is eligible.
    pub(crate) fn node_counts_changed(&mut self, name: &str) {
        let keys: Vec<ScopeId> = self.placement.keys.keys().copied().collect();
        for scope in keys {
            self.refile_node(scope, name);
        }
    }

    fn eligible(&self, key: &PlacementKey, node: &Node) -> bool {
        node.usable()
            && key.selector.matches_map(&node.labels)
            && key
                .agent_kind
                .as_ref()
                .is_none_or(|k| node.kinds.contains(k))
    }

    fn room_key(&self, node: &Node, two_stage: bool) -> RoomKey {
        let pq = self.policy.nodes.prepare_queue;
        (
            Reverse(node.free_room(two_stage, pq)),
            node.occupied(),
            node.name.clone(),
        )
    }

    fn refile_node(&mut self, scope: ScopeId, name: &str) {
        let key = &self.placement.keys[&scope];
        let entry = self
            .nodes
            .get(name)
            .filter(|n| self.eligible(key, n))
            .map(|n| self.room_key(n, key.two_stage));
        let old = self.nodes.get_mut(name).and_then(|n| {
            let pos = n.filed.iter().position(|(s, _)| *s == scope)?;
            Some(n.filed.swap_remove(pos).1)
        });
        let set = self.placement.nodes.entry(scope).or_default();
        if let Some(old) = old {
            set.remove(&old);
        }
        let gained = entry
            .as_ref()
            .is_some_and(|(Reverse(room), _, _)| *room > 0);
        if let Some(e) = entry {
            set.insert(e.clone());
            if let Some(n) = self.nodes.get_mut(name) {
                n.filed.push((scope, e));
            }
        }
        if gained {
            self.wake(scope, None);
        }
    }

    /// Takes a node out of every placement index (before it is forgotten).
    fn unfile_node(&mut self, name: &str) {
        let filed = self
            .nodes
            .get_mut(name)
            .map(|n| std::mem::take(&mut n.filed))
            .unwrap_or_default();
        for (scope, key) in filed {
            if let Some(set) = self.placement.nodes.get_mut(&scope) {
                set.remove(&key);
            }
        }
    }

    /// The placement scope of a movable job, creating its index on first use.
    pub(crate) fn placement_scope(&mut self, key: PlacementKey) -> ScopeId {
        let name = format!(
            "{}|{}|{}",
            key.selector.text(),
            key.agent_kind.as_deref().unwrap_or("*"),
            key.two_stage
        );
        let scope = self.intern(ScopeKey::Placement(name));
        if let std::collections::hash_map::Entry::Vacant(slot) = self.placement.keys.entry(scope) {
            slot.insert(key);
            self.placement.nodes.insert(scope, BTreeSet::new());
            let names: Vec<String> = self.nodes.keys().cloned().collect();
            for name in names {
                self.refile_node(scope, &name);
            }
        }
        scope
    }

    /// Eligible nodes of a placement scope, best first.
    pub(crate) fn placement_candidates(&self, scope: ScopeId) -> impl Iterator<Item = &str> {
        self.placement
            .nodes
            .get(&scope)
            .into_iter()
            .flat_map(|s| s.iter().map(|(_, _, n)| n.as_str()))
    }

    /// A two-stage job reported prepared on `node`: it now waits for a run slot there.
    pub(crate) fn node_prepared(&mut self, node: &str, id: JobId, now: Timestamp) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.preparing = n.preparing.saturating_sub(1);
            n.prepared += 1;
            n.prepared_queue.insert((now, id));
            self.dirty_nodes.insert(node.to_string());
        }
    }
}
