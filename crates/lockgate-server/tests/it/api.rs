//! The API's behaviour: idempotency, policy changes, nodes, events, metrics.

use crate::harness::*;
use lockgate_api::{JobQuery, NodeRegister, Role};
use lockgate_core::{JobState, Outcome};

#[test]
fn idempotent_submit_returns_the_same_job_even_after_it_finished() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let admin = s.admin();
    let mut req = job("backup", &[("datastore", "ds1")]);
    req.idempotency_key = Some("k1".into());
    let (first, created) = admin.submit(&req).unwrap();
    assert!(created);
    let (again, created) = admin.submit(&req).unwrap();
    assert!(!created);
    assert_eq!(again.id, first.id);
    let token = first.lease.as_ref().expect("admitted at once").token;
    admin
        .finish_job(first.id, token, Outcome::Succeeded, None)
        .unwrap();
    let (after, created) = admin.submit(&req).unwrap();
    assert_eq!(
        (after.id, created, after.state),
        (first.id, false, JobState::Succeeded)
    );
    // Keys are per owner.
    let alice = s.token("alice", Role::Submitter, None);
    let (other, created) = alice.submit(&req).unwrap();
    assert!(created && other.id != first.id);
}

#[test]
fn policy_changes_apply_at_once_and_dry_runs_change_nothing() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 1\n");
    let admin = s.admin();
    let a = admin.submit(&job("backup", &[])).unwrap().0;
    let b = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!((a.state, b.state), (JobState::Running, JobState::Queued));
    let dry = admin
        .put_policy("[global]\nmax_running = 2\n", true, None)
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.admitted_now, vec![b.id]);
    assert_eq!(admin.job(b.id).unwrap().state, JobState::Queued);
    let applied = admin
        .put_policy("[global]\nmax_running = 2\n", false, None)
        .unwrap();
    assert_eq!(applied.admitted_now, vec![b.id]);
    assert_eq!(admin.job(b.id).unwrap().state, JobState::Running);
    // Lowering drains: nothing running is stopped.
    let low = admin
        .put_policy("[global]\nmax_running = 1\n", false, None)
        .unwrap();
    assert_eq!(low.over_limit, vec!["global".to_string()]);
    assert_eq!(admin.job(a.id).unwrap().state, JobState::Running);
}

#[test]
fn a_config_file_is_the_source_of_truth() {
    if crate::harness::sqlite_only("with --database-url the database holds the policy and the --config file is never written (docs/policy.md; crates/lockgate/tests/it/postgres.rs tests that side)") {
        return;
    }
    let dir = tempdir();
    let file = dir.path().join("lockgate.toml");
    std::fs::write(&file, "[global]\nmax_running = 1\n").unwrap();
    let s = TestServer::open(&dir.path().join("data"), Some(file.clone()));
    let admin = s.admin();
    admin
        .put_policy("[global]\nmax_running = 4\n", false, None)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[global]\nmax_running = 4\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lockgate.toml.bak")).unwrap(),
        "[global]\nmax_running = 1\n"
    );
    // An invalid document is refused and the file is untouched.
    assert_eq!(
        admin
            .put_policy("[global]\nmax_running = \"x\"\n", false, None)
            .unwrap_err()
            .status(),
        Some(422)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[global]\nmax_running = 4\n"
    );
    s.stop();
    // A start with an invalid file fails and names file, line and field.
    std::fs::write(&file, "[global]\n\nmax_running = -1\n").unwrap();
    let err = lockgate_server::Server::open(lockgate_server::Config {
        data_dir: dir.path().join("data"),
        listen: "127.0.0.1:0".parse().unwrap(),
        policy_file: Some(file.clone()),
        tls: None,
        hardening: Default::default(),
        backup_input_roots: Vec::new(),
        database_url: None,
    })
    .err()
    .expect("refused");
    let text = err.to_string();
    assert!(
        text.contains("lockgate.toml:3") && text.contains("global.max_running"),
        "{text}"
    );
}

#[test]
fn listing_filters_and_pages() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 2\n");
    let admin = s.admin();
    for i in 0..5 {
        admin
            .submit(&job(if i % 2 == 0 { "backup" } else { "verify" }, &[]))
            .unwrap();
    }
    let page = admin
        .jobs(&JobQuery {
            limit: Some(2),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        page.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(page.next, Some(2));
    let page = admin
        .jobs(&JobQuery {
            limit: Some(2),
            after: Some(4),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((page.jobs.len(), page.next), (1, None));
    let q = admin
        .jobs(&JobQuery {
            state: Some("queued".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(q.jobs.len(), 3);
    let v = admin
        .jobs(&JobQuery {
            kind: Some("verify".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(v.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![2, 4]);
}

#[test]
fn nodes_register_cordon_and_hand_agent_jobs_out() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[nodes]\nmax_running = 1\n");
    let admin = s.admin();
    let agent = s.token("agent-n1", Role::Agent, Some("n1"));
    let reg = NodeRegister {
        labels: [("zone".to_string(), "eu-1".to_string())].into(),
        kinds: ["data-upload".to_string()].into(),
        ..Default::default()
    };
    assert_eq!(
        agent.register_node("n2", &reg).unwrap_err().status(),
        Some(403),
        "bound to n1"
    );
    let n = agent.register_node("n1", &reg).unwrap();
    assert_eq!((n.state.as_str(), n.number), ("ready", Some(1)));
    admin.cordon("n1", true).unwrap();
    let mut j = job("data-upload", &[]);
    j.node_selector = Some("zone=eu-1".into());
    let queued = admin.submit(&j).unwrap().0;
    assert_eq!(queued.state, JobState::Queued);
    assert!(
        admin
            .explain(queued.id)
            .unwrap()
            .text
            .contains("no eligible node")
            || !admin.explain(queued.id).unwrap().reasons.is_empty()
    );
    admin.cordon("n1", false).unwrap();
    let running = admin.job(queued.id).unwrap();
    assert_eq!(
        (running.state, running.node.as_deref()),
        (JobState::Running, Some("n1"))
    );
    let list: serde_json::Value = agent
        .call("GET", "/v1/nodes/n1/assignments?timeout_s=5", None::<&()>)
        .unwrap();
    let a = &list["assignments"][0];
    assert_eq!(
        (a["job"]["id"].as_u64(), a["stage"].as_str()),
        (Some(queued.id), Some("run"))
    );
    let _: serde_json::Value = agent
        .call(
            "POST",
            &format!("/v1/nodes/n1/assignments/{}/ack", queued.id),
            None::<&()>,
        )
        .unwrap();
    let token = a["token"].as_u64().unwrap();
    agent
        .finish_job(queued.id, token, Outcome::Succeeded, None)
        .unwrap();
    let nodes = admin.nodes().unwrap().nodes;
    assert_eq!((nodes.len(), nodes[0].running), (1, 0));
    admin.remove_node("n1").unwrap();
    assert!(admin.nodes().unwrap().nodes.is_empty());
}

#[test]
fn events_are_numbered_and_the_stream_resumes() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let admin = s.admin();
    let j = admin.submit(&job("backup", &[])).unwrap().0;
    let events = admin.events(0).unwrap().events;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let last = *seqs.last().unwrap();
    // Resume after the last one: the next event to arrive is the finish.
    let url = s.url.clone();
    let token = s.admin.clone();
    let follower = std::thread::spawn(move || {
        let c = lockgate_client::Client::new(&url, Some(token)).unwrap();
        let mut got = Vec::new();
        c.follow_events(last, |ev| {
            got.push(ev);
            false
        })
        .unwrap();
        got
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    admin
        .finish_job(j.id, j.lease.unwrap().token, Outcome::Succeeded, None)
        .unwrap();
    let got = follower.join().unwrap();
    assert_eq!(got[0].seq, last + 1);
    assert_eq!(got[0].data["change"], "finished");
    // The backlog is replayed from the store to a stream that starts behind.
    let c = s.admin();
    let mut replay = Vec::new();
    c.follow_events(0, |ev| {
        replay.push(ev.seq);
        replay.len() < 3
    })
    .unwrap();
    assert_eq!(replay, vec![1, 2, 3]);
}

#[test]
fn metrics_show_jobs_scopes_and_commits() {
    let dir = tempdir();
    // The kind is named in the policy: kinds it does not name are counted as `other`.
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 1\n[kinds.backup]\n");
    let admin = s.admin();
    admin.submit(&job("backup", &[])).unwrap();
    admin.submit(&job("backup", &[])).unwrap();
    let (status, text) = s.raw("GET", "/metrics", None, None);
    assert_eq!(status, 200);
    for needle in [
        "lockgate_jobs{state=\"running\",kind=\"backup\"} 1",
        "lockgate_jobs{state=\"queued\",kind=\"backup\"} 1",
        "lockgate_admissions_total{kind=\"backup\"} 1",
        "lockgate_scope_running{scope=\"global\"} 1",
        "lockgate_scope_limit{scope=\"global\"} 1",
        "lockgate_wait_seconds_count 1",
        "lockgate_lease_expiries_total 0",
        "lockgate_store_commit_seconds_count",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
}
