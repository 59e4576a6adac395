//! The loop's part of a forecast: what it hands over shares the engine's job records (no
//! job is copied on the loop), and what that costs at a given queue length.

use crate::auth::Tokens;
use crate::event_loop::Loop;
use crate::policy::PolicySource;
use lockgate_core::job::{JobSpec, JobState};
use lockgate_core::{Engine, Mode, Policy};
use std::time::Duration;

const POLICY: &str = r#"
[global]
max_running = 200

[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 2
"#;

/// A loop over a real store whose engine holds `queued` jobs behind 200 running ones
/// (100 datastores, 2 each), its events drained as after a batch.
fn loop_with(dir: &std::path::Path, queued: usize) -> Loop {
    let store = lockgate_store::SqliteStore::open(&dir.join("s.db")).unwrap();
    let policy = Policy::from_toml(POLICY, None).unwrap();
    let (events, _) = tokio::sync::broadcast::channel(16);
    let engine = Engine::new(policy, Mode::Indexed);
    let mut lp = Loop::new(
        engine,
        Box::new(store),
        Tokens::default(),
        PolicySource::Store,
        events,
        0,
        0,
    );
    let now = lp.now();
    for i in 0..queued + 200 {
        let spec = JobSpec {
            kind: "backup".into(),
            owner: "fc".into(),
            attrs: [("datastore".to_string(), format!("ds{}", i % 100))].into(),
            ..JobSpec::default()
        };
        lp.engine.submit(spec, now).unwrap();
        while lp.engine.poll_event().is_some() {}
    }
    lp
}

/// The input of a forecast holds the engine's own job records (the same allocations), so
/// taking it is pointer copies, however large the jobs are; a forecast computed from it
/// knows every queued job.
#[test]
fn the_forecast_input_shares_the_job_records_with_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let mut lp = loop_with(dir.path(), 2_000);
    let now = lp.now();
    let input = lp.forecast_input(now, now.plus(Duration::from_secs(3_600)));
    assert_eq!(input.state.len(), 2_200);
    for job in input.state.jobs() {
        let own = lp.engine.job(job.id).expect("live");
        assert!(std::ptr::eq(&**job, own), "job {} was copied", job.id);
    }
    let snap = super::snapshot::compute(input, super::FORWARD_BUDGET);
    let queued = lp.engine.jobs().filter(|j| j.state == JobState::Queued);
    for job in queued {
        assert!(snap.p50.jobs.contains_key(&job.id), "job {}", job.id);
    }
}

/// What taking the input costs the loop (`copy`), at the depths in
/// `LOCKGATE_FORECAST_COST_DEPTHS` (default 10000), printed
/// (`cargo test -p lockgate-server --lib forecast_input_cost -- --nocapture`): the median
/// of 5 refreshes, each after 100 running jobs finished and 100 queued ones were admitted
/// in their place, and before them the first, after every job was submitted (the loop
/// built the engine's shared map, empty, when it started).
#[test]
fn forecast_input_cost() {
    let depths = std::env::var("LOCKGATE_FORECAST_COST_DEPTHS").unwrap_or("10000".into());
    for depth in depths
        .split(',')
        .map(|d| d.trim().parse::<usize>().unwrap())
    {
        let dir = tempfile::tempdir().unwrap();
        let mut lp = loop_with(dir.path(), depth);
        let now = lp.now();
        let until = now.plus(Duration::from_secs(86_400));
        let burst = lp.forecast_input(now, until).copy;
        let mut copies: Vec<Duration> = Vec::new();
        for round in 0..5u64 {
            let running: Vec<(u64, u64)> = lp
                .engine
                .jobs()
                .filter(|j| j.state == JobState::Running)
                .take(100)
                .map(|j| (j.id, j.lease.unwrap().token))
                .collect();
            let t = now.plus(Duration::from_millis(round + 1));
            for (id, token) in running {
                let done = lockgate_core::Outcome::Succeeded;
                lp.engine.finish(id, token, done, None, t).unwrap();
            }
            while lp.engine.poll_event().is_some() {}
            let input = lp.forecast_input(t, until);
            assert_eq!(input.state.len(), depth + 100 - 100 * round as usize);
            copies.push(input.copy);
        }
        copies.sort();
        let ms = |d: &Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
        println!(
            "forecast input on the loop at {depth} queued jobs: {} ms (median of 5, \
             each after 100 finishes; runs {:?}); the first, after {} submits: {} ms",
            ms(&copies[2]),
            copies.iter().map(ms).collect::<Vec<_>>(),
            depth + 200,
            ms(&burst)
        );
    }
}
