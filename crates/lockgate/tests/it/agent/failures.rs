//! Failures: an agent killed with `kill -9` mid-work, and a server restarted under an agent
//! with running work.

use super::*;
use crate::harness::{eventually, gone, Srv};
use lockgate_core::JobState;

const POLICY: &str = r#"
[leases]
ttl = "500ms"
[nodes]
max_running = 2
ttl = "500ms"
[kinds.move]
retry = { times = 3, interval = "10ms" }
"#;

/// kill -9 of an agent: its handlers die with it (PDEATHSIG), the node and its jobs are
/// lost after the TTL, the movable jobs are retried on the other nodes and finish, no slot
/// leaks, and no job ever runs twice at once (the handlers' own records).
#[test]
fn a_killed_agent_s_jobs_run_elsewhere_and_nothing_runs_twice() {
    let _serial = serial();
    let srv = Srv::start(POLICY);
    let cfg = handlers(&srv);
    let mut agents: Vec<AgentProc> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| start_agent(&srv, n, &[], &cfg))
        .collect();
    let admin = srv.admin();
    for _ in 0..24 {
        admin.submit(&movable("move", 400, 0)).unwrap();
    }
    let path = srv.path("records.txt");
    assert!(eventually(Duration::from_secs(20), || {
        records(&path)
            .iter()
            .filter(|r| r.node == "n1" && r.end.is_none())
            .count()
            == 2
    }));
    agents[0].kill9();
    let killed_at = now_ms();
    let victims: Vec<Rec> = records(&path)
        .into_iter()
        .filter(|r| r.node == "n1" && r.end.is_none())
        .collect();
    assert!(!victims.is_empty());
    for v in &victims {
        assert!(
            eventually(Duration::from_secs(5), || gone(v.pid)),
            "handler {} of the killed agent survived it",
            v.pid
        );
    }
    let jobs = wait_all_final(&srv, 24, Duration::from_secs(60));
    for j in &jobs {
        assert_eq!(j.state, JobState::Succeeded, "job {} {:?}", j.id, j.message);
    }
    for v in &victims {
        let j = jobs.iter().find(|j| j.id == v.job).unwrap();
        assert_ne!(j.node.as_deref(), Some("n1"), "job {} ran elsewhere", j.id);
        assert!(j.attempt >= 2);
    }
    // Nothing ran twice at once: per job, handler runs do not overlap (a killed handler
    // ran until the kill).
    let recs = records(&path);
    let mut by_job: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for r in &recs {
        let end = r.end.unwrap_or_else(|| {
            assert_eq!(
                r.node, "n1",
                "only the killed agent's handlers lack an end: {r:?}"
            );
            killed_at
        });
        by_job.entry(r.job).or_default().push((r.start, end));
    }
    for (job, spans) in &by_job {
        assert_eq!(
            max_overlap(spans),
            1,
            "job {job} ran twice at once: {spans:?}"
        );
    }
    for n in ["n2", "n3"] {
        let spans: Vec<(u64, u64)> = recs
            .iter()
            .filter(|r| r.node == n)
            .map(|r| (r.start, r.end.unwrap()))
            .collect();
        assert!(max_overlap(&spans) <= 2, "{n} ran more than its number");
    }
    // No slot leaked: every node is empty, the killed one lost.
    let c = srv.admin();
    assert!(eventually(Duration::from_secs(5), || {
        c.nodes()
            .unwrap()
            .nodes
            .iter()
            .all(|n| n.running + n.preparing + n.prepared == 0)
    }));
    assert_eq!(c.node("n1").unwrap().state, "lost");
    eprintln!(
        "kill -9 agent: {} job(s) moved from n1, {} handler runs in all",
        victims.len(),
        recs.len()
    );
}

/// The server is killed and restarted while an agent runs work: the handlers keep running,
/// the agent reconnects, renews the leases (which the restart made fresh) and finishes the
/// jobs; nothing is lost or run twice.
#[test]
fn a_server_restart_under_running_work_loses_nothing() {
    let _serial = serial();
    let mut srv = Srv::start(POLICY);
    let _agent = start_agent(&srv, "n1", &[], &handlers(&srv));
    let admin = srv.admin();
    for _ in 0..4 {
        admin.submit(&movable("move", 1500, 0)).unwrap();
    }
    let path = srv.path("records.txt");
    assert!(eventually(Duration::from_secs(20), || records(&path).len() == 2));
    srv.kill9();
    // Down for longer than the lease and node TTLs.
    std::thread::sleep(Duration::from_millis(800));
    srv.spawn();
    let jobs = wait_all_final(&srv, 4, Duration::from_secs(30));
    for j in &jobs {
        assert_eq!(j.state, JobState::Succeeded, "job {} {:?}", j.id, j.message);
        assert_eq!(j.attempt, 1, "job {} was lost and retried", j.id);
        assert!(j
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("run: exit status 0"));
    }
    let recs = records(&path);
    assert_eq!(recs.len(), 4, "each job ran once: {recs:?}");
    assert!(recs.iter().all(|r| r.end.is_some()));
}

/// A cancel request reaches the handler (SIGTERM to its group) and the job ends
/// `cancelled` with who cancelled it and the handler's last output in its message.
#[test]
fn a_cancel_request_stops_the_handler() {
    let srv = Srv::start(POLICY);
    let _agent = start_agent(&srv, "n1", &[], &handlers(&srv));
    let admin = srv.admin();
    let id = admin.submit(&movable("move", 30_000, 0)).unwrap().0.id;
    let path = srv.path("records.txt");
    assert!(eventually(Duration::from_secs(20), || records(&path).len() == 1));
    let pid = records(&path)[0].pid;
    admin.cancel(id, false).unwrap();
    let jobs = wait_all_final(&srv, 1, Duration::from_secs(10));
    assert_eq!(jobs[0].state, JobState::Cancelled);
    let msg = jobs[0].message.clone().unwrap_or_default();
    assert!(
        msg.starts_with(
            "cancelled by admin token \"admin\": cancel requested; run handler stopped (signal 15)"
        ),
        "{msg}"
    );
    assert!(gone(pid));
}

/// Issue 10, item 11: `tar -cf OUT /data {attr.path}` with `path=--remove-files` deleted the
/// data it backed up. An attribute value starting with `-` may not begin an argument: the
/// job fails naming the attribute and the handler, and the command is never started (its
/// marker file is not written), unless the handler sets `allow_dash_values = true`.
#[test]
fn an_attribute_starting_with_a_dash_is_not_passed_as_an_option() {
    let srv = Srv::start(POLICY);
    let marker = |name: &str| srv.path(name).display().to_string();
    let handler = |kind: &str, opt_in: bool| {
        format!(
            "[handlers.{kind}]\nrun = [\"sh\", \"-c\", \"touch {} && echo \\\"$1\\\"\", \"sh\", \"{{attr.path}}\"]\nallow_dash_values = {opt_in}\n",
            marker(&format!("{kind}.ran"))
        )
    };
    let cfg = format!("{}{}", handler("tarlike", false), handler("optin", true));
    let _agent = start_agent(&srv, "n1", &[], &cfg);
    let admin = srv.admin();
    let submit = |kind: &str, path: &str| {
        let req = SubmitRequest {
            kind: kind.into(),
            attrs: BTreeMap::from([("path".to_string(), path.to_string())]),
            node_selector: Some(String::new()),
            executor: Some(Executor::Agent),
            ..SubmitRequest::default()
        };
        admin.submit(&req).unwrap().0.id
    };
    let refused = submit("tarlike", "--remove-files");
    let jobs = wait_all_final(&srv, 1, Duration::from_secs(20));
    let j = jobs.iter().find(|j| j.id == refused).unwrap();
    assert_eq!(j.state, JobState::Failed, "{:?}", j.message);
    let msg = j.message.clone().unwrap_or_default();
    assert!(
        msg.contains("attribute \"path\"") && msg.contains("[handlers.tarlike]"),
        "{msg}"
    );
    assert!(
        !srv.path("tarlike.ran").exists(),
        "the command ran with a dash value"
    );
    // The same handler runs with a plain value, and an opted-in handler with a dash value.
    submit("tarlike", "data");
    submit("optin", "--verbose");
    for j in wait_all_final(&srv, 3, Duration::from_secs(20)) {
        if j.id != refused {
            assert_eq!(j.state, JobState::Succeeded, "job {} {:?}", j.id, j.message);
        }
    }
    assert!(srv.path("tarlike.ran").exists() && srv.path("optin.ran").exists());
}
