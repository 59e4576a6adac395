//! Packing the window (`[queue] order = "window"`, policy.md): among queued jobs of equal
//! base priority, the jobs that would otherwise end the night alone go first.
//!
//! # The plan
//! A job with an expected run time (a hint, [`Engine::set_expected_run`]) gets a *score*:
//! its expected run plus the backlog of its bottleneck, the most loaded scope with a number
//! that it takes (the hinted run time of the live jobs on that scope, itself included,
//! over the scope's number; a conflict key counts as a number of 1). The score is taken
//! when the hint is given. Its *planned start* is
//!
//! ```text
//! planned_start = queued_at + horizon - min(score, horizon)
//! ```
//!
//! and jobs of equal base priority are admitted by planned start (then arrival, then id).
//! Jobs that arrive together go most-loaded-bottleneck first, longest first (LPT on the
//! bottleneck: the list schedule that ends a set of jobs soonest, within 4/3 of the best on
//! identical slots, and much closer with many short jobs). A job that arrives more than
//! `horizon` after another never overtakes it. A job without a hint has score 0: it goes by
//! arrival, behind every hinted job that arrived up to `horizon` after it.
//!
//! Under FIFO, the planned start is `queued_at`, so the rank is exactly FIFO's.
//!
//! # Bounded waits
//! The planned start replaces `queued_at` everywhere the rank uses it: with aging, the
//! effective priority grows from the planned start; without it, `reserve_after` counts
//! from the planned start (`reserve.rs`). A job is thus served at worst as FIFO would serve
//! it had it arrived `horizon` later.
//!
//! # Invariants
//! - a job's score is fixed when its hint is given and kept until the job ends, so its rank
//!   never changes while it is filed (the queue's `BTreeSet`s find it by rank);
//! - a hint on a queued, filed job re-files it (out of its class, then in), so no index
//!   holds a stale rank;
//! - hints are dropped when their job ends (`end_job`), and with them their share of the
//!   per-scope load; a retried or requeued job keeps its hint (same id);
//! - the hints are not part of a [`Snapshot`](super::Snapshot): after a restart the server
//!   gives them again (until then the jobs count as unhinted).
//!
//! # Costs
//! [`Engine::set_expected_run`]: O(s + log n) (s = scopes the job takes) and one admission
//! pass; a submit or an admission pays nothing more than under FIFO: the rank is still one
//! key computed in O(1) (one hash lookup), and every index stays O(log n).

use super::Engine;
use crate::job::{Job, JobId, JobState};
use crate::policy::QueueOrder;
use crate::scope::ScopeKey;
use crate::time::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

/// One job's hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// Expected run time, ms.
    pub run_ms: u64,
    /// The run weighted by the bottleneck, ms (fixed when the hint is given).
    pub score_ms: u64,
}

/// Every live job's hint, and the hinted work per scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowHints {
    hints: HashMap<JobId, Hint>,
    /// The scopes (with a number) each hinted job was counted on, by key (stable across
    /// rebuilds, unlike ids).
    counted: HashMap<JobId, Vec<ScopeKey>>,
    /// Hinted ms of the live jobs on each scope.
    load: HashMap<ScopeKey, u64>,
}

impl WindowHints {
    /// Drops an ended job's hint and its share of the load.
    pub fn forget(&mut self, id: JobId) {
        let Some(h) = self.hints.remove(&id) else {
            return;
        };
        for key in self.counted.remove(&id).unwrap_or_default() {
            if let Some(w) = self.load.get_mut(&key) {
                *w = w.saturating_sub(h.run_ms);
                if *w == 0 {
                    self.load.remove(&key);
                }
            }
        }
    }
}

/// Where a queued job stands in the window plan (explain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlace {
    /// The job's expected run, when it has a hint.
    pub expected_run: Option<Duration>,
    /// Its planned start, after its arrival by `horizon - min(score, horizon)`.
    pub planned_start: Timestamp,
    /// 1-based place among the queued jobs of its base priority, by planned start.
    pub place: usize,
    /// Queued jobs of its base priority.
    pub of: usize,
}

impl Engine {
    /// Gives a job its expected run time, for `[queue] order = "window"` (under FIFO it is
    /// kept and has no effect). The server takes it from the learned durations, the
    /// simulator from the workload's `run_s`. A later hint replaces an earlier one. A job
    /// that is not live is ignored.
    ///
    /// Cost: O(s + log n), and one admission pass when it re-ranks a queued job.
    pub fn set_expected_run(&mut self, id: JobId, run: Duration, now: Timestamp) {
        let Some(e) = self.entries.find(id) else {
            return;
        };
        let run_ms = run.as_millis().min(u128::from(u64::MAX)) as u64;
        // Under FIFO the rank does not read the hint: keep it, touch nothing.
        let (filed, needs) = (e.class.is_some(), e.needs.clone());
        let filed = filed && self.policy.queue.order == QueueOrder::Window;
        if filed {
            self.dequeue(id);
        }
        self.window.forget(id);
        let limited: Vec<(ScopeKey, u64)> = needs
            .common
            .iter()
            .filter(|n| n.take > 0)
            .filter_map(|n| {
                let key = self.scopes.interner.key(n.scope);
                let limit = match key {
                    ScopeKey::Conflict { .. } => Some(1),
                    _ => self.scopes.states[n.scope as usize].limit,
                };
                Some((key.clone(), limit.filter(|&l| l > 0)?))
            })
            .collect();
        let mut backlog = 0u64;
        for (key, limit) in &limited {
            let w = self.window.load.entry(key.clone()).or_insert(0);
            *w = w.saturating_add(run_ms);
            backlog = backlog.max(*w / limit);
        }
        self.window
            .counted
            .insert(id, limited.into_iter().map(|(k, _)| k).collect());
        let hint = Hint {
            run_ms,
            score_ms: window_score(run_ms, backlog),
        };
        self.window.hints.insert(id, hint);
        if filed {
            self.enqueue(id);
            self.run_pass(now);
        }
    }

    /// The planned start of a job (see the module docs); `queued_at` under FIFO.
    pub(crate) fn planned_start(&self, job: &Job) -> u64 {
        if self.policy.queue.order != QueueOrder::Window {
            return job.queued_at.0;
        }
        let horizon = self.policy.queue.window_horizon.as_millis() as u64;
        let score = self.window.hints.get(&job.id).map_or(0, |h| h.score_ms);
        job.queued_at.0.saturating_add(horizon - score.min(horizon))
    }

    /// Where a queued job stands in the window plan; `None` under FIFO or when it is not
    /// queued. Cost O(n) (it counts the queued jobs of its priority), like explain's position.
    pub fn window_place(&self, id: JobId) -> Option<WindowPlace> {
        if self.policy.queue.order != QueueOrder::Window {
            return None;
        }
        let job = &self.entries.find(id)?.job;
        if job.state != JobState::Queued {
            return None;
        }
        let key = (self.planned_start(job), job.queued_at, job.id);
        let peers = self
            .entries
            .values()
            .map(|e| &e.job)
            .filter(|j| j.state == JobState::Queued && j.priority == job.priority);
        let (mut ahead, mut of) = (0, 0);
        for j in peers {
            of += 1;
            if (self.planned_start(j), j.queued_at, j.id) < key {
                ahead += 1;
            }
        }
        Some(WindowPlace {
            expected_run: self
                .window
                .hints
                .get(&id)
                .map(|h| Duration::from_millis(h.run_ms)),
            planned_start: Timestamp(self.planned_start(job)),
            place: ahead + 1,
            of,
        })
    }
}

/// A job's score from its run and the backlog of its bottleneck (ms per slot of the most
/// loaded scope it takes, counting the hinted live jobs, itself included).
fn window_score(run_ms: u64, backlog_ms: u64) -> u64 {
    run_ms.saturating_add(backlog_ms)
}
