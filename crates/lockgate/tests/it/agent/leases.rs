//! One lease, one run of a handler: what the chaos harness (docs/reliability.md) found the
//! agent doing wrong, each shown here on a real server and agent.
//!
//! - A handler that ended while the server was down was run again under the same lease
//!   once the server was back (the finish was given up; the restarted server offered the
//!   assignment again).
//! - The same for a prepare handler whose `prepared` could not be reported, and for a
//!   handler stopped because the server was out of reach past `unreachable_grace`.
//! - An assignment granted while the agent could not take it (paused here) started its
//!   handler although the lease had run out meanwhile and the slot was someone else's.

use super::*;
use crate::harness::{eventually, signal, Srv};
use lockgate_core::JobState;
use rustix::process::Signal;

const POLICY: &str = r#"
[leases]
ttl = "1s"
[kinds.stage]
two_stage = true
"#;

/// Handlers that append their kind and stage to `runs.txt`, then sleep: `once` 1 s,
/// `long` 30 s, `stage` 1 s to prepare and nothing to run.
fn config(srv: &Srv) -> String {
    let runs = srv.path("runs.txt");
    let h = |tag: &str, secs: &str| {
        format!(
            r#"["sh", "-c", "echo {tag} $LOCKGATE_JOB_ID $LOCKGATE_FENCING_TOKEN >> {}; sleep {secs}"]"#,
            runs.display()
        )
    };
    format!(
        "[agent]\ngrace = \"200ms\"\nunreachable_grace = \"2s\"\n\n[handlers.once]\nrun = {}\n\n[handlers.long]\nrun = {}\n\n[handlers.stage]\nprepare = {}\nrun = {}\n",
        h("once", "1"),
        h("long", "30"),
        h("prepare", "1"),
        h("run", "0")
    )
}

fn runs(srv: &Srv) -> Vec<String> {
    std::fs::read_to_string(srv.path("runs.txt"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn submit(srv: &Srv, kind: &str, node: &str) -> u64 {
    let (job, _) = srv
        .admin()
        .submit(&SubmitRequest {
            kind: kind.into(),
            node: Some(node.into()),
            executor: Some(Executor::Agent),
            ..SubmitRequest::default()
        })
        .unwrap();
    job.id
}

fn ended(srv: &Srv, id: u64) -> JobState {
    let admin = srv.admin();
    assert!(
        eventually(Duration::from_secs(20), || admin
            .job(id)
            .is_ok_and(|j| j.state.is_terminal())),
        "job {id} never ended: {:?}",
        admin.job(id)
    );
    admin.job(id).unwrap().state
}

/// Kills the server with -9 and starts it again 3.5 s later.
fn down_for_3_5_s(srv: &mut Srv) {
    srv.kill9();
    std::thread::sleep(Duration::from_millis(3500));
    srv.spawn();
}

/// The server is killed while a handler runs and started again after the agent gave up
/// on it: whatever the handler was doing, it ran once under its lease.
#[test]
fn a_handler_runs_once_under_its_lease_across_a_server_restart() {
    let _serial = serial();
    let mut srv = Srv::start(POLICY);
    let _agent = start_agent(&srv, "n1", &[], &config(&srv));
    let started =
        |srv: &Srv, n: usize| eventually(Duration::from_secs(20), || runs(srv).len() == n);

    // 1. The handler ends while the server is down: the finish waits for the server.
    let once = submit(&srv, "once", "n1");
    assert!(started(&srv, 1), "{:?}", runs(&srv));
    down_for_3_5_s(&mut srv);
    assert_eq!(ended(&srv, once), JobState::Succeeded);

    // 2. The prepare handler ends while the server is down: `prepared` waits for it.
    let staged = submit(&srv, "stage", "n1");
    assert!(started(&srv, 2), "{:?}", runs(&srv));
    down_for_3_5_s(&mut srv);
    assert_eq!(
        ended(&srv, staged),
        JobState::Succeeded,
        "{:?}",
        srv.admin().job(staged).unwrap().message
    );

    // 3. The server is away past unreachable_grace: the handler is stopped, and the
    //    attempt ends failed instead of running again under the same lease.
    let long = submit(&srv, "long", "n1");
    assert!(started(&srv, 4), "{:?}", runs(&srv));
    down_for_3_5_s(&mut srv);
    assert_eq!(ended(&srv, long), JobState::Failed);
    let message = srv.admin().job(long).unwrap().message.unwrap_or_default();
    assert!(message.contains("handler was stopped"), "{message}");

    std::thread::sleep(Duration::from_millis(1500));
    let tags: Vec<String> = runs(&srv)
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(
        tags,
        ["once", "prepare", "run", "long"],
        "each handler ran once: {:?}",
        runs(&srv)
    );
}

/// The agent is paused while the server assigns it a job; the job's lease runs out and
/// the job is lost before the agent reads the assignment. The agent must not start the
/// handler: another job holds the slot by then.
#[test]
fn an_assignment_whose_lease_ran_out_before_the_agent_read_it_never_starts() {
    let _serial = serial();
    let srv = Srv::start(&format!(
        "{POLICY}[[conflict]]\nkeys = [\"group\"]\n[nodes]\nttl = \"30s\"\n"
    ));
    let cfg = config(&srv);
    let n1 = start_agent(&srv, "n1", &[], &cfg);
    let admin = srv.admin();
    signal(n1.pid(), Signal::STOP);
    let grouped = |node: &str| SubmitRequest {
        kind: "long".into(),
        node: Some(node.into()),
        executor: Some(Executor::Agent),
        attrs: [("group".to_string(), "g".to_string())].into(),
        ..SubmitRequest::default()
    };
    let (late, _) = admin.submit(&grouped("n1")).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || admin
            .job(late.id)
            .is_ok_and(|j| j.state == JobState::Lost)),
        "the paused agent's job was never lost: {:?}",
        admin.job(late.id)
    );
    let _n2 = start_agent(&srv, "n2", &[], &cfg);
    let (next, _) = admin.submit(&grouped("n2")).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || runs(&srv).len() == 1),
        "the next holder of the group never started"
    );
    signal(n1.pid(), Signal::CONT);
    std::thread::sleep(Duration::from_millis(1500));
    let lines = runs(&srv);
    assert_eq!(
        lines,
        [format!(
            "long {} {}",
            next.id,
            admin.job(next.id).unwrap().lease.unwrap().token
        )],
        "only the group's holder ran"
    );
}

/// An agent killed with -9 and started again at once, well within the lease TTL: the new
/// process registers with an id of its own, the server loses the job the old process
/// held, and the retry runs under a newer token. The old lease is never run again.
#[test]
fn a_restarted_agent_never_runs_its_old_process_lease() {
    let _serial = serial();
    let srv = Srv::start(
        "[leases]\nttl = \"60s\"\n[kinds.long]\nretry = { times = 1, interval = \"100ms\" }\n",
    );
    let mut agent = start_agent(&srv, "n1", &[], &config(&srv));
    let id = submit(&srv, "long", "n1");
    let started = |n: usize| eventually(Duration::from_secs(20), || runs(&srv).len() >= n);
    assert!(started(1), "{:?}", runs(&srv));
    agent.kill9();
    respawn(&srv, &mut agent, &[]);
    // Long before the 60 s TTL could free the slot.
    assert!(started(2), "the retry never ran: {:?}", runs(&srv));
    std::thread::sleep(Duration::from_millis(500));
    let lines = runs(&srv);
    let tokens: Vec<u64> = lines
        .iter()
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 2, "{lines:?}");
    assert!(
        tokens[1] > tokens[0],
        "the second run has a newer token: {lines:?}"
    );
    let job = srv.admin().job(id).unwrap();
    assert_eq!(job.attempt, 2, "{job:?}");
    let events = srv.admin().events(0).unwrap();
    let text = serde_json::to_string(&events).unwrap();
    assert!(text.contains("the node's agent restarted"), "{text}");
}
