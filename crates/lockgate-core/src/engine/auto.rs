//! Automatic limits in the engine: the number a controller (`crate::auto`, run by the
//! server) set for each partition of a `[[limit]]` whose `max` is a range.
//!
//! Invariants:
//! - the number of such a scope is the one set here, within the range (`min` until one is
//!   set), or a smaller active window's; a partition with a fixed `values` entry keeps it;
//! - setting a number updates the scope in place and wakes it, as a window boundary does: a
//!   raised number admits at once, a lowered one leaves the scope over its limit to drain,
//!   stopping nothing;
//! - the numbers survive a policy change (numbers outside a changed range are brought into
//!   it; those of a rule no longer automatic are ignored) and travel with [`super::Shared`],
//!   so forecasts count with them.

use super::Engine;
use crate::auto::AutoConfig;
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
        let set = self.auto.get(&key.to_string()).copied();
        Some(set.unwrap_or(config.min).clamp(config.min, config.max))
    }

    fn auto_config(&self, key: &ScopeKey) -> Option<AutoConfig> {
        let ScopeKey::Limit { name, parts } = key else {
            return None;
        };
        let limit = self.policy.limits.iter().find(|l| &l.name == name)?;
        let values: Vec<String> = parts.iter().map(|(_, v)| v.clone()).collect();
        if limit.values.contains_key(&values) {
            return None;
        }
        limit.auto
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
