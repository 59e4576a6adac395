//! A server on PostgreSQL whose database goes away and comes back: while it is away every
//! request is answered `503 unavailable` (nothing is acknowledged), the server keeps
//! running, and once the database is back the kept change is committed and the server
//! answers again, by itself. Runs on its own cluster (stopped and started here); skipped
//! with a message where PostgreSQL is not installed, unless `LOCKGATE_TEST_STORE=postgres`.

use crate::harness::*;
use lockgate_store::postgres::testdb::{self, TestCluster};
use std::time::{Duration, Instant};

#[test]
fn a_lost_database_gives_errors_not_acknowledgements_and_the_server_recovers_by_itself() {
    if !on_postgres() && testdb::bindir().is_none() {
        eprintln!("SKIPPED: no PostgreSQL binaries (initdb, pg_ctl) found");
        return;
    }
    let cluster = TestCluster::start().expect("a cluster of our own");
    let dir = tempdir();
    let url = cluster.database();
    let on = |url: &str| lockgate_server::Config {
        database_url: Some(url.to_string()),
        ..TestServer::config(dir.path())
    };
    let s = TestServer::with_config(on(&url));
    let submit = |kind: &str| {
        s.raw(
            "POST",
            "/v1/jobs",
            Some(&s.admin),
            Some(("application/json", &format!("{{\"kind\":\"{kind}\"}}"))),
        )
    };
    assert_eq!(submit("before").0, 201);
    cluster.stop();
    let (status, body) = submit("while-away");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not acknowledged"), "{body}");
    cluster.restart().expect("the cluster starts again");
    let start = Instant::now();
    loop {
        let (status, body) = submit("after");
        if status == 201 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never recovered: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The change answered with an error was never acknowledged. While the server kept
    // its lead through the outage (shorter than its leadership lease) it kept the change
    // and committed it first: job 2 is "while-away". A server whose lease ran out stepped
    // down, dropped what it had not committed and rebuilt from the database when it took
    // the lead again: then job 2 is "after". Either way a restart (from the database
    // alone) has every acknowledged job.
    let kinds = |s: &TestServer| -> Vec<String> {
        (1..=3)
            .map(|id| s.admin().job(id).map(|j| j.kind).unwrap_or_default())
            .filter(|k| !k.is_empty())
            .collect()
    };
    let seen = kinds(&s);
    assert!(
        seen == ["before", "while-away", "after"] || seen == ["before", "after"],
        "{seen:?}"
    );
    s.stop();
    let s = TestServer::with_config(on(&url));
    assert_eq!(kinds(&s), seen);
    s.stop();
}
