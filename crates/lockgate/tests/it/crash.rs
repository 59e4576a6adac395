//! Crash durability: `kill -9` the server while clients work.

use crate::harness::*;
use lockgate_api::{JobQuery, SubmitRequest};
use lockgate_client::{Client, ClientError};
use lockgate_core::{JobState, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Calls `f` until the server answers (it may be down for a restart).
fn retry<T>(mut f: impl FnMut() -> Result<T, ClientError>) -> Result<T, ClientError> {
    let start = Instant::now();
    loop {
        match f() {
            Err(e) if e.is_temporary() && start.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => return r,
        }
    }
}

/// One client's whole cycle: submit (same key on every retry), wait for admission, finish.
fn cycle(c: &Client, key: &str) -> u64 {
    let req = SubmitRequest {
        kind: "backup".into(),
        idempotency_key: Some(key.into()),
        ..Default::default()
    };
    let mut job = retry(|| c.submit(&req)).unwrap().0;
    while !job.state.is_admitted() {
        assert!(
            !job.is_final(),
            "job {} ended {:?} before it ran",
            job.id,
            job.state
        );
        let from = job.state;
        job = retry(|| c.wait(job.id, from, 10)).unwrap();
    }
    let token = job.lease.as_ref().unwrap().token;
    match retry(|| c.finish_job(job.id, token, Outcome::Succeeded, None)) {
        Ok(_) => {}
        // The finish was committed but its answer was lost in a crash.
        Err(e) if e.code() == Some("lease_lost") => {
            let now = retry(|| c.job(job.id)).unwrap();
            assert_eq!(now.state, JobState::Succeeded, "job {}: {e}", job.id);
        }
        Err(e) => panic!("job {}: {e}", job.id),
    }
    job.id
}

#[test]
fn kill_9_during_2000_submissions_loses_and_duplicates_nothing() {
    let mut s = Srv::start("[global]\nmax_running = 16\n[leases]\nttl = \"10s\"\n");
    let url = s.url();
    let token = s.token.clone();
    let acked: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let workers: Vec<_> = (0..16)
        .map(|w| {
            let (url, token, acked) = (url.clone(), token.clone(), acked.clone());
            std::thread::spawn(move || {
                let c = Client::new(&url, Some(token)).unwrap();
                for i in 0..125 {
                    let key = format!("w{w}-{i}");
                    let id = cycle(&c, &key);
                    acked.lock().unwrap().insert(key, id);
                }
            })
        })
        .collect();
    let mut kills = 0;
    while kills < 8 && acked.lock().unwrap().len() < 1900 {
        std::thread::sleep(Duration::from_millis(120));
        s.kill9();
        kills += 1;
        s.spawn();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert!(kills >= 4, "the server was killed {kills} times only");
    s.kill9();
    s.spawn();

    let admin = s.admin();
    let mut all = Vec::new();
    let mut q = JobQuery {
        limit: Some(1000),
        ..Default::default()
    };
    loop {
        let page = admin.jobs(&q).unwrap();
        all.extend(page.jobs);
        match page.next {
            Some(n) => q.after = Some(n),
            None => break,
        }
    }
    let acked = acked.lock().unwrap();
    assert_eq!(acked.len(), 2000);
    assert_eq!(
        all.len(),
        2000,
        "every acknowledged job exists exactly once"
    );
    let keys: BTreeSet<&str> = all
        .iter()
        .filter_map(|j| j.idempotency_key.as_deref())
        .collect();
    assert_eq!(keys.len(), 2000);
    for j in &all {
        assert_eq!(
            j.state,
            JobState::Succeeded,
            "job {} {:?}",
            j.id,
            j.idempotency_key
        );
        assert_eq!(acked[j.idempotency_key.as_deref().unwrap()], j.id);
    }
    eprintln!("killed the server {kills} times");
}

#[test]
fn a_lease_survives_a_restart_shorter_than_its_ttl() {
    let mut s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"3s\"\n");
    let admin = s.admin();
    let req = SubmitRequest {
        kind: "backup".into(),
        ..Default::default()
    };
    let held = admin.submit(&req).unwrap().0;
    let waiting = admin.submit(&req).unwrap().0;
    let token = held.lease.unwrap().token;
    s.kill9();
    s.spawn();
    let admin = s.admin();
    assert_eq!(
        admin.heartbeat(held.id, token).unwrap().state,
        JobState::Running
    );
    assert_eq!(
        admin.job(waiting.id).unwrap().state,
        JobState::Queued,
        "the slot is still held"
    );
    admin
        .finish_job(held.id, token, Outcome::Succeeded, None)
        .unwrap();
    assert_eq!(
        admin.wait(waiting.id, JobState::Queued, 10).unwrap().state,
        JobState::Running
    );
    // And a graceful stop exits 0.
    assert!(s.terminate().success());
}

#[test]
fn a_running_lockgate_run_rides_out_a_server_crash_shorter_than_the_ttl() {
    let mut s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"3s\"\n");
    let ready = s.path("started");
    let script = format!("touch {}; sleep 1.5", ready.display());
    let mut run = s
        .run(&["--report", "r.json", "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || ready.exists()));
    s.kill9();
    std::thread::sleep(Duration::from_millis(300));
    s.spawn();
    assert_eq!(run.wait().unwrap().code(), Some(0));
    let report: lockgate_api::JobView =
        serde_json::from_str(&std::fs::read_to_string(s.path("r.json")).unwrap()).unwrap();
    assert_eq!((report.state, report.attempt), (JobState::Succeeded, 1));
}

#[test]
fn a_server_gone_past_the_ttl_stops_the_command_with_75() {
    let mut s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"600ms\"\n");
    let pidfile = s.path("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut run = s
        .run(&["--grace", "10s", "--", "sh", "-c", &script])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || read_pid(&pidfile).is_some()));
    let child = read_pid(&pidfile).unwrap();
    s.kill9();
    let start = Instant::now();
    assert_eq!(run.wait().unwrap().code(), Some(75));
    assert!(gone(child));
    // The grace period is capped by the lease: the command is gone before the TTL could
    // have handed its slot to anyone (10 s grace asked for, well under that taken).
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}
