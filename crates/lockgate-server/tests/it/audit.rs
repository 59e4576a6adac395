//! The audit log over real HTTP: every act that changes or tries to change the system is
//! recorded with its principal and outcome (an unchanged policy apply and a submitter's
//! refused act included), only an admin reads it, every non-read operation of the API
//! document is audited, retention prunes it and a restart keeps it.

use crate::harness::*;
use lockgate_api::{NodeRegister, PauseRequest, Role};
use serde_json::{json, Value};
use std::path::Path;

const POLICY: &str = "[global]\nmax_running = 1\n";

/// Every entry (as JSON), oldest first, read as the admin.
fn entries(s: &TestServer) -> Vec<Value> {
    let (status, body) = s.raw("GET", "/v1/audit?limit=1000", Some(&s.admin), None);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["entries"].as_array().unwrap().clone()
}

/// The entries of `(method, path)`, oldest first.
fn of(all: &[Value], method: &str, path: &str) -> Vec<Value> {
    all.iter()
        .filter(|e| e["method"] == method && e["path"] == path)
        .cloned()
        .collect()
}

/// The one entry of `(method, path)` whose outcome is `outcome`, checked to name `who`.
#[track_caller]
fn expect(all: &[Value], method: &str, path: &str, who: &str, outcome: &str) -> Value {
    let found = of(all, method, path);
    let hit = found
        .iter()
        .find(|e| e["outcome"] == outcome)
        .unwrap_or_else(|| panic!("no {outcome} entry for {method} {path}: {found:#?}"));
    assert_eq!(hit["principal"], who, "{hit:#}");
    hit.clone()
}

fn token_secret(s: &TestServer, name: &str, role: &str) -> String {
    let (status, body) = s.raw(
        "POST",
        "/v1/tokens",
        Some(&s.admin),
        Some((
            "application/json",
            &json!({"name": name, "role": role}).to_string(),
        )),
    );
    assert_eq!(status, 201, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string()
}

fn backup_input(root: &Path) -> String {
    let dir = root.join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cfg", "namespace": "app"}, "data": {"k": "v"}});
    std::fs::write(dir.join("cm.json"), cm.to_string()).unwrap();
    dir.display().to_string()
}

#[test]
fn policy_applies_are_audited_with_their_outcome_and_never_their_text() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    let secret_word = "hush-do-not-log-me";
    let changed = format!("# {secret_word}\n[global]\nmax_running = 2\n");
    admin.put_policy(POLICY, false, None).unwrap();
    let (st, body) = s.raw(
        "PUT",
        "/v1/policy?dry_run=true",
        Some(&s.admin),
        Some(("application/toml", &changed)),
    );
    assert_eq!(st, 200, "{body}");
    admin.put_policy(&changed, false, None).unwrap();
    let bad = "[global]\nmax_running = -1\n";
    assert_eq!(
        admin.put_policy(bad, false, None).unwrap_err().status(),
        Some(422)
    );
    let sub = token_secret(&s, "sub", "submitter");
    let (st, _) = s.raw(
        "PUT",
        "/v1/policy",
        Some(&sub),
        Some(("application/toml", POLICY)),
    );
    assert_eq!(st, 403);

    let all = entries(&s);
    let puts = of(&all, "PUT", "/v1/policy");
    let outcomes: Vec<&str> = puts
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["ok", "unchanged", "unchanged", "ok", "invalid", "refused"],
        "{puts:#?}"
    );
    assert_eq!(puts[0]["principal"], "admin");
    assert_eq!(puts[0]["role"], "admin");
    assert!(puts[2]["summary"]
        .as_str()
        .unwrap()
        .starts_with("dry_run=true"));
    let applied = puts[3]["summary"].as_str().unwrap();
    assert!(
        applied.contains("body sha256:") && applied.contains("1 change(s): global max_running"),
        "{applied}"
    );
    assert!(puts[4]["error"]
        .as_str()
        .unwrap()
        .starts_with("invalid_policy:"));
    assert_eq!(
        (&puts[5]["principal"], &puts[5]["role"]),
        (&json!("sub"), &json!("submitter"))
    );
    assert!(puts[5]["error"].as_str().unwrap().starts_with("forbidden:"));
    let text = serde_json::to_string(&all).unwrap();
    assert!(!text.contains(secret_word), "the policy text is never kept");
    assert!(!text.contains(&sub), "a token's secret is never kept");
}

#[test]
fn every_kind_of_act_is_audited_with_its_principal() {
    let dir = tempdir();
    let policy = "[global]\nmax_running = 1\n[blocks]\nexec_template = [\"env\", \"{command}\"]\n";
    let s = TestServer::start(dir.path(), policy);
    let admin = s.admin();
    let sub = s.token("sub", Role::Submitter, None);
    let agent = s.token("ag", Role::Agent, Some("n1"));
    let viewer = s.token("view", Role::Viewer, None);

    // Jobs: the submitter's own cancel, an admin's forced cancel, edits, retry.
    let (a, _) = sub.submit(&job("backup", &[])).unwrap();
    let (b, _) = sub.submit(&job("backup", &[])).unwrap();
    let (c, _) = sub.submit(&job("backup", &[])).unwrap();
    admin.set_job(b.id, 5).unwrap();
    sub.cancel(b.id, false).unwrap();
    admin.cancel(a.id, true).unwrap();
    let _ = admin.retry_job(c.id);
    // Nodes: registration, cordon, uncordon, removal, and a viewer's refused cordon.
    agent.register_node("n1", &NodeRegister::default()).unwrap();
    admin.cordon("n1", true).unwrap();
    assert_eq!(viewer.cordon("n1", false).unwrap_err().status(), Some(403));
    admin.cordon("n1", false).unwrap();
    admin.remove_node("n1").unwrap();
    // Schedules.
    let sched = serde_json::from_value(json!({"name": "nightly", "when": "daily",
        "job": {"kind": "check"}}))
    .unwrap();
    admin.create_schedule(&sched).unwrap();
    admin.delete_schedule("nightly").unwrap();
    // Pauses.
    let p = admin
        .pause(&PauseRequest {
            reason: "fsck".into(),
            ..PauseRequest::default()
        })
        .unwrap();
    admin.resume(p.id).unwrap();
    admin.resume_all().unwrap();
    // Backups: one created and cancelled, one with an input that does not exist.
    let from = backup_input(dir.path());
    let req = |name: &str, from: &str| -> lockgate_api::BackupRequest {
        serde_json::from_value(json!({"name": name, "from": from})).unwrap()
    };
    admin.create_backup(&req("b1", &from)).unwrap();
    let _ = admin.cancel_backup("b1");
    assert!(admin.create_backup(&req("b2", "/no/such/dir")).is_err());
    // Tokens: created above through the client; revoke one; no token at all.
    admin.revoke_token("view").unwrap();
    let (st, _) = s.raw("POST", "/v1/pauses", None, Some(("application/json", "{}")));
    assert_eq!(st, 401);

    let all = entries(&s);
    let t = expect(&all, "POST", "/v1/tokens", "admin", "ok");
    let summary = t["summary"].as_str().unwrap();
    assert!(
        summary.contains("name=\"sub\"") && summary.contains("role=\"submitter\""),
        "{summary}"
    );
    expect(
        &all,
        "POST",
        &format!("/v1/jobs/{}/set", b.id),
        "admin",
        "ok",
    );
    expect(
        &all,
        "POST",
        &format!("/v1/jobs/{}/cancel", b.id),
        "sub",
        "ok",
    );
    let forced = expect(
        &all,
        "POST",
        &format!("/v1/jobs/{}/cancel", a.id),
        "admin",
        "ok",
    );
    assert_eq!(forced["summary"], "force=true");
    assert_eq!(
        of(&all, "POST", &format!("/v1/jobs/{}/retry", c.id)).len(),
        1
    );
    let reg = expect(&all, "PUT", "/v1/nodes/n1", "ag", "ok");
    assert_eq!(reg["role"], "agent");
    expect(&all, "POST", "/v1/nodes/n1/cordon", "admin", "ok");
    expect(&all, "POST", "/v1/nodes/n1/uncordon", "view", "refused");
    expect(&all, "POST", "/v1/nodes/n1/uncordon", "admin", "ok");
    expect(&all, "DELETE", "/v1/nodes/n1", "admin", "ok");
    expect(&all, "POST", "/v1/schedules", "admin", "ok");
    expect(&all, "DELETE", "/v1/schedules/nightly", "admin", "ok");
    let paused = expect(&all, "POST", "/v1/pauses", "admin", "ok");
    assert_eq!(paused["summary"], "reason=\"fsck\"");
    expect(
        &all,
        "DELETE",
        &format!("/v1/pauses/{}", p.id),
        "admin",
        "ok",
    );
    expect(&all, "DELETE", "/v1/pauses", "admin", "ok");
    let created = of(&all, "POST", "/v1/backups");
    assert_eq!(created.len(), 2, "{created:#?}");
    assert_eq!(
        (&created[0]["outcome"], &created[0]["principal"]),
        (&json!("ok"), &json!("admin"))
    );
    assert!(created[0]["summary"]
        .as_str()
        .unwrap()
        .contains("name=\"b1\""));
    assert_eq!(created[1]["outcome"], "invalid");
    assert_eq!(of(&all, "POST", "/v1/backups/b1/cancel").len(), 1);
    expect(&all, "DELETE", "/v1/tokens/view", "admin", "ok");
    let anon = of(&all, "POST", "/v1/pauses")
        .into_iter()
        .find(|e| e["outcome"] == "refused")
        .expect("the unauthenticated pause");
    assert_eq!(
        (&anon["principal"], &anon["role"]),
        (&Value::Null, &Value::Null)
    );
    // The lease protocol and plain submits are in the event log, not here.
    assert!(of(&all, "POST", "/v1/jobs").is_empty());
}

#[test]
fn only_an_admin_reads_the_audit_log_and_filters_page_it() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let sub = token_secret(&s, "sub", "submitter");
    let view = token_secret(&s, "view", "viewer");
    let ag = {
        let (st, body) = s.raw(
            "POST",
            "/v1/tokens",
            Some(&s.admin),
            Some((
                "application/json",
                r#"{"name":"ag","role":"agent","node":"n1"}"#,
            )),
        );
        assert_eq!(st, 201, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for t in [&sub, &view, &ag] {
        let (st, body) = s.raw("GET", "/v1/audit", Some(t), None);
        assert_eq!(st, 403, "{body}");
    }
    assert_eq!(s.raw("GET", "/v1/audit", None, None).0, 401);
    let (st, body) = s.raw("GET", "/v1/audit?since=yesterday", Some(&s.admin), None);
    assert_eq!((st, body.contains("since")), (422, true), "{body}");

    let all = entries(&s);
    assert_eq!(all.len(), 4, "the policy and three tokens: {all:#?}");
    let page = |q: &str| -> Vec<u64> {
        let (st, body) = s.raw("GET", &format!("/v1/audit?{q}"), Some(&s.admin), None);
        assert_eq!(st, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(page("limit=2"), seqs[..2]);
    assert_eq!(page(&format!("after={}&limit=2", seqs[1])), seqs[2..]);
    assert_eq!(page("principal=sub"), Vec::<u64>::new());
    assert_eq!(page("principal=admin"), seqs);
    let later = lockgate_api::time::format(lockgate_core::Timestamp(u64::MAX / 4));
    assert_eq!(
        page(&format!("since={}", lockgate_client::encode(&later))),
        Vec::<u64>::new()
    );
}

/// Every non-read operation of the API document (as served, so a route added later is
/// covered too) leaves an entry when a submitter tries it, except the lease protocol
/// and submits, which leave one only when refused.
#[test]
fn every_mutating_operation_of_the_api_document_is_audited() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let sub = token_secret(&s, "sub", "submitter");
    let (_, doc) = s.raw("GET", "/v1/openapi.json", None, None);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let mut tried = Vec::new();
    for (route, item) in doc["paths"].as_object().unwrap() {
        for method in ["put", "post", "delete", "patch"] {
            if item.get(method).is_none() {
                continue;
            }
            let method = method.to_uppercase();
            let path = route
                .replace("{id}", "999999")
                .replace("{job}", "999999")
                .replace("{name}", "nosuch");
            let path = path
                .split('/')
                .map(|seg| if seg.starts_with('{') { "nosuch" } else { seg })
                .collect::<Vec<_>>()
                .join("/");
            let protocol = lockgate_server::audit::is_protocol(&method, route);
            // The protocol routes are tried without a token: refused, so recorded.
            let token = if protocol { None } else { Some(sub.as_str()) };
            let (st, body) = s.raw(&method, &path, token, Some(("application/json", "{}")));
            assert!(st >= 200, "{method} {path}: {body}");
            tried.push((method, path, protocol));
        }
    }
    assert!(tried.len() >= 20, "{tried:?}");
    let all = entries(&s);
    for (method, path, protocol) in &tried {
        let mut found = of(&all, method, path);
        found.retain(|e| e["principal"] != "admin");
        assert_eq!(
            found.len(),
            1,
            "{method} {path} (protocol: {protocol}): {found:#?}"
        );
        let e = &found[0];
        if *protocol {
            assert_eq!(
                (&e["outcome"], &e["principal"]),
                (&json!("refused"), &Value::Null)
            );
        } else {
            assert_eq!(e["principal"], "sub", "{e:#}");
        }
    }
}

#[test]
fn a_restart_keeps_the_audit_log_and_retention_prunes_it() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    s.token("sub", Role::Submitter, None);
    let before = entries(&s);
    assert_eq!(before.len(), 2);
    s.stop();
    let s = TestServer::open(dir.path(), None);
    assert_eq!(entries(&s), before, "a restart keeps every entry");
    s.stop();
    // An entry older than the retention (14 days by default): the next start prunes it.
    {
        let mut store = crate::harness::open_store(dir.path());
        let old = lockgate_store::AuditRecord {
            seq: 0,
            request: "old".into(),
            at: lockgate_core::Timestamp(1_000),
            principal: Some("admin".into()),
            role: Some(Role::Admin),
            method: "POST".into(),
            path: "/v1/pauses".into(),
            summary: String::new(),
            outcome: lockgate_api::AuditOutcome::Ok,
            error: None,
        };
        use lockgate_store::Store;
        store
            .commit(&lockgate_store::Batch {
                audit: vec![old],
                ..Default::default()
            })
            .unwrap();
    }
    let s = TestServer::open(dir.path(), None);
    let after = entries(&s);
    assert_eq!(
        after, before,
        "the old entry is pruned, the recent ones kept"
    );
}
