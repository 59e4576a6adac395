//! What a forecast costs: the engine's shared state the server's loop takes
//! (`Engine::share`, after 100 jobs finished since the last one; beside it the full
//! `Engine::clone` the loop took before), the rebuild off the loop (`Engine::from_shared`)
//! and one forward run to the end ([`lockgate_sim::forecast::forward`]), at 10k and 100k
//! queued jobs.
//!
//! Run: `cargo bench -p lockgate-sim --bench forecast` (`-- --depths 10000` for chosen
//! depths).
//!
//! Setup per depth: 100 datastores with `per-datastore` at 2 (200 jobs run), a global
//! limit of 200, learned durations of 60 s median and 90 s p90 per datastore (20 runs
//! each); `depth` backups queued behind, round-robin over the datastores. The forward run
//! plays every queued job to its end (virtual time: depth x 60 s / 200 slots), renewing
//! leases every TTL/3 as the server's holders do.

use lockgate_core::durations::{Durations, ForecastPolicy};
use lockgate_core::job::{JobSpec, JobState, Outcome};
use lockgate_core::policy::PerKey;
use lockgate_core::{Engine, Mode, Policy, Timestamp};
use lockgate_sim::forecast::{forward, Quantile};
use std::time::Instant;

const POLICY: &str = r#"
[global]
max_running = 200

[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 2
"#;

fn spec(ds: usize) -> JobSpec {
    JobSpec {
        kind: "backup".into(),
        owner: "bench".into(),
        attrs: [("datastore".to_string(), format!("ds{ds}"))].into(),
        ..JobSpec::default()
    }
}

fn durations(policy: &Policy) -> Durations {
    let mut d = Durations::new(ForecastPolicy {
        key: vec![PerKey::Attr("datastore".into())],
        ..ForecastPolicy::default()
    });
    for ds in 0..100 {
        for i in 0..20u64 {
            let mut job = spec(ds).check(policy).unwrap().into_job(1, Timestamp(0));
            job.state = JobState::Succeeded;
            job.outcome = Some(JobState::Succeeded);
            job.started_at = Some(Timestamp(0));
            job.finished_at = Some(Timestamp(if i < 18 { 60_000 } else { 90_000 }));
            d.observe(&job);
        }
    }
    d
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let depths: Vec<usize> = match args.iter().position(|a| a == "--depths") {
        Some(i) => args[i + 1].split(',').map(|d| d.parse().unwrap()).collect(),
        None => vec![10_000, 100_000],
    };
    let policy = Policy::from_toml(POLICY, None).unwrap();
    let d = durations(&policy);
    for depth in depths {
        let mut engine = Engine::new(policy.clone(), Mode::Indexed);
        for i in 0..depth + 200 {
            engine.submit(spec(i % 100), Timestamp(0)).unwrap();
        }
        while engine.poll_event().is_some() {}
        let t = Instant::now();
        drop(engine.share());
        let first_share = t.elapsed().as_secs_f64();
        let mut shares = Vec::new();
        let mut shared = None;
        let mut now = 1;
        for _ in 0..5 {
            let running: Vec<(u64, u64)> = engine
                .jobs()
                .filter(|j| j.state == JobState::Running)
                .take(100)
                .map(|j| (j.id, j.lease.unwrap().token))
                .collect();
            for (id, token) in running {
                now += 1;
                let at = Timestamp(now);
                engine
                    .finish(id, token, Outcome::Succeeded, None, at)
                    .unwrap();
            }
            while engine.poll_event().is_some() {}
            let t = Instant::now();
            shared = Some(engine.share());
            let _ = d.clone();
            shares.push(t.elapsed().as_secs_f64());
        }
        shares.sort_by(f64::total_cmp);
        let t = Instant::now();
        let rebuilt = Engine::from_shared(shared.unwrap(), Timestamp(1_000));
        let rebuild = t.elapsed().as_secs_f64();
        drop(rebuilt);
        let mut copies = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let e = engine.clone();
            copies.push(t.elapsed().as_secs_f64());
            drop(e);
        }
        copies.sort_by(f64::total_cmp);
        let mut exports = Vec::new();
        let mut snap = None;
        for _ in 0..5 {
            let t = Instant::now();
            snap = Some(engine.export());
            exports.push(t.elapsed().as_secs_f64());
        }
        exports.sort_by(f64::total_cmp);
        let t = Instant::now();
        let restored = Engine::restore(
            policy.clone(),
            snap.unwrap(),
            Timestamp(1_000),
            Mode::Indexed,
        );
        let restore = t.elapsed().as_secs_f64();
        drop(restored);
        let t = Instant::now();
        let run = forward(
            engine.clone(),
            Timestamp(1_000),
            &d,
            &[],
            Quantile::P50,
            Timestamp(u64::MAX / 4),
            &mut || true,
        );
        let fwd = t.elapsed().as_secs_f64();
        let ended = run.jobs.values().filter(|f| f.end.is_some()).count();
        println!(
            "forecast depth {depth}: on the loop: share {:.3} ms with the durations (median of 5, \
             each after 100 finishes; the first share, which builds the map, {:.1} ms); \
             off it: from_shared {:.1} ms",
            shares[2] * 1e3,
            first_share * 1e3,
            rebuild * 1e3
        );
        println!(
            "forecast depth {depth}: clone {:.1} ms, export {:.1} ms (medians of 5), restore {:.1} ms, \
             forward run {:.2} s ({} steps, {ended} jobs ended, complete {}), {:.2} us per job",
            copies[2] * 1e3,
            exports[2] * 1e3,
            restore * 1e3,
            fwd,
            run.steps,
            run.complete,
            fwd * 1e6 / ended as f64
        );
    }
}
