//! Golden test of the stored job JSON: a fixed job, made by the engine and written by
//! the store, must be stored as exactly `testdata/stored_job.json`, and that text must
//! read back as the same job. A renamed, retyped or removed field of the engine's `Job`
//! would otherwise make every old database unreadable (or silently lose a field) without a
//! single failing test. If the format changes on purpose, the old text must still load:
//! keep the old file as a second case and write the new one with
//! `LOCKGATE_BLESS=1 cargo test -p lockgate-store golden`.

use super::*;
use lockgate_core::engine::NodeRegistration;
use lockgate_core::job::JobSpec;
use lockgate_core::{Engine, Mode, Policy};

const GOLDEN: &str = include_str!("../../testdata/stored_job.json");

/// A job with as many fields set as a submit and an admission set: pinned to a node,
/// priority, two stages, deadlines, idempotency key, admitted (to prepare) with a lease.
fn fixed_job() -> Job {
    let mut engine = Engine::new(Policy::unlimited(), Mode::Indexed);
    let now = Timestamp(1_700_000_000_000);
    let node = NodeRegistration {
        name: "n1".into(),
        labels: [("zone".to_string(), "a".to_string())].into(),
        ..NodeRegistration::default()
    };
    engine.register_node(node, now);
    let spec = JobSpec {
        kind: "backup".into(),
        attrs: [("datastore".to_string(), "ds1".to_string())].into(),
        owner: "alice".into(),
        priority: Some(5),
        node: Some("n1".into()),
        two_stage: Some(true),
        max_wait_ms: Some(60_000),
        max_run_ms: Some(3_600_000),
        idempotency_key: Some("nightly/2023-11-14".into()),
        ..JobSpec::default()
    };
    let id = engine.submit(spec, now).expect("valid").job.id;
    engine.handle_timeout(now);
    engine.job(id).cloned().expect("live")
}

fn stored_body(job: &Job) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    s.commit(&Batch {
        jobs: vec![(job.clone(), true)],
        ..Batch::default()
    })
    .unwrap();
    s.conn
        .query_row(
            "SELECT body FROM jobs WHERE id = ?1",
            [job.id as i64],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn golden_stored_job_json_is_unchanged_and_still_loads() {
    let job = fixed_job();
    let body = stored_body(&job);
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(&body).unwrap())
            .unwrap()
            + "\n";
    if std::env::var_os("LOCKGATE_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/stored_job.json");
        std::fs::write(path, &pretty).unwrap();
    }
    assert_eq!(
        pretty, GOLDEN,
        "the stored job JSON changed: old databases may no longer load (see the module docs)"
    );
    let old: Job = serde_json::from_str(GOLDEN).expect("the golden job still loads");
    assert_eq!(old, job);
}
