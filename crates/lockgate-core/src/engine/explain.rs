//! Explain: every condition that holds a queued job, with its numbers (policy.md, Explain).
//!
//! Built on the same evaluation the admission pass uses (`Engine::evaluate` in
//! `admission.rs`), so an explanation can never disagree with a decision: every
//! `Block` it returns is described here in words ([`Reason`]). Cost O(n): the position
//! counts the queued jobs ranked ahead that compete for at least one of the same scopes.

use super::admission::{Block, BlockKind};
use super::{Engine, Entry};
use crate::job::{JobId, JobState};
use crate::scope::ScopeKey;
use crate::time::Timestamp;
use serde::Serialize;

/// One holding condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    /// Scope name, when the condition is a scope (`limit:per-datastore[datastore=ds1]`).
    pub scope: Option<String>,
    /// `capacity`, `zero`, `over_limit`, `conflict`, `reserved`, `node_missing`,
    /// `node_lost`, `cordoned`, `no_agent`, `no_eligible_node`, `no_room`, `not_before`,
    /// `strict`, `exclusive_waiting` (an exclusive job ranked above waits for the key),
    /// `held` (room held for a preemptor), `preempting` (the victims this preemptor waits
    /// for), `window` (a limit's time window sets the number), `maintenance`, `paused`
    /// (scope `pause:<id>`), `after` or `after_ok` (scope `after:<id>`).
    pub kind: String,
    /// Units in use in the scope.
    pub count: Option<u64>,
    /// The scope's limit.
    pub limit: Option<u64>,
    /// Jobs holding the scope (or the job it is reserved for, or ahead in strict order).
    pub holders: Vec<JobId>,
    /// The condition in words, with the numbers.
    pub text: String,
}

/// Why a job waits, or what it is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// 1-based position among queued jobs that compete with it (0 when not queued).
    pub position: usize,
    /// Effective priority now.
    pub effective_priority: f64,
    /// Every holding condition.
    pub reasons: Vec<Reason>,
    /// All of it in one line.
    pub text: String,
}

/// Formats a timestamp (ms since the Unix epoch) as RFC 3339 UTC, second precision.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let secs = t.0 / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = crate::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `job 41` or `jobs 41, 57` (at most eight listed).
fn job_list(ids: &[JobId]) -> String {
    let shown: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
    let more = if ids.len() > 8 {
        format!(", +{} more", ids.len() - 8)
    } else {
        String::new()
    };
    let word = if ids.len() == 1 { "job" } else { "jobs" };
    format!("{word} {}{more}", shown.join(", "))
}

impl Engine {
    /// Explains a live job at `now`; `None` for a job the engine no longer holds.
    pub fn explain(&mut self, id: JobId, now: Timestamp) -> Option<Explanation> {
        let job = self.job(id)?.clone();
        if job.state != JobState::Queued {
            let text = match (&job.state, job.node()) {
                (s, Some(n)) if s.is_admitted() => format!("{s} on node {n}"),
                (s, _) if s.is_admitted() => format!("{s}"),
                (s, _) => match job.retry_at {
                    Some(at) => format!(
                        "{s}; retry {} of the kind's retries at {}",
                        job.attempt,
                        rfc3339(at)
                    ),
                    None => format!("{s}"),
                },
            };
            return Some(Explanation {
                position: 0,
                effective_priority: job.priority as f64,
                reasons: vec![],
                text,
            });
        }
        let effective_priority = self.effective_priority(id, now);
        let mut reasons: Vec<Reason> = self.hold_reasons(id);
        if let Err(blocks) = self.evaluate_all(id, now) {
            reasons.extend(blocks.into_iter().map(|b| self.describe(id, b)));
        }
        if let Some(victims) = self.preempt_victims(id).filter(|v| !v.is_empty()) {
            reasons.push(Reason {
                scope: None,
                kind: "preempting".into(),
                count: None,
                limit: None,
                text: format!("preempting: waiting for {} to stop", job_list(&victims)),
                holders: victims,
            });
        }
        if let Some(ahead) = self.strict_blocker(id, now) {
            reasons.push(Reason {
                scope: None,
                kind: "strict".into(),
                count: None,
                limit: None,
                holders: vec![ahead],
                text: format!("strict order: job {ahead} is ahead and waiting"),
            });
        }
        let position = self.position(id);
        let mut text = format!(
            "queued, {} in line, effective priority {effective_priority:.2}",
            ordinal(position)
        );
        if let Some(terms) = self.priority_terms(&job, now) {
            text.push_str(&format!(" ({terms})"));
        }
        if let Some(w) = self.window_place(id) {
            text.push_str(&format!(
                "; window plan: {} of {} at its priority, planned start {}",
                ordinal(w.place),
                w.of,
                rfc3339(w.planned_start)
            ));
            match w.expected_run {
                Some(run) => text.push_str(&format!(", expected run {}s", run.as_secs())),
                None => text.push_str(", no expected run (by arrival)"),
            }
        }
        if reasons.is_empty() {
            text.push_str("; admissible now");
        } else {
            let parts: Vec<&str> = reasons.iter().map(|r| r.text.as_str()).collect();
            text.push_str("; ");
            text.push_str(&parts.join("; "));
        }
        Some(Explanation {
            position,
            effective_priority,
            reasons,
            text,
        })
    }
}

impl Engine {
    /// How the effective priority comes from the job's own, term by term as
    /// `effective_priority` adds them: `+` the waiting time over `[queue].aging`, `-` the
    /// fair-share term, the owner's running jobs over its weight. In ranks that term is
    /// `fair_term`: the same count times the aging scale, so each running job of a weight-1
    /// owner weighs as much as one `aging` of waiting. `None` when neither term applies.
    fn priority_terms(&self, job: &crate::job::Job, now: Timestamp) -> Option<String> {
        use crate::time::format_duration;
        use std::time::Duration;
        let mut parts = vec![format!("priority {}", job.priority)];
        let aging = self.policy.queue.aging;
        if let Some(a) = aging {
            let waited = now.since(job.queued_at);
            parts.push(format!(
                "+{:.2} for {} waiting at aging {}",
                waited as f64 / a.as_millis() as f64,
                format_duration(Duration::from_secs(waited / 1000)),
                format_duration(a)
            ));
        }
        let running = self.owner_running.get(&job.owner).copied().unwrap_or(0);
        if self.policy.queue.fair_share && running > 0 {
            let weight = self.policy.owner_weight(&job.owner);
            let scale = match aging {
                Some(a) => format!(", each worth {} of waiting", format_duration(a / weight)),
                None => String::new(),
            };
            parts.push(format!(
                "-{:.2} fair share: owner {:?} has {running} running at weight {weight}{scale}",
                running as f64 / f64::from(weight),
                job.owner
            ));
        }
        (parts.len() > 1).then(|| parts.join(", "))
    }

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
        let me = &self.entries.get(id);
        let mine = self.eff_rank(id);
        let competes = |other: &Entry| {
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
        if let Some(reason) = self.describe_window(&block) {
            return reason;
        }
        let key = block.scope.map(|s| self.scopes.interner.key(s).clone());
        let state = block.scope.map(|s| &self.scopes.states[s as usize]);
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
                Some(ScopeKey::Pool(_) | ScopeKey::NodePool { .. } | ScopeKey::PoolValue { .. }) => {
                    let free = limit.unwrap_or(0).saturating_sub(used);
                    ("capacity", format!("{name}: needs {}, {free} free", block.need))
                }
                _ => ("capacity", format!("{name}: {used}/{} ({})", limit.unwrap_or(0), job_list(&holders))),
            },
            BlockKind::Zero => ("zero", format!("{name} is 0")),
            BlockKind::OverLimit => (
                "over_limit",
                format!("{name}: {used}/{} over limit since its number was lowered; admits nothing until it drains", limit.unwrap_or(0)),
            ),
            BlockKind::Conflict => match self.shared_conflict_text(id, key.as_ref(), &holders) {
                Some(text) => ("conflict", text),
                None => ("conflict", conflict_text(key.as_ref(), &name, &self.holder_names(&holders))),
            },
            BlockKind::Reserved(r) => {
                holders = vec![*r];
                ("reserved", format!("{name}: reserved for job {r}"))
            }
            BlockKind::NodeMissing => ("node_missing", format!("node:{node} is not registered")),
            BlockKind::NodeLost => ("node_lost", format!("node:{node} is lost (its agent is silent)")),
            BlockKind::NodeCordoned => ("cordoned", format!("node:{node} is cordoned")),
            BlockKind::NoAgent => {
                let kind = self.entries.find(id).map(|e| e.job.kind.clone()).unwrap_or_default();
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
            BlockKind::NoEligibleNode | BlockKind::NoRoom => self.placement_text(&block),
            BlockKind::NotBefore(t) => ("not_before", format!("not before {}", rfc3339(*t))),
            BlockKind::ExclusiveWaiting(e) => {
                holders = vec![*e];
                ("exclusive_waiting", self.exclusive_waiting_text(id, *e, key.as_ref()))
            }
            BlockKind::HeldFor(p) if *p == id => {
                holders = self.preempt_victims(id).unwrap_or_default();
                ("preempting", format!("{name}: held for this job until {} stop", job_list(&holders)))
            }
            BlockKind::HeldFor(p) => {
                holders = vec![*p];
                ("held", format!("{name}: room held for job {p}, which preempts"))
            }
        };
        let scope = key
            .filter(|k| !matches!(k, ScopeKey::Placement(_)))
            .map(|k| super::explain_conflict::shown_key(&k).to_string());
        Reason {
            scope,
            kind: kind.into(),
            count,
            limit,
            holders,
            text,
        }
    }

    /// A placement block (`NoEligibleNode` or `NoRoom`): kind and text, from the job's
    /// placement key (selector, agent kind) and how many nodes are candidates.
    fn placement_text(&self, block: &Block) -> (&'static str, String) {
        let pk = block.scope.and_then(|s| self.placement.keys.get(&s));
        let sel = pk
            .map(|k| k.selector.text().to_string())
            .unwrap_or_default();
        let agent = pk
            .and_then(|k| k.agent_kind.clone())
            .map(|k| format!(" with an agent for kind {k}"))
            .unwrap_or_default();
        let eligible = block
            .scope
            .map(|s| self.placement_candidates(s).count())
            .unwrap_or(0);
        if block.kind == BlockKind::NoRoom {
            (
                "no_room",
                format!("no room: all {eligible} eligible nodes for selector \"{sel}\" are full"),
            )
        } else if sel.is_empty() && pk.is_some_and(|k| k.agent_kind.is_some()) {
            // Any node would do (a schedule's run by default): what is missing is an agent.
            let kind = pk.and_then(|k| k.agent_kind.as_deref()).unwrap_or_default();
            (
                "no_eligible_node",
                format!("no eligible node: no ready agent has a handler for kind {kind}"),
            )
        } else {
            (
                "no_eligible_node",
                format!("no eligible node: selector \"{sel}\" matches 0 ready nodes{agent}"),
            )
        }
    }
}

/// `conflict: job 41 holds datastore=ds1, vm (all)`: the holders (as
/// [`Engine::holder_names`] names them) and the conflict's attributes (`name` when the
/// key is not a conflict key).
fn conflict_text(key: Option<&ScopeKey>, name: &str, holders: &[String]) -> String {
    let what = match key {
        Some(ScopeKey::Conflict { parts, overlap, .. }) => {
            let mut kv: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if let Some((k, v)) = overlap {
                kv.push(if v.is_empty() || v == "*" {
                    format!("{k} (all)")
                } else {
                    format!("{k}={v}")
                });
            }
            kv.join(", ")
        }
        _ => name.to_string(),
    };
    let who = holders.join(", ");
    let verb = if holders.len() == 1 { "holds" } else { "hold" };
    let word = if holders.len() == 1 { "job" } else { "jobs" };
    format!("conflict: {word} {who} {verb} {what}")
}

/// `1st`, `2nd`, `3rd`, `4th`, ...
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(Timestamp(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(Timestamp(1_774_649_861_000)),
            "2026-03-27T22:17:41Z"
        );
        assert_eq!(rfc3339(Timestamp(951_782_400_000)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).to_vec();
        assert_eq!(
            got,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
        );
    }
}
