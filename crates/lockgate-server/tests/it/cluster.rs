//! The leadership lease against a real PostgreSQL (the store's test cluster): one leader
//! at a time, a standby that names it, takeover after a leader stops renewing, a leader
//! that finds its row taken or loses its database steps down within its lease, on its own
//! monotonic clock.

use lockgate_server::cluster::{self, Change, ClusterConfig, Leadership};
use lockgate_store::postgres::testdb;
use std::process::Command;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_millis(600);

/// A fresh database with lockgate's schema (the leadership tables are in its first
/// migration).
fn database(on: &testdb::TestCluster) -> String {
    let url = on.database();
    lockgate_store::PgStore::open(&url).expect("schema");
    url
}

fn psql(url: &str, sql: &str) -> String {
    let bin = testdb::bindir().expect("PostgreSQL binaries");
    let out = Command::new(bin.join("psql"))
        .args([
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn replica(url: &str, name: &str) -> (Leadership, Receiver<Change>) {
    let (tx, rx) = channel();
    let l = cluster::spawn(
        ClusterConfig {
            database_url: url.to_string(),
            holder: name.to_string(),
            url: format!("http://{name}:7400"),
            lease: LEASE,
        },
        tx,
    );
    (l, rx)
}

fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

#[test]
fn two_replicas_elect_one_leader_and_the_standby_names_it() {
    let url = database(testdb::cluster());
    let (a, a_rx) = replica(&url, "a");
    let (b, b_rx) = replica(&url, "b");
    until("a leader", Duration::from_secs(5), || {
        a.leading().is_some() || b.leading().is_some()
    });
    let (leader, standby, rx) = if a.leading().is_some() {
        (&a, &b, &a_rx)
    } else {
        (&b, &a, &b_rx)
    };
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(1)),
        Ok(Change::Won { term: 1 })
    );
    until(
        "the standby learns the leader",
        Duration::from_secs(3),
        || standby.leader_url().is_some(),
    );
    assert_eq!(standby.leader_url().as_deref(), Some(leader.url()));
    // Several renewals later: still one leader, still term 1.
    std::thread::sleep(LEASE * 3);
    assert_eq!(leader.leading(), Some(1));
    assert_eq!(standby.leading(), None);
    assert!(a_rx.try_recv().is_err() && b_rx.try_recv().is_err());
    let view = standby.view();
    assert_eq!((view.role.as_str(), view.term), ("standby", 1));
    assert_eq!(
        view.leader.as_ref().map(|l| l.holder.as_str()),
        Some(leader.holder())
    );
    assert_eq!(view.replicas.len(), 2, "{view:?}");
    assert_eq!(view.replicas.iter().filter(|r| r.leader).count(), 1);
    assert!(!view.database.contains("@127.0.0.1") || view.database.starts_with("postgres://"));
    let text = leader.metrics();
    assert!(text.contains("lockgate_cluster_leader 1\n"), "{text}");
    assert!(text.contains("lockgate_cluster_term 1\n"), "{text}");
    assert!(
        text.contains("lockgate_cluster_leader_changes_total 1\n"),
        "{text}"
    );
    assert!(standby.metrics().contains("lockgate_cluster_leader 0\n"));
}

#[test]
fn a_leader_that_stops_renewing_is_replaced_under_a_new_term() {
    let url = database(testdb::cluster());
    // A leader that stopped (paused, dead): its row, never renewed.
    psql(
        &url,
        "UPDATE lockgate_leader SET holder = 'ghost', url = 'http://ghost:7400', term = 7, \
         acquired_at = now(), expires_at = now() + interval '1 second' WHERE id = 1",
    );
    let start = Instant::now();
    let (a, rx) = replica(&url, "a");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a.leading(), None, "the ghost's lease has not run out");
    assert_eq!(a.leader_url().as_deref(), Some("http://ghost:7400"));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)),
        Ok(Change::Won { term: 8 })
    );
    let took = start.elapsed();
    // The row's lease (1 s) plus at most one renewal interval (LEASE/3) and slack.
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(
        took < Duration::from_millis(1000) + LEASE / 3 + Duration::from_millis(400),
        "{took:?}"
    );
    assert_eq!(
        psql(&url, "SELECT holder || ' ' || term FROM lockgate_leader"),
        "a 8"
    );
}

#[test]
fn a_leader_whose_row_was_taken_steps_down_within_a_renewal() {
    let url = database(testdb::cluster());
    let (a, rx) = replica(&url, "a");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)),
        Ok(Change::Won { term: 1 })
    );
    psql(
        &url,
        "UPDATE lockgate_leader SET holder = 'thief', term = term + 1, \
         expires_at = now() + interval '1 minute' WHERE id = 1",
    );
    match rx.recv_timeout(LEASE) {
        Ok(Change::Lost { term: 1, why }) => assert!(why.contains("another replica"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.leading(), None);
    until("the new term seen", Duration::from_secs(2), || {
        a.view().term == 2
    });
}

#[test]
fn a_leader_that_loses_its_database_stops_leading_before_its_lease_can_pass() {
    let own = testdb::TestCluster::start().expect("own cluster");
    let url = database(&own);
    let (a, rx) = replica(&url, "a");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)),
        Ok(Change::Won { term: 1 })
    );
    // Right after a renewal: the validity is at most LEASE − margin from now.
    std::thread::sleep(LEASE / 3 + Duration::from_millis(20));
    // Watch leading() while the database stops (pg_ctl waits for the shutdown).
    let watcher = a.clone();
    let watch = std::thread::spawn(move || {
        let mut last_true = Instant::now();
        while watcher.leading().is_some() {
            last_true = Instant::now();
            std::thread::sleep(Duration::from_millis(2));
        }
        last_true
    });
    let stopped = Instant::now();
    own.stop();
    let last_true = watch.join().unwrap();
    let led_for = last_true.saturating_duration_since(stopped);
    assert!(
        led_for < LEASE,
        "leading() was still true {led_for:?} after the database began to stop"
    );
    match rx.recv_timeout(LEASE) {
        Ok(Change::Lost { term: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    // The database back: the lease (run out on its clock) is taken again under a new term.
    own.restart().expect("restart");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(Change::Won { term: 2 })
    );
}
