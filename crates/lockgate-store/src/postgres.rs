//! [`PgStore`]: the [`Store`] on a PostgreSQL database (`docs/postgresql.md`).
//!
//! # Invariants
//! - **One transaction per [`Batch`]** (the group commit), with `synchronous_commit = on`
//!   for the session: a commit that returned is on the database's disk (and on its
//!   synchronous standbys, if the operator has any).
//! - **No per-row round trip**: each part of a batch is one multi-row statement over
//!   `UNNEST` arrays of prepared statements (`write.rs`); rows with one key are merged
//!   first (the last write wins, as SQLite's `INSERT OR REPLACE` one after the other).
//! - **Fenced commits**: with a [`Fence`] set ([`PgStore::set_fence`]), every commit
//!   first takes `lockgate_leader` `FOR KEY SHARE` where `holder` and `term` are the
//!   fence's, and fails with [`StoreError::Fenced`] when that row is not there: a leader
//!   that lost its lease cannot commit, and a takeover (which locks the row `FOR UPDATE`)
//!   waits for a commit in flight, so no commit lands under a stale term. The leader's
//!   renewal does not wait for its commits (`FOR NO KEY UPDATE` and `FOR KEY SHARE` do
//!   not conflict).
//! - The same data and the same answers as [`crate::SqliteStore`]: the store tests run one
//!   table of operations on both (`conformance.rs`).
//! - Schema versions and forward migrations in `schema.rs`; a newer schema than this build
//!   knows is refused ([`StoreError::TooNew`]).

mod conn;
mod joblogs;
mod outbox;
mod read;
pub(crate) mod schema;
#[cfg(any(test, feature = "testdb"))]
pub mod testdb;
mod write;

use crate::*;
use conn::{Pg, PgError, R};

pub use conn::redact;
pub use outbox::PgOutboxReader;
pub use schema::PG_SCHEMA_VERSION;

/// The leadership a commit must still hold: the `lockgate_leader` row's holder and term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The replica's name, as it wrote it into `lockgate_leader.holder`.
    pub holder: String,
    /// The term it holds (`lockgate_leader.term`).
    pub term: i64,
}

/// The PostgreSQL store. See the module docs.
#[derive(Debug)]
pub struct PgStore {
    pg: Pg,
    fence: Option<Fence>,
}

fn corrupt(what: &'static str) -> impl Fn(serde_json::Error) -> PgError {
    move |e| {
        PgError::Store(StoreError::Corrupt {
            what,
            message: e.to_string(),
        })
    }
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> R<T> {
    serde_json::from_str(text).map_err(corrupt(what))
}

/// Milliseconds as the database keeps them (`bigint`).
fn ms(t: Timestamp) -> i64 {
    t.0 as i64
}

/// A `bigint` column as a time.
fn ts(v: i64) -> Timestamp {
    Timestamp(v as u64)
}

impl PgStore {
    /// Connects to the database at `url` and migrates it to [`PG_SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`StoreError::Open`] when the database cannot be reached (naming `host:port`,
    /// never the password) or migrated; [`StoreError::TooNew`] when a newer lockgate
    /// wrote it.
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        let mut pg = Pg::connect(url)?;
        let shown = pg.shown().to_string();
        let version = pg
            .run("migrate", async |c| migrate(c).await)
            .map_err(|e| match e {
                StoreError::Io { message, .. } => StoreError::Open {
                    path: shown.clone(),
                    message,
                },
                e => e,
            })?;
        if version > PG_SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: shown,
                found: version,
                known: PG_SCHEMA_VERSION,
            });
        }
        Ok(PgStore { pg, fence: None })
    }

    /// The URL as it may be shown (`postgres://user:***@host/db`).
    pub fn shown_url(&self) -> &str {
        self.pg.shown()
    }

    /// Sets (or clears) the leadership every later commit must still hold (see the
    /// module docs).
    pub fn set_fence(&mut self, fence: Option<Fence>) {
        self.fence = fence;
    }

    /// The fence set, if any.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// The schema version of the database.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn schema_version(&mut self) -> Result<u32, StoreError> {
        self.pg.run("read version", async |c| version(c).await)
    }

    /// The store's identity (as [`crate::SqliteStore::identity`]).
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn identity(&mut self) -> Result<Option<String>, StoreError> {
        self.pg.run("read identity", async |c| {
            let row = c
                .opt(
                    "SELECT value FROM lockgate_meta WHERE key = 'store_id'",
                    &[],
                )
                .await?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    /// Stores `candidate` as the identity unless the store has one; returns the one it has.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn claim_identity(&mut self, candidate: &str) -> Result<String, StoreError> {
        self.pg.run("write identity", async |c| {
            c.exec(
                "INSERT INTO lockgate_meta (key, value) VALUES ('store_id', $1)
                 ON CONFLICT (key) DO NOTHING",
                &[&candidate],
            )
            .await?;
            let row = c
                .opt(
                    "SELECT value FROM lockgate_meta WHERE key = 'store_id'",
                    &[],
                )
                .await?;
            Ok(row.map_or_else(|| candidate.to_string(), |r| r.get(0)))
        })
    }

    /// Raises the stored highest job id and last event sequence to at least these values
    /// (as [`crate::SqliteStore::raise_counters`]).
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn raise_counters(&mut self, max_job_id: u64, event_seq: u64) -> Result<(), StoreError> {
        self.pg.run("raise counters", async |c| {
            write::bump(
                c,
                &[
                    ("max_job_id", max_job_id as i64),
                    ("event_seq", event_seq as i64),
                ],
            )
            .await
        })
    }

    /// Runs `f` on the store's connection (reconnecting first if it was lost): for the
    /// leadership code, which keeps its own tables in the same database.
    ///
    /// # Errors
    /// [`StoreError::Io`] named `operation`.
    pub fn with_client<T>(
        &mut self,
        operation: &'static str,
        f: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, StoreError> {
        self.pg.run(operation, async |c| Ok(f(&c.client).await?))
    }
}

/// The version row (0 before the first migration).
async fn version(c: &mut conn::Conn) -> R<u32> {
    let row = c
        .opt("SELECT version FROM lockgate_schema WHERE id = 1", &[])
        .await?;
    Ok(row.map_or(0, |r| r.get::<_, i32>(0) as u32))
}

/// Applies the migrations the database lacks, each in its own transaction under the
/// migration lock; returns the version found (above ours: the caller refuses it).
async fn migrate(c: &mut conn::Conn) -> R<u32> {
    c.client.batch_execute(schema::VERSION_TABLE).await?;
    loop {
        let done = c
            .transaction(async |c| {
                c.exec(
                    "SELECT pg_advisory_xact_lock($1)",
                    &[&schema::MIGRATION_LOCK],
                )
                .await?;
                let v = c
                    .opt(
                        "SELECT version FROM lockgate_schema WHERE id = 1 FOR UPDATE",
                        &[],
                    )
                    .await?
                    .map_or(0, |r| r.get::<_, i32>(0) as u32);
                let Some(sql) = schema::MIGRATIONS.get(v as usize) else {
                    return Ok(Some(v));
                };
                c.client.batch_execute(sql).await?;
                c.exec(
                    "UPDATE lockgate_schema SET version = $1 WHERE id = 1",
                    &[&(v as i32 + 1)],
                )
                .await?;
                Ok(None)
            })
            .await?;
        if let Some(v) = done {
            return Ok(v);
        }
    }
}

impl Store for PgStore {
    fn load(&mut self) -> Result<Loaded, StoreError> {
        self.pg.run("load", async |c| read::load(c).await)
    }

    fn load_tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError> {
        self.pg.run("read tokens", async |c| read::tokens(c).await)
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let fence = self.fence.clone();
        self.pg.run("commit", async |c| {
            c.transaction(async |c| {
                if let Some(f) = &fence {
                    write::check_fence(c, f).await?;
                }
                write::batch(c, batch).await
            })
            .await
        })
    }

    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.pg.run("read jobs", async |c| read::job(c, id).await)
    }

    fn job_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, StoreError> {
        self.pg
            .run("read jobs", async |c| read::job_by_key(c, owner, key).await)
    }

    fn jobs(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        self.pg
            .run("read jobs", async |c| read::jobs(c, filter).await)
    }

    fn events_after(&mut self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.pg.run("read events", async |c| {
            read::events_after(c, after, limit).await
        })
    }

    fn schedule_runs(&mut self, name: &str, limit: usize) -> Result<Vec<ScheduleRun>, StoreError> {
        self.pg.run("read schedule runs", async |c| {
            read::schedule_runs(c, name, limit).await
        })
    }

    fn backup(&mut self, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        self.pg.run("read backups", async |c| {
            Ok(read::records(c, &read::BACKUPS, Some(name)).await?.pop())
        })
    }

    fn backups(&mut self) -> Result<Vec<BackupRecord>, StoreError> {
        self.pg.run("read backups", async |c| {
            read::records(c, &read::BACKUPS, None).await
        })
    }

    fn restore(&mut self, name: &str) -> Result<Option<RestoreRecord>, StoreError> {
        self.pg.run("read restores", async |c| {
            Ok(read::records(c, &read::RESTORES, Some(name)).await?.pop())
        })
    }

    fn restores(&mut self) -> Result<Vec<RestoreRecord>, StoreError> {
        self.pg.run("read restores", async |c| {
            read::records(c, &read::RESTORES, None).await
        })
    }

    fn audit(&mut self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        self.pg
            .run("read audit", async |c| read::audit(c, filter).await)
    }

    fn job_log(
        &mut self,
        job: JobId,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredLogLine>, StoreError> {
        self.pg.run("read job logs", async |c| {
            joblogs::read(c, job, after, limit, max_bytes).await
        })
    }

    fn job_log_tail(&mut self, job: JobId, n: usize) -> Result<Vec<StoredLogLine>, StoreError> {
        self.pg
            .run("read job logs", async |c| joblogs::tail(c, job, n).await)
    }

    fn job_log_bytes(&mut self) -> Result<u64, StoreError> {
        self.pg
            .run("read job logs", async |c| joblogs::total(c).await)
    }

    fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned, StoreError> {
        let c0 = ms(cutoff);
        self.pg.run("prune", async |c| {
            c.transaction(async |c| {
                let log_lines = joblogs::prune(c, c0).await? as usize;
                let jobs = c
                    .exec(
                        "DELETE FROM lockgate_jobs WHERE NOT live AND finished_at < $1",
                        &[&c0],
                    )
                    .await? as usize;
                let events = c
                    .exec("DELETE FROM lockgate_events WHERE at < $1", &[&c0])
                    .await? as usize;
                let schedule_runs = c
                    .exec("DELETE FROM lockgate_schedule_runs WHERE at < $1", &[&c0])
                    .await? as usize;
                let audit = c
                    .exec("DELETE FROM lockgate_audit WHERE at < $1", &[&c0])
                    .await? as usize;
                c.exec(
                    "DELETE FROM lockgate_outbox WHERE state <> 'pending' AND done_at < $1",
                    &[&c0],
                )
                .await?;
                Ok(Pruned {
                    jobs,
                    events,
                    schedule_runs,
                    audit,
                    log_lines,
                })
            })
            .await
        })
    }

    /// Nothing to do: every commit is durable when it returns.
    fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}
