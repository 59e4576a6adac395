//! The `-o json` shapes scripts rely on, pinned offline (no server at the configured
//! address): `policy check` (`{valid, field, message}`) and `simulate` (`nodes: [{node,
//! slots, ..}]`, `unfinished`). They may gain keys, never lose or rename one. `schedule
//! next` (`{expr, next}`) is pinned in `schedule.rs` and `backup create --dry-run` in
//! `backup.rs`.

use crate::harness::BIN;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn offline(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env("LOCKGATE_SERVER", "http://127.0.0.1:1")
        .env_remove("LOCKGATE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not only JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn policy_check_json_keeps_valid_field_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[global]\nmax_running = -1\n").unwrap();
    let bad = bad.to_str().unwrap();
    let out = offline(&["-o", "json", "policy", "check", bad]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["valid"], false);
    assert_eq!(v["field"], "global.max_running");
    assert_eq!(v["line"], 2);
    assert_eq!(v["file"], bad);
    assert_eq!(
        v["message"],
        format!("{bad}:2: global.max_running: expected a whole number >= 0, got -1")
    );
    let out = offline(&[
        "-o",
        "json",
        "policy",
        "check",
        "examples/pbs-like/policy.toml",
    ]);
    assert!(out.status.success());
    let v = json(&out);
    assert_eq!(v["valid"], true, "{v}");
}

#[test]
fn simulate_json_keeps_nodes_with_slots_and_unfinished() {
    let dir = "examples/velero-like";
    let out = offline(&[
        "simulate",
        "--policy",
        &format!("{dir}/policy.toml"),
        "--nodes",
        &format!("{dir}/nodes.json"),
        "--workload",
        &format!("{dir}/workload.jsonl"),
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    for key in [
        "jobs",
        "makespan_s",
        "wait_s",
        "scopes",
        "nodes",
        "unfinished",
    ] {
        assert!(v.get(key).is_some(), "no {key:?} in {v}");
    }
    assert_eq!(v["unfinished"], 0);
    let nodes = v["nodes"].as_array().expect("nodes is a list");
    assert_eq!(nodes.len(), 3, "{v}");
    for n in nodes {
        assert!(n["node"].is_string(), "{n}");
        assert!(n["slots"].is_number() || n["slots"].is_null(), "{n}");
    }
}

#[test]
fn simulate_sweep_json_names_the_best_limit() {
    let dir = "examples/contention";
    let out = offline(&[
        "simulate",
        "--policy",
        &format!("{dir}/policy.toml"),
        "--nodes",
        &format!("{dir}/nodes.json"),
        "--workload",
        &format!("{dir}/workload.jsonl"),
        "--contention",
        &format!("{dir}/contention.toml"),
        "--sweep",
        "limit:per-datastore=2..4",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["sweep"], "limit:per-datastore=2..4", "{v}");
    assert_eq!(v["best"], 3, "{v}");
    let points = v["points"].as_array().expect("points is a list");
    assert_eq!(points.len(), 3, "{v}");
    for p in points {
        for key in ["value", "makespan_s", "wait_s", "slowdown", "unfinished"] {
            assert!(p.get(key).is_some(), "no {key:?} in {p}");
        }
    }
}

#[test]
fn simulate_compare_takes_every_baseline() {
    let dir = "examples/contention";
    let mut args = vec![
        "simulate".to_string(),
        "--policy".into(),
        format!("{dir}/policy.toml"),
        "--nodes".into(),
        format!("{dir}/nodes.json"),
        "--workload".into(),
        format!("{dir}/workload.jsonl"),
        "--contention".into(),
        format!("{dir}/contention.toml"),
        "-o".into(),
        "json".into(),
    ];
    let names = ["velero", "velero-1.17", "pbs", "bacula", "unlimited"];
    for b in names {
        args.push("--compare".into());
        args.push(b.into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = offline(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    for b in names {
        assert!(v["compare"][b]["makespan_s"].is_number(), "{b}: {v}");
        assert!(v["compare"][b]["slowdown"]["p95"].is_number(), "{b}: {v}");
    }
    assert!(v["slowdown"]["p50"].is_number(), "{v}");
}

fn stdout(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The id column of a `job ls` table.
fn ids(table: &str) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn job_ls_lists_newest_first_and_filters_on_the_server() {
    let s = crate::harness::Srv::start("[global]\nmax_running = 1\n");
    let admin = s.admin();
    let submit = |ds: &str| {
        admin
            .submit(&lockgate_api::SubmitRequest {
                kind: "backup".into(),
                attrs: [("datastore".to_string(), ds.to_string())].into(),
                ..Default::default()
            })
            .unwrap()
            .0
    };
    let first = submit("ds1");
    let token = first.lease.as_ref().expect("admitted").token;
    admin
        .finish_job(first.id, token, lockgate_core::Outcome::Succeeded, None)
        .unwrap();
    submit("ds2");
    submit("ds1");
    submit("ds1");
    let all = stdout(&mut s.cli(&["job", "ls"]));
    assert_eq!(ids(&all), [4, 3, 2, 1], "{all}");
    let header = all.lines().next().unwrap();
    for col in ["SUBMITTED", "STARTED", "WAIT", "RUN"] {
        assert!(header.contains(col), "{header}");
    }
    let active = stdout(&mut s.cli(&["job", "ls", "--active", "--attr", "datastore=ds1"]));
    assert_eq!(ids(&active), [4, 3], "{active}");
    let old = stdout(&mut s.cli(&["job", "ls", "--oldest-first", "--limit", "2"]));
    assert_eq!(ids(&old), [1, 2], "{old}");
    let shown = stdout(&mut s.cli(&["job", "show", "1"]));
    for field in [
        "Submitted:",
        "Admitted:",
        "Started:",
        "Finished:",
        "Wait:",
        "Run:",
    ] {
        assert!(shown.contains(field), "{shown}");
    }
    assert!(!shown.contains("Finished:    -"), "{shown}");
}
