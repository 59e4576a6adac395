//! `GET /v1/ui/occupancy`: each scope's units in use over the last hours, replayed from
//! the event log, and the waits by kind.
//!
//! How: the first event of the window is found by a binary search over sequence numbers
//! (one-row reads), then at most [`MAX_EVENTS`] events are read in order. Each job event
//! moves its job into or out of the admitted states; a job's scopes are those the
//! **current** policy gives it (`Policy::scopes_of`), so a window across a policy change
//! shows the old jobs as the new policy would count them. A job whose first event in the
//! window, or live and admitted, held its scopes at the window's start when its record says
//! it was admitted before the start and had not ended by then.
//!
//! # Invariants
//! - Bounded work on the loop: about 40 one-row reads for the search, at most
//!   [`MAX_EVENTS`] events and one job read per distinct job; `truncated` says when the
//!   window held more.
//! - Each bucket's value is the highest count inside it, so a short burst to the limit
//!   is never averaged away.

use super::OccupancyQuery;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{Role, UiOccupancy, UiSeries};
use lockgate_core::{Job, JobId, JobState, Timestamp};
use std::collections::{BTreeMap, HashMap};

/// Most events one answer replays.
pub const MAX_EVENTS: usize = 20_000;

/// Buckets per answer.
const BUCKETS: u64 = 60;

/// Most series per answer (busiest first).
const MAX_SERIES: usize = 40;

impl Loop {
    pub(super) fn ui_occupancy(
        &mut self,
        p: &Principal,
        q: OccupancyQuery,
        now: Timestamp,
    ) -> Result<UiOccupancy, ApiError> {
        p.require(&[Role::Admin, Role::Viewer], "read the occupancy history")?;
        let hours = q.hours.unwrap_or(6.0);
        if !hours.is_finite() || !(0.1..=168.0).contains(&hours) {
            return Err(ApiError::invalid(
                "hours",
                format!("hours must be between 0.1 and 168, got {hours}"),
            ));
        }
        let span = (hours * 3_600_000.0) as u64;
        let from = now.0.saturating_sub(span);
        let step = (span / BUCKETS).max(1);
        let (events, truncated) = self.job_events_since(from)?;
        let mut jobs: HashMap<JobId, Option<Job>> = HashMap::new();
        for (id, _, _) in &events {
            if !jobs.contains_key(id) {
                let j = self.job_for_replay(*id)?;
                jobs.insert(*id, j);
            }
        }
        for j in self.engine.jobs().filter(|j| j.state.is_admitted()) {
            jobs.entry(j.id).or_insert_with(|| Some(j.clone()));
        }
        let policy = self.engine.policy();
        let mut replay = Replay::new(from, step, now.0);
        for j in jobs.values().flatten() {
            let admitted = j.prepare_started_at.or(j.started_at);
            let held_at_start =
                admitted.is_some_and(|t| t.0 < from) && j.finished_at.is_none_or(|t| t.0 >= from);
            replay.start(j, held_at_start, policy);
        }
        for (id, state, at) in &events {
            if let Some(Some(j)) = jobs.get(id) {
                replay.apply(j, *state, *at, policy);
            }
        }
        let limits: HashMap<String, Option<u64>> = self
            .engine
            .scope_usage()
            .into_iter()
            .map(|u| (u.scope, u.limit))
            .collect();
        Ok(replay.finish(limits, events.len(), truncated))
    }

    /// The job events from `from` on, `(job, state after, at)`, at most [`MAX_EVENTS`]
    /// events read; whether more were left.
    #[allow(clippy::type_complexity)]
    fn job_events_since(
        &mut self,
        from: u64,
    ) -> Result<(Vec<(JobId, JobState, u64)>, bool), ApiError> {
        let mut after = self.first_seq_at(from)?;
        let (mut out, mut read) = (Vec::new(), 0);
        loop {
            let page = self.store.events_after(after, 2_000)?;
            if page.is_empty() {
                return Ok((out, false));
            }
            for ev in page {
                if read == MAX_EVENTS {
                    return Ok((out, true));
                }
                read += 1;
                after = ev.seq;
                let Ok(data) = serde_json::from_str::<serde_json::Value>(&ev.data) else {
                    continue;
                };
                let id = data["job"]["id"].as_u64();
                let state = data["job"]["state"].as_str().and_then(JobState::parse);
                if let (true, Some(id), Some(state)) = (data["type"] == "job", id, state) {
                    out.push((id, state, ev.at.0));
                }
            }
        }
    }

    /// The sequence number before the first event at or after `from` (binary search).
    fn first_seq_at(&mut self, from: u64) -> Result<u64, ApiError> {
        let (mut lo, mut hi) = (0u64, self.seq);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.store.events_after(mid, 1)?.first() {
                Some(e) if e.at.0 < from => lo = e.seq,
                _ => hi = mid,
            }
        }
        Ok(lo)
    }

    fn job_for_replay(&mut self, id: JobId) -> Result<Option<Job>, ApiError> {
        Ok(match self.engine.job(id) {
            Some(j) => Some(j.clone()),
            None => self.store.job(id)?,
        })
    }
}

/// The replay's state: who holds what now, and each bucket's peak and last level.
struct Replay {
    from: u64,
    step: u64,
    now: u64,
    /// Whether each job holds its scopes now (in the replay's time).
    holds: HashMap<JobId, bool>,
    used: HashMap<String, u64>,
    /// Level at the window's start.
    start: HashMap<String, u64>,
    /// Per scope and bucket: the highest level and the last level, where one changed.
    buckets: HashMap<String, Vec<Option<(u64, u64)>>>,
    waits: BTreeMap<String, f64>,
}

impl Replay {
    fn new(from: u64, step: u64, now: u64) -> Replay {
        Replay {
            from,
            step,
            now,
            holds: HashMap::new(),
            used: HashMap::new(),
            start: HashMap::new(),
            buckets: HashMap::new(),
            waits: BTreeMap::new(),
        }
    }

    fn bucket(&self, at: u64) -> usize {
        (at.saturating_sub(self.from) / self.step).min(BUCKETS - 1) as usize
    }

    fn takes(job: &Job, policy: &lockgate_core::Policy) -> Vec<(String, u64)> {
        policy
            .scopes_of(job)
            .common
            .into_iter()
            .filter(|u| u.take > 0)
            .map(|u| (u.key.to_string(), u.take))
            .collect()
    }

    /// A job as it stood at the window's start.
    fn start(&mut self, job: &Job, held: bool, policy: &lockgate_core::Policy) {
        self.holds.insert(job.id, held);
        if held {
            for (scope, take) in Self::takes(job, policy) {
                *self.start.entry(scope.clone()).or_default() += take;
                *self.used.entry(scope).or_default() += take;
            }
        }
    }

    fn apply(&mut self, job: &Job, state: JobState, at: u64, policy: &lockgate_core::Policy) {
        let now_holds = state.is_admitted();
        let held = self.holds.insert(job.id, now_holds).unwrap_or(false);
        if held == now_holds {
            return;
        }
        if now_holds {
            if let Some(t) = job.prepare_started_at.or(job.started_at) {
                let wait = t.0.saturating_sub(job.queued_at.0) as f64 / 1000.0;
                *self.waits.entry(job.kind.clone()).or_default() += wait;
            }
        }
        let b = self.bucket(at);
        for (scope, take) in Self::takes(job, policy) {
            let u = self.used.entry(scope.clone()).or_default();
            *u = if now_holds {
                *u + take
            } else {
                u.saturating_sub(take)
            };
            let v = *u;
            let row = self
                .buckets
                .entry(scope)
                .or_insert_with(|| vec![None; BUCKETS as usize]);
            row[b] = Some(row[b].map_or((v, v), |(p, _)| (p.max(v), v)));
        }
    }

    fn finish(
        self,
        limits: HashMap<String, Option<u64>>,
        events: usize,
        truncated: bool,
    ) -> UiOccupancy {
        let mut names: Vec<&String> = self.buckets.keys().chain(self.start.keys()).collect();
        names.extend(limits.iter().filter(|(_, l)| l.is_some()).map(|(k, _)| k));
        names.sort();
        names.dedup();
        let last = self.bucket(self.now);
        let mut series: Vec<UiSeries> = names
            .into_iter()
            .filter(|n| !n.starts_with("node"))
            .map(|scope| {
                let mut level = self.start.get(scope).copied().unwrap_or(0);
                let row = self.buckets.get(scope);
                let peak = (0..BUCKETS as usize)
                    .map(|i| {
                        if i > last {
                            return 0;
                        }
                        match row.and_then(|r| r[i]) {
                            Some((p, end)) => {
                                let v = p.max(level);
                                level = end;
                                v
                            }
                            None => level,
                        }
                    })
                    .collect();
                UiSeries {
                    limit: limits.get(scope).copied().flatten(),
                    scope: scope.clone(),
                    peak,
                }
            })
            .collect();
        series.sort_by_key(|s| std::cmp::Reverse(s.peak.iter().copied().max().unwrap_or(0)));
        series.truncate(MAX_SERIES);
        UiOccupancy {
            from: lockgate_api::time::format(Timestamp(self.from)),
            until: lockgate_api::time::format(Timestamp(self.now)),
            step_s: self.step / 1000,
            series,
            waits_by_kind: self.waits,
            events,
            truncated,
        }
    }
}
