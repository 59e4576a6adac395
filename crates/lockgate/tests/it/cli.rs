//! The CLI for people and scripts: JSON on stdout only, TLS, SIGHUP reloads.

use crate::harness::*;
use lockgate_core::JobState;
use serde_json::Value;
use std::time::Duration;

fn json_out(c: &mut std::process::Command) -> Value {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not only JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn json_output_is_only_json_and_tokens_are_shown_once() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let t = json_out(&mut s.cli(&[
        "-o",
        "json",
        "token",
        "create",
        "--name",
        "ci",
        "--role",
        "submitter",
    ]));
    assert_eq!(
        (t["name"].as_str(), t["role"].as_str(), t["node"].is_null()),
        (Some("ci"), Some("submitter"), true)
    );
    let secret = t["token"].as_str().unwrap().to_string();
    assert!(secret.len() >= 32);
    let list = json_out(&mut s.cli(&["-o", "json", "token", "ls"]));
    assert!(
        list.to_string().contains("\"ci\"") && !list.to_string().contains(&secret),
        "never the secret again"
    );

    let mut as_ci = s.cli(&[
        "-o",
        "json",
        "job",
        "submit",
        "--kind",
        "backup",
        "--attr",
        "datastore=ds1",
    ]);
    as_ci.env("LOCKGATE_TOKEN", &secret);
    let job = json_out(&mut as_ci);
    assert_eq!(
        (job["owner"].as_str(), job["state"].as_str()),
        (Some("ci"), Some("running"))
    );
    let id = job["id"].as_u64().unwrap().to_string();
    let listed = json_out(&mut s.cli(&["-o", "json", "job", "ls", "--state", "running"]));
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
    let ex = json_out(&mut s.cli(&["-o", "json", "job", "explain", &id]));
    assert_eq!(ex["position"], 0);
    let cancelled = json_out(&mut s.cli(&["-o", "json", "job", "cancel", "--force", &id]));
    assert_eq!(cancelled["state"], "cancelled");
    let policy = json_out(&mut s.cli(&["-o", "json", "policy", "show"]));
    assert_eq!(policy["policy"]["global"]["max_running"], 1);
    let events = s.cli(&["-o", "json", "events"]).output().unwrap();
    for line in String::from_utf8(events.stdout).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
    // Offline check: no server needed, and the error names file, line and field.
    let bad = s.path("bad.toml");
    std::fs::write(&bad, "[global]\nmax_running = -1\n").unwrap();
    let out = s
        .cli(&["policy", "check"])
        .arg(&bad)
        .env("LOCKGATE_SERVER", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("bad.toml:2") && err.contains("global.max_running"),
        "{err}"
    );
}

#[test]
fn sighup_rereads_the_config_file_and_an_invalid_one_changes_nothing() {
    let s = Srv::start("[global]\nmax_running = 0\n");
    let admin = s.admin();
    let queued = admin
        .submit(&lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        })
        .unwrap()
        .0;
    let before = admin.policy().unwrap().digest;
    std::fs::write(s.path("lockgate.toml"), "[global]\nmax_running = oops\n").unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        admin.policy().unwrap().digest,
        before,
        "an invalid file changes nothing"
    );
    std::fs::write(s.path("lockgate.toml"), "[global]\nmax_running = 1\n").unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    assert_eq!(
        admin.wait(queued.id, JobState::Queued, 10).unwrap().state,
        JobState::Running
    );
    assert_ne!(admin.policy().unwrap().digest, before);
}

#[test]
fn tls_serves_the_api_and_lockgate_run() {
    let s = Srv::start_with("", true);
    assert!(s.url().starts_with("https://"));
    let status = s.run(&["--", "true"]).status().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(s.admin().job(1).unwrap().state, JobState::Succeeded);
    // Plain HTTP is not served on a TLS port.
    let plain = lockgate_client::Client::new(
        &format!("http://127.0.0.1:{}", s.port),
        Some(s.token.clone()),
    )
    .unwrap();
    assert!(plain.job(1).is_err());
}

/// `lockgate bench` swaps its own policies (one limits nothing); the `removes_all_limits`
/// guard on `PUT /v1/policy` once made it fail at its last phase. A small run must end
/// with every phase measured.
#[test]
fn bench_runs_every_phase_with_its_own_policies() {
    let out = std::process::Command::new(BIN)
        .args([
            "bench",
            "--json",
            "--clients",
            "2",
            "--cycles",
            "5",
            "--waiters",
            "5",
            "--runs",
            "2",
            "--drain",
            "40",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("bench prints JSON");
    assert_eq!(v["throughput"]["cycles"].as_u64(), Some(10));
    assert_eq!(v["release_to_admission_ms"]["samples"].as_u64(), Some(5));
    assert_eq!(v["run_vs_flock"]["runs"].as_u64(), Some(2));
    assert!(v["run_vs_flock"]["lockgate_run_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["drain_jobs"].as_u64(), Some(40));
    assert!(v["drain_jobs_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["drain_single_jobs_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_policy_that_would_match_nothing_is_warned_about_and_strict_refuses_it() {
    let s = Srv::start("[global]\nmax_running = 4\n");
    let typo = s.path("typo.toml");
    std::fs::write(
        &typo,
        "[kinds.backup]\n\n[[limit]]\nname = \"backups\"\nmatch = \"knd=backup\"\nmax = 2\n",
    )
    .unwrap();
    let check = |extra: &[&str]| {
        let mut c = s.cli(&["policy", "check"]);
        c.args(extra).arg(&typo);
        c.output().unwrap()
    };
    // Offline: valid, with a warning naming the line and the likely typo.
    let out = check(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: line 5: [[limit]] \"backups\"")
            && err.contains("did you mean \"kind\""),
        "{err}"
    );
    assert_eq!(check(&["--strict"]).status.code(), Some(1));

    // With the server's history: the count of jobs it matched none of.
    let admin = s.admin();
    for _ in 0..3 {
        admin
            .submit(&lockgate_api::SubmitRequest {
                kind: "backup".into(),
                ..Default::default()
            })
            .unwrap();
    }
    let out = check(&["--history", "--strict"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("matched none of the 3 jobs of the last 7d"),
        "{err}"
    );
    let json = s
        .cli(&["-o", "json", "policy", "diff", "--strict"])
        .arg(&typo)
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["warnings"].as_array().unwrap().len(), 1, "{v}");

    // The restic and borg pages' conflicts pasted together: warned, and quiet once each
    // names its tool.
    let both = s.path("both.toml");
    std::fs::write(
        &both,
        "[[conflict]]\nkeys = [\"repo\"]\nexclusive = \"kind in (prune, check)\"\n\n[[conflict]]\nkeys = [\"repo\"]\n",
    )
    .unwrap();
    let out = s
        .cli(&["policy", "check", "--strict"])
        .arg(&both)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("one at a time"),
        "{out:?}"
    );
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/integrations/restic-and-borg.toml"
    );
    let out = s
        .cli(&["policy", "check", "--strict", shipped])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
