//! Long-polls wake on the change, not on a timer.

use crate::harness::*;
use lockgate_core::{JobState, Outcome};
use std::time::{Duration, Instant};

#[test]
fn a_freed_slot_wakes_the_next_waiting_client_at_once() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 1\n");
    let admin = s.admin();
    let a = admin.submit(&job("backup", &[])).unwrap().0;
    let b = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(b.state, JobState::Queued);
    let waiter = {
        let c = s.admin();
        std::thread::spawn(move || {
            let got = c.wait(b.id, JobState::Queued, 60).unwrap();
            (got, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    admin
        .finish_job(a.id, a.lease.unwrap().token, Outcome::Succeeded, None)
        .unwrap();
    let (got, woke) = waiter.join().unwrap();
    assert_eq!(got.state, JobState::Running);
    // Answered by the release, not by the 60 s timeout (the latency itself is measured
    // by `lockgate bench`, not asserted here).
    assert!(woke.duration_since(released) < Duration::from_secs(30));
}

#[test]
fn wait_answers_at_once_when_the_state_already_differs_and_at_the_timeout_otherwise() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 0\n");
    let admin = s.admin();
    let j = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(
        admin.wait(j.id, JobState::Running, 30).unwrap().state,
        JobState::Queued
    );
    let start = Instant::now();
    assert_eq!(
        admin.wait(j.id, JobState::Queued, 1).unwrap().state,
        JobState::Queued
    );
    assert!(start.elapsed() >= Duration::from_millis(900));
}

#[test]
fn an_unrenewed_lease_expires_and_frees_the_slot() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        "[global]\nmax_running = 1\n[leases]\nttl = \"300ms\"\n",
    );
    let admin = s.admin();
    let a = admin.submit(&job("backup", &[])).unwrap().0;
    let b = admin.submit(&job("backup", &[])).unwrap().0;
    let lost = admin.wait(a.id, JobState::Running, 30).unwrap();
    assert_eq!(lost.state, JobState::Lost);
    let e = admin.heartbeat(a.id, a.lease.unwrap().token).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), Some("lease_lost")));
    let b = admin.wait(b.id, JobState::Queued, 30).unwrap();
    assert_eq!(b.state, JobState::Running);
    // Renewing every ttl/3 keeps it.
    let token = b.lease.unwrap().token;
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(100));
        assert!(admin.heartbeat(b.id, token).is_ok());
    }
    let m = s.raw("GET", "/metrics", None, None).1;
    assert!(m.contains("lockgate_lease_expiries_total 1"), "{m}");
}
