//! Turning the engine's holding conditions into the reasons `explain` shows.

use super::admission::{Block, BlockKind};
use super::Engine;
use crate::explain::{rfc3339, Reason};
use crate::job::{JobId, JobState};
use crate::scope::ScopeKey;
use crate::time::Timestamp;

impl Engine {
    /// Every condition holding a queued job.
    pub(crate) fn evaluate_all(&mut self, id: JobId, now: Timestamp) -> Result<(), Vec<Block>> {
        self.evaluate(id, now, true).map(|_| ())
    }

    /// In strict order, the better-ranked blocked job that holds `id` back.
    pub(crate) fn strict_blocker(&mut self, id: JobId, now: Timestamp) -> Option<JobId> {
        if !self.policy.queue.strict {
            return None;
        }
        let mine = self.eff_rank(id);
        let mut queued: Vec<_> = self
            .entries
            .values()
            .filter(|e| e.job.state == JobState::Queued && e.class.is_some())
            .map(|e| e.job.id)
            .collect();
        queued.sort_by_key(|&j| self.eff_rank(j));
        for j in queued {
            if j == id || self.eff_rank(j) >= mine {
                return None;
            }
            if self.evaluate(j, now, false).is_err() {
                return Some(j);
            }
        }
        None
    }

    /// 1-based position among queued jobs that compete with `id` for a scope.
    pub(crate) fn position(&self, id: JobId) -> usize {
        let me = &self.entries[&id];
        let mine = self.eff_rank(id);
        let competes = |other: &super::Entry| {
            other
                .needs
                .common
                .iter()
                .any(|n| me.needs.common.iter().any(|m| m.scope == n.scope))
                || (me.job.placement.pinned().is_some()
                    && me.job.placement.pinned() == other.job.placement.pinned())
                || (me.placement.is_some() && me.placement == other.placement)
        };
        1 + self
            .entries
            .values()
            .filter(|e| e.job.state == JobState::Queued && e.job.id != id)
            .filter(|e| self.eff_rank(e.job.id) < mine && competes(e))
            .count()
    }

    fn node_rule_text(&self, node: &str) -> String {
        match self.nodes.get(node).and_then(|n| n.rule.as_ref()) {
            Some(rule) => format!(" (rule \"{rule}\")"),
            None => String::new(),
        }
    }

    /// One condition in words, with its numbers.
    pub(crate) fn describe(&self, id: JobId, block: Block) -> Reason {
        let key = block.scope.map(|s| self.interner.key(s).clone());
        let state = block.scope.map(|s| &self.scopes[s as usize]);
        let count = state.map(|s| s.used);
        let limit = state.and_then(|s| s.limit);
        let mut holders: Vec<JobId> = state
            .map(|s| s.holders.iter().copied().collect())
            .unwrap_or_default();
        let name = key.as_ref().map(|k| k.to_string()).unwrap_or_default();
        let node = match &key {
            Some(ScopeKey::Node(n) | ScopeKey::NodePrepare(n)) => n.clone(),
            _ => String::new(),
        };
        let used = count.unwrap_or(0);
        let (kind, text) = match &block.kind {
            BlockKind::Capacity => match &key {
                Some(ScopeKey::Pool(_) | ScopeKey::NodePool { .. }) => {
                    let free = limit.unwrap_or(0).saturating_sub(used);
                    ("capacity", format!("{name}: needs {}, {free} free", block.need))
                }
                _ => ("capacity", format!("{name}: {used}/{} ({})", limit.unwrap_or(0), crate::explain::job_list(&holders))),
            },
            BlockKind::Zero => ("zero", format!("{name} is 0")),
            BlockKind::OverLimit => (
                "over_limit",
                format!("{name}: {used}/{} over limit after a policy change; admits nothing until it drains", limit.unwrap_or(0)),
            ),
            BlockKind::Conflict => {
                let what = match &key {
                    Some(ScopeKey::Conflict { parts, overlap, .. }) => {
                        let mut kv: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        if let Some((k, v)) = overlap {
                            kv.push(if v.is_empty() || v == "*" { format!("{k} (all)") } else { format!("{k}={v}") });
                        }
                        kv.join(", ")
                    }
                    _ => name.clone(),
                };
                let who = holders.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(", ");
                let verb = if holders.len() == 1 { "holds" } else { "hold" };
                let word = if holders.len() == 1 { "job" } else { "jobs" };
                ("conflict", format!("conflict: {word} {who} {verb} {what}"))
            }
            BlockKind::Reserved(r) => {
                holders = vec![*r];
                ("reserved", format!("{name}: reserved for job {r}"))
            }
            BlockKind::NodeMissing => ("node_missing", format!("node:{node} is not registered")),
            BlockKind::NodeLost => ("node_lost", format!("node:{node} is lost (its agent is silent)")),
            BlockKind::NodeCordoned => ("cordoned", format!("node:{node} is cordoned")),
            BlockKind::NoAgent => {
                let kind = self.entries.get(&id).map(|e| e.job.kind.clone()).unwrap_or_default();
                ("no_agent", format!("node:{node}: its agent has no handler for kind {kind}"))
            }
            BlockKind::NodeZero => ("zero", format!("node:{node} is 0{}", self.node_rule_text(&node))),
            BlockKind::NodeFull => (
                "capacity",
                format!("node:{node}: {used}/{}{}", limit.unwrap_or(0), self.node_rule_text(&node)),
            ),
            BlockKind::NodePrepareFull => (
                "capacity",
                format!("node-prepare:{node}: {used}/{} running, preparing or prepared", limit.unwrap_or(0)),
            ),
            BlockKind::NoEligibleNode | BlockKind::NoRoom => {
                let pk = block.scope.and_then(|s| self.placement_keys.get(&s));
                let sel = pk.map(|k| k.selector.text().to_string()).unwrap_or_default();
                let agent = pk
                    .and_then(|k| k.agent_kind.clone())
                    .map(|k| format!(" with an agent for kind {k}"))
                    .unwrap_or_default();
                let eligible = block.scope.map(|s| self.placement_candidates(s).count()).unwrap_or(0);
                if block.kind == BlockKind::NoRoom {
                    ("no_room", format!("no room: all {eligible} eligible nodes for selector \"{sel}\" are full"))
                } else {
                    ("no_eligible_node", format!("no eligible node: selector \"{sel}\" matches 0 ready nodes{agent}"))
                }
            }
            BlockKind::NotBefore(t) => ("not_before", format!("not before {}", rfc3339(*t))),
        };
        let scope = key
            .filter(|k| !matches!(k, ScopeKey::Placement(_)))
            .map(|k| k.to_string());
        Reason {
            scope,
            kind: kind.into(),
            count,
            limit,
            holders,
            text,
        }
    }
}
