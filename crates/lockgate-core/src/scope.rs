//! Scopes: every counted thing, with one name used everywhere (policy.md, "Scope names").
//!
//! `global`, `global-prepare`, `limit:<name>` or `limit:<name>[k=v,k2=v2]`, `node:<name>`,
//! `node-prepare:<name>`, `pool:<name>` or `pool:<name>@<node>`, `conflict:<k=v,..>`.
//! Inside the engine a scope is interned to a dense [`ScopeId`] so counters and waiter sets
//! are vector lookups, not string hashing, on the admission path.

use std::collections::HashMap;
use std::fmt;

/// Dense index of an interned scope.
pub type ScopeId = u32;

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
    },
    /// Placement of movable jobs with one selector: a job waits here when no eligible node
    /// has room.
    Placement(String),
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
            ScopeKey::Conflict { parts, overlap, .. } => {
                f.write_str("conflict:")?;
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
        }
    }
}

/// Interning table: key <-> dense id.
#[derive(Debug, Clone, Default)]
pub struct Interner {
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

    /// Whether nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
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
                },
                "conflict:datastore=ds1,group=vm/100",
            ),
        ];
        for (key, name) in cases {
            assert_eq!(key.to_string(), name);
        }
    }
}
