//! Explain: every condition that holds a queued job, with its numbers (policy.md, Explain).
//!
//! Built on the same [`Engine::evaluate`](crate::engine) the admission pass uses, so an
//! explanation can never disagree with a decision. Cost O(n): the position counts the
//! queued jobs ranked ahead that compete for at least one of the same scopes.

use crate::engine::Engine;
use crate::job::{JobId, JobState};
use crate::time::Timestamp;
use serde::Serialize;

/// One holding condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    /// Scope name, when the condition is a scope (`limit:per-datastore[datastore=ds1]`).
    pub scope: Option<String>,
    /// `capacity`, `zero`, `over_limit`, `conflict`, `reserved`, `node_missing`,
    /// `node_lost`, `cordoned`, `no_agent`, `no_eligible_node`, `no_room`, `not_before`
    /// or `strict`.
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
pub fn rfc3339(t: Timestamp) -> String {
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
pub fn job_list(ids: &[JobId]) -> String {
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
        let mut reasons: Vec<Reason> = match self.evaluate_all(id, now) {
            Ok(()) => Vec::new(),
            Err(blocks) => blocks.into_iter().map(|b| self.describe(id, b)).collect(),
        };
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
