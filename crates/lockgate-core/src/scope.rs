//! Scopes: every counted thing, with one name used everywhere (policy.md, "Scope names").
//!
//! `global`, `global-prepare`, `limit:<name>` or `limit:<name>[k=v,k2=v2]`, `node:<name>`,
//! `node-prepare:<name>`, `pool:<name>` or `pool:<name>@<node>`, `conflict:<k=v,..>`,
//! `pool:<name>[k=v]` (a per-value pool), `maintenance:<name>`.
//! Inside the engine a scope is interned to a dense id so counters and waiter sets are
//! vector lookups, not string hashing, on the admission path.
//!
//! Which scopes a job takes is decided here, once: [`Policy::scopes_of`] is a pure function
//! of the policy and the job, used by the engine (which interns the keys) and by the
//! simulator's lower bound (which reads their capacities with [`ScopeKey::limit_in`]).
//! Node scopes (`node:`, `node-prepare:`, per-node pools) depend on where the job is placed
//! and are added by the engine at admission.

use crate::job::Job;
use crate::policy::{PerKey, Policy};
use crate::selector::Selector;
use std::collections::HashMap;
use std::fmt;

/// Dense index of an interned scope.
pub(crate) type ScopeId = u32;

/// A counted thing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKey {
    /// `[global].max_running`.
    Global,
    /// `[global].prepare_queue`.
    GlobalPrepare,
    /// One partition of a `[[limit]]` (values in `per` order; empty for an unpartitioned
    /// limit).
    Limit {
        /// Limit name.
        name: String,
        /// `per` keys and this partition's values.
        parts: Vec<(String, String)>,
    },
    /// A node's run slots.
    Node(String),
    /// A node's prepare bound (`running + preparing + prepared < max_running + prepare_queue`).
    NodePrepare(String),
    /// A global pool.
    Pool(String),
    /// A per-node pool.
    NodePool {
        /// Pool name.
        pool: String,
        /// Node name.
        node: String,
    },
    /// A conflict key: `index` is the conflict's position in the policy; `parts` the key
    /// values; `value` the overlap value (`Some("*")` counts star holders), `None` the whole
    /// key.
    Conflict {
        /// Position of the `[[conflict]]`.
        index: usize,
        /// Key names and values.
        parts: Vec<(String, String)>,
        /// Overlap attribute name and value, for overlap conflicts.
        overlap: Option<(String, String)>,
        /// The counter of exclusive holders beside the counter of every holder (a conflict
        /// with `exclusive`): shared jobs need it free, exclusive jobs take it.
        exclusive: bool,
    },
    /// Placement of movable jobs with one selector: a job waits here when no eligible node
    /// has room.
    Placement(String),
    /// One value's pool of a per-value pool (`[resources.<pool>]` with `per`).
    PoolValue {
        /// Pool name.
        pool: String,
        /// `per` keys and this pool's values.
        parts: Vec<(String, String)>,
    },
    /// A `[[maintenance]]` window: every matching admitted job takes 1, and while the window
    /// is active its limit is 0 (so it admits nothing it matches and stops nothing).
    Maintenance(String),
}

fn write_parts(f: &mut fmt::Formatter<'_>, parts: &[(String, String)]) -> fmt::Result {
    for (i, (k, v)) in parts.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{k}={v}")?;
    }
    Ok(())
}

impl ScopeKey {
    /// The policy rule this scope is a partition of, the same for every value a job can
    /// bring: `global`, `global-prepare`, `limit:<name>`, `node`, `node-prepare`,
    /// `pool:<pool>`, `pool:<pool>@node`, `conflict[<index>]` or `placement`. Whoever shows
    /// scopes can bound how many it shows per rule (the metrics do).
    pub fn rule(&self) -> String {
        match self {
            ScopeKey::Global => "global".into(),
            ScopeKey::GlobalPrepare => "global-prepare".into(),
            ScopeKey::Limit { name, .. } => format!("limit:{name}"),
            ScopeKey::Node(_) => "node".into(),
            ScopeKey::NodePrepare(_) => "node-prepare".into(),
            ScopeKey::Pool(p) => format!("pool:{p}"),
            ScopeKey::NodePool { pool, .. } => format!("pool:{pool}@node"),
            ScopeKey::Conflict {
                index, exclusive, ..
            } => match exclusive {
                false => format!("conflict[{index}]"),
                true => format!("conflict-exclusive[{index}]"),
            },
            ScopeKey::Placement(_) => "placement".into(),
            ScopeKey::PoolValue { pool, .. } => format!("pool:{pool}"),
            ScopeKey::Maintenance(name) => format!("maintenance:{name}"),
        }
    }
}

impl fmt::Display for ScopeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeKey::Global => f.write_str("global"),
            ScopeKey::GlobalPrepare => f.write_str("global-prepare"),
            ScopeKey::Limit { name, parts } => {
                write!(f, "limit:{name}")?;
                if !parts.is_empty() {
                    f.write_str("[")?;
                    write_parts(f, parts)?;
                    f.write_str("]")?;
                }
                Ok(())
            }
            ScopeKey::Node(n) => write!(f, "node:{n}"),
            ScopeKey::NodePrepare(n) => write!(f, "node-prepare:{n}"),
            ScopeKey::Pool(p) => write!(f, "pool:{p}"),
            ScopeKey::NodePool { pool, node } => write!(f, "pool:{pool}@{node}"),
            ScopeKey::Conflict {
                parts,
                overlap,
                exclusive,
                ..
            } => {
                f.write_str(if *exclusive {
                    "conflict-exclusive:"
                } else {
                    "conflict:"
                })?;
                write_parts(f, parts)?;
                if let Some((k, v)) = overlap {
                    if !parts.is_empty() {
                        f.write_str(",")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                Ok(())
            }
            ScopeKey::Placement(sel) => write!(f, "placement:{sel:?}"),
            ScopeKey::PoolValue { pool, parts } => {
                write!(f, "pool:{pool}[")?;
                write_parts(f, parts)?;
                f.write_str("]")
            }
            ScopeKey::Maintenance(name) => write!(f, "maintenance:{name}"),
        }
    }
}

/// How a job's use of a scope is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// `used + take <= limit` (an unlimited scope always fits).
    Fits,
    /// `used == 0`: nobody else holds it (conflict keys).
    Free,
}

/// One scope a job takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeUse {
    /// The scope.
    pub key: ScopeKey,
    /// Units taken (0 for a scope that is only checked, such as the `*` holders of an
    /// overlap conflict).
    pub take: u64,
    /// How it is checked.
    pub check: Check,
}

/// Everything a job takes apart from its node's scopes ([`Policy::scopes_of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobScopes {
    /// Global count, limit partitions, global pools, conflict keys: taken at (prepare)
    /// admission and held to the end. No key appears twice.
    pub common: Vec<ScopeUse>,
    /// `global-prepare`, for a two-stage job when `[global].prepare_queue` is set: taken at
    /// prepare admission, given back when the job starts running.
    pub prepare: Option<ScopeKey>,
    /// Per-node pools and amounts: taken from the node the job runs on.
    pub node_cost: Vec<(String, u64)>,
}

impl ScopeKey {
    /// The limit the policy itself sets on a scope: `global`, `global-prepare`, a limit
    /// partition, a global pool, one value's pool. `None` for an unlimited one and for
    /// scopes whose limit depends on nodes (`node:`, `node-prepare:`, per-node pools), on
    /// the time of day (maintenance) or that have none (conflicts, placement). For a rule
    /// with `windows` it is the loosest number the rule ever sets (so a bound computed
    /// from it holds at every hour); the engine applies the number of the hour.
    pub fn limit_in(&self, policy: &Policy) -> Option<u64> {
        match self {
            ScopeKey::Global => policy.loosest_global().map(u64::from),
            ScopeKey::GlobalPrepare => policy.global.prepare_queue.map(u64::from),
            ScopeKey::Limit { name, parts } => {
                let limit = policy.limits.iter().find(|l| &l.name == name)?;
                let values: Vec<String> = parts.iter().map(|(_, v)| v.clone()).collect();
                limit.loosest_for(&values).map(u64::from)
            }
            ScopeKey::Pool(pool) => policy.resources.get(pool).copied(),
            ScopeKey::PoolValue { pool, .. } => policy.value_pools.get(pool).map(|p| p.capacity),
            _ => None,
        }
    }
}

fn per_parts(job: &Job, per: &[PerKey]) -> Option<Vec<(String, String)>> {
    per.iter()
        .map(|k| {
            job.key_value(k.name())
                .map(|v| (k.name().to_string(), v.to_string()))
        })
        .collect()
}

fn matches(job: &Job, sel: &Selector) -> bool {
    sel.matches(|k| job.key_value(k))
}

/// See [`Policy::scopes_of`].
pub(crate) fn scopes_of(policy: &Policy, job: &Job) -> JobScopes {
    let coordinator = policy.is_coordinator(&job.kind);
    let mut common: Vec<ScopeUse> = Vec::new();
    let mut push = |key: ScopeKey, take: u64, check: Check| {
        if !common.iter().any(|u| u.key == key) {
            common.push(ScopeUse { key, take, check });
        }
    };
    let global = policy.global.max_running.is_some() || !policy.global.windows.is_empty();
    if !coordinator && global {
        push(ScopeKey::Global, 1, Check::Fits);
    }
    for limit in &policy.limits {
        let applies = match &limit.matcher {
            Some(m) if coordinator => m.names_value("kind", &job.kind) && matches(job, m),
            Some(m) => matches(job, m),
            None => !coordinator,
        };
        if let Some(parts) = applies.then(|| per_parts(job, &limit.per)).flatten() {
            let name = limit.name.clone();
            push(ScopeKey::Limit { name, parts }, 1, Check::Fits);
        }
    }
    let mut node_cost = Vec::new();
    if !coordinator {
        for (pool, &amount) in job.cost.iter().filter(|(_, &a)| a > 0) {
            if policy.resources.contains_key(pool) {
                push(ScopeKey::Pool(pool.clone()), amount, Check::Fits);
            } else if let Some(vp) = policy.value_pools.get(pool) {
                // Like a `[[limit]]` with `per`: a job without the keys takes nothing.
                if let Some(parts) = per_parts(job, &vp.per) {
                    let pool = pool.clone();
                    push(ScopeKey::PoolValue { pool, parts }, amount, Check::Fits);
                }
            } else {
                node_cost.push((pool.clone(), amount));
            }
        }
    }
    for (index, conflict) in policy.conflicts.iter().enumerate() {
        conflict_scopes(job, index, conflict, &mut push);
    }
    // Coordinator kinds too: a maintenance window holds every job it matches.
    for m in &policy.maintenance {
        if m.matcher.as_ref().is_none_or(|sel| matches(job, sel)) {
            push(ScopeKey::Maintenance(m.name.clone()), 1, Check::Fits);
        }
    }
    let prepare = (job.two_stage && !coordinator && policy.global.prepare_queue.is_some())
        .then_some(ScopeKey::GlobalPrepare);
    JobScopes {
        common,
        prepare,
        node_cost,
    }
}

/// The scopes one conflict rule gives `job` (none when it does not apply): its key, and
/// with `overlap` the per-value scopes plus the "every holder" (`<attr>=`) and "star holder"
/// (`<attr>=*`) counters.
///
/// With `exclusive`, every one of those scopes gets a twin that counts exclusive holders
/// only (`conflict-exclusive:..`). An exclusive job checks the every-holder scopes free
/// and takes the twins; a shared job takes the every-holder scopes and checks the twins
/// free. So two shared jobs never meet on a scope one of them checks free, and an
/// exclusive job meets everyone. In every case what a job *takes* from a rule is exactly
/// what a job it conflicts with checks free (reservations rely on it, `engine/reserve.rs`).
fn conflict_scopes(
    job: &Job,
    index: usize,
    conflict: &crate::policy::Conflict,
    push: &mut impl FnMut(ScopeKey, u64, Check),
) {
    if conflict.matcher.as_ref().is_some_and(|m| !matches(job, m)) {
        return;
    }
    let Some(parts) = per_parts(job, &conflict.keys) else {
        return;
    };
    // `None`: the rule has no `exclusive`, everyone needs the key alone (no twins).
    let alone = conflict.exclusive.as_ref().map(|m| matches(job, m));
    let mut use_key = |overlap: Option<(String, String)>, free: bool, take: u64| {
        let key = |exclusive| ScopeKey::Conflict {
            index,
            parts: parts.clone(),
            overlap: overlap.clone(),
            exclusive,
        };
        let check = |free| if free { Check::Free } else { Check::Fits };
        match alone {
            None => push(key(false), take, check(free)),
            // Exclusive: as without `exclusive`, and it takes the twin where it takes.
            Some(true) => {
                push(key(false), take, check(free));
                if take > 0 {
                    push(key(true), take, Check::Fits);
                }
            }
            // Shared: takes the every-holder scope where it takes, and needs the twin
            // (the exclusive holders) free where it would need the key free.
            Some(false) => {
                if take > 0 {
                    push(key(false), take, Check::Fits);
                }
                if free {
                    push(key(true), 0, Check::Free);
                }
            }
        }
    };
    let Some(attr) = &conflict.overlap else {
        use_key(None, true, 1);
        return;
    };
    let Some(list) = job.attrs.get(attr) else {
        return;
    };
    let scope = |v: &str| Some((attr.clone(), v.to_string()));
    // `<attr>=` (empty value) counts every holder, `<attr>=*` the star holders.
    let values: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return;
    }
    if values.contains(&"*") {
        use_key(scope(""), true, 1);
        use_key(scope("*"), false, 1);
    } else {
        use_key(scope(""), false, 1);
        use_key(scope("*"), true, 0);
        for v in values {
            use_key(scope(v), true, 1);
        }
    }
}

/// Interning table: key <-> dense id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interner {
    ids: HashMap<ScopeKey, ScopeId>,
    keys: Vec<ScopeKey>,
}

impl Interner {
    /// The id of a key, interning it on first use.
    pub fn intern(&mut self, key: ScopeKey) -> ScopeId {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.keys.len() as ScopeId;
        self.keys.push(key.clone());
        self.ids.insert(key, id);
        id
    }

    /// The id of a key already interned.
    pub fn get(&self, key: &ScopeKey) -> Option<ScopeId> {
        self.ids.get(key).copied()
    }

    /// The key of an id.
    pub fn key(&self, id: ScopeId) -> &ScopeKey {
        &self.keys[id as usize]
    }

    /// Number of interned scopes.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_policy_md() {
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        let cases = [
            (ScopeKey::Global, "global"),
            (ScopeKey::GlobalPrepare, "global-prepare"),
            (
                ScopeKey::Limit {
                    name: "restores".into(),
                    parts: vec![],
                },
                "limit:restores",
            ),
            (
                ScopeKey::Limit {
                    name: "per-datastore".into(),
                    parts: vec![p("datastore", "ds1")],
                },
                "limit:per-datastore[datastore=ds1]",
            ),
            (ScopeKey::Node("worker-3".into()), "node:worker-3"),
            (
                ScopeKey::NodePrepare("worker-3".into()),
                "node-prepare:worker-3",
            ),
            (ScopeKey::Pool("threads".into()), "pool:threads"),
            (
                ScopeKey::NodePool {
                    pool: "nvme".into(),
                    node: "n1".into(),
                },
                "pool:nvme@n1",
            ),
            (
                ScopeKey::Conflict {
                    index: 0,
                    parts: vec![p("datastore", "ds1"), p("group", "vm/100")],
                    overlap: None,
                    exclusive: false,
                },
                "conflict:datastore=ds1,group=vm/100",
            ),
            (
                ScopeKey::Conflict {
                    index: 1,
                    parts: vec![p("repo", "main")],
                    overlap: None,
                    exclusive: true,
                },
                "conflict-exclusive:repo=main",
            ),
            (
                ScopeKey::PoolValue {
                    pool: "repo-io".into(),
                    parts: vec![p("repo", "main")],
                },
                "pool:repo-io[repo=main]",
            ),
            (
                ScopeKey::Maintenance("ds1-fsck".into()),
                "maintenance:ds1-fsck",
            ),
        ];
        for (key, name) in cases {
            assert_eq!(key.to_string(), name);
        }
    }
}
