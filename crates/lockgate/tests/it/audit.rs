//! `lockgate audit ls` against a real server process: SIGHUP reloads (changed, unchanged
//! and invalid) and token acts are listed newest first with their principal and outcome;
//! `--principal` and `--since` filter; a submitter may not read the log.

use crate::harness::*;
use serde_json::Value;
use std::time::Duration;

fn audit_json(s: &Srv, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["audit", "ls", "-o", "json"];
    all.extend_from_slice(args);
    let out = s.cli(&all).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

#[test]
fn audit_ls_lists_sighup_reloads_and_token_acts_newest_first() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let reloads = |s: &Srv| {
        audit_json(s, &[])
            .into_iter()
            .filter(|e| e["method"] == "SIGHUP")
            .count()
    };
    // The same file again: unchanged. Then a change, then an invalid file.
    signal(s.pid(), rustix::process::Signal::HUP);
    assert!(eventually(Duration::from_secs(10), || reloads(&s) == 1));
    std::fs::write(s.path("lockgate.toml"), "[global]\nmax_running = 2\n").unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    assert!(eventually(Duration::from_secs(10), || reloads(&s) == 2));
    std::fs::write(s.path("lockgate.toml"), "[global]\nmax_running = oops\n").unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    assert!(eventually(Duration::from_secs(10), || reloads(&s) == 3));
    let out = s
        .cli(&[
            "token",
            "create",
            "--name",
            "ci",
            "--role",
            "submitter",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let ci: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ci_token = ci["token"].as_str().unwrap().to_string();

    let all = audit_json(&s, &[]);
    let got: Vec<(&str, &str, &str)> = all
        .iter()
        .map(|e| {
            (
                e["method"].as_str().unwrap(),
                e["principal"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("POST", "admin", "ok"),
            ("SIGHUP", "system", "invalid"),
            ("SIGHUP", "system", "ok"),
            ("SIGHUP", "system", "unchanged"),
        ],
        "newest first: {all:#?}"
    );
    assert!(all[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("invalid_policy:"));
    assert!(all[2]["summary"]
        .as_str()
        .unwrap()
        .contains("global max_running"));
    assert!(!serde_json::to_string(&all).unwrap().contains(&ci_token));
    assert_eq!(audit_json(&s, &["--principal", "admin"]).len(), 1);
    assert_eq!(audit_json(&s, &["--since", "1h"]).len(), 4);
    assert_eq!(
        audit_json(&s, &["--since", "2999-01-01T00:00:00Z"]).len(),
        0
    );

    let table = s.cli(&["audit", "ls"]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("TIME") && lines[0].contains("OUTCOME"),
        "{text}"
    );
    assert!(
        lines[1].contains("admin (admin)") && lines[1].contains("POST /v1/tokens"),
        "{text}"
    );
    assert_eq!(lines.len(), 5, "{text}");

    let refused = s
        .cli(&["audit", "ls"])
        .env("LOCKGATE_TOKEN", &ci_token)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("403")
            || String::from_utf8_lossy(&refused.stderr).contains("may not"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
