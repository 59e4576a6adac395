//! The notification outbox in SQLite (schema version 8).
//!
//! One row per (event, target): written in the batch that records the event, so an
//! acknowledged event's notification is on disk with it. A row is `pending` until its
//! sender reports it `delivered` or `failed` (given up); those are kept until retention
//! prunes them by `done_at`.
//!
//! Only the server's event loop writes (through [`crate::Batch`]); the delivery task reads
//! with its own connection ([`OutboxReader`]). WAL readers never block the writer, so a
//! slow sender cannot hold up a commit.

use super::io;
use crate::{OutboxOutcome, OutboxRow, OutboxUpdate, StoreError};
use lockgate_core::Timestamp;
use rusqlite::{params, Connection, OpenFlags, Transaction};
use std::path::Path;

/// Migration 7 -> 8.
pub(super) const MIGRATION: &str = "CREATE TABLE outbox (
        seq INTEGER NOT NULL,
        target TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        done_at INTEGER,
        last_error TEXT,
        PRIMARY KEY (seq, target)
    );
    CREATE INDEX outbox_pending ON outbox(next_at) WHERE state = 'pending';
    CREATE INDEX outbox_done ON outbox(done_at) WHERE state <> 'pending';";

/// Writes the outbox part of a batch: new rows, then what senders reported.
pub(super) fn write(
    tx: &Transaction<'_>,
    rows: &[OutboxRow],
    updates: &[OutboxUpdate],
) -> Result<(), rusqlite::Error> {
    for r in rows {
        tx.prepare_cached(
            "INSERT OR IGNORE INTO outbox (seq, target, body, created_at, attempts, next_at, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending')",
        )?
        .execute(params![
            r.seq as i64,
            r.target,
            r.body,
            r.created_at.0 as i64,
            r.attempts,
            r.next_at.0 as i64
        ])?;
    }
    for u in updates {
        let (state, next_at, done_at, error) = match &u.outcome {
            OutboxOutcome::Delivered { at } => ("delivered", None, Some(at.0 as i64), None),
            OutboxOutcome::Retry { next_at, error } => (
                "pending",
                Some(next_at.0 as i64),
                None,
                Some(error.as_str()),
            ),
            OutboxOutcome::GaveUp { at, error } => {
                ("failed", None, Some(at.0 as i64), Some(error.as_str()))
            }
        };
        tx.prepare_cached(
            "UPDATE outbox SET state = ?3, attempts = ?4, next_at = coalesce(?5, next_at),
                 done_at = ?6, last_error = coalesce(?7, last_error)
             WHERE seq = ?1 AND target = ?2 AND state = 'pending'",
        )?
        .execute(params![
            u.seq as i64,
            u.target,
            state,
            u.attempts,
            next_at,
            done_at,
            error
        ])?;
    }
    Ok(())
}

/// Rows not pending any more that were done before `cutoff`.
pub(super) fn prune(tx: &Transaction<'_>, cutoff: i64) -> Result<usize, rusqlite::Error> {
    tx.prepare_cached("DELETE FROM outbox WHERE state <> 'pending' AND done_at < ?1")?
        .execute([cutoff])
}

/// How many rows are pending.
pub(super) fn pending(conn: &Connection) -> Result<u64, StoreError> {
    conn.query_row(
        "SELECT count(*) FROM outbox WHERE state = 'pending'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
    .map_err(io("read outbox"))
}

/// The delivery task's own read-only connection to the outbox.
#[derive(Debug)]
pub struct OutboxReader {
    conn: Connection,
}

impl OutboxReader {
    /// Opens the store file read-only (it must exist: the server opened it first).
    ///
    /// # Errors
    /// [`StoreError::Open`].
    pub fn open(path: &Path) -> Result<OutboxReader, StoreError> {
        let open_err = |e: rusqlite::Error| StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        Ok(OutboxReader { conn })
    }

    /// Pending rows due at `now`, oldest event first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        let err = io("read outbox");
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, target, body, created_at, attempts, next_at FROM outbox
                 WHERE state = 'pending' AND next_at <= ?1 ORDER BY seq, target LIMIT ?2",
            )
            .map_err(&err)?;
        let rows = stmt
            .query_map(params![now.0 as i64, limit as i64], |r| {
                Ok(OutboxRow {
                    seq: r.get::<_, i64>(0)? as u64,
                    target: r.get(1)?,
                    body: r.get(2)?,
                    created_at: Timestamp(r.get::<_, i64>(3)? as u64),
                    attempts: r.get(4)?,
                    next_at: Timestamp(r.get::<_, i64>(5)? as u64),
                })
            })
            .map_err(&err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(&err)?;
        Ok(rows)
    }

    /// The earliest `next_at` of a pending row after `after` (rows at or before it are
    /// the caller's already), if any.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn next_due_after(&mut self, after: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.conn
            .query_row(
                "SELECT min(next_at) FROM outbox WHERE state = 'pending' AND next_at > ?1",
                [after.0 as i64],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map(|t| t.map(|t| Timestamp(t as u64)))
            .map_err(io("read outbox"))
    }
}

// Its tests are the store conformance table's `outbox_rows` (conformance.rs), run on this
// store and on PostgreSQL's.
