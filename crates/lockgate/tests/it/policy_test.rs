//! `lockgate policy test`: the examples' assertion files pass and fail with their numbers,
//! a policy change that breaks a promise is caught, and bad input is refused with its line.

use crate::harness::BIN;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mixed")
        .join(name)
}

fn policy_test(policy: &Path, asserts: &Path, json: bool) -> Output {
    let mut c = Command::new(BIN);
    c.args(["policy", "test"])
        .arg(policy)
        .arg("--nodes")
        .arg(example("nodes.json"))
        .arg("--workload")
        .arg(example("workload.jsonl"))
        .arg("--assert")
        .arg(asserts);
    if json {
        c.args(["-o", "json"]);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_exit(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}{}", stdout(o), stderr(o));
}

#[test]
fn the_examples_promises_hold_and_stricter_ones_fail_with_their_numbers() {
    let out = policy_test(&example("policy.toml"), &example("assert.toml"), false);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("5 of 5 assertions held"),
        "{}",
        stdout(&out)
    );

    let out = policy_test(
        &example("policy.toml"),
        &example("assert-stricter.toml"),
        true,
    );
    assert_exit(&out, 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(v["failed"], 2);
    let failed: Vec<&serde_json::Value> = v["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ok"] == false)
        .collect();
    assert_eq!(failed[0]["check"], "start_within");
    assert_eq!(failed[0]["line"], 9);
    assert!(
        failed[0]["measured"].as_str().unwrap().contains("bound 1m"),
        "{v}"
    );
    assert_eq!(failed[1]["check"], "done_within");
}

#[test]
fn a_policy_change_that_breaks_a_promise_is_caught() {
    // The uplink pool raised from 20 to 30 units: the promise that it is never
    // oversubscribed (20) must fail, with the peak it reached.
    let dir = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(example("policy.toml")).unwrap();
    let loosened = policy.replace("uplink = 20 ", "uplink = 30 ");
    assert_ne!(policy, loosened, "the example's uplink pool moved");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, loosened).unwrap();
    let out = policy_test(&path, &example("assert.toml"), false);
    assert_exit(&out, 1);
    let text = stdout(&out);
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failed.len(), 1, "{}", stdout(&out));
    assert!(
        failed[0].contains("the uplink is never oversubscribed: peak 2")
            && failed[0].contains("(bound 20)"),
        "{}",
        failed[0]
    );
}

#[test]
fn assertion_files_that_cannot_be_judged_are_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[[assert]]\nscope = \"limit:per-storage[storage=s3-cold]\"\nmax = 2\n", ":1: scope \"limit:per-storage[storage=s3-cold]\": no job of the run touched it"),
        ("[[assert]]\nmax = 2\nscope = \"global\"\n\n[[assert]]\nkind = \"tape\"\nwait_p90 = \"1m\"\n", ":5: kind \"tape\": no job of the workload has it"),
        ("[[assert]]\ndone_within = \"soon\"\n", ":1: done_within \"soon\""),
        ("[[assert]]\ndone_within = \"1h\"\nmaximum = 2\n", ":3: unknown field `maximum`"),
        ("[[assert\n", ":1: "),
    ];
    for (i, (text, expect)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("a{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = policy_test(&example("policy.toml"), &path, false);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {}", stderr(&out));
        let want = format!("{}{expect}", path.display());
        assert!(
            stderr(&out).contains(&want),
            "{text:?}: want {want:?} in {}",
            stderr(&out)
        );
    }
}

/// The restore-night example: restores asked for during a night of 400 queued backups
/// start at the first slot that frees, by the restore kinds' built-in priority; with that
/// priority taken away (the planted bug) they wait behind the backups, and the assertion
/// says by how many releases.
#[test]
fn restores_start_at_the_first_slot_release_unless_their_priority_is_taken_away() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/restore-night");
    let run = |policy: &Path| {
        Command::new(BIN)
            .args(["policy", "test"])
            .arg(policy)
            .arg("--nodes")
            .arg(dir.join("nodes.json"))
            .arg("--workload")
            .arg(dir.join("workload.jsonl"))
            .arg("--assert")
            .arg(dir.join("assert.toml"))
            .output()
            .unwrap()
    };
    let out = run(&dir.join("policy.toml"));
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("the latest started at slot release 1 after its submit"),
        "{}",
        stdout(&out)
    );
    let tmp = tempfile::tempdir().unwrap();
    let flat = tmp.path().join("policy.toml");
    let text = std::fs::read_to_string(dir.join("policy.toml")).unwrap();
    std::fs::write(&flat, text + "priority = 0\n").unwrap();
    let out = run(&flat);
    assert_exit(&out, 1);
    let said = stdout(&out);
    assert!(
        said.contains("FAIL") && said.contains("3 of 4 assertions held"),
        "{said}"
    );
}
