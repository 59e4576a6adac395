//! [`SqliteStore`]: the [`Store`] on one SQLite file.
//!
//! # Implementation details
//! - WAL mode with `synchronous = FULL`: readers never block the writer, and a commit that
//!   returned is on disk. Group commit is the caller's business (one [`Batch`] per
//!   transaction); a batch of a thousand job changes costs one fsync.
//! - Jobs are stored whole, as the engine's JSON, with the columns that listings filter on
//!   (`state`, `kind`, `owner`, `node`) and a `live` flag for the restart. A `job` event
//!   refers to its job's row and holds only what changed (`events.rs`).
//! - Schema versions are `PRAGMA user_version`; [`MIGRATIONS`] are applied in order, each in
//!   its own transaction, so an interrupted upgrade resumes where it stopped.

mod audit;
mod backups;
pub mod copy;
mod events;
#[cfg(test)]
mod golden;
mod joblogs;
mod outbox;
mod pauses;
mod rpo;
mod schedules;

use crate::*;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

pub use outbox::OutboxReader as SqliteOutboxReader;

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = 10;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    "CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        node TEXT,
        idempotency_key TEXT,
        live INTEGER NOT NULL,
        finished_at INTEGER,
        body TEXT NOT NULL
    );
    CREATE INDEX jobs_live ON jobs(live) WHERE live = 1;
    CREATE INDEX jobs_key ON jobs(owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_finished ON jobs(finished_at) WHERE live = 0;
    CREATE TABLE nodes (name TEXT PRIMARY KEY, body TEXT NOT NULL);
    CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        node TEXT,
        hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE events (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE INDEX events_at ON events(at);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 1 -> 2
    schedules::MIGRATION,
    // 2 -> 3
    backups::MIGRATION,
    // 3 -> 4
    pauses::MIGRATION,
    // 4 -> 5
    rpo::MIGRATION,
    // 5 -> 6
    audit::MIGRATION,
    // 6 -> 7
    joblogs::MIGRATION,
    // 7 -> 8
    outbox::MIGRATION,
    // 8 -> 9
    events::MIGRATION,
    // 9 -> 10
    backups::RESTORES_MIGRATION,
];

/// The job listing, oldest first: a fixed text (and [`JOBS_DESC`]), so both statements
/// stay in the prepared-statement cache. `?8` is the active filter: the states that have
/// not ended (a test checks the list against `JobState::is_terminal`).
const JOBS_ASC: &str = "SELECT body FROM jobs WHERE id > ?1 AND id < ?7
    AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR kind = ?3)
    AND (?4 IS NULL OR owner = ?4) AND (?5 IS NULL OR node = ?5)
    AND (?8 = 0 OR state IN ('queued', 'preparing', 'prepared', 'running'))
    ORDER BY id LIMIT ?6";

/// The job listing, newest first (as [`JOBS_ASC`]).
const JOBS_DESC: &str = "SELECT body FROM jobs WHERE id > ?1 AND id < ?7
    AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR kind = ?3)
    AND (?4 IS NULL OR owner = ?4) AND (?5 IS NULL OR node = ?5)
    AND (?8 = 0 OR state IN ('queued', 'preparing', 'prepared', 'running'))
    ORDER BY id DESC LIMIT ?6";

/// The SQLite store. See the module docs.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
}

fn io(operation: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| {
        let full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
        let message = e.to_string();
        if full {
            StoreError::Full { operation, message }
        } else {
            StoreError::Io { operation, message }
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what,
        message: e.to_string(),
    })
}

impl SqliteStore {
    /// Opens (or creates) the database and migrates it to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`StoreError::Open`] when the file cannot be opened or migrated;
    /// [`StoreError::TooNew`] when a newer lockgate wrote it.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        let open_err = |e: rusqlite::Error| StoreError::Open {
            path: shown.clone(),
            message: e.to_string(),
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(open_err)?;
        let version: u32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open_err)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: shown,
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = conn.transaction().map_err(open_err)?;
            tx.execute_batch(sql).map_err(open_err)?;
            tx.pragma_update(None, "user_version", (i + 1) as u32)
                .map_err(open_err)?;
            tx.commit().map_err(open_err)?;
        }
        Ok(SqliteStore { conn })
    }

    /// The schema version of the open database.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(io("read version"))
    }

    /// The store's identity: a random id the server stored in it the first time it used
    /// it (`None` for a new or emptied database). The server keeps the same id beside the
    /// store (`lockgate.watermark`), so a database file replaced by another one is told
    /// apart from the one it acknowledged writes to.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn identity(&self) -> Result<Option<String>, StoreError> {
        meta_text(&self.conn, "store_id").map_err(io("read identity"))
    }

    /// Stores `candidate` as the identity unless the store has one already; returns the
    /// identity it has now.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn claim_identity(&mut self, candidate: &str) -> Result<String, StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?1)",
                [candidate],
            )
            .map_err(io("write identity"))?;
        Ok(self.identity()?.unwrap_or_else(|| candidate.to_string()))
    }

    /// Raises the stored highest job id and last event sequence to at least these values
    /// (never lowers them), so a store started fresh after damage never reissues an id or
    /// an event number that was acknowledged before.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn raise_counters(&mut self, max_job_id: u64, event_seq: u64) -> Result<(), StoreError> {
        let err = io("raise counters");
        let tx = self.conn.transaction().map_err(&err)?;
        bump(&tx, "max_job_id", max_job_id).map_err(&err)?;
        bump(&tx, "event_seq", event_seq).map_err(&err)?;
        tx.commit().map_err(&err)
    }

    fn meta(&self, key: &str) -> Result<u64, StoreError> {
        meta_number(&self.conn, key).map_err(io("read meta"))
    }

    fn rows_to_jobs(
        &self,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<Job>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(io("read jobs"))?;
        let mut rows = stmt.query(args).map_err(io("read jobs"))?;
        let mut jobs = Vec::new();
        // Each body is decoded as its row is read, straight from SQLite's buffer: holding
        // every body as a String first doubled the peak of a restart (issue 17).
        while let Some(row) = rows.next().map_err(io("read jobs"))? {
            let body = row.get_ref(0).map_err(io("read jobs"))?;
            let text = body.as_str().map_err(|e| StoreError::Corrupt {
                what: "job",
                message: e.to_string(),
            })?;
            jobs.push(decode("job", text)?);
        }
        Ok(jobs)
    }
}

/// The `meta` row `key` (`store_id`, `max_job_id`, `event_seq`, ...).
fn meta_text(conn: &Connection, key: &str) -> Result<Option<String>, rusqlite::Error> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
}

/// A counter of `meta` (0 when it was never written).
fn meta_number(conn: &Connection, key: &str) -> Result<u64, rusqlite::Error> {
    Ok(meta_text(conn, key)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

fn bump(tx: &rusqlite::Transaction<'_>, key: &str, value: u64) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = CAST(max(CAST(value AS INTEGER), CAST(?2 AS INTEGER)) AS TEXT)",
    )?
    .execute(params![key, value.to_string()])?;
    Ok(())
}

/// Writes every part of `batch` inside `tx` (the caller commits).
fn write_batch(tx: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    write_jobs(tx, batch)?;
    events::write(tx, batch)?;
    write_nodes(tx, batch)?;
    write_tokens(tx, batch)?;
    write_meta(tx, batch)?;
    schedules::write(
        tx,
        &batch.schedules,
        &batch.removed_schedules,
        &batch.schedule_runs,
    )?;
    backups::write(tx, backups::Table::Backups, &batch.backups)?;
    backups::write(tx, backups::Table::Restores, &batch.restores)?;
    pauses::write(tx, &batch.pauses, &batch.removed_pauses)?;
    rpo::write(tx, &batch.rpo, &batch.removed_rpo)?;
    audit::write(tx, &batch.audit)?;
    joblogs::write(tx, &batch.job_logs, batch.log_limits)?;
    outbox::write(tx, &batch.outbox, &batch.outbox_updates)
}

/// Puts every job of the batch whole, and raises `max_job_id`.
fn write_jobs(tx: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    let mut put = tx.prepare_cached(
        "INSERT OR REPLACE INTO jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    let mut max_id = 0;
    for (job, live) in &batch.jobs {
        let body = serde_json::to_string(job).expect("jobs serialize");
        put.execute(params![
            job.id as i64,
            job.owner,
            job.kind,
            job.state.as_str(),
            job.node(),
            job.idempotency_key,
            *live as i64,
            job.finished_at.map(|t| t.0 as i64),
            body
        ])?;
        max_id = max_id.max(job.id);
    }
    if max_id > 0 {
        bump(tx, "max_job_id", max_id)?;
    }
    Ok(())
}

/// Puts the batch's nodes, then deletes its removed ones.
fn write_nodes(tx: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    for n in &batch.nodes {
        let body = serde_json::to_string(n).expect("nodes serialize");
        tx.prepare_cached("INSERT OR REPLACE INTO nodes (name, body) VALUES (?1, ?2)")?
            .execute(params![n.registration.name, body])?;
    }
    for name in &batch.removed_nodes {
        tx.prepare_cached("DELETE FROM nodes WHERE name = ?1")?
            .execute([name])?;
    }
    Ok(())
}

/// Puts the batch's tokens, then deletes its revoked ones.
fn write_tokens(tx: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    for t in &batch.tokens {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO tokens (name, role, node, hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            t.name,
            t.role.as_str(),
            t.node,
            t.hash,
            t.created_at.0 as i64
        ])?;
    }
    for name in &batch.revoked_tokens {
        tx.prepare_cached("DELETE FROM tokens WHERE name = ?1")?
            .execute([name])?;
    }
    Ok(())
}

/// The policy text, `max_token` and what was learned, when the batch changes them.
fn write_meta(tx: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    for (key, text) in [("policy", &batch.policy), ("learned", &batch.learned)] {
        if let Some(text) = text {
            tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?
                .execute([key, text.as_str()])?;
        }
    }
    if let Some(t) = batch.max_token {
        bump(tx, "max_token", t)?;
    }
    Ok(())
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Loaded, StoreError> {
        let live_jobs =
            self.rows_to_jobs("SELECT body FROM jobs WHERE live = 1 ORDER BY id", &[])?;
        let mut stmt = self
            .conn
            .prepare("SELECT body FROM nodes ORDER BY name")
            .map_err(io("read nodes"))?;
        let nodes = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(io("read nodes"))?
            .collect::<Result<Vec<String>, _>>()
            .map_err(io("read nodes"))?
            .iter()
            .map(|b| decode("node", b))
            .collect::<Result<Vec<NodeRecord>, _>>()?;
        drop(stmt);
        let tokens = self.load_tokens()?;
        let text = |key: &str| -> Result<Option<String>, StoreError> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(io("read meta"))
        };
        let policy = text("policy")?;
        let learned = text("learned")?;
        let max_id: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM jobs", [], |r| r.get(0))
            .map_err(io("read jobs"))?;
        let max_seq: Option<i64> = self
            .conn
            .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
            .map_err(io("read events"))?;
        let (pauses, max_pause_id) = pauses::load(&self.conn)?;
        Ok(Loaded {
            live_jobs,
            nodes,
            tokens,
            policy,
            max_job_id: self.meta("max_job_id")?.max(max_id.unwrap_or(0) as u64),
            max_token: self.meta("max_token")?,
            learned,
            last_event_seq: self.meta("event_seq")?.max(max_seq.unwrap_or(0) as u64),
            schedules: schedules::load(&self.conn)?,
            pauses,
            max_pause_id,
            rpo: rpo::load(&self.conn)?,
            outbox_pending: outbox::pending(&self.conn)?,
        })
    }

    fn load_tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name, role, node, hash, created_at FROM tokens ORDER BY name")
            .map_err(io("read tokens"))?;
        let tokens = stmt
            .query_map([], |r| {
                Ok(TokenRecord {
                    name: r.get(0)?,
                    role: Role::parse(&r.get::<_, String>(1)?).unwrap_or(Role::Viewer),
                    node: r.get(2)?,
                    hash: r.get(3)?,
                    created_at: Timestamp(r.get::<_, i64>(4)? as u64),
                })
            })
            .map_err(io("read tokens"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io("read tokens"));
        tokens
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let err = io("commit");
        let tx = self.conn.transaction().map_err(&err)?;
        write_batch(&tx, batch).map_err(&err)?;
        tx.commit().map_err(&err)
    }

    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        Ok(self
            .rows_to_jobs("SELECT body FROM jobs WHERE id = ?1", &[&(id as i64)])?
            .pop())
    }

    fn job_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, StoreError> {
        let sql = "SELECT body FROM jobs WHERE owner = ?1 AND idempotency_key = ?2 ORDER BY id DESC LIMIT 1";
        Ok(self.rows_to_jobs(sql, &[&owner, &key])?.pop())
    }

    fn jobs(&mut self, f: &JobFilter) -> Result<Vec<Job>, StoreError> {
        let after = f.after.unwrap_or(0) as i64;
        let before = f.before.map_or(i64::MAX, |b| b.min(i64::MAX as u64) as i64);
        let limit = f.limit as i64;
        let active = i64::from(f.active);
        let state = f.state.map(JobState::as_str);
        let sql = if f.newest_first { JOBS_DESC } else { JOBS_ASC };
        self.rows_to_jobs(
            sql,
            &[
                &after, &state, &f.kind, &f.owner, &f.node, &limit, &before, &active,
            ],
        )
    }

    fn events_after(&mut self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        events::after(&self.conn, after, limit)
    }

    fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned, StoreError> {
        let err = io("prune");
        let c = cutoff.0 as i64;
        let tx = self.conn.transaction().map_err(&err)?;
        let log_lines = joblogs::prune(&tx, c).map_err(&err)?;
        let jobs = tx
            .execute("DELETE FROM jobs WHERE live = 0 AND finished_at < ?1", [c])
            .map_err(&err)?;
        let events = tx
            .execute("DELETE FROM events WHERE at < ?1", [c])
            .map_err(&err)?;
        let schedule_runs = schedules::prune(&tx, c).map_err(&err)?;
        let audit = audit::prune(&tx, c).map_err(&err)?;
        outbox::prune(&tx, c).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(Pruned {
            jobs,
            events,
            schedule_runs,
            audit,
            log_lines,
        })
    }

    fn job_log(
        &mut self,
        job: JobId,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredLogLine>, StoreError> {
        joblogs::read(&self.conn, job, after, limit, max_bytes)
    }

    fn job_log_tail(&mut self, job: JobId, n: usize) -> Result<Vec<StoredLogLine>, StoreError> {
        joblogs::tail(&self.conn, job, n)
    }

    fn job_log_bytes(&mut self) -> Result<u64, StoreError> {
        joblogs::total_bytes(&self.conn)
    }

    fn schedule_runs(&mut self, name: &str, limit: usize) -> Result<Vec<ScheduleRun>, StoreError> {
        schedules::runs(&self.conn, name, limit)
    }

    fn audit(&mut self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        audit::query(&self.conn, filter)
    }

    fn backup(&mut self, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        backups::get(&self.conn, backups::Table::Backups, name)
    }

    fn backups(&mut self) -> Result<Vec<BackupRecord>, StoreError> {
        backups::all(&self.conn, backups::Table::Backups)
    }

    fn restore(&mut self, name: &str) -> Result<Option<RestoreRecord>, StoreError> {
        backups::get(&self.conn, backups::Table::Restores, name)
    }

    fn restores(&mut self) -> Result<Vec<RestoreRecord>, StoreError> {
        backups::all(&self.conn, backups::Table::Restores)
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(io("checkpoint"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_claimed_once_and_counters_only_rise() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        assert_eq!(s.identity().unwrap(), None);
        assert_eq!(s.claim_identity("a").unwrap(), "a");
        assert_eq!(s.claim_identity("b").unwrap(), "a");
        s.raise_counters(7, 9).unwrap();
        s.raise_counters(3, 4).unwrap();
        let l = s.load().unwrap();
        assert_eq!((l.max_job_id, l.last_event_seq), (7, 9));
    }

    #[test]
    fn opens_migrates_and_refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let loaded = s.load().unwrap();
        assert_eq!(
            (loaded.max_job_id, loaded.max_token, loaded.last_event_seq),
            (0, 0, 0)
        );
        s.commit(&Batch {
            max_token: Some(7),
            policy: Some("[global]\n".into()),
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let loaded = s.load().unwrap();
        assert_eq!(
            (loaded.max_token, loaded.policy.as_deref()),
            (7, Some("[global]\n"))
        );
        s.conn
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(s);
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
    }

    #[test]
    fn schedules_and_their_runs_survive_a_reopen_and_version_1_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A version-1 database (as the previous release wrote it).
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let rec = ScheduleRecord {
            name: "nightly".into(),
            source: ScheduleSource::Api,
            spec: Some("{}".into()),
            last_planned: Timestamp(2_000),
            last_job: Some(4),
            created_at: Timestamp(1_000),
        };
        let run = |planned, job, note: Option<&str>, at| ScheduleRun {
            schedule: "nightly".into(),
            planned: Timestamp(planned),
            job,
            note: note.map(str::to_string),
            at: Timestamp(at),
        };
        s.commit(&Batch {
            schedules: vec![rec.clone()],
            schedule_runs: vec![
                run(1_000, Some(3), None, 1_000),
                run(2_000, None, Some("previous run still running"), 50_000),
            ],
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.load().unwrap().schedules, vec![rec]);
        let runs = s.schedule_runs("nightly", 10).unwrap();
        assert_eq!(
            runs.iter().map(|r| r.planned.0).collect::<Vec<_>>(),
            [2_000, 1_000]
        );
        assert_eq!(s.prune(Timestamp(10_000)).unwrap().schedule_runs, 1);
        s.commit(&Batch {
            removed_schedules: vec!["nightly".into()],
            ..Batch::default()
        })
        .unwrap();
        assert!(s.load().unwrap().schedules.is_empty());
        assert!(s.schedule_runs("nightly", 10).unwrap().is_empty());
    }

    #[test]
    fn backup_records_survive_a_reopen_and_version_2_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A version-2 database (schedules, no backups).
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        use lockgate_api::BackupState::{Finished, Queued, Running};
        let rec = |name: &str, state, at| BackupRecord {
            name: name.into(),
            state,
            created_at: Timestamp(at),
            body: format!("{{\"name\":\"{name}\"}}"),
        };
        s.commit(&Batch {
            backups: vec![rec("b", Running, 2_000), rec("a", Queued, 1_000)],
            ..Batch::default()
        })
        .unwrap();
        s.commit(&Batch {
            backups: vec![rec("b", Finished, 2_000)],
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let all = s.backups().unwrap();
        assert_eq!(
            all,
            vec![rec("a", Queued, 1_000), rec("b", Finished, 2_000)]
        );
        assert_eq!(s.backup("b").unwrap(), Some(rec("b", Finished, 2_000)));
        assert_eq!(s.backup("c").unwrap(), None);
        // Retention never deletes backup records.
        s.prune(Timestamp(u64::MAX / 2)).unwrap();
        assert_eq!(s.backups().unwrap().len(), 2);
    }

    #[test]
    fn the_active_filter_names_every_state_that_has_not_ended() {
        let live: Vec<String> = JobState::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let list = format!("state IN ({})", live.join(", "));
        assert!(JOBS_ASC.contains(&list), "{list}");
        assert!(JOBS_DESC.contains(&list), "{list}");
        assert_eq!(
            JOBS_ASC.replace("ORDER BY id", "ORDER BY id DESC"),
            JOBS_DESC
        );
    }
}
