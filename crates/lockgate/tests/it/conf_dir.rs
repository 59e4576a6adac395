//! A policy split over a directory (`--config DIR`): its `*.toml` files merge in name
//! order, hidden and other files are left out, SIGHUP re-reads the directory, `policy
//! check DIR` names the file and line of a problem, and `PUT /v1/policy` cannot write a
//! directory.

use crate::harness::*;
use lockgate_api::SubmitRequest;
use lockgate_core::JobState;
use std::time::Duration;

fn write(s: &Srv, name: &str, text: &str) {
    std::fs::write(s.path("conf.d").join(name), text).unwrap();
}

#[test]
fn a_policy_directory_merges_in_name_order_and_sighup_rereads_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf.d");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("10-global.toml"), "[global]\nmax_running = 4\n").unwrap();
    std::fs::write(
        conf.join("20-kinds.toml"),
        "[kinds.backup]\npriority = 1\n\n[[limit]]\nname = \"one-backup\"\nmatch = \"kind = backup\"\nmax = 0\n",
    )
    .unwrap();
    // An editor's leftovers and a disabled file: never part of the policy.
    std::fs::write(conf.join(".20-kinds.toml.swp"), "garbage [[[").unwrap();
    std::fs::write(
        conf.join("30-later.toml.disabled"),
        "[global]\nmax_running = 1\n",
    )
    .unwrap();
    let mut s = Srv::unstarted(dir, "", "");
    s.spawn();
    s.token = std::fs::read_to_string(s.path("data/admin.token"))
        .unwrap()
        .trim()
        .to_string();
    let admin = s.admin();
    let text = admin.policy().unwrap().policy.to_string();
    assert!(
        text.contains("one-backup") && text.contains("\"max_running\":4"),
        "{text}"
    );

    let queued = admin
        .submit(&SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        })
        .unwrap()
        .0;
    assert_eq!(
        queued.state,
        JobState::Queued,
        "max = 0 from the second file holds it"
    );

    // A broken file makes the reload change nothing; a fixed one applies.
    write(
        &s,
        "30-limit.toml",
        "[[limit]]\nname = \"one-backup\"\nmax = 3\n",
    );
    signal(s.pid(), rustix::process::Signal::HUP);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(admin.job(queued.id).unwrap().state, JobState::Queued);
    let log = std::fs::read_to_string(s.path("server.log")).unwrap();
    assert!(
        log.contains("30-limit.toml:2"),
        "the reload error names the file and line: {log}"
    );
    std::fs::remove_file(s.path("conf.d/30-limit.toml")).unwrap();
    write(&s, "20-kinds.toml", "[kinds.backup]\npriority = 1\n");
    signal(s.pid(), rustix::process::Signal::HUP);
    assert_eq!(
        admin.wait(queued.id, JobState::Queued, 10).unwrap().state,
        JobState::Running
    );

    // The API cannot write a directory.
    let out = s
        .cli(&["policy", "apply"])
        .arg(s.path("conf.d/10-global.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is the directory"), "{err}");
}

#[test]
fn policy_check_reads_a_directory_and_names_the_file_of_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf.d");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("10-global.toml"), "[global]\nmax_running = 4\n").unwrap();
    let check = || {
        std::process::Command::new(BIN)
            .args(["policy", "check"])
            .arg(&conf)
            .env("LOCKGATE_SERVER", "http://127.0.0.1:9")
            .output()
            .unwrap()
    };
    let out = check();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(conf.join("20-again.toml"), "\n[global]\nmax_running = 5\n").unwrap();
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("20-again.toml:3")
            && err.contains("already set in")
            && err.contains("10-global.toml"),
        "{err}"
    );
    std::fs::remove_file(conf.join("10-global.toml")).unwrap();
    std::fs::remove_file(conf.join("20-again.toml")).unwrap();
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no *.toml file"), "{err}");
}
