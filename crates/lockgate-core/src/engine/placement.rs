//! The placement index: for each placement key (selector, agent kind, stage) of the movable
//! jobs seen under the current policy, its eligible nodes ordered by room.
//!
//! Invariants (kept by `Engine::refile_node` and `Engine::placement_scope` in `nodes.rs`):
//! - `keys` and `nodes` have the same scope ids; a key gets its node set when it is first
//!   used, filled from every registered node;
//! - a node is in a key's set exactly when it is eligible for it (selector matches, ready,
//!   not cordoned, and for agent jobs its agent runs the kind), under its current
//!   [`RoomKey`], and the node's `filed` list names every set it is in with that key.

use super::nodes::{PlacementKey, RoomKey};
use crate::scope::ScopeId;
use std::collections::{BTreeSet, HashMap};

/// Eligible nodes per placement scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlacementIndex {
    /// What makes a node eligible, per placement scope.
    pub keys: HashMap<ScopeId, PlacementKey>,
    /// The eligible nodes, best first.
    pub nodes: HashMap<ScopeId, BTreeSet<RoomKey>>,
}
