//! Snapshots (`insta`) of the error bodies users see: the status, code, field, line and
//! message of each, as the server sends them. A changed text shows up as a snapshot diff
//! (`cargo insta review`, or `INSTA_UPDATE=always cargo test -p lockgate-server`).

use crate::harness::*;
use lockgate_api::Role;
use std::fmt::Write;

const POLICY: &str = "[global]\nmax_running = 1\n";

/// One request and the error body it gets, pretty-printed.
fn show(out: &mut String, s: &TestServer, req: (&str, &str, Option<&str>, Option<&str>)) {
    let (method, path, token, body) = req;
    let ctype = if path == "/v1/policy" {
        "application/toml"
    } else {
        "application/json"
    };
    let (status, text) = s.raw(method, path, token, body.map(|b| (ctype, b)));
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let _ = writeln!(out, "{method} {path}");
    if let Some(b) = body {
        let _ = writeln!(out, "  body: {b:?}");
    }
    let _ = writeln!(
        out,
        "  -> {status} {}\n",
        serde_json::to_string_pretty(&v)
            .unwrap()
            .replace('\n', "\n     ")
    );
}

#[test]
fn error_bodies() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    let held = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(held.id, 1, "the snapshots name job 1");
    let queued = admin.submit(&job("backup", &[])).unwrap().0;
    admin.cancel(queued.id, false).unwrap();
    let viewer_token = {
        let created = admin
            .create_token(&lockgate_api::TokenCreate {
                name: "reader".into(),
                role: Role::Viewer,
                node: None,
            })
            .unwrap();
        created.token
    };
    let t = Some(s.admin.as_str());
    let v = Some(viewer_token.as_str());
    let cases: Vec<(&str, &str, Option<&str>, Option<&str>)> = vec![
        ("GET", "/v1/jobs", None, None),
        ("GET", "/v1/jobs", Some("not-a-token"), None),
        ("POST", "/v1/jobs", t, Some(r#"{"kind": "backup", "#)),
        ("POST", "/v1/jobs", t, Some("")),
        (
            "POST",
            "/v1/jobs",
            t,
            Some(r#"{"kind": "backup", "colour": "red"}"#),
        ),
        ("POST", "/v1/jobs", t, Some(r#"{"attrs": {}}"#)),
        (
            "POST",
            "/v1/jobs",
            t,
            Some(r#"{"kind": "backup", "node_selector": "zone in (a"}"#),
        ),
        ("POST", "/v1/jobs", v, Some(r#"{"kind": "backup"}"#)),
        ("GET", "/v1/jobs?state=sleeping", t, None),
        ("GET", "/v1/jobs/abc", t, None),
        ("GET", "/v1/jobs/999999", t, None),
        ("GET", "/v1/jobs/1/wait?from=asleep", t, None),
        (
            "POST",
            "/v1/jobs/1/heartbeat",
            t,
            Some(r#"{"token": 424242}"#),
        ),
        ("POST", "/v1/jobs/2/cancel", t, None),
        ("POST", "/v1/jobs/1/cancel?force=true", v, None),
        (
            "PUT",
            "/v1/policy",
            t,
            Some("[global]\nmax_running = \"many\"\n"),
        ),
        ("GET", "/v1/nodes/ghost", t, None),
        ("POST", "/v1/nodes/ghost/heartbeat", t, None),
        (
            "POST",
            "/v1/tokens",
            t,
            Some(r#"{"name": "reader", "role": "viewer"}"#),
        ),
        (
            "POST",
            "/v1/tokens",
            t,
            Some(r#"{"name": "a1", "role": "agent"}"#),
        ),
        ("GET", "/v1/schedules/nightly", t, None),
        ("GET", "/v1/backups/nightly", t, None),
        ("GET", "/v1/nothing-here", t, None),
        ("DELETE", "/v1/jobs", t, None),
    ];
    let mut out = String::new();
    for case in cases {
        show(&mut out, &s, case);
    }
    insta::assert_snapshot!("error_bodies", out);
}
