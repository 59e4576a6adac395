//! A full disk never stops the server (docs/security.md, `space.rs`): a burst of submits
//! near the watermark gets 507s instead of a failed commit, and a commit that fails for
//! space anyway is answered 507 and kept while the server stays up, and committed once
//! space returns.

use crate::hardening::SmallFs;
use crate::harness::*;
use lockgate_server::hardening::Hardening;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WHY: &str = "the commit that fails for space is SQLite's on the data dir's tmpfs; a database keeps its own disk";

fn small_fs(size: &str) -> Option<SmallFs> {
    let fs = SmallFs::mount(size);
    if fs.is_none() {
        // CI runs as root and must run these: no silent skip there.
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs under CI: the full-disk tests must run there"
        );
        println!("skipped: cannot mount a tmpfs here (not root?)");
    }
    fs
}

/// A submit of about `bytes` of attributes: its status and body.
fn submit(s: &TestServer, bytes: usize, key: &str) -> (u16, Value) {
    let attrs: BTreeMap<String, String> = (0..bytes / 4000)
        .map(|i| (format!("a{i}"), "x".repeat(4000)))
        .collect();
    let body = json!({"kind": "backup", "attrs": attrs, "idempotency_key": key});
    let (status, text) = s.raw(
        "POST",
        "/v1/jobs",
        Some(&s.admin),
        Some(("application/json", &body.to_string())),
    );
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

const POLICY: &str =
    "[global]\nmax_running = 0\n[quotas]\nmax_attrs = 32\nmax_attr_value_bytes = 4096\n";

#[test]
fn a_burst_of_submits_near_a_full_disk_gets_507s_and_the_server_stays_up() {
    if sqlite_only(WHY) {
        return;
    }
    let Some(fs) = small_fs("3m") else { return };
    let data = fs.path().join("data");
    let hardening = Hardening {
        min_free_space: Some(1_500_000),
        ..Hardening::default()
    };
    let s = TestServer::open_with(&data, None, hardening);
    s.admin().put_policy(POLICY, false, None).unwrap();
    // 16 submits of 72 KB at once, from 16 threads: the sampled flag cannot see them.
    let answers: Vec<(String, u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let s = &s;
                scope.spawn(move || {
                    let key = format!("burst-{i}");
                    let (status, body) = submit(s, 72_000, &key);
                    (key, status, body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let taken: Vec<&(String, u16, Value)> = answers.iter().filter(|a| a.1 == 201).collect();
    let full: Vec<&(String, u16, Value)> = answers.iter().filter(|a| a.1 == 507).collect();
    assert_eq!(
        taken.len() + full.len(),
        16,
        "only 201 and 507: {:?}",
        answers.iter().map(|a| (a.1, &a.2)).collect::<Vec<_>>()
    );
    assert!(!full.is_empty(), "a burst past the watermark is refused");
    assert!(!taken.is_empty(), "what fits is taken");
    for (_, _, body) in &full {
        assert_eq!(body["error"]["code"], "insufficient_storage", "{body}");
    }
    assert_eq!(s.raw("GET", "/readyz", None, None).0, 200);
    // Every acknowledged job is there, now and after a restart.
    let check = |s: &TestServer| {
        for (key, _, body) in &taken {
            let id = body["id"].as_u64().unwrap();
            let job = s.admin().job(id).unwrap();
            assert_eq!(job.idempotency_key.as_deref(), Some(key.as_str()));
        }
    };
    check(&s);
    s.stop();
    let s = TestServer::open_with(&data, None, Hardening::default());
    check(&s);
}

#[test]
fn a_commit_that_fails_for_space_answers_507_and_commits_once_space_returns() {
    if sqlite_only(WHY) {
        return;
    }
    let Some(fs) = small_fs("8m") else { return };
    let data = fs.path().join("data");
    // No watermark: nothing refuses the submit before its commit meets the full disk.
    let hardening = Hardening {
        min_free_space: Some(0),
        ..Hardening::default()
    };
    let s = TestServer::open_with(&data, None, hardening);
    s.admin().put_policy(POLICY, false, None).unwrap();
    let (status, before) = submit(&s, 1000, "before");
    assert_eq!(status, 201, "{before}");
    let fill = fs.path().join("fill");
    std::fs::write(&fill, vec![1u8; fs.avail() as usize]).unwrap_or(());
    let (status, body) = submit(&s, 120_000, "while-full");
    assert_eq!(status, 507, "{body}");
    assert_eq!(body["error"]["code"], "insufficient_storage", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("not acknowledged"), "{message}");
    // The server is up while the disk is full (it used to exit 70 here), and it still
    // answers what only reads, although every commit fails until space returns.
    assert_eq!(s.raw("GET", "/healthz", None, None).0, 200);
    let id = before["id"].as_u64().unwrap();
    for path in [
        format!("/v1/jobs/{id}"),
        "/v1/jobs".to_string(),
        format!("/v1/jobs/{id}/explain"),
        "/v1/nodes".to_string(),
        "/v1/policy".to_string(),
        "/metrics".to_string(),
    ] {
        let (status, text) = s.raw("GET", &path, Some(&s.admin), None);
        assert_eq!(status, 200, "GET {path} while the disk is full: {text}");
    }
    // A change is still refused: it could not be committed.
    let (status, body) = s.raw(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        Some(&s.admin),
        Some(("application/json", "{}")),
    );
    assert_eq!(status, 507, "{body}");
    // Space comes back: the kept batch and the next submit commit, without a restart.
    std::fs::remove_file(&fill).unwrap();
    let start = Instant::now();
    let (status, again) = loop {
        let (status, body) = submit(&s, 1000, "after");
        if status == 201 || start.elapsed() > Duration::from_secs(10) {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 201, "{again}");
    assert_eq!(s.admin().job(id).unwrap().id, id);
    // The kept submit was committed once space returned: asking again finds it.
    let (status, kept) = submit(&s, 120_000, "while-full");
    assert_eq!(status, 200, "the kept job is found by its key: {kept}");
    s.stop();
}
