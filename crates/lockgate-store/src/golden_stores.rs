//! Upgrades from every earlier schema version, on both stores: `testdata/upgrade/` keeps a
//! store as each earlier version wrote it (`sqlite-vN.sql`, `postgres-vN.sql`: that
//! version's schema and its rows, as SQL), and each must open with this build, upgrade to
//! its schema and read back every job, token, schedule and event it held. A store from a
//! newer version is refused (`TooNew`; the conformance table and `sqlite.rs` test that).
//!
//! The files are frozen: they stand for what an older release left on disk, so a change to
//! an old migration, or a format that stops reading old rows, fails here. A test requires
//! one file for every version below the current one. Before raising the schema version,
//! write the file of the version being left with
//! `LOCKGATE_BLESS=1 cargo test -p lockgate-store golden_stores` (it writes only files that
//! are missing), and look at it before committing it.

use crate::event_row::tests::{assert_reads_back, old_rows, OldEvent};
use crate::postgres::testdb;
use crate::*;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/upgrade")
}

fn golden(store: &str, version: u32) -> PathBuf {
    golden_dir().join(format!("{store}-v{version}.sql"))
}

/// What every golden store holds (its events apart).
struct Fixture {
    batch: Batch,
    events: Vec<OldEvent>,
}

fn fixture() -> Fixture {
    let (mut jobs, events) = old_rows();
    let queued = lockgate_core::job::JobSpec {
        kind: "prune".into(),
        owner: "ops".into(),
        idempotency_key: Some("prune/2026-12-01".into()),
        ..Default::default()
    }
    .check(&lockgate_core::Policy::unlimited())
    .expect("valid")
    .into_job(50, Timestamp(1_700_000_000_000));
    jobs.push((queued, true));
    let token = |name: &str, role, node: Option<&str>| TokenRecord {
        name: name.into(),
        role,
        node: node.map(str::to_string),
        hash: format!("{:064x}", name.len() * 7919),
        created_at: Timestamp(1_700_000_000_000),
    };
    let batch = Batch {
        jobs,
        tokens: vec![
            token("admin", Role::Admin, None),
            token("agent-n1", Role::Agent, Some("n1")),
        ],
        max_token: Some(2),
        policy: Some("[global]\nmax_running = 2\n".into()),
        schedules: vec![ScheduleRecord {
            name: "nightly".into(),
            source: ScheduleSource::Api,
            spec: Some(r#"{"cron":"0 1 * * *","job":{"kind":"backup"}}"#.into()),
            last_planned: Timestamp(1_700_000_000_000),
            last_job: Some(1),
            created_at: Timestamp(1_699_000_000_000),
        }],
        schedule_runs: vec![ScheduleRun {
            schedule: "nightly".into(),
            planned: Timestamp(1_700_000_000_000),
            job: Some(1),
            note: None,
            at: Timestamp(1_700_000_000_100),
        }],
        ..Batch::default()
    };
    Fixture { batch, events }
}

/// The tables a SQLite store of `version` has, in creation order.
fn sqlite_tables(version: u32) -> Vec<String> {
    let conn = Connection::open_in_memory().unwrap();
    for sql in &crate::sqlite::MIGRATIONS[..version as usize] {
        conn.execute_batch(sql).unwrap();
    }
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        .unwrap();
    let names = stmt.query_map([], |r| r.get(0)).unwrap();
    names.map(Result::unwrap).collect()
}

/// `INSERT` statements for every row of `table`; every value a quoted text literal (so
/// that PostgreSQL casts it to the column's type), `prefix` before the table's name.
fn dump_rows(conn: &Connection, table: &str, prefix: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap();
    let cols: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let values = cols
        .iter()
        .map(|c| {
            format!("CASE WHEN \"{c}\" IS NULL THEN 'NULL' ELSE quote(CAST(\"{c}\" AS TEXT)) END")
        })
        .collect::<Vec<_>>()
        .join(" || ', ' || ");
    let sql = format!(
        "SELECT 'INSERT INTO {prefix}{table} ({}) VALUES (' || {values} || ');' FROM \"{table}\" ORDER BY 1",
        cols.join(", ")
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

/// The rows of the fixture as `INSERT`s into the tables of a store of `version` (SQLite's
/// table names; `prefix` before each), its events whole, as every version before SQLite's
/// 9 and PostgreSQL's 2 wrote them.
fn fixture_rows(version: u32, prefix: &str) -> String {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    SqliteStore::open(&path).unwrap().commit(&f.batch).unwrap();
    let conn = Connection::open(&path).unwrap();
    let mut out = Vec::new();
    for table in sqlite_tables(version) {
        if table != "events" {
            out.extend(dump_rows(&conn, &table, prefix));
        }
    }
    for (seq, at, data) in &f.events {
        out.push(format!(
            "INSERT INTO {prefix}events (seq, at, data) VALUES ('{seq}', '{at}', '{}');",
            data.replace('\'', "''")
        ));
    }
    let last = f.events.last().map_or(0, |e| e.0);
    out.push(format!(
        "INSERT INTO {prefix}meta (key, value) VALUES ('event_seq', '{last}') ON CONFLICT (key) DO UPDATE SET value = excluded.value;"
    ));
    out.join("\n") + "\n"
}

fn sqlite_golden_text(version: u32) -> String {
    let mut text = format!(
        "-- A lockgate SQLite store as schema version {version} wrote it (crate::golden_stores).\n"
    );
    for sql in &crate::sqlite::MIGRATIONS[..version as usize] {
        text.push_str(sql.trim());
        text.push_str(";\n");
    }
    text.push_str(&fixture_rows(version, ""));
    text.push_str(&format!("PRAGMA user_version = {version};\n"));
    text
}

fn postgres_golden_text(version: u32) -> String {
    use crate::postgres::schema::{MIGRATIONS, VERSION_TABLE};
    let mut text = format!(
        "-- A lockgate PostgreSQL store as schema version {version} wrote it (crate::golden_stores).\n"
    );
    text.push_str(VERSION_TABLE.trim());
    text.push('\n');
    for sql in &MIGRATIONS[..version as usize] {
        text.push_str(sql.trim());
        text.push_str(";\n");
    }
    text.push_str(&format!(
        "UPDATE lockgate_schema SET version = {version};\n"
    ));
    // PostgreSQL's version 1 holds what SQLite's version 8 does.
    text.push_str(&fixture_rows(8, "lockgate_"));
    text
}

/// Writes the golden files that are missing, when `LOCKGATE_BLESS` is set.
fn bless(path: &Path, text: impl FnOnce() -> String) {
    if std::env::var_os("LOCKGATE_BLESS").is_some() && !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text()).unwrap();
    }
}

/// Checks a store upgraded from a golden file against the fixture.
fn assert_holds_the_fixture(store: &mut dyn Store, version: u32, with_schedules: bool) {
    let f = fixture();
    let loaded = store.load().unwrap();
    let live: Vec<u64> = f
        .batch
        .jobs
        .iter()
        .filter(|(_, l)| *l)
        .map(|(j, _)| j.id)
        .collect();
    let loaded_live: Vec<u64> = loaded.live_jobs.iter().map(|j| j.id).collect();
    assert_eq!(loaded_live, live, "version {version}: the queue");
    for (job, _) in &f.batch.jobs {
        assert_eq!(
            store.job(job.id).unwrap().as_ref(),
            Some(job),
            "version {version}: job {}",
            job.id
        );
    }
    let mut tokens = loaded.tokens.clone();
    tokens.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(tokens, f.batch.tokens, "version {version}: tokens");
    assert_eq!(loaded.max_token, 2, "version {version}");
    assert_eq!(
        loaded.policy.as_deref(),
        f.batch.policy.as_deref(),
        "version {version}: policy"
    );
    if with_schedules {
        assert_eq!(
            loaded.schedules, f.batch.schedules,
            "version {version}: schedules"
        );
        assert_eq!(
            store.schedule_runs("nightly", 10).unwrap(),
            f.batch.schedule_runs,
            "version {version}: schedule runs"
        );
    }
    assert_reads_back(&f.events, &store.events_after(0, 1000).unwrap());
    assert_eq!(
        loaded.last_event_seq,
        f.events.last().unwrap().0,
        "version {version}: event counter"
    );
    assert!(loaded.max_job_id >= 50, "version {version}: job counter");
}

#[test]
fn every_earlier_sqlite_version_upgrades_and_keeps_its_jobs_tokens_schedules_and_events() {
    for version in 1..SCHEMA_VERSION {
        let path = golden("sqlite", version);
        bless(&path, || sqlite_golden_text(version));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; every earlier schema version needs its golden store (see the module docs)",
                path.display()
            )
        });
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lockgate.db");
        Connection::open(&db).unwrap().execute_batch(&text).unwrap();
        let mut store = SqliteStore::open(&db).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_holds_the_fixture(&mut store, version, version >= 2);
    }
}

#[test]
fn every_earlier_postgres_version_upgrades_and_keeps_its_jobs_tokens_schedules_and_events() {
    if !crate::conformance::postgres_available() {
        return;
    }
    for version in 1..PG_SCHEMA_VERSION {
        let path = golden("postgres", version);
        bless(&path, || postgres_golden_text(version));
        assert!(
            path.exists(),
            "{}: missing; every earlier schema version needs its golden store (see the module docs)",
            path.display()
        );
        let url = testdb::fresh_database();
        testdb::cluster().sql_file(&url, &path);
        let mut store = PgStore::open(&url).unwrap();
        assert_eq!(store.schema_version().unwrap(), PG_SCHEMA_VERSION);
        assert_holds_the_fixture(&mut store, version, true);
    }
}
