//! Issue 10, items 4, 10 and 12 from the CLI side: what `lockgate` refuses before or with
//! the server, and what it never prints to a terminal.

use crate::harness::*;

fn fails(c: &mut std::process::Command) -> String {
    let out = c.output().unwrap();
    assert!(!out.status.success(), "{:?}", out.status);
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn succeeds(c: &mut std::process::Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn token_create_cannot_impersonate_schedules_or_backups() {
    let s = Srv::start("");
    for (name, prefix) in [
        ("schedule:nightly", "schedule:"),
        ("backup:b1", "backup:"),
        ("restore:r1", "restore:"),
    ] {
        let err = fails(&mut s.cli(&["token", "create", "--name", name, "--role", "admin"]));
        assert!(err.contains(prefix) && err.contains("reserved"), "{err}");
    }
}

#[test]
fn policy_apply_removes_every_limit_only_when_asked() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let empty = s.path("empty.toml");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let file = empty.to_str().unwrap();
    let err = fails(&mut s.cli(&["policy", "apply", file]));
    assert!(err.contains("--allow-unlimited"), "{err}");
    assert_eq!(
        std::fs::read_to_string(s.path("lockgate.toml")).unwrap(),
        "[global]\nmax_running = 1\n"
    );
    // `policy check` is the admin's: an empty file is valid there.
    succeeds(&mut s.cli(&["policy", "check", file]));
    succeeds(&mut s.cli(&["policy", "apply", "--allow-unlimited", file]));
    assert_eq!(
        std::fs::read_to_string(s.path("lockgate.toml")).unwrap(),
        "# nothing\n"
    );
}

#[test]
fn escape_sequences_in_attrs_never_reach_the_terminal() {
    let s = Srv::start("");
    let admin = s.admin();
    // An attribute value (while the server accepts control characters there), and a
    // holder's message (free text) both carry ESC[2J.
    let attrs = [("path".to_string(), "/x\u{1b}[2J\u{7}".to_string())];
    let with_attr = admin.submit(&lockgate_api::SubmitRequest {
        kind: "backup".into(),
        attrs: attrs.into_iter().collect(),
        ..Default::default()
    });
    let job = admin
        .submit(&lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        })
        .unwrap()
        .0;
    let token = job.lease.as_ref().expect("admitted at once").token;
    admin
        .finish_job(
            job.id,
            token,
            lockgate_core::Outcome::Failed,
            Some("boom \u{1b}[2J\u{7}".into()),
        )
        .unwrap();
    let id = job.id.to_string();
    let mut cases = vec![vec!["job", "show", id.as_str()], vec!["events"]];
    if with_attr.is_ok() {
        cases.push(vec!["job", "ls"]);
    }
    for args in &cases {
        let text = succeeds(&mut s.cli(args));
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{args:?}: {text:?}"
        );
        if args[0] == "job" {
            assert!(text.contains("\\x1b[2J"), "{args:?}: {text}");
        }
    }
}

#[test]
fn agent_labels_follow_kubernetes_syntax() {
    let s = Srv::start("");
    for label in ["bad key=x", "zone=a b", "Example.com/zone=x", "zone=-a"] {
        let err = fails(&mut s.cli(&["agent", "--node", "n1", "--label", label]));
        assert!(err.contains("label"), "{label}: {err}");
    }
}

#[test]
fn schedule_next_still_prints_an_empty_list_for_an_expression_that_never_fires() {
    let s = Srv::start("");
    let out = succeeds(&mut s.cli(&["-o", "json", "schedule", "next", "0 0 30 2 *"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["next"], serde_json::json!([]), "{out}");
}
