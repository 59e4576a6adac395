//! `lockgate queue pause/resume/pauses`, `job set`, and `--after` on `lockgate run` (issue
//! 11), against a real server process.

use crate::harness::*;
use serde_json::Value;
use std::time::Duration;

fn out(c: &mut std::process::Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn json(c: &mut std::process::Command) -> Value {
    serde_json::from_str(&out(c)).unwrap()
}

#[test]
fn pause_explain_resume_and_set_priority_from_the_cli() {
    let s = Srv::start("");
    let id = out(&mut s.cli(&[
        "queue",
        "pause",
        "--match",
        "repo=main",
        "--until",
        "2h",
        "--reason",
        "borg check",
    ]));
    let id = id.trim().to_string();
    assert_eq!(id, "1");
    let job = json(&mut s.cli(&[
        "-o",
        "json",
        "job",
        "submit",
        "--kind",
        "backup",
        "--attr",
        "repo=main",
    ]));
    assert_eq!(job["state"], "queued");
    let jid = job["id"].as_u64().unwrap().to_string();
    let why = out(&mut s.cli(&["job", "explain", &jid]));
    assert!(why.contains("pause:1: paused by admin until 20"), "{why}");
    assert!(why.contains("(repo=main): borg check"), "{why}");
    let list = out(&mut s.cli(&["queue", "pauses"]));
    assert!(
        list.contains("repo=main") && list.contains("borg check"),
        "{list}"
    );
    let set = json(&mut s.cli(&["-o", "json", "job", "set", &jid, "--priority", "-3"]));
    assert_eq!(set["priority"], -3);
    let bad = s
        .cli(&["queue", "pause", "--reason", "x", "--until", "soon"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--until"),
        "names the flag"
    );
    assert!(out(&mut s.cli(&["queue", "resume", "--all"])).contains("resumed pause 1"));
    let j = json(&mut s.cli(&["-o", "json", "job", "show", &jid]));
    assert_eq!(j["state"], "running");
}

#[test]
fn run_after_waits_until_its_dependency_ends() {
    let s = Srv::start("");
    // Admitted at once, and nobody holds it: it ends only when cancelled.
    let first = json(&mut s.cli(&["-o", "json", "job", "submit", "--kind", "backup"]));
    assert_eq!(first["state"], "running");
    let first = first["id"].as_u64().unwrap().to_string();
    let mut run = s
        .run(&["--kind", "verify", "--after", &first, "--", "true"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(run.try_wait().unwrap().is_none(), "waits for job {first}");
    out(&mut s.cli(&["job", "cancel", &first, "--force"]));
    let ok = eventually(Duration::from_secs(10), || {
        run.try_wait().unwrap().is_some()
    });
    assert!(ok, "run went on once its dependency ended");
    assert!(run.wait().unwrap().success());
}
