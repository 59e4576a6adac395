//! Packing the window (`[queue] order = "window"`, policy.md): among queued jobs of equal
//! base priority, the jobs on the scope that would otherwise end the night last go first.
//!
//! # The plan
//! Every scope with a number that hinted jobs take (a limit partition, a pool, `global`, a
//! node's number; a conflict key counts as a number of 1) has a *projected end*:
//!
//! ```text
//! end(s) = now + remaining(s) / number(s)
//! ```
//!
//! where `remaining` is the hinted run time ([`Engine::set_expected_run`]) of the live jobs
//! on it, less what its holders have already run (each at most its hint). It is when the
//! scope's work would be done if the scope were kept full: the lower bound's per-scope term,
//! seen from now. A queued job's *tail* is
//!
//! ```text
//! tail = max over its scopes s of ( end(s) + run / (2 * number(s)) )
//! ```
//!
//! rounded down to [`RESOLUTION`]: its most critical scope first (the one that ends last;
//! a verify chain that starts late or a datastore holding a third of the groups), and on
//! one scope the longer job first (longest-processing-time first, which ends a set of jobs
//! on identical slots soonest within 4/3). Tails within one resolution tie and go by
//! arrival, so that the slots do not all fill with long jobs at once (jobs that arrive
//! later need some slot to free before long). Its *planned start* is
//!
//! ```text
//! planned_start = clamp(2 * epoch + horizon - tail, queued_at, queued_at + horizon)
//! ```
//!
//! (`epoch`: the time of the first hint since the plan was last empty, that is since no live
//! job had a hint), and jobs of equal base priority are admitted by planned start (then
//! arrival, then id): the greater the tail, the sooner. A job on no scope with a number has
//! no bottleneck: its planned start is `queued_at + horizon - min(run, horizon)` (by
//! arrival, longest first). A job without a hint has `queued_at + horizon`: it goes by
//! arrival, behind the hinted jobs that arrived up to `horizon` after it.
//!
//! Under FIFO, the planned start is `queued_at`, so the rank is exactly FIFO's.
//!
//! Only the tails' order matters: `2 * epoch + horizon` keeps the planned starts of a
//! night's jobs inside their clamps. A plan that never empties drifts out of them: a job
//! that arrives more than about `(horizon - backlog) / 2` after the epoch gets
//! `planned_start = queued_at`, so such jobs go by arrival (FIFO) until the plan empties.
//!
//! # Rescoring
//! A scope's projected end moves when its load does (a hint, a job's end, a run longer or
//! shorter than its hint) and, while the scope is not kept full, with time. The jobs of a
//! scope are rescored (their tails recomputed, and those whose tail changed re-filed) when
//! its projected end has moved by its *step*, the larger of [`RESOLUTION`] and an eighth of
//! its backlog (`end - now`): every scope whose load changed is checked at the next pass,
//! and every scope again once the clock alone could have moved it by its step (a projected
//! end moves at most as fast as the clock).
//!
//! # Bounded waits
//! The planned start replaces `queued_at` everywhere the rank uses it: with aging, the
//! effective priority grows from the planned start; without it, `reserve_after` counts
//! from the planned start (`reserve.rs`). The planned start never leaves `[queued_at,
//! queued_at + horizon]`, whatever rescoring does, so a job is served at worst as FIFO
//! would serve it had it arrived `horizon` later.
//!
//! # Invariants
//! - a filed job's rank changes only in `Engine::rescore` and
//!   [`Engine::set_expected_run`], which take it out of its class under the old rank and
//!   file it under the new one, so no index (the queue's `BTreeSet`s find jobs by rank)
//!   holds a stale rank; the epoch moves only when no live job has a hint, so no filed
//!   rank depends on it then;
//! - `ScopeLoad::load` is the sum of the hints of the live jobs in `ScopeLoad::jobs`, and
//!   a scope is dropped with its last job;
//! - hints are dropped when their job ends (`end_job`), and with them their share of the
//!   per-scope load; a retried or requeued job keeps its hint (same id);
//! - rescoring visits scopes and jobs in key and id order, so a run is deterministic;
//! - the hints are not part of a [`Snapshot`](super::Snapshot): after a restart the server
//!   gives them again (until then the jobs count as unhinted).
//!
//! # Costs
//! A submit or an admission pays nothing more than under FIFO: the rank is still one key
//! computed in O(1) (hash lookups), and every index stays O(log n). A pass pays O(1) when
//! no scope is due, and O(l) per scope whose load changed since the last one (l: the
//! scope's holders). [`Engine::set_expected_run`]: O(s * l + log n) (s: the scopes the job
//! takes) and one admission pass. Rescoring a scope of k jobs: O(k * (s + log n)) and O(l)
//! per scope involved; a scope's projected end must move by an eighth of its backlog
//! between two rescorings (or by [`RESOLUTION`], whichever is larger), so arrivals of
//! similar jobs pay an amortized O(8) rescorings each per scope. Under FIFO, nothing is
//! rescored. Measured: the simulator's table (26 runs of up to 141 jobs) takes 1 s
//! against 0.2 s before rescoring; not measured at 10k or 100k queued jobs.

use super::Engine;
use crate::job::{Job, JobId, JobState};
use crate::policy::QueueOrder;
use crate::scope::ScopeKey;
use crate::time::Timestamp;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// The plan's resolution, ms: tails are rounded down to it, and a scope's jobs are
/// rescored once its projected end moves by it. Learned durations are medians, rarely
/// closer than this to a real run.
pub const RESOLUTION: u64 = 60_000;

/// A scope's jobs are rescored once its projected end moves by the larger of
/// [`RESOLUTION`] and `1 / RESCORE` of its backlog.
const RESCORE: u64 = 8;

/// Projected ends computed in one round, by scope.
type Ends = HashMap<ScopeKey, u64>;

/// One job's hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// Expected run time, ms.
    pub run_ms: u64,
    /// Its tail when last scored, ms (see the module docs).
    pub tail_ms: u64,
}

/// The hinted work on one scope with a number.
#[derive(Debug, Clone, Default)]
struct ScopeLoad {
    /// Hinted ms of the live jobs on it.
    load: u64,
    /// Its number when last hinted (a conflict key: 1).
    limit: u64,
    /// Its projected end when its jobs were last scored, ms.
    scored_end: u64,
    /// When it is next checked by time, ms (its entry in `WindowHints::due`).
    due: u64,
    /// The live hinted jobs counted on it.
    jobs: BTreeSet<JobId>,
}

/// Every live job's hint, and the hinted work per scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowHints {
    hints: HashMap<JobId, Hint>,
    /// The scopes (with a number) each hinted job was counted on, by key (stable across
    /// rebuilds, unlike ids).
    counted: HashMap<JobId, Vec<ScopeKey>>,
    /// Per scope.
    scopes: HashMap<ScopeKey, ScopeLoad>,
    /// The plan's origin, ms (see the module docs).
    epoch: u64,
    /// Scopes whose load changed since the last pass: checked at the next one.
    changed: BTreeSet<ScopeKey>,
    /// Every scope's next check by time: (due, key).
    due: BTreeSet<(u64, ScopeKey)>,
}

impl WindowHints {
    /// Drops an ended job's hint and its share of the load.
    pub fn forget(&mut self, id: JobId) {
        self.forget_load(id);
        self.hints.remove(&id);
    }

    /// Takes a job's share out of the loads, keeping its hint (its rank as filed).
    fn forget_load(&mut self, id: JobId) {
        let Some(h) = self.hints.get(&id).copied() else {
            return;
        };
        for key in self.counted.remove(&id).unwrap_or_default() {
            let Some(s) = self.scopes.get_mut(&key) else {
                continue;
            };
            s.load = s.load.saturating_sub(h.run_ms);
            s.jobs.remove(&id);
            if s.jobs.is_empty() {
                self.due.remove(&(s.due, key.clone()));
                self.changed.remove(&key);
                self.scopes.remove(&key);
            } else {
                self.changed.insert(key);
            }
        }
    }
}

/// Where a queued job stands in the window plan (explain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlace {
    /// The job's expected run, when it has a hint.
    pub expected_run: Option<Duration>,
    /// Its planned start (see the module docs).
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
    /// Cost: O(s * l + log n), and one admission pass (see the module docs).
    pub fn set_expected_run(&mut self, id: JobId, run: Duration, now: Timestamp) {
        let Some(e) = self.entries.find(id) else {
            return;
        };
        let run_ms = run.as_millis().min(u128::from(u64::MAX)) as u64;
        let window = self.policy.queue.order == QueueOrder::Window;
        let (filed, needs) = (e.class.is_some() && window, e.needs.clone());
        // Out of its class under the rank it was filed with, back in under the new one.
        if filed {
            self.dequeue(id);
        }
        self.window.forget_load(id);
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
        if self.window.hints.is_empty() {
            self.window.epoch = now.0;
        }
        for (key, limit) in &limited {
            let w = &mut self.window;
            let s = w.scopes.entry(key.clone()).or_default();
            if s.jobs.is_empty() {
                s.due = now.0.saturating_add(RESOLUTION);
                w.due.insert((s.due, key.clone()));
            }
            s.load = s.load.saturating_add(run_ms);
            s.limit = *limit;
            s.jobs.insert(id);
            w.changed.insert(key.clone());
        }
        self.window
            .counted
            .insert(id, limited.into_iter().map(|(k, _)| k).collect());
        let tail_ms = self.tail(id, run_ms, now, &mut Ends::new());
        self.window.hints.insert(id, Hint { run_ms, tail_ms });
        if filed {
            self.enqueue(id);
        }
        if window {
            self.run_pass(now);
        }
    }

    /// Rescores the jobs of every scope whose projected end moved by its step (the larger
    /// of [`RESOLUTION`] and `1 / RESCORE` of its backlog), checking the scopes whose load
    /// changed and those due by time. A pass calls it first; O(1) when nothing is due.
    pub(crate) fn rescore_stale(&mut self, now: Timestamp) {
        if self.policy.queue.order != QueueOrder::Window {
            self.window.changed.clear();
            return;
        }
        let mut check = std::mem::take(&mut self.window.changed);
        while let Some((at, key)) = self.window.due.first().cloned() {
            if at > now.0 {
                break;
            }
            self.window.due.pop_first();
            check.insert(key);
        }
        let (mut jobs, mut ends) = (BTreeSet::new(), Ends::new());
        for key in check {
            let Some(end) = self.projected_end(&key, now) else {
                continue;
            };
            ends.insert(key.clone(), end);
            let s = self.window.scopes.get_mut(&key).expect("projected");
            // The larger of the resolution and an eighth of the backlog: a scope of k
            // jobs is rescored after about k / 8 arrivals at most (amortized O(8)).
            let step = RESOLUTION.max(end.saturating_sub(now.0) / RESCORE);
            let drift = end.abs_diff(s.scored_end);
            let next = if drift >= step {
                s.scored_end = end;
                jobs.extend(s.jobs.iter().copied());
                now.0 + step
            } else {
                // A projected end moves at most as fast as the clock.
                now.0 + step - drift
            };
            self.window.due.remove(&(s.due, key.clone()));
            s.due = next;
            self.window.due.insert((next, key));
        }
        for id in jobs {
            if self.entries.find(id).is_some_and(|e| e.class.is_some()) {
                self.rescore(id, now, &mut ends);
            }
        }
    }

    /// A scope's projected end at `now`, ms; `None` for a scope no hinted job takes.
    fn projected_end(&self, key: &ScopeKey, now: Timestamp) -> Option<u64> {
        let s = self.window.scopes.get(key)?;
        let remaining = s.load.saturating_sub(self.done_on(key, now));
        Some(now.0.saturating_add(remaining / s.limit))
    }

    /// A job's tail from the current loads of the scopes it was counted on (see the
    /// module docs), rounded down to [`RESOLUTION`]. `ends` keeps the projected ends
    /// computed at `now`, so that a rescoring round computes each once: O(s) lookups, and
    /// O(l) for each scope not yet in `ends`.
    fn tail(&self, id: JobId, run_ms: u64, now: Timestamp, ends: &mut Ends) -> u64 {
        // A job cannot end before now + run, whatever its scopes.
        let mut tail = now.0.saturating_add(run_ms);
        for key in self.window.counted.get(&id).into_iter().flatten() {
            let Some(s) = self.window.scopes.get(key) else {
                continue;
            };
            let end = match ends.get(key) {
                Some(&end) => end,
                None => {
                    let end = self.projected_end(key, now).unwrap_or(now.0);
                    ends.insert(key.clone(), end);
                    end
                }
            };
            tail = tail.max(end.saturating_add(run_ms / 2 / s.limit));
        }
        tail / RESOLUTION * RESOLUTION
    }

    /// The hinted work the holders of a scope have done by `now` (each at most its hint).
    fn done_on(&self, key: &ScopeKey, now: Timestamp) -> u64 {
        let Some(sid) = self.scopes.interner.get(key) else {
            return 0;
        };
        let mut done = 0u64;
        for &h in &self.scopes.states[sid as usize].holders {
            let (Some(hint), Some(e)) = (self.window.hints.get(&h), self.entries.find(h)) else {
                continue;
            };
            if let Some(start) = e.job.prepare_started_at.or(e.job.started_at) {
                done = done.saturating_add(now.since(start).min(hint.run_ms));
            }
        }
        done
    }

    /// Rescores a filed job; re-files it when its tail changed.
    fn rescore(&mut self, id: JobId, now: Timestamp, ends: &mut Ends) {
        let old = self.window.hints[&id];
        let tail_ms = self.tail(id, old.run_ms, now, ends);
        if tail_ms == old.tail_ms {
            return;
        }
        self.dequeue(id);
        self.window.hints.insert(id, Hint { tail_ms, ..old });
        self.enqueue(id);
    }

    /// The planned start of a job (see the module docs); `queued_at` under FIFO.
    pub(crate) fn planned_start(&self, job: &Job) -> u64 {
        if self.policy.queue.order != QueueOrder::Window {
            return job.queued_at.0;
        }
        let horizon = self.policy.queue.window_horizon.as_millis() as u64;
        let q = job.queued_at.0;
        let Some(h) = self.window.hints.get(&job.id) else {
            return q.saturating_add(horizon);
        };
        if self
            .window
            .counted
            .get(&job.id)
            .is_none_or(|k| k.is_empty())
        {
            return q.saturating_add(horizon - h.run_ms.min(horizon));
        }
        let e = self.window.epoch;
        (e.saturating_mul(2).saturating_add(horizon))
            .saturating_sub(h.tail_ms)
            .clamp(q, q.saturating_add(horizon))
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
