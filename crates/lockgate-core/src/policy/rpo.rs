//! The validated form of `[[rpo]]` (docs `policy.md`, "RPO rules"): which jobs a rule
//! counts and which value of the rule a job belongs to.
//!
//! Invariants (given by validation): names are unique and valid scope names (a derived
//! name is `match` without whitespace and the `per` keys, `kind=backup:group`); `per` keys
//! are listed once; `max_age` is greater than zero.
//!
//! The ages themselves are not kept here: the policy has no clock and no memory. The
//! server tracks each value's last success (`lockgate-server` `rpo/`).

use super::PerKey;
use crate::job::Job;
use crate::selector::Selector;
use std::time::Duration;

/// One `[[rpo]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpoRule {
    /// Unique name (given, or derived from `match` and `per`).
    pub name: String,
    /// Which jobs count; `None`: every job.
    pub matcher: Option<Selector>,
    /// The keys whose values each get their own age (empty: one value for the rule).
    pub per: Vec<PerKey>,
    /// Past this age of its last success, a value is overdue.
    pub max_age: Duration,
}

impl RpoRule {
    /// The value of this rule `job` belongs to: its `per` values as `(key, value)` pairs in
    /// `per` order. `None` when the rule does not count the job (its `match` does not
    /// select it, or it lacks one of the keys).
    pub fn value_of(&self, job: &Job) -> Option<Vec<(String, String)>> {
        if let Some(m) = &self.matcher {
            if !m.matches(|k| job.key_value(k)) {
                return None;
            }
        }
        self.per
            .iter()
            .map(|k| {
                job.key_value(k.name())
                    .map(|v| (k.name().to_string(), v.to_string()))
            })
            .collect()
    }

    /// The name a rule without `name` gets: its `match` without whitespace (`all` without
    /// one), a colon, and its `per` keys comma-joined (`kind=backup:group`).
    pub fn derived_name(matcher: Option<&str>, per: &[String]) -> String {
        let m: String = matcher
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let m = if m.is_empty() { "all".to_string() } else { m };
        if per.is_empty() {
            m
        } else {
            format!("{m}:{}", per.join(","))
        }
    }
}
