//! A paused leader: SIGSTOP keeps its process and its database session, so only the
//! leadership lease on the database's clock can pass the lead. A standby takes over and
//! admits new work; after SIGCONT the old leader gives no answer that lets a slot be held
//! twice (the records say so) and reports `standby` on `/v1/cluster` by itself.

use super::procs::{all_jobs, Wrapper};
use super::replicas::Replicas;
use super::{policy, records, GLOBAL, PER_DATASTORE};
use crate::harness::eventually;
use lockgate_core::JobState;
use std::time::{Duration, Instant};

const TTL_S: u64 = 6;

#[test]
fn a_paused_leader_loses_the_lead_and_steps_down_by_itself_without_a_slot_held_twice() {
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
    assert!(admitted, "the new leader admitted nothing:\n{}", r.logs());
    r.pause(old, false);
    let resumed = Instant::now();
    let steps_down = eventually(Duration::from_secs(5), || {
        r.reps[old]
            .view(&r.token)
            .is_some_and(|v| v.role == "standby")
    });
    assert!(steps_down, "the old leader still leads:\n{}", r.logs());
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
    assert_eq!(jobs.len(), n, "no job twice");
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
