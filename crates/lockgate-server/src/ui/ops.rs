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
            UiOp::Throughput(reply) => {
                let r = p
                    .require(&[Role::Admin, Role::Viewer], "read the throughput history")
                    .map(|()| self.throughput_history.view());
                self.answer(reply, r);
            }
        }
    }

    fn ui_overview(&mut self, p: &Principal, now: Timestamp) -> Result<UiOverview, ApiError> {
        p.require(
            &[Role::Admin, Role::Viewer, Role::Submitter],
            "read the overview",
        )?;
        let t = self.ui_tally(p);
        let mut scopes = self.ui_scopes(&t.split);
        let scopes_omitted = scopes.len().saturating_sub(UiOverview::MAX_SCOPES);
        scopes.truncate(UiOverview::MAX_SCOPES);
        let oldest_waiting = t.oldest.map(|o| UiOldest {
            waited_s: now.0.saturating_sub(o.queued_at.0) as f64 / 1000.0,
            queued_at: lockgate_api::time::format(o.queued_at),
            ..o.view
        });
        Ok(UiOverview {
            scopes,
            scopes_omitted,
            states: t.states,
            queued_by_kind: t.queued_by_kind,
            queued_by_owner: t.queued_by_owner,
            oldest_waiting,
            at: lockgate_api::time::format(now),
            last_seq: self.seq,
        })
    }

    /// One pass over the live jobs (a submitter's queue is its own, as `GET /v1/jobs`
    /// shows it; the scope split counts every job, as the engine does).
    fn ui_tally(&self, p: &Principal) -> Tally {
        let mut t = Tally {
            states: JobState::ALL
                .iter()
                .filter(|s| !s.is_terminal())
                .map(|s| (s.as_str().to_string(), 0))
                .collect(),
            ..Tally::default()
        };
        let policy = self.engine.policy();
        for job in self.engine.jobs() {
            let own = p.role != Role::Submitter || job.owner == p.name;
            if own {
                *t.states.entry(job.state.as_str().to_string()).or_default() += 1;
            }
            let slot = match job.state {
                JobState::Queued if own => {
                    t.queued(job);
                    continue;
                }
                JobState::Running => 0,
                JobState::Prepared => 1,
                JobState::Preparing => 2,
                _ => continue,
            };
            let scopes = policy.scopes_of(job);
            for u in scopes.common.iter().filter(|u| u.take > 0) {
                t.split.entry(u.key.to_string()).or_default()[slot] += u.take;
            }
            if let (Some(k), true) = (&scopes.prepare, slot > 0) {
                t.split.entry(k.to_string()).or_default()[slot] += 1;
            }
        }
        // A node's own scopes: its run slots are held by running jobs, its prepare bound
        // by preparing and prepared ones (the node's own counters) and, for the rest of
        // its count, by running ones (`ui_scopes`).
        for n in self.engine.nodes() {
            let run = t.split.entry(format!("node:{}", n.name)).or_default();
            run[0] += u64::from(n.running);
            let prep = t
                .split
                .entry(format!("node-prepare:{}", n.name))
                .or_default();
            prep[1] += u64::from(n.prepared);
            prep[2] += u64::from(n.preparing);
        }
        t
    }

    /// Every scope with a limit or any use, with its split, in display order.
    fn ui_scopes(&self, split: &HashMap<String, [u64; 3]>) -> Vec<UiScope> {
        let mut scopes: Vec<UiScope> = self
            .engine
            .scope_usage()
            .into_iter()
            .filter(|u| u.limit.is_some() || u.used > 0)
            .map(|u| {
                let [mut running, prepared, preparing] =
                    split.get(&u.scope).copied().unwrap_or_default();
                if u.rule == "node-prepare" {
                    // The prepare bound also counts the node's jobs past their prepare step.
                    running = u.used.saturating_sub(prepared + preparing);
                }
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
            let key = |s: &UiScope| {
                (
                    scope_rank(&s.rule),
                    s.rule.clone(),
                    std::cmp::Reverse(s.used),
                )
            };
            key(a).cmp(&key(b)).then_with(|| a.scope.cmp(&b.scope))
        });
        scopes
    }
}

/// What one pass over the live jobs counts.
#[derive(Default)]
struct Tally {
    /// scope -> units held by `[running, prepared, preparing]` jobs.
    split: HashMap<String, [u64; 3]>,
    states: BTreeMap<String, usize>,
    queued_by_kind: BTreeMap<String, usize>,
    queued_by_owner: BTreeMap<String, usize>,
    oldest: Option<Oldest>,
}

struct Oldest {
    queued_at: Timestamp,
    view: UiOldest,
}

impl Tally {
    fn queued(&mut self, job: &lockgate_core::Job) {
        *self.queued_by_kind.entry(job.kind.clone()).or_default() += 1;
        *self.queued_by_owner.entry(job.owner.clone()).or_default() += 1;
        let older = self
            .oldest
            .as_ref()
            .is_none_or(|o| (job.queued_at, job.id) < (o.queued_at, o.view.id));
        if older {
            self.oldest = Some(Oldest {
                queued_at: job.queued_at,
                view: UiOldest {
                    id: job.id,
                    kind: job.kind.clone(),
                    owner: job.owner.clone(),
                    queued_at: String::new(),
                    waited_s: 0.0,
                },
            });
        }
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
