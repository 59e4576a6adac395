//! The gate and the step-down of a failed takeover against a real PostgreSQL (the store's
//! test cluster): what the HTTP gate answers between winning the lease and serving, and
//! that a replica whose rebuild failed gives the row up at once.

use super::{spawn, Change, ClusterConfig, Leadership};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use lockgate_store::postgres::testdb;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use tower_service::Service;

const LEASE: Duration = Duration::from_millis(600);

fn replica(name: &str) -> (Leadership, Receiver<Change>, String) {
    let url = testdb::fresh_database();
    lockgate_store::PgStore::open(&url).expect("schema");
    let (tx, rx) = channel();
    let l = spawn(
        ClusterConfig {
            database_url: url.clone(),
            holder: name.to_string(),
            url: format!("http://{name}:7400"),
            lease: LEASE,
        },
        tx,
    );
    (l, rx, url)
}

fn won(rx: &Receiver<Change>) -> i64 {
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Change::Won { term }) => term,
        other => panic!("expected Won, got {other:?}"),
    }
}

/// A router whose every path (a fallback, not a route of the API) is behind the gate, as
/// a replica's.
fn gated(l: &Leadership) -> axum::Router {
    axum::Router::new()
        .fallback(|| async { "handled" })
        .layer(axum::middleware::from_fn_with_state(l.clone(), super::gate))
}

async fn get(router: &axum::Router, path: &str) -> (StatusCode, String) {
    let req = Request::get(path).body(Body::empty()).unwrap();
    let resp = router.clone().call(req).await.unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_replica_that_won_the_lease_answers_503_until_its_term_is_served_never_401() {
    let (l, rx, _) = replica("a");
    let term = tokio::task::spawn_blocking(move || won(&rx)).await.unwrap();
    let router = gated(&l);
    // Won, not yet serving (the rebuild is under way): no handler runs.
    let (status, body) = get(&router, "/v1/jobs").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("\"unavailable\"") && body.contains("loading"),
        "{body}"
    );
    assert_eq!(l.view().role, "taking_over");
    l.serve(term);
    assert_eq!(
        get(&router, "/v1/jobs").await,
        (StatusCode::OK, "handled".into())
    );
    assert_eq!(l.view().role, "leader");
    // Stopping the term closes the gate again before the loop goes.
    l.stop_serving();
    assert_eq!(
        get(&router, "/v1/jobs").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    l.resign_and_wait(LEASE);
}

#[test]
fn a_failed_takeover_releases_the_row_at_once_and_holds_off_the_next_try() {
    let (l, rx, url) = replica("a");
    let term = won(&rx);
    let asked = Instant::now();
    l.step_down(term);
    match rx.recv_timeout(LEASE) {
        Ok(Change::Lost { term: t, why }) => assert_eq!(t, term, "{why}"),
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(l.leading().is_none());
    // Released (expired now), not left to run out: another replica takes it at once.
    let (b, b_rx) = {
        let (tx, rx) = channel();
        let b = spawn(
            ClusterConfig {
                database_url: url,
                holder: "b".into(),
                url: "http://b:7400".into(),
                lease: LEASE,
            },
            tx,
        );
        (b, rx)
    };
    assert_eq!(won(&b_rx), term + 1);
    assert!(
        asked.elapsed() < LEASE,
        "b took the row {:?} after the step-down: it was not released",
        asked.elapsed()
    );
    std::thread::sleep(LEASE);
    assert!(l.leading().is_none() && b.leading() == Some(term + 1));
    b.resign_and_wait(LEASE);
    l.resign_and_wait(LEASE);
}

/// A commit in flight holds the leader row as the store's fence does (`FOR KEY SHARE`
/// until its commit). The leader's renewals pass it, so a slow commit never costs the
/// leader its lead; a takeover would wait for it (the row is held for 3 leases here and a
/// second replica gets nothing, because the lease never runs out).
#[test]
fn a_slow_commit_holding_the_fence_never_blocks_the_leader_s_renewal() {
    let (l, rx, url) = replica("a");
    let term = won(&rx);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, b_rx) = channel();
    let b = rt.block_on(async {
        let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        db.batch_execute("BEGIN").await.unwrap();
        let fenced = db
            .query_opt(
                "SELECT 1 FROM lockgate_leader WHERE id = 1 AND holder = 'a' AND term = $1 \
                 FOR KEY SHARE",
                &[&term],
            )
            .await
            .unwrap();
        assert!(fenced.is_some(), "the fence names a under term {term}");
        let b = spawn(
            ClusterConfig {
                database_url: url.clone(),
                holder: "b".into(),
                url: "http://b:7400".into(),
                lease: LEASE,
            },
            tx,
        );
        let held = Instant::now();
        while held.elapsed() < LEASE * 3 {
            assert_eq!(
                l.leading(),
                Some(term),
                "a lost the lead {:?} into a commit it made itself",
                held.elapsed()
            );
            tokio::time::sleep(LEASE / 20).await;
        }
        db.batch_execute("COMMIT").await.unwrap();
        b
    });
    assert!(
        b_rx.try_recv().is_err(),
        "b took over while a's lease was being renewed"
    );
    assert_eq!(l.leading(), Some(term));
    b.resign_and_wait(LEASE);
    l.resign_and_wait(LEASE);
}
