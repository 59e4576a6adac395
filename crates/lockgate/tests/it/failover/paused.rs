//! A paused leader: SIGSTOP keeps its process and its database session, so only the
//! leadership lease on the database's clock can pass the lead. A standby takes over and
//! admits new work; after SIGCONT the old leader gives no answer that lets a slot be held
//! twice (the records say so; a submit it read only after SIGCONT is answered 503 and
//! never becomes a job) and reports `standby` on `/v1/cluster` by itself.

use super::procs::{all_jobs, Wrapper};
use super::replicas::Replicas;
use super::{policy, records, GLOBAL, PER_DATASTORE};
use crate::harness::eventually;
use lockgate_core::JobState;
use std::time::{Duration, Instant};

const TTL_S: u64 = 6;

#[test]
fn a_paused_leader_loses_the_lead_and_steps_down_by_itself_without_a_slot_held_twice() {
    let _serial = crate::agent::serial();
    let r = Replicas::start(2, &policy(TTL_S));
    let servers = r.servers();
    let spawn = |prefix: &str, n: usize| -> Vec<Wrapper> {
        (0..n)
            .map(|i| {
                let ds = format!("ds{}", i % 4);
                Wrapper::spawn(
                    &servers,
                    &r.token,
                    r.work(),
                    &format!("{prefix}{i}"),
                    &ds,
                    "0.4",
                )
            })
            .collect()
    };
    let mut wrappers = spawn("before", 20);
    let rec = r.path("records");
    assert!(eventually(Duration::from_secs(30), || records::read(&rec)
        .len()
        >= 8));

    let old = r.leader(None).expect("a leader");
    r.pause(old, true);
    let paused = Instant::now();
    let new = r.wait_leader(Duration::from_secs(2 * TTL_S), Some(old));
    println!("replica {new} leads {:?} after the pause", paused.elapsed());
    // New work is admitted by the new leader while the old one is still stopped.
    wrappers.extend(spawn("after", 10));
    let admitted = eventually(Duration::from_secs(20), || {
        records::read(&rec).keys().any(|k| k.starts_with("after"))
    });
    if !admitted {
        let at_new = lockgate_client::Client::new(&r.reps[new].url(), Some(r.token.clone()));
        let jobs: Vec<_> = all_jobs(&at_new.unwrap())
            .into_iter()
            .map(|j| (j.id, j.idempotency_key, j.state))
            .collect();
        panic!("the new leader admitted nothing: {jobs:?}\n{}", r.logs());
    }
    // A submit sent to the stopped leader itself sits in its socket; it is read after
    // SIGCONT, when the old leader's validity has passed on its monotonic clock.
    let stale = stale_submit(&r.reps[old].url(), &r.token);
    std::thread::sleep(Duration::from_millis(200));
    r.pause(old, false);
    let resumed = Instant::now();
    let steps_down = eventually(Duration::from_secs(5), || {
        r.reps[old]
            .view(&r.token)
            .is_some_and(|v| v.role == "standby")
    });
    assert!(steps_down, "the old leader still leads:\n{}", r.logs());
    let (status, body) = stale.join().unwrap();
    assert_eq!(
        status, 503,
        "the paused leader answered a submit it read after SIGCONT: {body}"
    );
    let new_view = r.reps[new].view(&r.token).unwrap();
    assert!(new_view.term > 1, "{new_view:?}");
    let names_new = eventually(Duration::from_secs(5), || {
        r.reps[old].view(&r.token).is_some_and(|v| {
            v.leader.is_some_and(|l| l.holder == new_view.me) && v.term == new_view.term
        })
    });
    assert!(
        names_new,
        "the old leader never named the new one:\n{}",
        r.logs()
    );
    println!(
        "the old leader reports standby {:?} after SIGCONT",
        resumed.elapsed()
    );

    let n = wrappers.len();
    let reported: Vec<_> = wrappers.into_iter().map(Wrapper::finish).collect();
    let spans = records::read(&rec);
    assert_eq!(spans.len(), n, "every command ran exactly once");
    let peaks = records::check_limits(&spans, GLOBAL, PER_DATASTORE);
    println!("peaks: {peaks:?}");
    let jobs = all_jobs(&r.admin());
    assert_eq!(
        jobs.len(),
        n,
        "no job twice, and none from the stale submit"
    );
    assert!(jobs
        .iter()
        .all(|j| j.idempotency_key.as_deref() != Some(STALE_KEY)));
    for j in reported.iter().chain(&jobs) {
        assert_eq!(
            j.state,
            JobState::Succeeded,
            "job {} {:?}",
            j.id,
            j.idempotency_key
        );
    }
}

const STALE_KEY: &str = "stale-probe";

/// A submit to `url` alone, from a thread: its status and body. Sent over plain HTTP
/// (ureq), not with lockgate's client: the client follows a `not_leader` answer to the
/// leader it names, which is right for a user but would hide what the old leader itself
/// answered.
fn stale_submit(url: &str, token: &str) -> std::thread::JoinHandle<(u16, String)> {
    let url = format!("{url}/v1/jobs");
    let auth = format!("Bearer {token}");
    std::thread::spawn(move || {
        let body = serde_json::json!({
            "kind": "backup",
            "attrs": {"datastore": "ds0"},
            "idempotency_key": STALE_KEY,
        });
        match ureq::post(&url)
            .set("Authorization", &auth)
            .set("Content-Type", "application/json")
            .timeout(Duration::from_secs(60))
            .send_string(&body.to_string())
        {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    })
}
