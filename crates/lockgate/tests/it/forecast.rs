//! Forecast accuracy, measured (docs/forecasts.md, docs/benchmarks.md "Accuracy"): a real
//! server, real `lockgate run -- sleep X` processes over a mixed workload with a known
//! duration spread. Round 1 gives the server its history; round 2 has the same shape
//! (durations drawn again from the same spread). Each round-2 job is explained right after
//! its submission, and its predicted start is compared with its actual start.
//!
//! Reproduce (and scale with `LOCKGATE_ACCURACY_JOBS`, default 24 jobs a round):
//! `cargo test -p lockgate --test it forecast_accuracy -- --nocapture`

use crate::harness::*;
use lockgate_api::{time, JobView};
use lockgate_client::Client;
use std::process::{Child, Stdio};
use std::time::Duration;

const POLICY: &str = "[global]\nmax_running = 3\n[forecast]\nkey = [\"group\"]\n";

/// Kind, group and the median seconds of each shape; a job takes its median times a
/// factor drawn in [0.8, 1.2].
const SHAPES: [(&str, &str, f64); 4] = [
    ("backup", "vm/a", 0.6),
    ("backup", "vm/b", 1.2),
    ("backup", "vm/c", 0.3),
    ("verify", "vm/a", 0.8),
];

/// A small deterministic generator (the spread is known, the run is repeatable).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Starts `lockgate run` for job `i` of a round, and waits until the server has its job
/// (ids are given in submit order, so it is `id`).
fn submit(s: &Srv, c: &Client, i: usize, rng: &mut Lcg, id: u64) -> Child {
    let (kind, group, median) = SHAPES[i % SHAPES.len()];
    let secs = median * (0.8 + 0.4 * rng.unit());
    let child = s
        .run(&[
            "--kind",
            kind,
            "--attr",
            &format!("group={group}"),
            "--",
            "sleep",
            &format!("{secs:.3}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || c.job(id).is_ok()),
        "job {id} was never submitted"
    );
    child
}

fn admitted_ms(j: &JobView) -> u64 {
    let t = j.prepare_started_at.as_ref().or(j.started_at.as_ref());
    time::parse(t.expect("it ran")).unwrap().0
}

#[test]
fn forecast_accuracy_on_a_mixed_workload() {
    let n: usize = std::env::var("LOCKGATE_ACCURACY_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let s = Srv::start(POLICY);
    let c = s.admin();
    let mut next = 1;
    let mut rng = Lcg(1);
    let round1: Vec<Child> = (0..n)
        .map(|i| {
            next += 1;
            submit(&s, &c, i, &mut rng, next - 1)
        })
        .collect();
    for mut child in round1 {
        assert!(child.wait().unwrap().success());
    }

    let mut rng = Lcg(2);
    let mut predicted = Vec::new();
    let mut children = Vec::new();
    for i in 0..n {
        let id = next;
        next += 1;
        children.push(submit(&s, &c, i, &mut rng, id));
        let ex = c.explain(id).unwrap();
        if let Some(e) = ex.estimate {
            let ms = |t: &Option<String>| t.as_deref().map(|t| time::parse(t).unwrap().0);
            predicted.push((id, ms(&e.start_p50), ms(&e.start_p90)));
        }
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }

    let tol_ms = 250;
    let (mut abs_err, mut in_band, mut in_tol_band, mut known) = (0u64, 0, 0, 0);
    for &(id, p50, p90) in &predicted {
        let (Some(p50), Some(p90)) = (p50, p90) else {
            continue;
        };
        known += 1;
        let actual = admitted_ms(&c.job(id).unwrap());
        abs_err += actual.abs_diff(p50);
        in_band += usize::from(actual >= p50 && actual <= p90);
        in_tol_band += usize::from(actual + tol_ms >= p50 && actual <= p90 + tol_ms);
    }
    assert!(
        known > 0,
        "round 2 queued some jobs, and each had an estimate"
    );
    assert_eq!(
        known,
        predicted.len(),
        "every queued job had a start estimate"
    );
    let mae_s = abs_err as f64 / known as f64 / 1000.0;
    let share = in_band as f64 / known as f64;
    let tol_share = in_tol_band as f64 / known as f64;
    println!(
        "forecast accuracy: {n} jobs a round, {known} queued at submission in round 2: \
         start MAE {mae_s:.3} s; actual start within [p50, p90]: {share:.2}; \
         within [p50 - {tol_ms} ms, p90 + {tol_ms} ms]: {tol_share:.2}"
    );
    // Generous bounds: a forecast that ignored the queue would be off by seconds.
    assert!(mae_s < 1.5, "mean absolute error {mae_s:.3} s");
    assert!(tol_share >= 0.5, "share within the band {tol_share:.2}");
}
