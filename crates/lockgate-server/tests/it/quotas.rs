//! `[quotas]` and bounded answers (issue 10, item 5), over real HTTP with a real store: what
//! one submitter may put into the server, and how much the server answers at once.

use crate::harness::*;
use lockgate_api::{JobQuery, Role};
use lockgate_core::Outcome;

#[test]
fn a_submitter_cannot_queue_past_its_quota_and_gets_429_naming_it() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        "[global]\nmax_running = 0\n[quotas]\nmax_queued_per_owner = 3\n",
    );
    let alice = s.token("alice", Role::Submitter, None);
    let mut first = None;
    for _ in 0..3 {
        first.get_or_insert(alice.submit(&job("backup", &[])).unwrap().0.id);
    }
    let e = alice.submit(&job("backup", &[])).unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    assert_eq!(e.code(), Some("quota_exceeded"));
    let text = e.to_string();
    assert!(
        text.contains("[quotas].max_queued_per_owner is 3") && text.contains("\"alice\""),
        "{text}"
    );
    // Another submitter has its own quota; admin tokens have none.
    let bob = s.token("bob", Role::Submitter, None);
    bob.submit(&job("backup", &[])).unwrap();
    let admin = s.admin();
    for _ in 0..5 {
        admin.submit(&job("backup", &[])).unwrap();
    }
    // A job that ends frees its place.
    alice.cancel(first.unwrap(), false).unwrap();
    alice.submit(&job("backup", &[])).unwrap();
    assert_eq!(
        alice.submit(&job("backup", &[])).unwrap_err().status(),
        Some(429)
    );
}

#[test]
fn kinds_and_attrs_outside_the_syntax_or_the_quotas_are_refused_422() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let alice = s.token("alice", Role::Submitter, None);
    let refused = |req: lockgate_api::SubmitRequest, field: &str| {
        let e = alice.submit(&req).unwrap_err();
        assert_eq!(
            (e.status(), e.code()),
            (Some(422), Some("invalid_field")),
            "{e}"
        );
        let lockgate_client::ClientError::Api { detail, .. } = &e else {
            unreachable!()
        };
        assert_eq!(detail.field.as_deref(), Some(field), "{e}");
    };
    refused(job("nul\0kind", &[]), "kind");
    refused(job(&"k".repeat(100_000), &[]), "kind");
    refused(job("backup", &[("a b", "x")]), "attrs.a b");
    refused(job("backup", &[("path", "a\u{1b}[31m")]), "attrs.path");
    let long = "x".repeat(1025);
    refused(job("backup", &[("path", &long)]), "attrs.path");
    let many: Vec<(String, String)> = (0..33).map(|i| (format!("a{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    refused(job("backup", &many), "attrs");
    // What backup tools need stays valid.
    alice
        .submit(&job(
            "lockgate.io/data-upload",
            &[
                ("group", "vm/100"),
                ("repository", "backup@host:/srv/repo"),
                ("namespaces", "a,b"),
                ("path", &"x".repeat(1024)),
            ],
        ))
        .unwrap();
}

#[test]
fn a_huge_finish_message_is_cut_to_the_quota_with_a_marker() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[quotas]\nmax_message_bytes = 1000\n");
    let alice = s.token("alice", Role::Submitter, None);
    let (j, _) = alice.submit(&job("backup", &[])).unwrap();
    let token = j.lease.unwrap().token;
    let done = alice
        .finish_job(j.id, token, Outcome::Failed, Some("e".repeat(200_000)))
        .unwrap();
    let m = done.message.unwrap();
    assert!(m.len() < 1100, "{} bytes kept", m.len());
    assert!(
        m.ends_with("[truncated: 199000 more bytes, [quotas].max_message_bytes = 1000]"),
        "{}",
        &m[1000..]
    );
    assert_eq!(alice.job(j.id).unwrap().message.unwrap(), m);
}

#[test]
fn a_job_list_page_is_bounded_in_bytes_and_paging_still_reaches_every_job() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 0\n");
    let admin = s.admin();
    let value = "v".repeat(1024);
    let attrs: Vec<(String, String)> = (0..32).map(|i| (format!("a{i}"), value.clone())).collect();
    let attrs: Vec<(&str, &str)> = attrs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for _ in 0..160 {
        admin.submit(&job("backup", &attrs)).unwrap();
    }
    let (status, body) = s.raw("GET", "/v1/jobs?limit=1000", Some(&s.admin), None);
    assert_eq!(status, 200);
    assert!(body.len() <= 4 << 20, "a {} byte page", body.len());
    let mut q = JobQuery {
        limit: Some(1000),
        ..Default::default()
    };
    let first = admin.jobs(&q).unwrap();
    assert!(
        first.jobs.len() < 160 && first.next.is_some(),
        "{} jobs in one page",
        first.jobs.len()
    );
    let mut seen = first.jobs.len();
    q.after = first.next;
    while let Some(after) = q.after {
        let page = admin
            .jobs(&JobQuery {
                after: Some(after),
                ..q.clone()
            })
            .unwrap();
        seen += page.jobs.len();
        q.after = page.next;
    }
    assert_eq!(seen, 160);
}

#[test]
fn submitters_cannot_grow_the_metrics_label_space_without_bound() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        "[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 1\n\n[[conflict]]\nkeys = [\"group\"]\n\n[kinds.backup]\n",
    );
    let alice = s.token("alice", Role::Submitter, None);
    for i in 0..500 {
        let (ds, group) = (format!("ds-{i}"), format!("vm/{i}"));
        alice
            .submit(&job(
                &format!("kind-{i}"),
                &[("datastore", &ds), ("group", &group)],
            ))
            .unwrap();
    }
    alice.submit(&job("backup", &[("datastore", "x")])).unwrap();
    let (status, text) = s.raw("GET", "/metrics", None, None);
    assert_eq!(status, 200);
    let series: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(series.len() < 800, "{} series", series.len());
    assert!(!text.contains("kind=\"kind-"), "unnamed kinds are labels");
    assert!(text.contains("lockgate_jobs{state=\"running\",kind=\"other\"} 500"));
    assert!(text.contains("lockgate_admissions_total{kind=\"backup\"} 1"));
    let running = |prefix: &str| {
        series
            .iter()
            .filter(|l| l.starts_with(&format!("lockgate_scope_running{{scope=\"{prefix}")))
            .count()
    };
    assert_eq!(running("limit:per-ds"), 101, "100 values and `other`");
    assert_eq!(running("conflict"), 101, "100 keys and `other`");
    assert!(text.contains("lockgate_scope_running{scope=\"conflict[0]:other\"} 400"));
    assert!(text.contains("lockgate_scope_running{scope=\"limit:per-ds:other\"} 401"));
}
