//! Automatic limits in the engine: the number a controller (`crate::auto`, run by the
//! server) set for each partition of a `[[limit]]` whose `max` is a range.
//!
//! Invariants:
//! - the number of such a scope is the one set here, within the range (`min` until one is
//!   set), or a smaller active window's; a partition with a fixed `values` entry keeps it;
//! - setting a number updates the scope in place and wakes it, as a window boundary does: a
//!   raised number admits at once, a lowered one leaves the scope over its limit to drain,
//!   stopping nothing;
//! - a node whose rule has a `guard` runs at most the slots its guard leaves it
//!   ([`Engine::set_node_guard`], never more than the rule's number): fewer drain, as a
//!   lowered number does;
//! - the numbers survive a policy change (numbers outside a changed range are brought into
//!   it; those of a rule no longer automatic are ignored) and travel with [`super::Shared`],
//!   so forecasts count with them.

use super::Engine;
use crate::auto::{AutoConfig, GuardLimits};
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use std::time::Duration;

/// One scope of an automatic limit, as the server's controller needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoScope {
    /// The scope's name (`limit:per-datastore[datastore=ds1]`).
    pub scope: String,
    /// The range and goal.
    pub config: AutoConfig,
    /// How often the number is judged.
    pub interval: Duration,
    /// Its number now (a smaller active window's, if one holds).
    pub limit: u32,
    /// Units in use.
    pub used: u64,
}

impl Engine {
    /// The automatic number of a `limit:` scope: set, or the range's `min`; `None` for a
    /// scope of a rule that is not automatic or a partition with a fixed value.
    pub(crate) fn auto_number(&self, key: &ScopeKey) -> Option<u32> {
        let config = self.auto_config(key)?;
        let set = || self.auto.get(&key.to_string()).copied();
        let n = config.pin.or_else(set).unwrap_or(config.min);
        Some(n.clamp(config.min, config.max))
    }

    fn auto_config(&self, key: &ScopeKey) -> Option<AutoConfig> {
        let ScopeKey::Limit { name, parts } = key else {
            return None;
        };
        let limit = self.policy.limits.iter().find(|l| &l.name == name)?;
        // Checked first, so that a limit without one costs no allocation on the hot path.
        let auto = limit.auto?;
        if !limit.values.is_empty() {
            let values: Vec<String> = parts.iter().map(|(_, v)| v.clone()).collect();
            if limit.values.contains_key(&values) {
                return None;
            }
        }
        Some(auto)
    }

    /// The scopes of automatic limits that jobs need now, with their numbers and use.
    pub fn auto_scopes(&self) -> Vec<AutoScope> {
        (0..self.scopes.states.len() as ScopeId)
            .filter_map(|id| {
                let key = self.scopes.interner.key(id);
                let config = self.auto_config(key)?;
                let ScopeKey::Limit { name, .. } = key else {
                    return None;
                };
                let limit = self.policy.limits.iter().find(|l| &l.name == name)?;
                let state = &self.scopes.states[id as usize];
                Some(AutoScope {
                    scope: key.to_string(),
                    config,
                    interval: limit.auto_interval,
                    limit: state.limit.map_or(config.max, |l| l as u32),
                    used: state.used,
                })
            })
            .collect()
    }

    /// The guard of the rule that sets node `name`'s number, with that number.
    pub fn node_guard(&self, name: &str) -> Option<(GuardLimits, u32)> {
        let node = self.nodes.get(name)?;
        let (number, rule) = self.policy.node_number(&node.labels);
        let guard = self.policy.nodes.rules.get(rule?)?.guard?;
        Some((guard, number?))
    }

    /// The slots node `name`'s guard leaves it now (`None`: the rule's number holds).
    pub fn node_guarded(&self, name: &str) -> Option<u32> {
        self.guards.get(name).copied()
    }

    /// Node `name`'s number under its guard: the smaller of the rule's and the guard's.
    pub(crate) fn guarded_number(&self, name: &str) -> Option<u32> {
        let number = self.nodes.get(name)?.number;
        match (number, self.guards.get(name)) {
            (Some(n), Some(&g)) => Some(n.min(g)),
            (n, _) => n,
        }
    }

    /// Leaves node `name` `slots` slots (`None`: the rule's number again) and admits what
    /// that allows; a node without a guarded rule is left alone (false).
    pub fn set_node_guard(&mut self, name: &str, slots: Option<u32>, now: Timestamp) -> bool {
        if self.node_guard(name).is_none() {
            return false;
        }
        match slots {
            Some(s) => self.guards.insert(name.to_string(), s),
            None => self.guards.remove(name),
        };
        self.node_changed(name);
        self.run_pass(now);
        true
    }

    /// The slots guards leave nodes now, by node (to keep across a restart).
    pub fn node_guards(&self) -> &std::collections::BTreeMap<String, u32> {
        &self.guards
    }

    /// Takes back what was learned before a restart (the numbers of automatic scopes, the
    /// slots guards left nodes) and applies it to every scope jobs need now; numbers are
    /// brought within their ranges as they are used.
    pub fn restore_learned(
        &mut self,
        auto: std::collections::BTreeMap<String, u32>,
        guards: std::collections::BTreeMap<String, u32>,
        now: Timestamp,
    ) {
        self.auto = auto;
        self.guards = guards;
        for id in 0..self.scopes.states.len() as ScopeId {
            let key = self.scopes.interner.key(id).clone();
            if !matches!(
                key,
                ScopeKey::Limit { .. } | ScopeKey::Node(_) | ScopeKey::NodePrepare(_)
            ) {
                continue;
            }
            let limit = self.scope_limit(&key);
            if self.scopes.states[id as usize].limit != limit {
                self.scopes.states[id as usize].limit = limit;
                self.wake(id, None);
            }
        }
        self.run_pass(now);
    }

    /// The numbers set so far, by scope name (to keep across a restart).
    pub fn auto_limits(&self) -> &std::collections::BTreeMap<String, u32> {
        &self.auto
    }

    /// Sets the number of the automatic scope `scope` to `value` (brought within its
    /// range) and admits what the change allows. `None` when `scope` is not a scope of an
    /// automatic limit that jobs need now (nothing changes); else the number set.
    pub fn set_auto_limit(&mut self, scope: &str, value: u32, now: Timestamp) -> Option<u32> {
        let id = (0..self.scopes.states.len() as ScopeId)
            .find(|&id| self.scopes.interner.key(id).to_string() == scope)?;
        let key = self.scopes.interner.key(id).clone();
        let config = self.auto_config(&key)?;
        let value = value.clamp(config.min, config.max);
        self.auto.insert(scope.to_string(), value);
        let limit = self.scope_limit(&key);
        if self.scopes.states[id as usize].limit != limit {
            self.scopes.states[id as usize].limit = limit;
            self.wake(id, None);
            self.run_pass(now);
        }
        Some(value)
    }
}
