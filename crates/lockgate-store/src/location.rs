//! [`StoreLocation`]: where a server's store is, the one place that knows both kinds.
//!
//! # Invariants
//! - Every part of the server that opens the store (the event loop's writer, the
//!   notification task's reader, the data-dir checks) goes through a [`StoreLocation`], so
//!   a server on PostgreSQL never opens a `lockgate.db` file by accident.
//! - [`StoreLocation`]'s `Display` never shows a password: a PostgreSQL URL is shown with
//!   [`crate::postgres::redact`].

use crate::*;
use std::path::PathBuf;

/// Where the store is.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The SQLite file (`<data-dir>/lockgate.db`).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`--database-url`); the URL is a secret.
    Postgres(String),
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => write!(f, "{}", p.display()),
            StoreLocation::Postgres(url) => f.write_str(&postgres::redact(url)),
        }
    }
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreLocation::Postgres(_) => {
                f.debug_tuple("Postgres").field(&self.to_string()).finish()
            }
        }
    }
}

impl StoreLocation {
    /// Opens (creating and migrating) the store.
    ///
    /// # Errors
    /// [`StoreError::Open`] or [`StoreError::TooNew`].
    pub fn open(&self) -> Result<AnyStore, StoreError> {
        Ok(match self {
            StoreLocation::Sqlite(p) => AnyStore::Sqlite(SqliteStore::open(p)?),
            StoreLocation::Postgres(url) => AnyStore::Postgres(Box::new(PgStore::open(url)?)),
        })
    }

    /// Opens a reader of the notification outbox on its own connection (the store must
    /// have been opened first).
    ///
    /// # Errors
    /// [`StoreError::Open`].
    pub fn open_reader(&self) -> Result<OutboxReader, StoreError> {
        Ok(match self {
            StoreLocation::Sqlite(p) => OutboxReader::Sqlite(SqliteOutboxReader::open(p)?),
            StoreLocation::Postgres(url) => {
                OutboxReader::Postgres(Box::new(PgOutboxReader::open(url)?))
            }
        })
    }

    /// Whether this is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self, StoreLocation::Postgres(_))
    }
}

/// An open store of either kind.
#[derive(Debug)]
pub enum AnyStore {
    /// SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL (boxed: its connection state is larger than a SQLite handle).
    Postgres(Box<PgStore>),
}

macro_rules! both {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $e,
            AnyStore::Postgres($s) => $e,
        }
    };
}

impl AnyStore {
    /// The store's identity (see [`SqliteStore::identity`]).
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn identity(&mut self) -> Result<Option<String>, StoreError> {
        both!(self, s => s.identity())
    }

    /// See [`SqliteStore::claim_identity`].
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn claim_identity(&mut self, candidate: &str) -> Result<String, StoreError> {
        both!(self, s => s.claim_identity(candidate))
    }

    /// See [`SqliteStore::raise_counters`].
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn raise_counters(&mut self, max_job_id: u64, event_seq: u64) -> Result<(), StoreError> {
        both!(self, s => s.raise_counters(max_job_id, event_seq))
    }

    /// The schema version of the open store.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn schema_version(&mut self) -> Result<u32, StoreError> {
        both!(self, s => s.schema_version())
    }
}

impl Store for AnyStore {
    fn load(&mut self) -> Result<Loaded, StoreError> {
        both!(self, s => s.load())
    }
    fn load_tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError> {
        both!(self, s => s.load_tokens())
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        both!(self, s => s.commit(batch))
    }
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        both!(self, s => s.job(id))
    }
    fn job_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, StoreError> {
        both!(self, s => s.job_by_key(owner, key))
    }
    fn jobs(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        both!(self, s => s.jobs(filter))
    }
    fn events_after(&mut self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        both!(self, s => s.events_after(after, limit))
    }
    fn schedule_runs(&mut self, name: &str, limit: usize) -> Result<Vec<ScheduleRun>, StoreError> {
        both!(self, s => s.schedule_runs(name, limit))
    }
    fn backup(&mut self, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        both!(self, s => s.backup(name))
    }
    fn backups(&mut self) -> Result<Vec<BackupRecord>, StoreError> {
        both!(self, s => s.backups())
    }
    fn restore(&mut self, name: &str) -> Result<Option<RestoreRecord>, StoreError> {
        both!(self, s => s.restore(name))
    }
    fn restores(&mut self) -> Result<Vec<RestoreRecord>, StoreError> {
        both!(self, s => s.restores())
    }
    fn audit(&mut self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        both!(self, s => s.audit(filter))
    }
    fn job_log(
        &mut self,
        job: JobId,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredLogLine>, StoreError> {
        both!(self, s => s.job_log(job, after, limit, max_bytes))
    }
    fn job_log_tail(&mut self, job: JobId, n: usize) -> Result<Vec<StoredLogLine>, StoreError> {
        both!(self, s => s.job_log_tail(job, n))
    }
    fn job_log_bytes(&mut self) -> Result<u64, StoreError> {
        both!(self, s => s.job_log_bytes())
    }
    fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned, StoreError> {
        both!(self, s => s.prune(cutoff))
    }
    fn flush(&mut self) -> Result<(), StoreError> {
        both!(self, s => s.flush())
    }
}

/// The notification task's reader of the outbox, of either kind.
#[derive(Debug)]
pub enum OutboxReader {
    /// The SQLite file, read-only.
    Sqlite(SqliteOutboxReader),
    /// Its own PostgreSQL connection (boxed, as in [`AnyStore`]).
    Postgres(Box<PgOutboxReader>),
}

impl OutboxReader {
    /// Opens the SQLite store file read-only (see [`SqliteOutboxReader::open`]).
    ///
    /// # Errors
    /// [`StoreError::Open`].
    pub fn open(path: &std::path::Path) -> Result<OutboxReader, StoreError> {
        Ok(OutboxReader::Sqlite(SqliteOutboxReader::open(path)?))
    }

    /// Pending rows due at `now`, oldest event first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        match self {
            OutboxReader::Sqlite(r) => r.due(now, limit),
            OutboxReader::Postgres(r) => r.due(now, limit),
        }
    }

    /// The earliest `next_at` of a pending row after `after`, if any.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn next_due_after(&mut self, after: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        match self {
            OutboxReader::Sqlite(r) => r.next_due_after(after),
            OutboxReader::Postgres(r) => r.next_due_after(after),
        }
    }
}
