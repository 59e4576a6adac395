//! The notification delivery task's own connection to the PostgreSQL outbox (as
//! [`crate::OutboxReader`] reads the SQLite file): it only reads, so the event loop stays
//! the store's one writer. Under PostgreSQL's MVCC a reader never blocks a commit.

use super::conn::Pg;
use super::{ms, ts};
use crate::{OutboxRow, StoreError};
use lockgate_core::Timestamp;

/// A read-only view of the outbox on its own connection.
#[derive(Debug)]
pub struct PgOutboxReader {
    pg: Pg,
}

impl PgOutboxReader {
    /// Connects to the database at `url` (the server opened and migrated it first).
    ///
    /// # Errors
    /// [`StoreError::Open`].
    pub fn open(url: &str) -> Result<PgOutboxReader, StoreError> {
        Ok(PgOutboxReader {
            pg: Pg::connect(url)?,
        })
    }

    /// Pending rows due at `now`, oldest event first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.pg.run("read outbox", async |c| {
            let rows = c
                .query(
                    "SELECT seq, target, body, created_at, attempts, next_at FROM lockgate_outbox
                     WHERE state = 'pending' AND next_at <= $1 ORDER BY seq, target LIMIT $2",
                    &[&ms(now), &(limit.min(i64::MAX as usize) as i64)],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| OutboxRow {
                    seq: r.get::<_, i64>(0) as u64,
                    target: r.get(1),
                    body: r.get(2),
                    created_at: ts(r.get(3)),
                    attempts: r.get::<_, i32>(4) as u32,
                    next_at: ts(r.get(5)),
                })
                .collect())
        })
    }

    /// The earliest `next_at` of a pending row after `after`, if any.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn next_due_after(&mut self, after: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.pg.run("read outbox", async |c| {
            let rows = c
                .query(
                    "SELECT min(next_at) FROM lockgate_outbox WHERE state = 'pending' AND next_at > $1",
                    &[&ms(after)],
                )
                .await?;
            Ok(rows[0].get::<_, Option<i64>>(0).map(ts))
        })
    }
}
