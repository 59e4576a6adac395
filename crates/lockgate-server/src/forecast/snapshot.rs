//! One forecast: the inputs taken on the loop ([`Input`]) and what the forward runs at
//! p50 and p90 made of them ([`Snapshot`]). Computed off the loop, on a plain thread.
//!
//! # Invariants
//! - The loop's part is [`Input`]: the engine's [`Shared`] state (its job records in a
//!   persistent map, shared, not copied: O(changes since the last forecast), never a walk
//!   of the queue), the durations and the planned runs. Everything else, rebuilding an engine from it ([`Engine::from_shared`], the
//!   restore a restart runs) and both forward runs, happens in [`compute`], off the loop.
//! - The rebuilt engine is the one a restart at `now` would give: leases renewed from
//!   `now`, nodes seen at `now`, and, under `order = "window"`, each queued job hinted
//!   again from the durations ([`expected_hold`]), in id order, as the loop hints them.

use lockgate_api::{time, EstimateView, ForecastJobView};
use lockgate_core::durations::Durations;
use lockgate_core::engine::Shared;
use lockgate_core::job::{JobId, JobState};
use lockgate_core::policy::QueueOrder;
use lockgate_core::{Engine, Job, Timestamp};
use lockgate_sim::forecast::{
    forward_known, Arrival, ForwardRun, JobForecast, Known, OwnEnd, Quantile,
};
use std::time::{Duration, Instant};

/// The forward run plays on at most this long past the last planned arrival: a queue that
/// takes longer to drain than a week is reported as not done (`null`).
pub(crate) const RUN_PAST_UNTIL: Duration = Duration::from_secs(7 * 86_400);

/// What the loop hands to a forecast: shared or copied state, so the loop goes on at once.
#[derive(Debug, Clone)]
pub struct Input {
    /// The engine's state, sharing its job records ([`Engine::share`]).
    pub state: Shared,
    pub durations: Durations,
    pub arrivals: Vec<Arrival>,
    /// Running jobs' ends at their own measured rate (`lockgate_sim::forecast::OwnEnd`).
    pub ends: std::collections::HashMap<JobId, OwnEnd>,
    pub now: Timestamp,
    /// Arrivals are planned up to here.
    pub until: Timestamp,
    /// How long the loop spent taking this input.
    pub copy: Duration,
    /// The loop's count of inputs taken when this one was (1 for the first).
    pub generation: u64,
}

/// A computed forecast.
#[derive(Debug)]
pub struct Snapshot {
    pub computed_at: Timestamp,
    pub until: Timestamp,
    pub p50: ForwardRun,
    pub p90: ForwardRun,
    /// Wall time of taking the input on the loop, and of the rebuild and the two forward
    /// runs off it.
    pub copy: Duration,
    pub elapsed: Duration,
    /// The generation of the input it was computed from ([`Input::generation`]).
    pub generation: u64,
    /// What it was computed from (for a forecast up to another `until` from the same
    /// state, without taking a new one on the loop).
    pub input: Input,
}

/// What `[queue] order = "window"` expects a queued job to hold its slots: its learned
/// prepare and run medians (docs/policy.md); `None` without a run estimate.
pub(crate) fn expected_hold(durations: &Durations, job: &Job) -> Option<Duration> {
    let expected = durations.expected(job);
    let run = expected.run?;
    let hold = run.p50_ms + expected.prepare.map_or(0, |p| p.p50_ms);
    Some(Duration::from_millis(hold))
}

/// Rebuilds the engine from `input` ([`Engine::from_shared`]) and hints its queued jobs
/// under `order = "window"` (see the module docs).
pub(crate) fn rebuild(input: &Input) -> Engine {
    let mut engine = Engine::from_shared(input.state.clone(), input.now);
    if engine.policy().queue.order == QueueOrder::Window {
        let queued = input.state.jobs().filter(|j| j.state == JobState::Queued);
        for job in queued {
            if let Some(hold) = expected_hold(&input.durations, job) {
                engine.set_expected_run(job.id, hold, input.now);
            }
        }
    }
    while engine.poll_event().is_some() {}
    engine
}

/// Rebuilds the engine and runs both forward passes, each bounded by `budget` of wall time.
pub(crate) fn compute(input: Input, budget: Duration) -> Snapshot {
    let started = Instant::now();
    let horizon = input.until.plus(RUN_PAST_UNTIL);
    let engine = rebuild(&input);
    let run = |engine: Engine, q: Quantile| {
        let stop_at = Instant::now() + budget;
        let known = Known {
            arrivals: &input.arrivals,
            ends: &input.ends,
        };
        forward_known(
            engine,
            input.now,
            &input.durations,
            known,
            q,
            horizon,
            &mut || Instant::now() < stop_at,
        )
    };
    let p50 = run(engine.clone(), Quantile::P50);
    let p90 = run(engine, Quantile::P90);
    Snapshot {
        computed_at: input.now,
        until: input.until,
        p50,
        p90,
        copy: input.copy,
        elapsed: started.elapsed(),
        generation: input.generation,
        input,
    }
}

impl Snapshot {
    /// The estimate of a job the forecast knows (a live job, or an arrival's id).
    pub(crate) fn estimate(&self, id: JobId) -> Option<EstimateView> {
        let a = self.p50.jobs.get(&id)?;
        let b = self.p90.jobs.get(&id).copied().unwrap_or_default();
        Some(self.view(*a, b))
    }

    fn view(&self, a: JobForecast, b: JobForecast) -> EstimateView {
        // p90 durations never make a job start or end earlier than p50 ones would in a
        // sane queue; where the engine's order makes it so (a reservation released
        // earlier), the later of the two is the p90.
        let later = |x: Option<Timestamp>, y: Option<Timestamp>| match (x, y) {
            (Some(x), Some(y)) => Some(x.max(y)),
            _ => None,
        };
        EstimateView {
            start_p50: time::format_opt(a.start),
            start_p90: time::format_opt(later(a.start, b.start)),
            end_p50: time::format_opt(a.end),
            end_p90: time::format_opt(later(a.end, b.end)),
            computed_at: Some(time::format(self.computed_at)),
        }
    }

    /// Every job the forecast covers: the live jobs not yet ended, then the planned runs
    /// (with the id the run gave them; `None` for one not submitted before it ended).
    pub(crate) fn entries(&self) -> Vec<(Entry<'_>, Option<JobId>)> {
        let live = self.input.state.jobs().filter(|j| {
            matches!(
                j.state,
                JobState::Queued | JobState::Preparing | JobState::Prepared | JobState::Running
            )
        });
        let planned = self.input.arrivals.iter().enumerate();
        live.map(|j| (Entry::Live(j), Some(j.id)))
            .chain(planned.map(|(i, a)| {
                (
                    Entry::Planned(a),
                    self.p50.arrivals.get(i).copied().flatten(),
                )
            }))
            .collect()
    }

    /// The jobs `covers` accepts, against the deadline `by`: when they are all done, and
    /// which would end after `by` (or have no estimate).
    pub(crate) fn tally(&self, covers: impl Fn(&Entry<'_>) -> bool, by: Timestamp) -> Tally {
        let mut t = Tally::default();
        let (mut end50, mut end90) = (Timestamp(0), Timestamp(0));
        for (entry, id) in self.entries() {
            if !covers(&entry) {
                continue;
            }
            t.jobs += 1;
            let est = id.and_then(|id| self.estimate(id)).unwrap_or_default();
            let a = id.and_then(|id| self.p50.jobs.get(&id)).and_then(|f| f.end);
            let b = id.and_then(|id| self.p90.jobs.get(&id)).and_then(|f| f.end);
            match (a, b) {
                (Some(a), Some(b)) => {
                    end50 = end50.max(a);
                    end90 = end90.max(a.max(b));
                    if a.max(b) > by {
                        t.missing.push(job_view(&entry, id, est));
                    }
                }
                _ => {
                    t.unknown += 1;
                    t.missing.push(job_view(&entry, id, est));
                }
            }
        }
        if t.unknown == 0 && t.jobs > 0 {
            t.done_p50 = Some(end50);
            t.done_p90 = Some(end90);
        }
        t
    }
}

fn job_view(entry: &Entry<'_>, id: Option<JobId>, estimate: EstimateView) -> ForecastJobView {
    match entry {
        Entry::Live(j) => ForecastJobView {
            id,
            schedule: None,
            kind: j.kind.clone(),
            state: j.state.to_string(),
            estimate,
        },
        Entry::Planned(a) => ForecastJobView {
            id: None,
            schedule: Some(a.schedule.clone()),
            kind: a.spec.kind.clone(),
            state: "planned".into(),
            estimate,
        },
    }
}

/// What [`Snapshot::tally`] found.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Jobs covered.
    pub jobs: usize,
    /// All done at p50 / p90 (`None` when one has no estimate, or none is covered).
    pub done_p50: Option<Timestamp>,
    pub done_p90: Option<Timestamp>,
    /// Jobs without an end in the forecast.
    pub unknown: usize,
    /// Jobs ending after the deadline at p90, or without an end.
    pub missing: Vec<ForecastJobView>,
}

/// A job a forecast covers.
pub(crate) enum Entry<'a> {
    /// Held by the engine.
    Live(&'a Job),
    /// A schedule's planned run.
    Planned(&'a Arrival),
}

impl Entry<'_> {
    /// The value a selector key has for it (as [`Job::key_value`]).
    pub(crate) fn key_value(&self, key: &str) -> Option<&str> {
        match self {
            Entry::Live(j) => j.key_value(key),
            Entry::Planned(a) => match key {
                "kind" => Some(&a.spec.kind),
                "owner" => Some(&a.spec.owner),
                "node" => a.spec.node.as_deref(),
                attr => a.spec.attrs.get(attr).map(String::as_str),
            },
        }
    }

    /// When it enters the queue.
    pub(crate) fn arrives(&self) -> Option<Timestamp> {
        match self {
            Entry::Live(_) => None,
            Entry::Planned(a) => Some(a.at),
        }
    }
}
