//! `simulate --from-server` and `policy apply --dry-run` on a history a real server
//! records: eight `lockgate run -- sleep 0.4` wrappers under `max_running = 2`.
//!
//! The replay under the same policy must give the live makespan within
//! [`TOLERANCE_MS`]. Why it can differ at all: the replay takes every job's run time as
//! the server measured it (admission to `finish`: the long-poll answer reaching the
//! wrapper, the fork of `sleep`, its 0.4 s, the `finish` call), so the HTTP latency of
//! each admission is inside the replayed durations, not lost; and the server admits the
//! next job in the same step that records a finish, as the engine does in the simulator.
//! What remains is rounding to whole milliseconds at each of the four admissions of a
//! slot's chain and the clock read of the step that records a submit. 50 ms covers that
//! with a margin of ten (the measured difference is reported in the assertion message).

use crate::harness::*;
use serde_json::Value;
use std::time::Duration;

/// Live makespan against the replay under the same policy (see the module docs).
const TOLERANCE_MS: f64 = 50.0;

fn column<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no column {name}: {v}"))
}

fn record_history(s: &Srv) {
    let mut runs: Vec<_> = (0..8)
        .map(|k| {
            s.run(&[
                "--kind",
                "backup",
                "--attr",
                &format!("vm=vm-{k}"),
                "--",
                "sleep",
                "0.4",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for r in &mut runs {
        assert_eq!(r.wait().unwrap().code(), Some(0));
    }
    let admin = s.admin();
    assert!(eventually(Duration::from_secs(5), || {
        admin
            .jobs(&lockgate_api::JobQuery::default())
            .is_ok_and(|l| l.jobs.len() == 8 && l.jobs.iter().all(|j| j.is_final()))
    }));
}

#[test]
fn replay_of_a_live_history_gives_its_makespan_and_a_higher_limit_a_shorter_one() {
    let s = Srv::start("[global]\nmax_running = 2\n");
    record_history(&s);
    std::fs::write(s.path("candidate.toml"), "[global]\nmax_running = 4\n").unwrap();
    let out = s
        .cli(&[
            "-o",
            "json",
            "simulate",
            "--from-server",
            "--since",
            "1h",
            "--policy",
            "candidate.toml",
            "--deadline",
            "1500ms",
            "--gantt",
            "g.svg",
            "--report",
            "r.html",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ms = |c: &str| column(&v, c)["makespan_s"].as_f64().unwrap() * 1000.0;
    let (recorded, active, candidate) = (ms("recorded"), ms("active"), ms("candidate"));
    assert!(
        (recorded - active).abs() <= TOLERANCE_MS,
        "live {recorded} ms, replay {active} ms"
    );
    assert!(recorded >= 1600.0, "four rounds of 0.4 s: {recorded} ms");
    assert!(
        candidate < active * 0.75,
        "candidate {candidate} ms, active {active} ms"
    );
    for c in ["recorded", "active", "candidate"] {
        assert_eq!(column(&v, c)["jobs"], 8, "{c}");
        assert_eq!(column(&v, c)["unfinished"], 0, "{c}");
    }
    let peak = |c: &str| {
        column(&v, c)["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["scope"] == "global")
            .map(|p| p["peak"].as_u64().unwrap())
    };
    assert_eq!(
        (peak("recorded"), peak("active"), peak("candidate")),
        (Some(2), Some(2), Some(4))
    );
    // Four rounds of 0.4 s under 2 slots end after 1.5 s; two rounds under 4 do not.
    assert!(column(&v, "active")["missed_deadline"].as_u64().unwrap() > 0);
    assert_eq!(column(&v, "candidate")["missed_deadline"], 0);
    let svg = std::fs::read_to_string(s.path("g.svg")).unwrap();
    assert_eq!(svg.matches("class=\"bar\"").count(), 8);
    let html = std::fs::read_to_string(s.path("r.html")).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "recorded, active, candidate"
    );
    assert!(html.contains("makespan"));
}

#[test]
fn policy_apply_dry_run_shows_the_diff_and_the_replay_and_applies_nothing() {
    let s = Srv::start("[global]\nmax_running = 2\n");
    record_history(&s);
    std::fs::write(s.path("candidate.toml"), "[global]\nmax_running = 4\n").unwrap();
    let digest = s.admin().policy().unwrap().digest;
    let out = s
        .cli(&[
            "policy",
            "apply",
            "--dry-run",
            "candidate.toml",
            "--since",
            "1h",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("max_running 2 -> 4"), "the diff: {text}");
    for want in [
        "recorded",
        "active",
        "candidate",
        "makespan",
        "wait p95",
        "2/2",
        "4/4",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert_eq!(
        s.admin().policy().unwrap().digest,
        digest,
        "nothing applied"
    );
}
