//! What a job takes from which scope, as interned ids: [`Policy::scopes_of`] (which scopes,
//! decided once for the engine and the simulator) interned under the current policy, once
//! per job shape (and again on every policy change).
//!
//! A job's placement-independent needs are a list of [`Need`]s sorted by scope id, no id
//! twice. Node scopes depend on placement and are added at admission.

use super::Engine;
use crate::job::{Attrs, Job};
#[cfg(doc)]
use crate::policy::Policy;
use crate::scope::ScopeId;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub(crate) use crate::scope::Check;

/// One scope a job needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Need {
    pub scope: ScopeId,
    pub take: u64,
    pub check: Check,
}

/// Everything a job needs apart from its node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Needs {
    /// Global count, limits, pools, conflicts: taken at (prepare) admission, held to the end.
    pub common: Vec<Need>,
    /// `global-prepare`, for two-stage jobs when `[global].prepare_queue` is set: taken at
    /// prepare admission, given back when the job starts running.
    pub prepare: Option<ScopeId>,
    /// Per-node pools: taken from the node the job runs on.
    pub node_cost: Vec<(String, u64)>,
}

/// Needs already computed under the current policy, by job shape: jobs with the same kind,
/// owner, attributes, costs, stage and pinned node need the same scopes. Cleared on every
/// rebuild, and when it grows past [`NeedsCache::MAX`] shapes.
#[derive(Debug, Clone, Default)]
pub(crate) struct NeedsCache {
    shapes: HashMap<u64, Vec<(Shape, Arc<Needs>)>>,
    len: usize,
}

/// The parts of a job its needs depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    kind: String,
    owner: String,
    attrs: Attrs,
    cost: BTreeMap<String, u64>,
    two_stage: bool,
    node: Option<String>,
}

impl Shape {
    fn of(job: &Job) -> Shape {
        Shape {
            kind: job.kind.clone(),
            owner: job.owner.clone(),
            attrs: job.attrs.clone(),
            cost: job.cost.clone(),
            two_stage: job.two_stage,
            node: job.key_value("node").map(str::to_string),
        }
    }

    fn matches(&self, job: &Job) -> bool {
        self.kind == job.kind
            && self.owner == job.owner
            && self.attrs == job.attrs
            && self.cost == job.cost
            && self.two_stage == job.two_stage
            && self.node.as_deref() == job.key_value("node")
    }

    fn hash(job: &Job) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &job.kind,
            &job.owner,
            &job.attrs,
            job.two_stage,
            job.key_value("node"),
        )
            .hash(&mut h);
        job.cost.hash(&mut h);
        h.finish()
    }
}

impl NeedsCache {
    /// Shapes kept before the cache starts over.
    const MAX: usize = 4096;

    /// Forgets everything (the policy or the scope table changed).
    pub fn clear(&mut self) {
        self.shapes.clear();
        self.len = 0;
    }
}

impl Engine {
    /// A job's needs, from the cache when a job of the same shape was seen under this policy.
    pub(crate) fn needs_of(&mut self, job: &Job) -> Arc<Needs> {
        let hash = Shape::hash(job);
        if let Some(hit) = self
            .needs_cache
            .shapes
            .get(&hash)
            .and_then(|v| v.iter().find(|(shape, _)| shape.matches(job)))
        {
            return hit.1.clone();
        }
        let needs = Arc::new(self.compute_needs(job));
        if self.needs_cache.len >= NeedsCache::MAX {
            self.needs_cache.clear();
        }
        self.needs_cache.len += 1;
        self.needs_cache
            .shapes
            .entry(hash)
            .or_default()
            .push((Shape::of(job), needs.clone()));
        needs
    }

    /// Computes a job's needs under the current policy, interning the scopes it touches.
    pub(crate) fn compute_needs(&mut self, job: &Job) -> Needs {
        let scopes = self.policy.scopes_of(job);
        let mut common: Vec<Need> = scopes
            .common
            .into_iter()
            .map(|u| Need {
                scope: self.intern(u.key),
                take: u.take,
                check: u.check,
            })
            .collect();
        common.sort();
        common.dedup_by_key(|n| n.scope);
        Needs {
            common,
            prepare: scopes.prepare.map(|k| self.intern(k)),
            node_cost: scopes.node_cost,
        }
    }
}
