//! The dashboard's loop operations: the overview, read from the engine in one pass.
//!
//! Cost: O(live jobs x scopes per job) for the split by state, plus O(scopes + nodes) for
//! the usage; no store read. The engine's own `used` count is reported beside the split, so
//! a page can show both and they agree by construction (a job holds its scopes from
//! (prepare) admission to its end; `global-prepare` only while it prepares or waits to run).

use super::UiOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{Role, UiOldest, UiOverview, UiScope};
use lockgate_core::{JobState, Timestamp};
use std::collections::{BTreeMap, HashMap};

impl Loop {
    /// Applies one dashboard operation.
    pub(crate) fn ui_op(&mut self, p: &Principal, op: UiOp, now: Timestamp) {
        match op {
            UiOp::Overview(reply) => {
                let r = self.ui_overview(p, now);
                self.answer(reply, r);
            }
            UiOp::Occupancy(q, reply) => {
                let r = self.ui_occupancy(p, q, now);
                self.answer(reply, r);
            }
        }
    }

    fn ui_overview(&mut self, p: &Principal, now: Timestamp) -> Result<UiOverview, ApiError> {
        p.require(
            &[Role::Admin, Role::Viewer, Role::Submitter],
            "read the overview",
        )?;
        // scope -> [running, prepared, preparing] units.
        let mut split: HashMap<String, [u64; 3]> = HashMap::new();
        let mut states: BTreeMap<String, usize> = JobState::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| (s.as_str().to_string(), 0))
            .collect();
        let mut queued_by_kind: BTreeMap<String, usize> = BTreeMap::new();
        let mut queued_by_owner: BTreeMap<String, usize> = BTreeMap::new();
        let mut oldest: Option<(Timestamp, &lockgate_core::Job)> = None;
        let policy = self.engine.policy();
        for job in self.engine.jobs() {
            // A submitter's queue is its own, as `GET /v1/jobs` shows it.
            let own = p.role != Role::Submitter || job.owner == p.name;
            if own {
                *states.entry(job.state.as_str().to_string()).or_default() += 1;
            }
            let slot = match job.state {
                JobState::Queued => {
                    if own {
                        *queued_by_kind.entry(job.kind.clone()).or_default() += 1;
                        *queued_by_owner.entry(job.owner.clone()).or_default() += 1;
                        if oldest.is_none_or(|(t, o)| (job.queued_at, job.id) < (t, o.id)) {
                            oldest = Some((job.queued_at, job));
                        }
                    }
                    continue;
                }
                JobState::Running => 0,
                JobState::Prepared => 1,
                JobState::Preparing => 2,
                _ => continue,
            };
            let scopes = policy.scopes_of(job);
            for u in scopes.common.iter().filter(|u| u.take > 0) {
                split.entry(u.key.to_string()).or_default()[slot] += u.take;
            }
            if let (Some(k), true) = (&scopes.prepare, slot > 0) {
                split.entry(k.to_string()).or_default()[slot] += 1;
            }
        }
        // A node's own scopes: its run slots are held by running jobs, its prepare bound
        // by preparing and prepared ones (the node's own counters).
        for n in self.engine.nodes() {
            let run = split.entry(format!("node:{}", n.name)).or_default();
            run[0] += u64::from(n.running);
            let prep = split.entry(format!("node-prepare:{}", n.name)).or_default();
            prep[1] += u64::from(n.prepared);
            prep[2] += u64::from(n.preparing);
        }
        let mut scopes: Vec<UiScope> = self
            .engine
            .scope_usage()
            .into_iter()
            .filter(|u| u.limit.is_some() || u.used > 0)
            .map(|u| {
                let [running, prepared, preparing] =
                    split.get(&u.scope).copied().unwrap_or_default();
                UiScope {
                    over_limit: u.limit.is_some_and(|l| u.used > l),
                    scope: u.scope,
                    rule: u.rule,
                    used: u.used,
                    running,
                    prepared,
                    preparing,
                    limit: u.limit,
                    peak: u.peak,
                }
            })
            .collect();
        scopes.sort_by(|a, b| {
            (
                scope_rank(&a.rule),
                &a.rule,
                std::cmp::Reverse(a.used),
                &a.scope,
            )
                .cmp(&(
                    scope_rank(&b.rule),
                    &b.rule,
                    std::cmp::Reverse(b.used),
                    &b.scope,
                ))
        });
        let scopes_omitted = scopes.len().saturating_sub(UiOverview::MAX_SCOPES);
        scopes.truncate(UiOverview::MAX_SCOPES);
        let oldest_waiting = oldest.map(|(t, j)| UiOldest {
            id: j.id,
            kind: j.kind.clone(),
            owner: j.owner.clone(),
            queued_at: lockgate_api::time::format(t),
            waited_s: now.0.saturating_sub(t.0) as f64 / 1000.0,
        });
        Ok(UiOverview {
            scopes,
            scopes_omitted,
            states,
            queued_by_kind,
            queued_by_owner,
            oldest_waiting,
            at: lockgate_api::time::format(now),
            last_seq: self.seq,
        })
    }
}

/// The global scopes first, conflicts last, the policy's limits and pools between.
fn scope_rank(rule: &str) -> u8 {
    if rule.starts_with("global") {
        0
    } else if rule.starts_with("conflict") {
        2
    } else {
        1
    }
}
