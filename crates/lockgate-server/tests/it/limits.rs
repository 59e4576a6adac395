//! The written limits (`lockgate_core::limits`, docs/security.md "Limits") over real HTTP:
//! every bounded field at its limit is taken, one past it is refused with 422 naming the
//! field and the limit, and numbers out of range are refused, never clamped.

use crate::harness::*;
use lockgate_api::Role;
use serde_json::{json, Value};

/// A JSON request as the admin: status and body.
fn send(s: &TestServer, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = s.raw(
        method,
        path,
        Some(&s.admin),
        Some(("application/json", &body.to_string())),
    );
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts a 422 naming `field`, with `needle` in the message.
fn refused(answer: (u16, Value), field: &str, needle: &str) {
    let (status, body) = answer;
    assert_eq!(status, 422, "{body}");
    let e = &body["error"];
    assert_eq!(e["field"], field, "{body}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
    assert!(message.len() < 400, "the value is shortened: {message}");
}

fn taken(answer: (u16, Value)) -> Value {
    let (status, body) = answer;
    assert!(status == 200 || status == 201, "{status} {body}");
    body
}

const NEVER: &str = "[global]\nmax_running = 0\n";

#[test]
fn a_submit_at_each_limit_is_taken_and_one_past_it_is_refused_naming_the_field() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), NEVER);
    let submit = |extra: Value| {
        let mut body = json!({"kind": "backup"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        send(&s, "POST", "/v1/jobs", &body)
    };
    taken(submit(json!({"idempotency_key": "k".repeat(256)})));
    refused(
        submit(json!({"idempotency_key": "k".repeat(1_900_000)})),
        "idempotency_key",
        "at most 256 bytes",
    );
    refused(
        submit(json!({"idempotency_key": "k".repeat(257)})),
        "idempotency_key",
        "257 bytes",
    );
    taken(submit(json!({"node": "n".repeat(253)})));
    refused(
        submit(json!({"node": "n".repeat(254)})),
        "node",
        "at most 253 bytes",
    );
    let selector = format!("a{}", vec!["a=b"; 1024].join(","));
    assert_eq!(selector.len(), 4096);
    taken(submit(json!({"node_selector": selector})));
    refused(
        submit(json!({"node_selector": format!("{selector},")})),
        "node_selector",
        "at most 4096 bytes",
    );
    for p in [1_000_000i64, -1_000_000] {
        taken(submit(json!({ "priority": p })));
    }
    for p in [1_000_001i64, -1_000_001, i64::MAX, i64::MIN] {
        refused(
            submit(json!({ "priority": p })),
            "priority",
            "expected -1000000 to 1000000",
        );
    }
    for field in ["max_wait_s", "max_run_s"] {
        taken(submit(json!({ field: 315_360_000.0 })));
        taken(submit(json!({ field: 0.001 })));
        for bad in [
            json!(315_360_000.5),
            json!(1e308),
            json!(18_446_744_073_709_551_616.0),
            json!(1e-320),
        ] {
            refused(submit(json!({ field: bad })), field, "315360000");
        }
    }
    // Nothing refused was stored: the taken ones only.
    let (_, list) = send(&s, "GET", "/v1/jobs?limit=1000", &json!({}));
    let jobs = list["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1 + 1 + 1 + 2 + 4, "{list}");
    assert!(jobs
        .iter()
        .all(|j| j["priority"].as_i64().unwrap().abs() <= 1_000_000));
}

#[test]
fn a_priority_edit_past_the_range_is_refused() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), NEVER);
    let job = taken(send(&s, "POST", "/v1/jobs", &json!({"kind": "backup"})));
    let path = format!("/v1/jobs/{}/set", job["id"]);
    taken(send(&s, "POST", &path, &json!({"priority": 1_000_000})));
    refused(
        send(&s, "POST", &path, &json!({"priority": i64::MIN})),
        "priority",
        "out of range",
    );
}

#[test]
fn a_node_registration_is_bounded_in_labels_kinds_and_pools() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let map = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let pools = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("p{i}"), json!(1)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let kinds = |n: usize| -> Value { (0..n).map(|i| format!("kind{i}")).collect() };
    taken(send(
        &s,
        "PUT",
        "/v1/nodes/n1",
        &json!({"labels": map(64), "kinds": kinds(256), "resources": pools(64)}),
    ));
    refused(
        send(&s, "PUT", "/v1/nodes/n1", &json!({"labels": map(10_000)})),
        "labels",
        "10000 entries, expected at most 64",
    );
    refused(
        send(&s, "PUT", "/v1/nodes/n1", &json!({"kinds": kinds(257)})),
        "kinds",
        "at most 256",
    );
    refused(
        send(&s, "PUT", "/v1/nodes/n1", &json!({"resources": pools(65)})),
        "resources",
        "at most 64",
    );
    refused(
        send(&s, "PUT", "/v1/nodes/n1", &json!({"kinds": ["not a kind"]})),
        "kinds",
        "invalid job kind",
    );
}

#[test]
fn an_agent_token_is_only_bound_to_a_node_name_the_node_api_takes() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    refused(
        send(
            &s,
            "POST",
            "/v1/tokens",
            &json!({"name": "agent-x", "role": "agent", "node": "NodeX_bad"}),
        ),
        "node",
        "invalid node name",
    );
    let agent = s.token("agent-y", Role::Agent, Some("node-y"));
    agent
        .register_node("node-y", &Default::default())
        .expect("the bound node registers");
}

#[test]
fn a_pause_s_reason_and_match_are_bounded() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    taken(send(
        &s,
        "POST",
        "/v1/pauses",
        &json!({"reason": "r".repeat(1024)}),
    ));
    refused(
        send(
            &s,
            "POST",
            "/v1/pauses",
            &json!({"reason": "r".repeat(1_000_000)}),
        ),
        "reason",
        "at most 1024 bytes",
    );
    refused(
        send(
            &s,
            "POST",
            "/v1/pauses",
            &json!({"reason": "x", "match": format!("kind={}", "b".repeat(5000))}),
        ),
        "match",
        "at most 4096 bytes",
    );
}

#[test]
fn a_schedule_s_when_and_durations_are_bounded() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let schedule = |extra: Value| {
        let mut body = json!({"name": "nightly", "when": "02:00", "job": {"kind": "backup"}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        send(&s, "POST", "/v1/schedules", &body)
    };
    refused(
        schedule(json!({"when": "*".repeat(100_000)})),
        "when",
        "at most 4096 bytes",
    );
    for field in ["jitter_s", "max_start_delay_s"] {
        refused(schedule(json!({ field: 1e308 })), field, "315360000");
    }
    refused(
        schedule(json!({"job": {"kind": "backup", "priority": i64::MAX}})),
        "job.priority",
        "out of range",
    );
    taken(schedule(json!({"jitter_s": 315_360_000.0})));
}

#[test]
fn a_policy_past_a_limit_is_refused_naming_the_line() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    for (policy, needle) in [
        ("[kinds.backup]\npriority = 1000001\n", "out of range"),
        (
            "[owners.alice]\nmax_priority = -9223372036854775808\n",
            "out of range",
        ),
        ("[leases]\nttl = \"3651d\"\n", "at most 3650d"),
    ] {
        let e = s.admin().put_policy(policy, false, None).unwrap_err();
        assert_eq!(e.status(), Some(422), "{e}");
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
}

#[test]
fn two_authorization_headers_are_refused_400_not_the_first_taken() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let addr = s.url.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(
        sock,
        "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {}\r\nAuthorization: Bearer nobody\r\n\r\n",
        s.admin
    )
    .unwrap();
    let mut answer = String::new();
    sock.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("2 Authorization headers"), "{answer}");
    // One header is served as before.
    assert_eq!(s.raw("GET", "/v1/jobs", Some(&s.admin), None).0, 200);
}

/// Sends `request` on a new connection; the whole answer (the server closes).
fn answer_to(s: &TestServer, request: &str) -> String {
    use std::io::{Read, Write};
    let addr = s.url.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    sock.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn a_request_head_with_a_bare_lf_is_refused_400_and_bodies_are_not_looked_at() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let auth = format!("Authorization: Bearer {}", s.admin);
    let heads = [
        format!("GET /v1/jobs HTTP/1.1\nHost: x\r\n{auth}\r\nConnection: close\r\n\r\n"),
        format!("GET /v1/jobs HTTP/1.1\r\nHost: x\n{auth}\r\nConnection: close\r\n\r\n"),
        format!("GET /v1/jobs HTTP/1.1\r\nHost: x\r\n{auth}\r\nConnection: close\r\n\n"),
        format!("GET /v1/jobs HTTP/1.1\n{auth}\nConnection: close\n\n"),
    ];
    for head in &heads {
        let answer = answer_to(&s, head);
        assert!(answer.starts_with("HTTP/1.1 400"), "{head:?}: {answer}");
    }
    // A body with lone LFs (pretty-printed JSON) is the body's business; two requests on
    // one connection, the second after the first's answer, are both checked and served.
    let body = "{\n  \"kind\": \"backup\"\n}\n";
    let post = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n{auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let closing = post.replacen("Host: x\r\n", "Host: x\r\nConnection: close\r\n", 1);
    let answer = answer_to(&s, &closing);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    use std::io::{BufRead, BufReader, Read, Write};
    let addr = s.url.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    sock.write_all(post.as_bytes()).unwrap();
    let mut reader = BufReader::new(sock.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 201"), "{status}");
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut skip = vec![0; length];
    reader.read_exact(&mut skip).unwrap();
    sock.write_all(format!("GET /v1/jobs HTTP/1.1\nHost: x\r\n{auth}\r\n\r\n").as_bytes())
        .unwrap();
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(
        status.starts_with("HTTP/1.1 400"),
        "the second head is checked too: {status}"
    );
}
