//! Database loss under load: the PostgreSQL cluster is stopped (`pg_ctl stop -m fast`)
//! while `lockgate run` wrappers submit, wait and hold; while it is away a submit is
//! answered 503 (no silent acknowledgement), and wrappers started meanwhile keep trying;
//! once it is back the server recovers by itself and every wrapper's job ends succeeded,
//! exactly once, as a restart from the database alone confirms.

use super::procs::{all_jobs, Wrapper};
use super::{own_cluster, policy, records, GLOBAL, PER_DATASTORE};
use crate::harness::*;
use lockgate_api::SubmitRequest;
use lockgate_core::JobState;
use std::time::{Duration, Instant};

/// How many wrappers, and how long each command lasts.
const WRAPPERS: usize = 30;
/// Wrappers started while the database is away.
const DURING: usize = 6;
const SECS: &str = "0.4";

#[test]
fn a_stopped_database_under_load_acknowledges_nothing_and_the_service_recovers_by_itself() {
    let _serial = crate::agent::serial();
    let pg = own_cluster();
    let url = pg.database();
    let s = Srv::start_on_database(&policy(6), &url);
    let dir = s.dir.path();
    let mut wrappers: Vec<Wrapper> = (0..WRAPPERS)
        .map(|i| {
            Wrapper::spawn(
                &s.url(),
                &s.token,
                dir,
                &format!("w{i}"),
                &format!("ds{}", i % 6),
                SECS,
            )
        })
        .collect();
    let started = || records::read(&dir.join("records")).len();
    assert!(eventually(Duration::from_secs(20), || started() >= GLOBAL as usize));

    pg.stop();
    let away = Instant::now();
    // A submit while the database is away: an error that says so, never a 2xx.
    let probe = SubmitRequest {
        kind: "backup".into(),
        idempotency_key: Some("probe".into()),
        ..Default::default()
    };
    let err = s
        .admin()
        .submit(&probe)
        .expect_err("no acknowledgement without the database");
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(err.to_string().contains("not acknowledged"), "{err}");
    println!("while the database is away: {err}");
    // Wrappers started while it is away keep trying (their submits are refused, never
    // acknowledged) and run once it is back.
    wrappers.extend((0..DURING).map(|i| {
        Wrapper::spawn(
            &s.url(),
            &s.token,
            dir,
            &format!("during{i}"),
            &format!("ds{}", i % 6),
            SECS,
        )
    }));
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(away.elapsed()));
    pg.restart().expect("the cluster starts again");
    let back = Instant::now();

    // The service recovers by itself: the same submit is acknowledged.
    let probe_job = loop {
        match s.admin().submit(&probe) {
            Ok((job, _)) => break job,
            Err(e) if e.status() == Some(503) && back.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("not recovered {:?} after the restart: {e}", back.elapsed()),
        }
    };
    println!(
        "recovered {:?} after the database came back",
        back.elapsed()
    );

    let reported: Vec<_> = wrappers.into_iter().map(Wrapper::finish).collect();
    let spans = records::read(&dir.join("records"));
    assert_eq!(
        spans.len(),
        WRAPPERS + DURING,
        "every command ran exactly once"
    );
    let peaks = records::check_limits(&spans, GLOBAL, PER_DATASTORE);
    println!("peaks: {peaks:?}");

    // Every acknowledged job is there, once, succeeded; the server's own state after a
    // restart (from the database alone) agrees.
    let mut s = s;
    s.kill9();
    s.spawn_with(&["--database-url", &url]);
    let jobs = all_jobs(&s.admin());
    for r in &reported {
        assert_eq!(
            r.state,
            JobState::Succeeded,
            "job {} {:?}",
            r.id,
            r.idempotency_key
        );
        let same: Vec<_> = jobs
            .iter()
            .filter(|j| j.idempotency_key == r.idempotency_key)
            .collect();
        assert_eq!(same.len(), 1, "{:?}", r.idempotency_key);
        assert_eq!(same[0].state, JobState::Succeeded);
    }
    assert!(jobs.iter().any(|j| j.id == probe_job.id));
    assert_eq!(jobs.len(), WRAPPERS + DURING + 1, "no job twice, none lost");
}
