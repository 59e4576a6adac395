//! What a job takes from which scope, derived from the policy once per job (and again on
//! every policy change).
//!
//! A job's placement-independent needs are a sorted list of [`Need`]s: the global count,
//! every limit partition it falls into, every global pool it costs and every conflict key
//! it holds. Node scopes depend on placement and are added at admission.

use super::Engine;
use crate::job::{Attrs, Job};
use crate::policy::{PerKey, Policy};
use crate::scope::{ScopeId, ScopeKey};
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How a need is checked against its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Check {
    /// `used + take <= limit` (an unlimited scope always fits).
    Fits,
    /// `used == 0` (conflict keys).
    Free,
}

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

fn per_parts(job: &Job, per: &[PerKey]) -> Option<Vec<(String, String)>> {
    per.iter()
        .map(|k| {
            job.key_value(k.name())
                .map(|v| (k.name().to_string(), v.to_string()))
        })
        .collect()
}

fn matches(job: &Job, sel: &crate::selector::Selector) -> bool {
    sel.matches(|k| job.key_value(k))
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
        let policy: &Policy = &self.policy;
        let coordinator = policy.is_coordinator(&job.kind);
        let mut keys: Vec<(ScopeKey, u64, Check)> = Vec::new();
        if !coordinator && policy.global.max_running.is_some() {
            keys.push((ScopeKey::Global, 1, Check::Fits));
        }
        for limit in &policy.limits {
            let applies = match &limit.matcher {
                Some(m) if coordinator => m.names_value("kind", &job.kind) && matches(job, m),
                Some(m) => matches(job, m),
                None => !coordinator,
            };
            if !applies {
                continue;
            }
            let Some(parts) = per_parts(job, &limit.per) else {
                continue;
            };
            keys.push((
                ScopeKey::Limit {
                    name: limit.name.clone(),
                    parts,
                },
                1,
                Check::Fits,
            ));
        }
        let mut node_cost = Vec::new();
        if !coordinator {
            for (pool, &amount) in &job.cost {
                if amount == 0 {
                    continue;
                }
                if policy.resources.contains_key(pool) {
                    keys.push((ScopeKey::Pool(pool.clone()), amount, Check::Fits));
                } else {
                    node_cost.push((pool.clone(), amount));
                }
            }
        }
        for (index, conflict) in policy.conflicts.iter().enumerate() {
            if conflict.matcher.as_ref().is_some_and(|m| !matches(job, m)) {
                continue;
            }
            let Some(parts) = per_parts(job, &conflict.keys) else {
                continue;
            };
            let Some(attr) = &conflict.overlap else {
                keys.push((
                    ScopeKey::Conflict {
                        index,
                        parts,
                        overlap: None,
                    },
                    1,
                    Check::Free,
                ));
                continue;
            };
            let Some(list) = job.attrs.get(attr) else {
                continue;
            };
            let scope = |v: &str| ScopeKey::Conflict {
                index,
                parts: parts.clone(),
                overlap: Some((attr.clone(), v.to_string())),
            };
            // `<attr>=` (empty value) counts every holder, `<attr>=*` the star holders.
            let values: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect();
            if values.is_empty() {
                continue;
            }
            if values.contains(&"*") {
                keys.push((scope(""), 1, Check::Free));
                keys.push((scope("*"), 1, Check::Fits));
            } else {
                keys.push((scope(""), 1, Check::Fits));
                keys.push((scope("*"), 0, Check::Free));
                for v in values {
                    keys.push((scope(v), 1, Check::Free));
                }
            }
        }
        let prepare = (job.two_stage && !coordinator && policy.global.prepare_queue.is_some())
            .then_some(ScopeKey::GlobalPrepare);
        let mut common: Vec<Need> = keys
            .into_iter()
            .map(|(key, take, check)| Need {
                scope: self.intern(key),
                take,
                check,
            })
            .collect();
        common.sort();
        common.dedup_by_key(|n| n.scope);
        Needs {
            common,
            prepare: prepare.map(|k| self.intern(k)),
            node_cost,
        }
    }
}
