//! Bad input gets a clear answer and changes nothing.

use crate::harness::*;
use lockgate_api::Role;
use serde_json::Value;

fn error(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"].clone()
}

const POLICY: &str = "[global]\nmax_running = 1\n";

#[test]
fn bad_requests_are_answered_clearly_and_change_nothing() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    let t = Some(s.admin.as_str());
    let held = admin
        .submit(&job("backup", &[("datastore", "ds1")]))
        .unwrap()
        .0;
    let before = admin.jobs(&Default::default()).unwrap().jobs.len();
    let digest = admin.policy().unwrap().digest;

    let json = "application/json";
    let cases: Vec<(&str, &str, u16, &str, Option<&str>)> = vec![
        (
            "POST",
            r#"{"kind": "backup", "#,
            400,
            "malformed_json",
            None,
        ),
        ("POST", "", 400, "malformed_json", None),
        (
            "POST",
            r#"{"kind": "backup", "colour": "red"}"#,
            422,
            "invalid_field",
            Some("colour"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "priority": "high"}"#,
            422,
            "invalid_field",
            Some("priority"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "attrs": {"datastore": 1}}"#,
            422,
            "invalid_field",
            Some("attrs.datastore"),
        ),
        (
            "POST",
            r#"{"attrs": {}}"#,
            422,
            "invalid_field",
            Some("kind"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "node_selector": "zone in (a"}"#,
            422,
            "invalid_field",
            Some("node_selector"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "attrs": {"owner": "bob"}}"#,
            422,
            "invalid_field",
            Some("attrs.owner"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "not_before": "tomorrow"}"#,
            422,
            "invalid_field",
            Some("not_before"),
        ),
        (
            "POST",
            r#"{"kind": "backup", "max_wait_s": -1}"#,
            422,
            "invalid_field",
            Some("max_wait_s"),
        ),
    ];
    for (method, body, status, code, field) in cases {
        let (got, text) = s.raw(method, "/v1/jobs", t, Some((json, body)));
        let e = error(&text);
        assert_eq!(got, status, "{body}: {text}");
        assert_eq!(e["code"], code, "{body}: {text}");
        assert_eq!(e["field"].as_str(), field, "{body}: {text}");
        assert!(!e["message"].as_str().unwrap().is_empty());
    }
    // Query strings and paths.
    let (got, text) = s.raw("GET", "/v1/jobs?state=sleeping", t, None);
    assert_eq!(
        (got, error(&text)["field"].as_str()),
        (422, Some("state")),
        "{text}"
    );
    // An unknown parameter is a 400 naming it (issue 10, item 12).
    let (got, text) = s.raw("GET", "/v1/jobs?colour=red", t, None);
    assert_eq!(
        (got, error(&text)["field"].as_str()),
        (400, Some("colour")),
        "{text}"
    );
    let (got, text) = s.raw(
        "GET",
        &format!("/v1/jobs/{}/wait?from=asleep", held.id),
        t,
        None,
    );
    assert_eq!(
        (got, error(&text)["field"].as_str()),
        (422, Some("from")),
        "{text}"
    );
    let (got, _) = s.raw("GET", "/v1/jobs/abc", t, None);
    assert_eq!(got, 404);
    let (got, _) = s.raw("GET", "/v1/jobs/999999", t, None);
    assert_eq!(got, 404);
    let (got, text) = s.raw(
        "POST",
        &format!("/v1/jobs/{}/heartbeat", held.id),
        t,
        Some((json, r#"{"token": "x"}"#)),
    );
    assert_eq!(
        (got, error(&text)["field"].as_str()),
        (422, Some("token")),
        "{text}"
    );
    let (got, text) = s.raw(
        "POST",
        &format!("/v1/jobs/{}/heartbeat", held.id),
        t,
        Some((json, r#"{"token": 999999}"#)),
    );
    assert_eq!(
        (got, error(&text)["code"].as_str()),
        (409, Some("lease_lost")),
        "{text}"
    );
    let (got, text) = s.raw("GET", "/v1/nowhere", t, None);
    assert_eq!(
        (got, error(&text)["code"].as_str()),
        (404, Some("not_found"))
    );

    // Missing and unknown tokens.
    let (got, text) = s.raw("GET", "/v1/jobs", None, None);
    assert_eq!(
        (got, error(&text)["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (got, _) = s.raw("GET", "/v1/jobs", Some("not-a-token"), None);
    assert_eq!(got, 401);
    let (got, _) = s.raw("GET", "/healthz", None, None);
    assert_eq!(got, 200);
    let (got, _) = s.raw("GET", "/readyz", None, None);
    assert_eq!(got, 200);

    assert_eq!(
        admin.jobs(&Default::default()).unwrap().jobs.len(),
        before,
        "nothing was created"
    );
    assert_eq!(admin.policy().unwrap().digest, digest);
}

#[test]
fn roles_limit_what_a_token_may_do() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let alice = s.token("alice", Role::Submitter, None);
    let bob = s.token("bob", Role::Submitter, None);
    let viewer = s.token("watcher", Role::Viewer, None);
    let a = alice.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(a.owner, "alice");
    let b = bob.submit(&job("backup", &[])).unwrap().0;

    // Bob may neither see nor cancel Alice's job; it stays as it was.
    let e = bob.cancel(a.id, false).unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(403), Some("forbidden")),
        "{e}"
    );
    assert_eq!(bob.job(a.id).unwrap_err().status(), Some(403));
    assert_eq!(s.admin().job(a.id).unwrap().state, a.state);
    let listed = bob.jobs(&Default::default()).unwrap().jobs;
    assert!(listed.iter().all(|j| j.owner == "bob") && listed.len() == 1);

    // Priority above the submitter's max_priority (default 0); force-cancel needs admin.
    let mut high = job("backup", &[]);
    high.priority = Some(5);
    let e = alice.submit(&high).unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(403), Some("forbidden")),
        "{e}"
    );
    assert!(s.admin().submit(&high).is_ok(), "admins are unlimited");
    assert_eq!(bob.cancel(b.id, true).unwrap_err().status(), Some(403));
    assert_eq!(bob.cancel(b.id, false).unwrap().state.as_str(), "cancelled");

    // Viewers read, never write; only admins manage tokens and the policy.
    assert!(viewer.job(a.id).is_ok());
    assert_eq!(
        viewer.submit(&job("backup", &[])).unwrap_err().status(),
        Some(403)
    );
    assert_eq!(viewer.cancel(a.id, false).unwrap_err().status(), Some(403));
    assert_eq!(alice.tokens().unwrap_err().status(), Some(403));
    assert_eq!(
        alice.put_policy("", false, None).unwrap_err().status(),
        Some(403)
    );

    // A revoked token is unknown at once.
    s.admin().revoke_token("alice").unwrap();
    assert_eq!(alice.job(a.id).unwrap_err().status(), Some(401));
}

#[test]
fn invalid_policy_and_stale_if_match_change_nothing() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    let before = admin.policy().unwrap();
    let bad = "[global]\nmax_running = 1\n\n[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = -2\n";
    let e = admin.put_policy(bad, false, None).unwrap_err();
    let lockgate_client::ClientError::Api { status, detail } = &e else {
        panic!("{e}")
    };
    assert_eq!(
        (*status, detail.code.as_str()),
        (422, "invalid_policy"),
        "{e}"
    );
    assert_eq!(detail.field.as_deref(), Some("limit[0].max"), "{e}");
    assert_eq!(detail.line, Some(7), "{e}");
    let e = admin
        .put_policy("[global]\nmax_runing = 3\n", false, None)
        .unwrap_err();
    assert_eq!(e.status(), Some(422), "{e}");
    assert_eq!(admin.policy().unwrap(), before, "the old policy stays");

    let e = admin
        .put_policy("[global]\nmax_running = 3\n", false, Some("0123abcd"))
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(412), Some("stale_policy")),
        "{e}"
    );
    assert_eq!(admin.policy().unwrap(), before);
    let ok = admin
        .put_policy("[global]\nmax_running = 3\n", false, Some(&before.digest))
        .unwrap();
    assert_eq!(ok.diff, vec!["global: max_running 1 -> 3".to_string()]);
    assert_ne!(admin.policy().unwrap().digest, before.digest);
}
