//! The forward run: a live engine played on with learned durations.

use lockgate_core::durations::{Durations, ForecastPolicy};
use lockgate_core::job::{JobSpec, JobState};
use lockgate_core::{Engine, Job, Mode, Policy, Timestamp};
use lockgate_sim::forecast::{forward, Arrival, Quantile};

fn spec(kind: &str) -> JobSpec {
    JobSpec {
        kind: kind.into(),
        owner: "t".into(),
        ..JobSpec::default()
    }
}

fn learned(kind: &str, runs: &[u64]) -> Durations {
    let mut d = Durations::new(ForecastPolicy::default());
    for &ms in runs {
        let policy = Policy::from_toml("", None).unwrap();
        let mut job: Job = spec(kind).check(&policy).unwrap().into_job(1, Timestamp(0));
        job.state = JobState::Succeeded;
        job.outcome = Some(JobState::Succeeded);
        job.started_at = Some(Timestamp(0));
        job.finished_at = Some(Timestamp(ms));
        d.observe(&job);
    }
    d
}

#[test]
fn queued_jobs_start_when_the_ones_ahead_end() {
    let policy = Policy::from_toml("[global]\nmax_running = 1\n", None).unwrap();
    let mut engine = Engine::new(policy, Mode::Indexed);
    let t0 = Timestamp(1_000_000);
    let ids: Vec<_> = (0..3)
        .map(|_| engine.submit(spec("backup"), t0).unwrap().job.id)
        .collect();
    let unknown = engine.submit(spec("verify"), t0).unwrap().job.id;
    let after_unknown = engine.submit(spec("backup"), t0).unwrap().job.id;
    while engine.poll_event().is_some() {}
    // 10 s median, 40 s p90 (the largest of two samples).
    let d = learned("backup", &[10_000, 40_000]);
    let now = Timestamp(t0.0 + 4_000);
    let horizon = Timestamp(t0.0 + 86_400_000);
    let arrivals = vec![Arrival {
        at: Timestamp(t0.0 + 100_000_000),
        spec: spec("backup"),
        schedule: "late".into(),
    }];
    let p50 = forward(
        engine.clone(),
        now,
        &d,
        &arrivals,
        Quantile::P50,
        horizon,
        &mut || true,
    );
    let at = |run: &lockgate_sim::forecast::ForwardRun, id| {
        let f = run.jobs[&id];
        (f.start.map(|t| t.0 - t0.0), f.end.map(|t| t.0 - t0.0))
    };
    assert!(p50.complete);
    assert_eq!(at(&p50, ids[0]), (Some(0), Some(10_000)));
    assert_eq!(at(&p50, ids[1]), (Some(10_000), Some(20_000)));
    assert_eq!(at(&p50, ids[2]), (Some(20_000), Some(30_000)));
    // No history, no default: it starts, but its end (and what waits for it) is unknown.
    assert_eq!(at(&p50, unknown), (Some(30_000), None));
    assert_eq!(at(&p50, after_unknown), (None, None));
    // The arrival past the horizon is never submitted.
    assert_eq!(p50.arrivals, vec![None]);
    assert_eq!(p50.waits.keys().collect::<Vec<_>>(), vec!["global"]);
    let p90 = forward(engine, now, &d, &[], Quantile::P90, horizon, &mut || true);
    assert_eq!(at(&p90, ids[1]), (Some(40_000), Some(80_000)));
}

#[test]
fn a_default_run_stands_in_for_missing_history_and_the_budget_stops_the_run() {
    let policy = Policy::from_toml(
        "[global]\nmax_running = 1\n[forecast]\ndefault_run = \"1s\"\n",
        None,
    )
    .unwrap();
    let d = Durations::new(policy.forecast.clone());
    let mut engine = Engine::new(policy, Mode::Indexed);
    let ids: Vec<_> = (0..2000)
        .map(|_| engine.submit(spec("x"), Timestamp(0)).unwrap().job.id)
        .collect();
    let full = forward(
        engine.clone(),
        Timestamp(0),
        &d,
        &[],
        Quantile::P50,
        Timestamp(u64::MAX / 2),
        &mut || true,
    );
    assert!(full.complete);
    assert_eq!(full.jobs[&ids[1999]].end, Some(Timestamp(2_000_000)));
    let mut asked = 0;
    let cut = forward(
        engine,
        Timestamp(0),
        &d,
        &[],
        Quantile::P50,
        Timestamp(u64::MAX / 2),
        &mut || {
            asked += 1;
            asked < 2
        },
    );
    assert!(!cut.complete);
    assert_eq!(cut.jobs[&ids[1999]].end, None);
}

#[test]
fn a_running_job_its_holder_measured_ends_at_its_own_rate() {
    use lockgate_sim::forecast::{forward_known, Known, OwnEnd};
    let policy = Policy::from_toml("[global]\nmax_running = 1\n", None).unwrap();
    let mut engine = Engine::new(policy, Mode::Indexed);
    let t0 = Timestamp(1_000_000);
    let ids: Vec<_> = (0..2)
        .map(|_| engine.submit(spec("backup"), t0).unwrap().job.id)
        .collect();
    while engine.poll_event().is_some() {}
    let d = learned("backup", &[10_000, 40_000]);
    let now = Timestamp(t0.0 + 4_000);
    let horizon = Timestamp(t0.0 + 86_400_000);
    // Slower than its history: at its own rate it reaches the median size at 25 s; it is
    // not known to reach the 90th percentile's.
    let ends = std::collections::HashMap::from([(
        ids[0],
        OwnEnd {
            p50: Some(Timestamp(t0.0 + 25_000)),
            p90: None,
        },
    )]);
    let known = Known {
        arrivals: &[],
        ends: &ends,
    };
    let at = |run: &lockgate_sim::forecast::ForwardRun, id| {
        let f = run.jobs[&id];
        (f.start.map(|t| t.0 - t0.0), f.end.map(|t| t.0 - t0.0))
    };
    let p50 = forward_known(
        engine.clone(),
        now,
        &d,
        known,
        Quantile::P50,
        horizon,
        &mut || true,
    );
    assert_eq!(at(&p50, ids[0]), (Some(0), Some(25_000)));
    assert_eq!(at(&p50, ids[1]), (Some(25_000), Some(35_000)));
    // Without an own end for p90, the learned run time.
    let p90 = forward_known(engine, now, &d, known, Quantile::P90, horizon, &mut || true);
    assert_eq!(at(&p90, ids[0]), (Some(0), Some(40_000)));
}
