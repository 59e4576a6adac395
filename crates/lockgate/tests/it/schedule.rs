//! `lockgate schedule`: `next` without a server (the times `systemd-analyze calendar`
//! prints), errors naming the bad part, and add/ls/show/next/rm against a real server.

use crate::harness::*;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `lockgate ARGS` with no reachable server, in the zone `tz`.
fn offline(tz: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("TZ", tz)
        .env("LOCKGATE_SERVER", "http://127.0.0.1:1")
        .env_remove("LOCKGATE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout_json(out: &std::process::Output) -> Value {
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
fn schedule_next_prints_the_systemd_times_without_a_server() {
    let next = |tz: &str, expr: &str, n: &str| {
        stdout_json(&offline(
            tz,
            &[
                "schedule",
                "next",
                expr,
                "--from",
                "2026-11-30T00:00:00Z",
                "-n",
                n,
                "-o",
                "json",
            ],
        ))
    };
    // `systemd-analyze calendar --base-time='2026-11-30 00:00:00 UTC' --iterations=3
    // 'mon..fri 02:00'` (TZ=UTC): Mon 30 Nov, Tue 1 Dec, Wed 2 Dec, 02:00 UTC.
    assert_eq!(
        next("UTC", "mon..fri 02:00", "3"),
        json!({"expr": "mon..fri 02:00", "next": [
            "2026-11-30T02:00:00Z", "2026-12-01T02:00:00Z", "2026-12-02T02:00:00Z"
        ]})
    );
    // Without a zone in the expression, times are the machine's local time (TZ).
    assert_eq!(
        next("Europe/Vienna", "mon..fri 02:00", "2")["next"],
        json!(["2026-11-30T01:00:00Z", "2026-12-01T01:00:00Z"])
    );
    // A zone in the expression wins; cron lines too.
    assert_eq!(
        next("Asia/Tokyo", "sat *-1..7 03:30 Europe/Vienna", "2")["next"],
        json!(["2026-12-05T02:30:00Z", "2027-01-02T02:30:00Z"])
    );
    assert_eq!(
        next("UTC", "30 2 * * 1-5", "2")["next"],
        json!(["2026-11-30T02:30:00Z", "2026-12-01T02:30:00Z"])
    );
    // Table output: one RFC 3339 time a line.
    let out = offline(
        "UTC",
        &[
            "schedule",
            "next",
            "daily",
            "--from",
            "2026-11-30T12:00:00Z",
            "-n",
            "2",
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2026-12-01T00:00:00Z\n2026-12-02T00:00:00Z\n"
    );
}

#[test]
fn schedule_next_names_the_part_of_a_bad_expression() {
    for (expr, part) in [
        ("mon..xyz", "\"xyz\""),
        ("25:00", "\"25\""),
        ("*:0/0", "\"0/0\""),
        ("03:00 Mars/Olympus", "\"Mars/Olympus\""),
    ] {
        let out = offline("UTC", &["schedule", "next", expr, "-o", "json"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{expr}: {err}");
        assert!(out.stdout.is_empty(), "{expr}: nothing on stdout");
        assert!(
            err.contains(&format!("invalid schedule expression {expr:?}: {part}")),
            "{expr}: {err}"
        );
    }
}

#[test]
fn schedule_add_ls_show_next_and_rm_against_a_server() {
    let s = Srv::start(
        "[leases]\nttl = \"120s\"\n\n[[schedule]]\nname = \"verify-ds1\"\nwhen = \"sat 03:00\"\njob = { kind = \"verify\", attrs = { datastore = \"ds1\" }, priority = -1 }\n",
    );
    let run = |args: &[&str]| s.cli(args).output().unwrap();
    let added = stdout_json(&run(&[
        "-o",
        "json",
        "schedule",
        "add",
        "every-2s",
        "--when",
        "*:*:0/2",
        "--kind",
        "check",
        "--attr",
        "datastore=ds2",
        "--priority",
        "-3",
        "--duplicates",
        "queue",
        "--misfire",
        "skip",
        "--max-start-delay",
        "1h",
        "--retry-times",
        "2",
        "--retry-interval",
        "30s",
    ]));
    assert_eq!(added["source"], "api");
    assert_eq!(added["job"]["priority"], -3);
    assert_eq!(added["retry"], json!({"times": 2, "interval_s": 30.0}));
    assert_eq!(added["max_start_delay_s"], 3600.0);
    assert!(eventually(Duration::from_secs(30), || {
        let v = stdout_json(&run(&["-o", "json", "schedule", "show", "every-2s"]));
        v["history"]
            .as_array()
            .is_some_and(|h| h.iter().any(|r| r["job"].is_u64()))
    }));
    let list = stdout_json(&run(&["-o", "json", "schedule", "ls"]));
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["every-2s", "verify-ds1"]);

    let table = run(&["schedule", "ls"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("every-2s") && l.contains("job ")),
        "{text}"
    );
    let shown = run(&["schedule", "show", "every-2s"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("PLANNED"));

    // A name is looked up on the server; its times are computed in the server's zone.
    let next = stdout_json(&run(&[
        "-o",
        "json",
        "schedule",
        "next",
        "verify-ds1",
        "-n",
        "2",
    ]));
    assert_eq!(next["expr"], "sat 03:00");
    assert_eq!(next["next"].as_array().unwrap().len(), 2);

    let refused = run(&["schedule", "rm", "verify-ds1"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("part of the policy"));
    assert!(run(&["schedule", "rm", "every-2s"]).status.success());
    let missing = run(&["schedule", "next", "every-2s"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("nor is it the name of a schedule"), "{err}");

    // The policy file is the source of policy schedules: SIGHUP swaps them.
    std::fs::write(
        s.path("lockgate.toml"),
        "[[schedule]]\nname = \"prune-ds1\"\nwhen = \"daily\"\njob = { kind = \"prune\" }\n",
    )
    .unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    assert!(eventually(Duration::from_secs(20), || {
        let list = stdout_json(&run(&["-o", "json", "schedule", "ls"]));
        list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].clone())
            .collect::<Vec<_>>()
            == [json!("prune-ds1")]
    }));
}

#[test]
fn schedule_add_after_names_the_schedule_it_waits_for() {
    let s = Srv::start(
        "[[schedule]]\nname = \"nightly-backup\"\nwhen = \"02:00\"\njob = { kind = \"backup\", attrs = { datastore = \"ds1\" } }\n",
    );
    let run = |args: &[&str]| s.cli(args).output().unwrap();
    let added = stdout_json(&run(&[
        "-o",
        "json",
        "schedule",
        "add",
        "verify",
        "--when",
        "02:30",
        "--kind",
        "verify",
        "--after",
        "nightly-backup",
    ]));
    assert_eq!(added["after"], "nightly-backup");
    // An unknown schedule is refused by the server, naming the field.
    let refused = run(&[
        "schedule", "add", "gc", "--when", "03:00", "--kind", "gc", "--after", "no-such",
    ]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("after") && err.contains("no-such"), "{err}");
}
