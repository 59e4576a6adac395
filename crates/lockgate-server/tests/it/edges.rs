//! Issue 10, items 4, 10 and 12: edges a hostile or careless client could use. Each test
//! is named after what it prevents.

use crate::harness::*;
use lockgate_api::Role;
use serde_json::{json, Value};
use std::io::{Read, Write};

fn error(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"].clone()
}

/// Sends `request` as raw bytes and returns the status and body of the answer.
fn raw_tcp(s: &TestServer, request: &[u8]) -> (u16, String) {
    let addr = s.url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn get(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n").into_bytes()
}

const LIMITED: &str = "[global]\nmax_running = 1\n";

fn config_server(dir: &std::path::Path, text: &str) -> (TestServer, std::path::PathBuf) {
    let file = dir.join("policy.toml");
    std::fs::write(&file, text).unwrap();
    let s = TestServer::open(&dir.join("data"), Some(file.clone()));
    (s, file)
}

#[test]
fn a_policy_body_that_is_not_a_table_cannot_wipe_the_policy() {
    let dir = tempdir();
    let (s, file) = config_server(dir.path(), LIMITED);
    let admin = s.admin();
    admin.submit(&job("backup", &[])).unwrap();
    let queued = admin.submit(&job("backup", &[])).unwrap().0;
    let digest = admin.policy().unwrap().digest;
    for body in ["[]", "1", "\"x\"", "null", "[{}]", "true"] {
        let (status, text) = s.raw(
            "PUT",
            "/v1/policy",
            Some(&s.admin),
            Some(("application/json", body)),
        );
        assert_eq!(status, 422, "{body}: {text}");
        assert_eq!(error(&text)["code"], "invalid_policy", "{body}: {text}");
        assert!(
            error(&text)["message"]
                .as_str()
                .unwrap()
                .contains("expected a table"),
            "{text}"
        );
    }
    assert_eq!(admin.policy().unwrap().digest, digest);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIMITED);
    assert_eq!(
        admin.job(queued.id).unwrap().state,
        lockgate_core::job::JobState::Queued
    );
}

#[test]
fn a_put_cannot_remove_every_limit_by_accident() {
    let dir = tempdir();
    let (s, file) = config_server(dir.path(), LIMITED);
    let admin = s.admin();
    admin.submit(&job("backup", &[])).unwrap();
    let queued = admin.submit(&job("backup", &[])).unwrap().0;
    for unlimited in ["", "[leases]\nttl = \"10s\"\n", "[[limit]]\nname = \"l\"\n"] {
        let (status, text) = s.raw(
            "PUT",
            "/v1/policy",
            Some(&s.admin),
            Some(("application/toml", unlimited)),
        );
        assert_eq!(status, 422, "{unlimited:?}: {text}");
        assert_eq!(error(&text)["code"], "removes_all_limits", "{text}");
        assert!(text.contains("allow_unlimited"), "{text}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIMITED);
    assert_eq!(
        admin.job(queued.id).unwrap().state,
        lockgate_core::job::JobState::Queued
    );
    // Any one limit is enough.
    for limited in [
        "[[conflict]]\nkeys = [\"kind\"]\n",
        "[nodes]\nmax_running = 3\n",
        "[[limit]]\nname = \"l\"\nmax = 5\n",
    ] {
        admin.put_policy(limited, true, None).unwrap();
    }
    let opts = lockgate_client::PolicyPut {
        allow_unlimited: true,
        ..Default::default()
    };
    admin.put_policy_with("", &opts).unwrap();
    // With a database the file is never written (docs/policy.md).
    let stored = match crate::harness::on_postgres() {
        true => LIMITED,
        false => "",
    };
    assert_eq!(std::fs::read_to_string(&file).unwrap(), stored);
    assert_eq!(
        admin.job(queued.id).unwrap().state,
        lockgate_core::job::JobState::Running
    );
    // From nothing to nothing removes nothing.
    admin
        .put_policy("[queue]\nstrict = true\n", false, None)
        .unwrap();
}

#[test]
fn a_config_file_is_never_seen_truncated_or_half_written() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let (s, file) = config_server(dir.path(), LIMITED);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let a = LIMITED.to_string();
    let b = format!("# {}\n[global]\nmax_running = 2\n", "x".repeat(64 * 1024));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (file, stop, a, b) = (file.clone(), stop.clone(), a.clone(), b.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let text = std::fs::read_to_string(&file).unwrap();
                assert!(text == a || text == b, "a read saw {} bytes", text.len());
                reads += 1;
            }
            reads
        })
    };
    let admin = s.admin();
    for i in 0..20 {
        let text = if i % 2 == 0 { &b } else { &a };
        admin.put_policy(text, false, None).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the file keeps its permissions");
}

#[test]
fn a_failed_config_write_keeps_the_old_file_and_answers_an_error() {
    if crate::harness::sqlite_only("with --database-url the database holds the policy and the --config file is never written (docs/policy.md; crates/lockgate/tests/it/postgres.rs tests that side)") {
        return;
    }
    let dir = tempdir();
    let (s, file) = config_server(dir.path(), LIMITED);
    let admin = s.admin();
    let digest = admin.policy().unwrap().digest;
    // The temporary file cannot be created (a directory is in its place; a read-only
    // directory would do too, but not for root).
    std::fs::create_dir(dir.path().join(".policy.toml.tmp")).unwrap();
    let err = admin
        .put_policy("[global]\nmax_running = 7\n", false, None)
        .unwrap_err();
    assert!(err.to_string().contains("policy not applied"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIMITED);
    assert_eq!(admin.policy().unwrap().digest, digest);
}

#[test]
fn tokens_cannot_impersonate_schedules_or_backups() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    for (name, prefix) in [("schedule:nightly", "schedule:"), ("backup:x", "backup:")] {
        let body = json!({"name": name, "role": "submitter"}).to_string();
        let (status, text) = s.raw(
            "POST",
            "/v1/tokens",
            Some(&s.admin),
            Some(("application/json", &body)),
        );
        assert_eq!(status, 422, "{text}");
        let e = error(&text);
        assert_eq!(e["field"], "name");
        assert!(e["message"].as_str().unwrap().contains(prefix), "{text}");
    }
    assert!(s
        .admin()
        .tokens()
        .unwrap()
        .iter()
        .all(|t| !t.name.contains(':')));
}

#[test]
fn framework_rejections_answer_in_the_error_shape() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let auth = format!("Authorization: Bearer {}\r\n", s.admin);
    let big = vec![b'x'; 3 * 1024 * 1024];
    let mut post = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    post.extend_from_slice(&big);
    let long = format!("/v1/jobs?state={}", "q".repeat(10_000));
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (get("/v1/nodes/%FF%FE", &auth), 400, "bad_request"),
        (get("/v1/jobs/%C3%28/explain", &auth), 400, "bad_request"),
        (post, 413, "payload_too_large"),
        (get(&long, &auth), 414, "uri_too_long"),
        (
            get(
                "/v1/jobs",
                &format!("{auth}X-Big: {}\r\n", "h".repeat(40_000)),
            ),
            431,
            "headers_too_large",
        ),
        (
            format!("DELETE /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n")
                .into_bytes(),
            405,
            "method_not_allowed",
        ),
        (get("/no/such/path", &auth), 404, "not_found"),
    ];
    for (req, status, code) in cases {
        let (got, body) = raw_tcp(&s, &req);
        let shown = String::from_utf8_lossy(&req[..req.len().min(60)]).to_string();
        assert_eq!(got, status, "{shown}: {body}");
        let e = error(&body);
        assert_eq!(e["code"], code, "{shown}: {body}");
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    let (status, text) = s.raw(
        "PUT",
        "/v1/policy",
        Some(&s.admin),
        Some(("text/xml", "<policy/>")),
    );
    assert_eq!(
        (status, error(&text)["code"].clone()),
        (415, json!("unsupported_media_type"))
    );
}

#[test]
fn trailing_data_after_a_json_body_is_not_ignored() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let (status, text) = s.raw(
        "POST",
        "/v1/jobs",
        Some(&s.admin),
        Some((
            "application/json",
            r#"{"kind": "backup"} {"kind": "restore"}"#,
        )),
    );
    assert_eq!(status, 400, "{text}");
    let e = error(&text);
    assert_eq!(e["code"], "malformed_json");
    assert!(
        e["message"].as_str().unwrap().contains("trailing"),
        "{text}"
    );
    assert!(s.admin().jobs(&Default::default()).unwrap().jobs.is_empty());
}

#[test]
fn an_invalid_last_event_id_does_not_replay_all_history() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LIMITED);
    s.admin().submit(&job("backup", &[])).unwrap();
    let auth = format!("Authorization: Bearer {}\r\n", s.admin);
    for id in ["abc", "-1", "99999999"] {
        let (status, body) = raw_tcp(
            &s,
            &get(
                "/v1/events/stream",
                &format!("{auth}Last-Event-ID: {id}\r\n"),
            ),
        );
        assert_eq!(status, 400, "{id}: {body}");
        let e = error(&body);
        assert_eq!(e["field"], "Last-Event-ID", "{body}");
        assert!(e["message"].as_str().unwrap().contains(id), "{body}");
    }
}

#[test]
fn unknown_query_parameters_are_refused_by_name() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let id = s.admin().submit(&job("backup", &[])).unwrap().0.id;
    let t = Some(s.admin.as_str());
    for path in [
        "/v1/jobs?colour=red".to_string(),
        format!("/v1/jobs/{id}?colour=red"),
        format!("/v1/jobs/{id}/wait?from=queued&colour=red"),
        "/v1/nodes?colour=red".into(),
        "/v1/tokens?colour=red".into(),
        "/v1/schedules?colour=red".into(),
        "/v1/events?colour=red".into(),
        "/v1/policy?colour=red".into(),
        "/healthz?colour=red".into(),
        "/metrics?colour=red".into(),
    ] {
        let (status, text) = s.raw("GET", &path, t, None);
        assert_eq!(status, 400, "{path}: {text}");
        assert_eq!(error(&text)["field"], "colour", "{path}: {text}");
    }
}

#[test]
fn a_schedule_that_never_fires_is_refused() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let t = Some(s.admin.as_str());
    for when in ["*-02-30", "0 0 30 2 *", "2001-01-01 00:00"] {
        let body = json!({"name": "never", "when": when, "job": {"kind": "check"}}).to_string();
        let (status, text) = s.raw(
            "POST",
            "/v1/schedules",
            t,
            Some(("application/json", &body)),
        );
        assert_eq!(status, 422, "{when}: {text}");
        let e = error(&text);
        assert_eq!(e["field"], "when", "{text}");
        assert!(e["message"].as_str().unwrap().contains(when), "{text}");
    }
    let policy = "[[schedule]]\nname = \"n\"\nwhen = \"0 0 30 2 *\"\njob = { kind = \"check\" }\n";
    let (status, text) = s.raw("PUT", "/v1/policy", t, Some(("application/toml", policy)));
    assert_eq!(status, 422, "{text}");
    assert_eq!(error(&text)["field"], "schedule[0].when", "{text}");
    assert!(s.admin().schedules().unwrap().schedules.is_empty());
}

#[test]
fn node_names_and_labels_follow_kubernetes_syntax() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let t = Some(s.admin.as_str());
    let long = "v".repeat(64);
    let cases = [
        ("Node_1", "{}".to_string(), "name"),
        ("-n", "{}".into(), "name"),
        (
            "n1",
            json!({"labels": {"bad key": "x"}}).to_string(),
            "labels.bad key",
        ),
        (
            "n1",
            json!({"labels": {"Example.com/zone": "x"}}).to_string(),
            "labels.Example.com/zone",
        ),
        (
            "n1",
            json!({"labels": {"zone": "a b"}}).to_string(),
            "labels.zone",
        ),
        (
            "n1",
            json!({"labels": {"zone": long}}).to_string(),
            "labels.zone",
        ),
        (
            "n1",
            json!({"labels": {"zone": "-a"}}).to_string(),
            "labels.zone",
        ),
    ];
    for (name, body, field) in cases {
        let (status, text) = s.raw(
            "PUT",
            &format!("/v1/nodes/{name}"),
            t,
            Some(("application/json", &body)),
        );
        assert_eq!(status, 422, "{name} {body}: {text}");
        assert_eq!(error(&text)["field"], field, "{text}");
    }
    let ok = json!({"labels": {"example.com/zone": "eu-1", "tier": "", "a_b.c": "X_y.Z"}});
    let (status, text) = s.raw(
        "PUT",
        "/v1/nodes/node-1.example.com",
        t,
        Some(("application/json", &ok.to_string())),
    );
    assert_eq!(status, 200, "{text}");
}

#[test]
fn metrics_can_be_kept_from_anyone_without_a_token() {
    let dir = tempdir();
    let open = TestServer::start(dir.path().join("open").as_path(), "");
    assert_eq!(
        open.raw("GET", "/metrics", None, None).0,
        200,
        "default: open"
    );
    let s = TestServer::open_set(&dir.path().join("closed"), None, |s| {
        s.set_metrics_auth(true)
    });
    let (status, text) = s.raw("GET", "/metrics", None, None);
    assert_eq!(status, 401, "{text}");
    assert_eq!(error(&text)["code"], "unauthorized");
    assert_eq!(s.raw("GET", "/metrics", Some("wrong"), None).0, 401);
    let viewer = s
        .admin()
        .create_token(&lockgate_api::TokenCreate {
            name: "prom".into(),
            role: Role::Viewer,
            node: None,
        })
        .unwrap();
    let (status, text) = s.raw("GET", "/metrics", Some(&viewer.token), None);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("lockgate_"), "{text}");
}
