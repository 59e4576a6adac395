//! A restart loses nothing; retention deletes what is old.

use crate::harness::*;
use lockgate_core::job::Job;
use lockgate_core::{JobState, Outcome, Timestamp};
use lockgate_store::{Batch, Store, StoredEvent};

#[test]
fn a_restart_keeps_jobs_leases_tokens_events_and_the_policy() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        "[global]\nmax_running = 1\n[leases]\nttl = \"5s\"\n",
    );
    let admin = s.admin();
    let alice_token = admin
        .create_token(&lockgate_api::TokenCreate {
            name: "alice".into(),
            role: lockgate_api::Role::Submitter,
            node: None,
        })
        .unwrap()
        .token;
    let alice = s.client(Some(&alice_token));
    let a = admin.submit(&job("backup", &[])).unwrap().0;
    let b = alice.submit(&job("backup", &[])).unwrap().0;
    let c = admin.submit(&job("backup", &[])).unwrap().0;
    admin.cancel(c.id, false).unwrap();
    let digest = admin.policy().unwrap().digest;
    let last = admin.events(0).unwrap().events.last().unwrap().seq;
    s.stop();

    let s = TestServer::open(dir.path(), None);
    let admin = s.admin();
    assert_eq!(admin.policy().unwrap().digest, digest);
    let a2 = admin.job(a.id).unwrap();
    assert_eq!(a2.state, JobState::Running);
    // The holder's lease survived (fresh TTL) and its token still works.
    let token = a.lease.unwrap().token;
    assert!(admin.heartbeat(a.id, token).is_ok());
    assert_eq!(admin.job(b.id).unwrap().state, JobState::Queued);
    assert_eq!(admin.job(c.id).unwrap().state, JobState::Cancelled);
    let alice = s.client(Some(&alice_token));
    assert_eq!(
        alice.job(b.id).unwrap().owner,
        "alice",
        "tokens survive the restart"
    );
    admin
        .finish_job(a.id, token, Outcome::Succeeded, None)
        .unwrap();
    let b2 = admin.wait(b.id, JobState::Queued, 10).unwrap();
    assert_eq!(b2.state, JobState::Running);
    assert!(
        b2.lease.unwrap().token > token,
        "fencing tokens keep growing across restarts"
    );
    let d = admin.submit(&job("backup", &[])).unwrap().0;
    assert!(d.id > c.id, "ids never repeat");
    let events = admin.events(last).unwrap().events;
    assert_eq!(events.first().map(|e| e.seq), Some(last + 1));
}

/// A `job` event's row holds only what changed (issue 17: the job's row holds the rest):
/// the events a live stream got are read back the same from the log, after a restart.
#[test]
fn events_read_from_the_log_after_a_restart_are_the_ones_the_stream_sent() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 1\n");
    let admin = s.admin();
    let until = Arc::new(AtomicU64::new(u64::MAX));
    let (url, token, stop) = (s.url.clone(), s.admin.clone(), until.clone());
    let follower = std::thread::spawn(move || {
        let c = lockgate_client::Client::new(&url, Some(token)).unwrap();
        let mut got = Vec::new();
        c.follow_events(0, |ev| {
            let seq = ev.seq;
            got.push(ev);
            seq < stop.load(Ordering::SeqCst)
        })
        .unwrap();
        got
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let a = admin
        .submit(&job("backup", &[("group", "vm/1")]))
        .unwrap()
        .0;
    let b = admin
        .submit(&job("backup", &[("group", "vm/2")]))
        .unwrap()
        .0;
    admin.set_job(b.id, 5).unwrap();
    admin.cancel(a.id, false).unwrap();
    let token = a.lease.unwrap().token;
    admin
        .finish_job(a.id, token, Outcome::Cancelled, Some("asked".into()))
        .unwrap();
    let last = admin.events(0).unwrap().events.last().unwrap().seq;
    until.store(last + 1, Ordering::SeqCst);
    admin.submit(&job("backup", &[])).unwrap();
    let live = follower.join().unwrap();
    assert!(live.len() >= 8, "{live:?}");
    s.stop();

    let s = TestServer::open(dir.path(), None);
    let logged = s.admin().events(0).unwrap().events;
    assert_eq!(logged[..live.len()], live[..]);
    let b_events: Vec<_> = logged
        .iter()
        .map(|e| serde_json::Value::Object(e.data.clone()))
        .filter(|d| d["job"]["id"] == b.id)
        .map(|d| (d["change"].clone(), d["job"]["priority"].clone()))
        .collect();
    assert_eq!(
        b_events[0].1, 0,
        "the submitted event keeps the priority of its moment"
    );
    assert!(b_events.iter().any(|(_, p)| *p == 5), "{b_events:?}");
}

fn finished_job(id: u64, at: Timestamp) -> Job {
    let mut j: Job = serde_json::from_value(serde_json::json!({
        "id": id, "kind": "backup", "attrs": {}, "owner": "admin", "priority": 0, "executor": "client",
        "state": "succeeded", "node": null, "pinned": false, "node_selector": null, "cost": {},
        "two_stage": false, "attempt": 1, "lease": null, "cancel_requested": false,
        "submitted_at": at.0, "queued_at": at.0, "prepare_started_at": null, "prepared_at": null,
        "started_at": at.0, "finished_at": at.0, "outcome": "succeeded", "message": null,
        "not_before": null, "max_wait_ms": null, "max_run_ms": null, "idempotency_key": "old",
        "retry_at": null
    }))
    .unwrap();
    j.finished_at = Some(at);
    j
}

#[test]
fn retention_deletes_old_finished_jobs_events_and_keys() {
    let dir = tempdir();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let old = Timestamp(now - 20 * 86_400_000);
    let recent = Timestamp(now - 86_400_000);
    {
        let mut store = crate::harness::open_store(dir.path());
        let mut b = Batch::default();
        b.jobs.push((finished_job(1, old), false));
        b.jobs.push((finished_job(2, recent), false));
        b.jobs[1].0.idempotency_key = Some("recent".into());
        b.events.push(StoredEvent {
            seq: 1,
            at: old,
            data: "{\"type\":\"x\"}".into(),
            job: None,
        });
        b.events.push(StoredEvent {
            seq: 2,
            at: recent,
            data: "{\"type\":\"x\"}".into(),
            job: None,
        });
        store.commit(&b).unwrap();
        let newest = match crate::harness::on_postgres() {
            true => lockgate_store::PG_SCHEMA_VERSION,
            false => lockgate_store::SCHEMA_VERSION,
        };
        assert_eq!(store.schema_version().unwrap(), newest);
    }
    let s = TestServer::open(dir.path(), None);
    let admin = s.admin();
    assert_eq!(admin.job(1).unwrap_err().status(), Some(404));
    assert_eq!(admin.job(2).unwrap().state, JobState::Succeeded);
    let events = admin.events(0).unwrap().events;
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
    // The old key is gone with its job; ids still never repeat.
    let mut req = job("backup", &[]);
    req.idempotency_key = Some("old".into());
    let (j, created) = admin.submit(&req).unwrap();
    assert!(created && j.id == 3);
}
