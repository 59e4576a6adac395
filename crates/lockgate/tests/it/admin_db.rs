//! `lockgate admin backup-db` and `restore-db`: a copy taken while clients submit and
//! finish holds every job acknowledged before it started, a restore into a fresh data dir
//! starts a server with that queue, and every refusal.

use crate::harness::*;
use lockgate_api::{JobQuery, SubmitRequest};
use lockgate_core::Outcome;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const POLICY: &str = "[global]\nmax_running = 4\n";

/// `lockgate admin VERB FILE --data-dir DATA_DIR -o json`.
fn admin(srv: &Srv, verb: &str, file: &Path, data_dir: &Path) -> Output {
    srv.cli(&["admin", verb])
        .arg(file)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["-o", "json"])
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Submits and finishes jobs until `stop`; every id is recorded once its submit was
/// acknowledged.
fn load(
    srv: &Srv,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<u64>>>,
) -> std::thread::JoinHandle<()> {
    let c = srv.admin();
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let req = SubmitRequest {
                kind: "backup".into(),
                idempotency_key: Some(format!("load-{n}")),
                ..Default::default()
            };
            let (job, _) = c.submit(&req).unwrap();
            acked.lock().unwrap().insert(job.id);
            // Every other job is finished, so the copy holds live and ended jobs.
            if let (0, Some(lease)) = (n % 2, &job.lease) {
                c.finish_job(job.id, lease.token, Outcome::Succeeded, None)
                    .unwrap();
            }
        }
    })
}

#[test]
fn a_copy_during_load_holds_every_acknowledged_job_and_restores_into_a_fresh_data_dir() {
    let srv = Srv::start(POLICY);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let worker = load(&srv, stop.clone(), acked.clone());
    assert!(eventually(Duration::from_secs(20), || acked
        .lock()
        .unwrap()
        .len()
        >= 200));
    let before: BTreeSet<u64> = acked.lock().unwrap().clone();
    let copy = srv.path("copy.db");
    let out = admin(&srv, "backup-db", &copy, &srv.path("data"));
    let during = acked.lock().unwrap().len();
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let summary = json(&out);
    assert!(
        during > before.len(),
        "the load went on while the copy was made ({} then {during})",
        before.len()
    );
    assert!(
        summary["jobs"].as_u64().unwrap() >= before.len() as u64,
        "{summary}"
    );
    assert!(summary["events"].as_u64().unwrap() > 0, "{summary}");

    // Restore into a fresh data dir and serve from it.
    let fresh = tempfile::tempdir().unwrap();
    let data = fresh.path().join("data");
    let out = admin(&srv, "restore-db", &copy, &data);
    let restored = json(&out);
    assert_eq!(
        restored["moved_aside"],
        serde_json::Value::Null,
        "{restored}"
    );
    assert_eq!(restored["summary"]["jobs"], summary["jobs"], "{restored}");

    let mut second = Srv::unstarted(fresh, POLICY, &srv.token);
    second.spawn();
    let c = second.admin();
    let mut ids = BTreeSet::new();
    let mut after = 0;
    loop {
        let page = c
            .jobs(&JobQuery {
                after: Some(after),
                limit: Some(1000),
                ..Default::default()
            })
            .unwrap();
        if page.jobs.is_empty() {
            break;
        }
        after = page.jobs.last().unwrap().id;
        ids.extend(page.jobs.iter().map(|j| j.id));
    }
    let missing: Vec<_> = before.difference(&ids).collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the copy, missing after the restore: {missing:?}"
    );
    // The old admin token works: the tokens came back with the store.
    assert!(c.tokens().is_ok());
}

#[test]
fn refusals_name_the_file_and_touch_nothing() {
    let srv = Srv::start(POLICY);
    let data = srv.path("data");
    let copy = srv.path("copy.db");
    let out = admin(&srv, "backup-db", &copy, &data);
    assert!(out.status.success(), "{}", text(&out));

    // An existing destination is never overwritten.
    let out = admin(&srv, "backup-db", &copy, &data);
    assert!(!out.status.success());
    assert!(text(&out).contains("never overwrites"), "{}", text(&out));

    // No store in the data dir.
    let empty = srv.path("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = admin(&srv, "backup-db", &srv.path("x.db"), &empty);
    assert!(!out.status.success());
    assert!(text(&out).contains("no such file"), "{}", text(&out));

    // A PostgreSQL store is the database's: pg_dump, not backup-db.
    let out = srv
        .cli(&["admin", "backup-db", "pg-copy.db"])
        .env(
            "LOCKGATE_DATABASE_URL",
            "postgres://lockgate@127.0.0.1/lockgate",
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("pg_dump"), "{}", text(&out));

    // Restore while the server runs on the data dir.
    let out = admin(&srv, "restore-db", &copy, &data);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("in use by another lockgate server"),
        "{}",
        text(&out)
    );

    let target = tempfile::tempdir().unwrap();
    let refused = |file: &Path, expect: &str| {
        let out = admin(&srv, "restore-db", file, target.path());
        assert!(!out.status.success(), "{} was restored", file.display());
        assert!(
            text(&out).contains(expect),
            "{}: {}",
            file.display(),
            text(&out)
        );
        assert!(
            !target.path().join("lockgate.db").exists(),
            "a refused restore left a store behind"
        );
    };
    // Not SQLite at all.
    let junk = srv.path("junk.db");
    std::fs::write(&junk, vec![b'x'; 8192]).unwrap();
    refused(&junk, "is not a lockgate store");
    // SQLite, but not lockgate's.
    let other = srv.path("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); PRAGMA user_version = 3;")
        .unwrap();
    refused(&other, "has no `jobs` table");
    // From a newer lockgate.
    let newer = srv.path("newer.db");
    std::fs::copy(&copy, &newer).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", lockgate_store::SCHEMA_VERSION + 1)
        .unwrap();
    refused(&newer, "knows up to");
    // Damaged: a page in the middle overwritten.
    let damaged = srv.path("damaged.db");
    let mut bytes = std::fs::read(&copy).unwrap();
    let page = 4096;
    assert!(bytes.len() > 3 * page, "the copy is {} bytes", bytes.len());
    for b in &mut bytes[2 * page..3 * page] {
        *b = 0x55;
    }
    std::fs::write(&damaged, bytes).unwrap();
    refused(&damaged, "is damaged");
    // A missing file.
    refused(&srv.path("nothing.db"), "nothing.db");
}

#[test]
fn a_restore_over_a_newer_store_keeps_it_aside_and_never_reissues_its_ids() {
    let mut srv = Srv::start(POLICY);
    let c = srv.admin();
    let submit = |key: &str| {
        c.submit(&SubmitRequest {
            kind: "backup".into(),
            idempotency_key: Some(key.into()),
            ..Default::default()
        })
        .unwrap()
        .0
        .id
    };
    let first = submit("a");
    let copy = srv.path("copy.db");
    let data = srv.path("data");
    let out = admin(&srv, "backup-db", &copy, &data);
    assert!(out.status.success(), "{}", text(&out));
    let later = submit("b");
    srv.terminate();

    let out = admin(&srv, "restore-db", &copy, &data);
    let restored = json(&out);
    let aside = restored["moved_aside"]
        .as_str()
        .expect("the old store moved aside");
    assert!(std::path::Path::new(aside).exists(), "{aside}");
    assert_eq!(
        restored["watermark"]["max_job_id"].as_u64(),
        Some(later),
        "{restored}"
    );

    // The server starts from the restored store without --start-fresh.
    srv.spawn();
    let c = srv.admin();
    assert!(c.job(first).is_ok(), "the job in the copy is there");
    assert!(
        c.job(later).is_err(),
        "the job after the copy is gone with the old store"
    );
    let next = c
        .submit(&SubmitRequest {
            kind: "backup".into(),
            idempotency_key: Some("c".into()),
            ..Default::default()
        })
        .unwrap()
        .0
        .id;
    assert!(
        next > later,
        "id {next} was given again (the old store had {later})"
    );
}
