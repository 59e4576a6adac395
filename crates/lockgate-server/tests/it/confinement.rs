//! Issue 10, items 1-3: a non-admin's backup reads only inside the backup input roots (one
//! answer for every path outside), is bounded by the `[blocks]` caps and stops when its
//! client goes away, and runs manifest hooks and takes namespaces only as its owner's
//! policy allows, naming what it refused.

use crate::harness::*;
use lockgate_api::{BackupState, BackupView, Role};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})
}

/// A pod in `ns` whose pre-hook creates `marker`.
fn hooked_pod(ns: &str, name: &str, marker: &Path) -> Value {
    let cmd = format!("touch {}", marker.display());
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {
            "pre.hook.backup.lockgate.io/command":
                serde_json::to_string(&["sh", "-c", &cmd]).unwrap()}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}
    })
}

fn write_list(path: &Path, items: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, serde_json::to_vec(&list).unwrap()).unwrap();
}

/// A server whose only `--backup-input-root` is `root`.
fn server_with_root(dir: &Path, root: &Path) -> TestServer {
    TestServer::with_config(lockgate_server::Config {
        backup_input_roots: vec![root.to_path_buf()],
        ..TestServer::config(dir)
    })
}

fn post(s: &TestServer, token: &str, body: Value) -> (u16, String) {
    s.raw(
        "POST",
        "/v1/backups",
        Some(token),
        Some(("application/json", &body.to_string())),
    )
}

fn dry_run(from: &Path) -> Value {
    json!({"name": "b", "from": from.display().to_string(), "dry_run": true})
}

fn submitter(s: &TestServer, name: &str) -> String {
    s.admin()
        .create_token(&lockgate_api::TokenCreate {
            name: name.into(),
            role: Role::Submitter,
            node: None,
        })
        .unwrap()
        .token
}

#[test]
fn a_submitter_cannot_read_outside_the_input_roots_nor_tell_what_exists() {
    let dir = tempdir();
    let root = dir.path().join("input");
    std::fs::create_dir(&root).unwrap();
    write_list(&root.join("app.json"), &[configmap("app", "a")]);
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    write_list(&outside.join("secret.json"), &[configmap("app", "s")]);
    std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
    let s = server_with_root(&dir.path().join("data"), &root);
    s.admin()
        .put_policy(
            "[owners.alice]\nbackup_namespaces = [\"app\"]\n",
            false,
            None,
        )
        .unwrap();
    let alice = submitter(&s, "alice");

    let (status, inside) = post(&s, &alice, dry_run(&root));
    assert_eq!(status, 200, "{inside}");
    let inside: Value = serde_json::from_str(&inside).unwrap();
    assert_eq!(inside["blocks"][0]["items"], json!(["configmaps/app/a"]));

    let answers: Vec<(u16, String)> = [
        PathBuf::from("/etc/passwd"),
        PathBuf::from("/no/such/lockgate/input"),
        PathBuf::from("/root"),
        outside.clone(),
        root.join("escape"),
        root.join("escape/secret.json"),
        root.join("../outside"),
        root.join("missing.json"),
    ]
    .iter()
    .map(|p| post(&s, &alice, dry_run(p)))
    .collect();
    for a in &answers {
        assert_eq!(
            a, &answers[0],
            "every refused path gets the same status and body"
        );
    }
    assert_eq!(answers[0].0, 403);
    let body: Value = serde_json::from_str(&answers[0].1).unwrap();
    assert_eq!(body["error"]["code"], "input_not_allowed");
    assert_eq!(body["error"]["field"], "from");
    // A real backup is refused the same way, and nothing is recorded.
    let real = json!({"name": "real", "from": "/etc/passwd"});
    assert_eq!(post(&s, &alice, real), answers[0]);
    assert!(s.admin().backups().unwrap().backups.is_empty());
    // An admin is not confined.
    let (status, body) = post(&s, &s.admin, dry_run(&outside));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn without_input_roots_a_submitters_backup_is_refused() {
    let dir = tempdir();
    let input = dir.path().join("input");
    std::fs::create_dir(&input).unwrap();
    write_list(&input.join("app.json"), &[configmap("app", "a")]);
    let s = TestServer::start(&dir.path().join("data"), "");
    let alice = submitter(&s, "alice");
    let (status, body) = post(&s, &alice, dry_run(&input));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("input_not_allowed"), "{body}");
    assert!(body.contains("no backup input roots"), "{body}");
    assert_eq!(post(&s, &s.admin, dry_run(&input)).0, 200);
}

#[test]
fn a_missing_input_root_is_a_startup_or_policy_error_naming_it() {
    let dir = tempdir();
    let missing = dir.path().join("no-such-root");
    let err = lockgate_server::Server::open(lockgate_server::Config {
        backup_input_roots: vec![missing.clone()],
        ..TestServer::config(&dir.path().join("data"))
    })
    .err()
    .expect("a missing --backup-input-root stops the start");
    assert!(err.to_string().contains("no-such-root"), "{err}");

    let s = TestServer::start(&dir.path().join("data"), "");
    let policy = format!(
        "[blocks]\ninput_roots = [{:?}]\n",
        missing.display().to_string()
    );
    let (status, body) = s.raw(
        "PUT",
        "/v1/policy",
        Some(&s.admin),
        Some(("application/toml", &policy)),
    );
    assert_eq!(status, 422, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "invalid_policy");
    assert_eq!(body["error"]["field"], "blocks.input_roots[0]");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("no-such-root"), "{message}");
    assert!(
        message.contains("expected an existing directory"),
        "{message}"
    );

    // A policy file naming a missing root stops the start too.
    let file = dir.path().join("lockgate.toml");
    std::fs::write(&file, &policy).unwrap();
    let err = lockgate_server::Server::open(lockgate_server::Config {
        policy_file: Some(file),
        ..TestServer::config(&dir.path().join("data2"))
    })
    .err()
    .expect("a policy naming a missing root stops the start");
    assert!(err.to_string().contains("blocks.input_roots[0]"), "{err}");
}

#[test]
fn an_input_over_a_cap_is_refused_naming_the_cap() {
    let dir = tempdir();
    let root = dir.path().join("input");
    std::fs::create_dir(&root).unwrap();
    let items: Vec<Value> = (0..5).map(|i| configmap("app", &format!("c{i}"))).collect();
    write_list(&root.join("app.json"), &items);
    let s = server_with_root(&dir.path().join("data"), &root);
    s.admin()
        .put_policy(
            "[owners.alice]\nbackup_namespaces = [\"app\"]\n[blocks]\nmax_items = 3\n",
            false,
            None,
        )
        .unwrap();
    let alice = submitter(&s, "alice");
    for token in [&alice, &s.admin] {
        let (status, body) = post(&s, token, dry_run(&root));
        assert_eq!(status, 422, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], "input_too_large");
        assert_eq!(body["error"]["field"], "blocks.max_items");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("max_items = 3"), "{message}");
    }
    // A file over max_file_bytes (a manifest read whole) is a bad file naming the cap;
    // nothing starts.
    let mut big = configmap("app", "big");
    big["data"]["k"] = json!("x".repeat(200));
    std::fs::write(root.join("big.json"), big.to_string()).unwrap();
    s.admin()
        .put_policy("[blocks]\nmax_file_bytes = \"100B\"\n", false, None)
        .unwrap();
    let (status, body) = post(
        &s,
        &s.admin,
        json!({"name": "x", "from": root.display().to_string()}),
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("max_file_bytes"), "{body}");
    assert!(s.admin().backups().unwrap().backups.is_empty());
}

/// The `lockgate_backup_plans_total` sample of `outcome`, 0 when absent.
fn plans(s: &TestServer, outcome: &str) -> u64 {
    let (_, text) = s.raw("GET", "/metrics", None, None);
    let needle = format!("lockgate_backup_plans_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[test]
fn a_plan_stops_when_its_client_goes_away() {
    let dir = tempdir();
    let big = dir.path().join("big.json");
    // Hundreds of thousands of items: planning takes seconds, far longer than the client
    // stays (a debug build plans at most a few hundred thousand items per second).
    let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
    write!(f, "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[").unwrap();
    for i in 0..400_000 {
        let sep = if i == 0 { "" } else { "," };
        write!(f, "{sep}{}", configmap("app", &format!("cm-{i}"))).unwrap();
    }
    write!(f, "]}}").unwrap();
    f.flush().unwrap();
    drop(f);
    let s = TestServer::start(&dir.path().join("data"), "");

    let body = dry_run(&big).to_string();
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "POST /v1/backups HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.admin,
        body.len()
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(conn);

    let deadline = Instant::now() + Duration::from_secs(20);
    while plans(&s, "canceled") == 0 {
        assert!(
            Instant::now() < deadline,
            "the plan did not stop after the client left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(plans(&s, "made"), 0, "the plan ran to its end");
    // The server is responsive.
    let (status, _) = s.raw("GET", "/healthz", None, None);
    assert_eq!(status, 200);
}

fn until_finished(s: &TestServer, token: &str, name: &str) -> BackupView {
    let c = s.client(Some(token));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = c.backup(name).unwrap();
        if v.state == BackupState::Finished {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "backup {name} did not finish: {v:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn reasons(
    refused: &[lockgate_api::BackupRefusal],
) -> Vec<(String, Option<String>, String, String)> {
    refused
        .iter()
        .map(|r| {
            (
                r.kind.clone(),
                r.namespace.clone(),
                r.name.clone(),
                r.reason.clone(),
            )
        })
        .collect()
}

#[test]
fn a_submitters_manifest_hooks_do_not_run_unless_its_owner_is_allowed_them() {
    let dir = tempdir();
    let root = dir.path().join("input");
    std::fs::create_dir(&root).unwrap();
    let marker = dir.path().join("hook-ran");
    write_list(
        &root.join("app.json"),
        &[
            hooked_pod("app", "web-0", &marker),
            configmap("kube-system", "cluster-admin-config"),
        ],
    );
    let s = server_with_root(&dir.path().join("data"), &root);
    s.admin()
        .put_policy(
            r#"
[blocks]
exec_template = ["env", "{command}"]

[owners.alice]
backup_namespaces = ["app"]

[owners.bob]
backup_namespaces = ["app"]
allow_hooks = true
"#,
            false,
            None,
        )
        .unwrap();
    let alice = submitter(&s, "alice");
    let bob = submitter(&s, "bob");
    let expected = vec![
        (
            "ConfigMap".to_string(),
            Some("kube-system".to_string()),
            "cluster-admin-config".to_string(),
            "namespace_not_allowed".to_string(),
        ),
        (
            "Pod".to_string(),
            Some("app".to_string()),
            "web-0".to_string(),
            "hooks_not_allowed".to_string(),
        ),
    ];

    let (status, body) = post(&s, &alice, dry_run(&root));
    assert_eq!(status, 200, "{body}");
    let dry: lockgate_api::BackupDryRun = serde_json::from_str(&body).unwrap();
    assert_eq!(reasons(&dry.refused), expected);
    assert_eq!(dry.blocks.len(), 1);
    assert_eq!(dry.blocks[0].items, vec!["pods/app/web-0".to_string()]);

    let from = root.display().to_string();
    let (status, body) = post(&s, &alice, json!({"name": "alice-1", "from": from}));
    assert_eq!(status, 201, "{body}");
    let created: BackupView = serde_json::from_str(&body).unwrap();
    assert_eq!(reasons(&created.refused), expected);
    let done = until_finished(&s, &alice, "alice-1");
    assert!(!marker.exists(), "a submitter's manifest hook ran");
    assert_eq!(done.phase.as_deref(), Some("PartiallyFailed"));
    assert_eq!(reasons(&done.refused), expected);

    let (status, body) = post(&s, &bob, json!({"name": "bob-1", "from": from}));
    assert_eq!(status, 201, "{body}");
    let done = until_finished(&s, &bob, "bob-1");
    assert!(
        marker.exists(),
        "an allowed owner's hook did not run: {done:?}"
    );
    assert_eq!(reasons(&done.refused), expected[..1].to_vec());
}
