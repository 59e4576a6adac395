//! The loop side of forecasts: learning from finished jobs, refreshing the cached forecast
//! off the loop, the estimate in explain, and the `[[deadline]]` metrics.

use super::snapshot::{compute, expected_hold, Input, Snapshot};
use super::{Cached, ForecastOp, COPY_SHARE, DEBOUNCE, DEFAULT_AHEAD, FORWARD_BUDGET};
use crate::event_loop::Loop;
use lockgate_api::{time, EstimateView, ExpectedView, ForecastQuery, ForecastView};
use lockgate_core::durations::Durations;
use lockgate_core::event::JobChange;
use lockgate_core::job::{Job, JobId, JobState};
use lockgate_core::policy::QueueOrder;
use lockgate_core::selector::Selector;
use lockgate_core::Timestamp;
use lockgate_sim::forecast::Arrival;
use lockgate_sim::forecast::OwnEnd;
use lockgate_store::JobFilter;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Loop {
    /// Every job event: the forecast is stale, and a finished job is learned from.
    pub(crate) fn forecast_learn(&mut self, change: JobChange, job: &Job, now: Timestamp) {
        self.forecast.stale = true;
        match change {
            JobChange::Finished => self.forecast.durations.observe(job),
            JobChange::Submitted | JobChange::Requeued => self.hint_window(job, now),
            _ => {}
        }
    }

    /// `[queue] order = "window"` ranks a queued job by its expected hold: here its
    /// learned prepare and run medians (docs/policy.md). A job without history gets no
    /// hint and goes by arrival. Under FIFO nothing is done.
    fn hint_window(&mut self, job: &Job, now: Timestamp) {
        if self.engine.policy().queue.order != QueueOrder::Window {
            return;
        }
        let Some(hold) = expected_hold(&self.forecast.durations, job) else {
            return;
        };
        self.engine.set_expected_run(job.id, hold, now);
    }

    /// Gives every queued job its hint once the history is read under `order = "window"`
    /// (at start, after a restart, when the order or `[forecast]` changes): O(n) passes,
    /// only then.
    fn hint_all_queued(&mut self, now: Timestamp) {
        let window = self.engine.policy().queue.order == QueueOrder::Window;
        if !window {
            self.forecast.window_hinted = false;
            return;
        }
        if self.forecast.window_hinted {
            return;
        }
        self.forecast.window_hinted = true;
        let queued: Vec<Job> = self
            .engine
            .jobs()
            .filter(|j| j.state == JobState::Queued)
            .cloned()
            .collect();
        for job in &queued {
            self.hint_window(job, now);
        }
    }

    /// (Re)learns from the store's newest successful jobs: at start and whenever
    /// `[forecast]` changes (its key splits the history differently).
    fn load_durations(&mut self) {
        let policy = self.engine.policy().forecast.clone();
        let mut d = Durations::new(policy);
        let filter = JobFilter {
            state: Some(JobState::Succeeded),
            newest_first: true,
            limit: super::HISTORY_LOAD,
            ..JobFilter::default()
        };
        match self.store.jobs(&filter) {
            Ok(jobs) => jobs.iter().rev().for_each(|j| d.observe(j)),
            Err(e) => tracing::warn!("forecast: cannot read the job history: {e}"),
        }
        self.forecast.durations = d;
        self.forecast.loaded = true;
        self.forecast.stale = true;
        self.forecast.window_hinted = false;
    }

    /// What a forecast works on, planned up to `until`: the engine's shared state (no job
    /// copied), a copy of the durations and the planned runs.
    pub(crate) fn forecast_input(&mut self, now: Timestamp, until: Timestamp) -> Input {
        let started = Instant::now();
        let state = self.engine.share();
        let arrivals = self.forecast_arrivals(now, until);
        let ends = self.own_rate_ends(now);
        self.forecast.generation += 1;
        Input {
            state,
            durations: self.forecast.durations.clone(),
            arrivals,
            ends,
            now,
            until,
            copy: started.elapsed(),
            generation: self.forecast.generation,
        }
    }

    /// The running jobs whose holders report a rate, with the ends they reach at it
    /// (the forecast's run at p50 aims at the median size, then the 90th percentile; the
    /// run at p90 at the 90th percentile). O(admitted jobs with reports).
    fn own_rate_ends(&self, now: Timestamp) -> HashMap<JobId, OwnEnd> {
        self.meters
            .job_ids()
            .filter_map(|id| {
                let job = self.engine.job(id)?;
                if job.state != JobState::Running {
                    return None;
                }
                let size = self.forecast.durations.expected(job).size?;
                let (moved, rate) = self.own_rate(job)?;
                let end = OwnEnd {
                    p50: reach(moved, rate, &[size.p50_ms, size.p90_ms], now),
                    p90: reach(moved, rate, &[size.p90_ms], now),
                };
                (end != OwnEnd::default()).then_some((id, end))
            })
            .collect()
    }

    /// The schedules' runs from `from` up to `until` (at most [`super::MAX_ARRIVALS`]).
    fn forecast_arrivals(&self, from: Timestamp, until: Timestamp) -> Vec<Arrival> {
        self.planned_runs(from, until, super::MAX_ARRIVALS)
            .into_iter()
            .map(|(schedule, at, spec)| Arrival { at, spec, schedule })
            .collect()
    }

    /// Once per batch: learns the history if the policy's `[forecast]` changed, and starts
    /// a refresh when the forecast is stale, none is running and the debounce is over.
    pub(crate) fn forecast_tick(&mut self, now: Timestamp) {
        if !self.forecast.loaded
            || self.forecast.durations.policy() != &self.engine.policy().forecast
        {
            self.load_durations();
        }
        self.hint_all_queued(now);
        let f = &self.forecast;
        let due = f.urgent || Instant::now() >= f.not_before;
        if !f.stale || !due || f.running.load(Ordering::Acquire) {
            return;
        }
        let input = self.forecast_input(now, now.plus(DEFAULT_AHEAD));
        let f = &mut self.forecast;
        f.stale = false;
        f.urgent = false;
        f.not_before = Instant::now() + DEBOUNCE.max(input.copy * COPY_SHARE);
        f.running.store(true, Ordering::Release);
        let (tx, running) = (f.tx.clone(), f.running.clone());
        let spawned = std::thread::Builder::new()
            .name("lockgate-forecast".into())
            .spawn(move || {
                let snap = compute(input, FORWARD_BUDGET);
                tx.send_replace(Some(std::sync::Arc::new(snap)));
                running.store(false, Ordering::Release);
            });
        if let Err(e) = spawned {
            tracing::warn!("forecast: cannot start its thread: {e}");
            self.forecast.running.store(false, Ordering::Release);
        }
    }

    /// When the loop must wake for a stale forecast (the debounce's end), if it is stale.
    pub(crate) fn forecast_deadline(&self, now: Timestamp) -> Option<Timestamp> {
        let f = &self.forecast;
        if !f.stale {
            return None;
        }
        let wait = f.not_before.saturating_duration_since(Instant::now());
        // While a refresh runs, look again shortly after.
        Some(now.plus(wait.max(Duration::from_millis(200))))
    }

    /// A job's learned durations and size, for its view; for a running job, when it should
    /// end at its own recent rate.
    pub(crate) fn expected_view(&self, job: &Job, now: Timestamp) -> ExpectedView {
        let durations = &self.forecast.durations;
        let expected = durations.expected(job);
        let view = |e: Option<lockgate_core::durations::Estimate>| {
            e.map(|e| lockgate_api::StageEstimateView {
                key: durations.key_text(job, e.key_len),
                ..e.into()
            })
        };
        let end_at = self.end_at(job, expected.size, now);
        ExpectedView {
            prepare: view(expected.prepare),
            run: view(expected.run),
            size: expected.size.map(|e| lockgate_api::SizeEstimateView {
                key: durations.key_text(job, e.key_len),
                ..e.into()
            }),
            end_at: end_at.map(time::format),
        }
    }

    /// When running `job`, of learned `size`, should end at its own rate: see [`reach`],
    /// aiming at the median, then the 90th percentile. `None` for a job not running, or
    /// without a size or a rate.
    pub(crate) fn end_at(
        &self,
        job: &Job,
        size: Option<lockgate_core::durations::Estimate>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        if job.state != JobState::Running {
            return None;
        }
        let size = size?;
        let (moved, rate) = self.own_rate(job)?;
        reach(moved, rate, &[size.p50_ms, size.p90_ms], now)
    }

    /// What admitted `job` has moved and its recent rate (bytes per second, the larger
    /// direction), as its holder measured them; `None` without a rate yet.
    pub(crate) fn own_rate(&self, job: &Job) -> Option<(u64, u64)> {
        let moved = lockgate_core::durations::moved(job).unwrap_or(0);
        Some((moved, self.meters.recent(job.id)?.moved()))
    }

    /// The estimate of a queued job for its explain: from the latest forecast, or all
    /// `null` (no `computed_at`) with an immediate refresh asked for when it does not
    /// know the job yet.
    pub(crate) fn estimate_for(&mut self, job: &Job) -> Option<EstimateView> {
        if job.state != JobState::Queued {
            return None;
        }
        let known = self.forecast.latest().and_then(|s| s.estimate(job.id));
        if known.is_none() {
            self.forecast.stale = true;
            self.forecast.urgent = true;
        }
        Some(known.unwrap_or_default())
    }

    pub(crate) fn forecast_op(&mut self, op: ForecastOp) {
        match op {
            ForecastOp::Get(q, reply) => {
                let r = self.forecast_get(q);
                self.answer(reply, r);
            }
            ForecastOp::Plan(from, until, reply) => {
                let arrivals = self.forecast_arrivals(from, until);
                self.answer(reply, Ok(arrivals));
            }
            ForecastOp::Subscribe(reply) => {
                self.forecast.stale = true;
                self.forecast.urgent = true;
                let rx = self.forecast.rx.clone();
                self.answer(reply, Ok(rx));
            }
        }
    }

    /// `GET /v1/forecast`: checks the query and says which snapshot answers it: the next
    /// one if the engine changed since the last copy (made urgent), else the last one
    /// taken. The handler waits for it off the loop; nothing is copied here.
    fn forecast_get(&mut self, q: ForecastQuery) -> Result<Cached, crate::error::ApiError> {
        let until = match &q.until {
            None => None,
            Some(text) => Some(time::parse(text).map_err(|e| {
                crate::error::ApiError::invalid(
                    "until",
                    format!("expected an RFC 3339 time, got {text:?}: {e}"),
                )
            })?),
        };
        if let Some(m) = &q.r#match {
            Selector::parse_jobs(m).map_err(|e| {
                crate::error::ApiError::invalid("match", format!("invalid job selector {m:?}: {e}"))
            })?;
        }
        let f = &mut self.forecast;
        let generation = if f.stale || f.generation == 0 {
            f.urgent = true;
            f.stale = true;
            f.generation + 1
        } else {
            f.generation
        };
        Ok(Cached {
            rx: f.rx.clone(),
            generation,
            until,
        })
    }

    /// `lockgate_window_*`: each `[[deadline]]`'s forecast against its next time.
    pub(crate) fn render_forecast_metrics(&self, out: &mut String, now: Timestamp) {
        let deadlines = &self.engine.policy().deadlines;
        let snap = self.forecast.latest();
        let _ = writeln!(out, "# HELP lockgate_forecast_age_seconds Age of the cached forecast (the state it started from).\n# TYPE lockgate_forecast_age_seconds gauge");
        if let Some(s) = &snap {
            let age = now.since(s.computed_at) as f64 / 1000.0;
            let _ = writeln!(out, "lockgate_forecast_age_seconds {age}");
            let _ = writeln!(out, "# HELP lockgate_forecast_compute_seconds Wall time of the last forecast: the copy on the loop, and the two forward runs off it.\n# TYPE lockgate_forecast_compute_seconds gauge");
            let _ = writeln!(
                out,
                "lockgate_forecast_compute_seconds{{part=\"copy\"}} {}",
                s.copy.as_secs_f64()
            );
            let _ = writeln!(
                out,
                "lockgate_forecast_compute_seconds{{part=\"forward\"}} {}",
                s.elapsed.as_secs_f64()
            );
        }
        let _ = writeln!(out, "# HELP lockgate_window_deadline_timestamp_seconds The next time of a [[deadline]].\n# TYPE lockgate_window_deadline_timestamp_seconds gauge");
        let _ = writeln!(out, "# HELP lockgate_window_forecast_end_timestamp_seconds When every job of a [[deadline]] is forecast to be done, by quantile (absent when one has no estimate).\n# TYPE lockgate_window_forecast_end_timestamp_seconds gauge");
        let _ = writeln!(out, "# HELP lockgate_window_at_risk 1 when the p90 forecast of a [[deadline]] ends after it.\n# TYPE lockgate_window_at_risk gauge");
        let _ = writeln!(out, "# HELP lockgate_window_unknown_jobs Jobs of a [[deadline]] with no estimate (no history, no default_run).\n# TYPE lockgate_window_unknown_jobs gauge");
        let zone = self.local_zone();
        for d in deadlines {
            let Ok(Some(by)) = d.by.next_after(now.0, zone) else {
                continue;
            };
            let by = Timestamp(by);
            let name = &d.name;
            let secs = |t: Timestamp| t.0 as f64 / 1000.0;
            let _ = writeln!(
                out,
                "lockgate_window_deadline_timestamp_seconds{{window=\"{name}\"}} {}",
                secs(by)
            );
            let Some(s) = &snap else { continue };
            let tally = s.tally(|e| deadline_covers(d, e, by), by);
            for (q, t) in [("0.5", tally.done_p50), ("0.9", tally.done_p90)] {
                if let Some(t) = t {
                    let _ = writeln!(out, "lockgate_window_forecast_end_timestamp_seconds{{window=\"{name}\",quantile=\"{q}\"}} {}", secs(t));
                }
            }
            // At risk: a job with an estimate ends after the deadline at p90 (a job with
            // none is counted in `unknown_jobs`, not guessed at).
            let risk = tally.missing.len() > tally.unknown;
            let _ = writeln!(
                out,
                "lockgate_window_at_risk{{window=\"{name}\"}} {}",
                u8::from(risk)
            );
            let _ = writeln!(
                out,
                "lockgate_window_unknown_jobs{{window=\"{name}\"}} {}",
                tally.unknown
            );
        }
    }
}

/// Whether a deadline covers a forecast entry: it matches, and a planned run arrives
/// before the deadline.
pub(crate) fn deadline_covers(
    d: &lockgate_core::policy::Deadline,
    e: &super::snapshot::Entry<'_>,
    by: Timestamp,
) -> bool {
    let matches = d
        .matcher
        .as_ref()
        .is_none_or(|s| s.matches(|k| e.key_value(k)));
    matches && e.arrives().is_none_or(|t| t < by)
}

/// The answer of `GET /v1/forecast` from a snapshot.
pub(crate) fn report(s: &Snapshot, q: &ForecastQuery) -> ForecastView {
    let sel = q
        .r#match
        .as_deref()
        .and_then(|m| Selector::parse_jobs(m).ok());
    let tally = s.tally(
        |e| sel.as_ref().is_none_or(|s| s.matches(|k| e.key_value(k))),
        s.until,
    );
    let waits_s: std::collections::BTreeMap<String, f64> = s
        .p50
        .waits
        .iter()
        .map(|(k, &ms)| (k.clone(), ms as f64 / 1000.0))
        .collect();
    let bottleneck = s
        .p50
        .waits
        .iter()
        .max_by_key(|(k, &ms)| (ms, std::cmp::Reverse((*k).clone())))
        .map(|(k, _)| k.clone());
    ForecastView {
        computed_at: time::format(s.computed_at),
        until: time::format(s.until),
        jobs: tally.jobs,
        done_p50: time::format_opt(tally.done_p50),
        done_p90: time::format_opt(tally.done_p90),
        missing: tally.missing,
        unknown: tally.unknown,
        bottleneck,
        waits_s,
        complete: s.p50.complete && s.p90.complete,
    }
}

/// When a job that has `moved` bytes at `rate` reaches the first of `targets` it has not
/// passed. `None` at a rate of 0, or past every target (its size is unlike its history's).
fn reach(moved: u64, rate: u64, targets: &[u64], now: Timestamp) -> Option<Timestamp> {
    let target = targets.iter().copied().find(|&t| t > moved)?;
    (rate > 0).then(|| {
        now.plus(Duration::from_secs_f64(
            (target - moved) as f64 / rate as f64,
        ))
    })
}
