//! The event log in SQLite: one row per event; a `job` event's row names its job (`job`)
//! and holds only what changes over the job's life (`crate::event_row`), so a queued job
//! is not written twice (schema version 9).
//!
//! A read joins each row to its job's row (by the jobs' primary key; the events need no
//! index of their own for it) and rebuilds the whole event.

use super::{bump, io};
use crate::event_row::Expander;
use crate::{Batch, StoreError, StoredEvent};
use lockgate_core::Timestamp;
use rusqlite::{params, Connection, Transaction};

/// Migration 8 -> 9: the `job` column, and every existing `job` event whose job row is
/// there rewritten as the new rows are written: the job's id in `job`; its fixed fields
/// (the `crate::JOB_FIXED_FIELDS` of this version) and its null ones
/// (`json_patch('{}', ...)`, RFC 7396, drops null members) left out of `data`. An event
/// whose job row is gone keeps its whole text. The freed pages are reused by later rows
/// (`VACUUM` gives them back to the file system).
pub(super) const MIGRATION: &str = "ALTER TABLE events ADD COLUMN job INTEGER;
    UPDATE events SET
        job = json_extract(data, '$.job.id'),
        data = json_patch('{}', json_remove(data,
            '$.job.id', '$.job.kind', '$.job.attrs', '$.job.owner', '$.job.executor',
            '$.job.submitted_at', '$.job.node_selector', '$.job.pinned', '$.job.two_stage',
            '$.job.cost', '$.job.not_before', '$.job.max_wait_s', '$.job.max_run_s',
            '$.job.idempotency_key', '$.job.after', '$.job.after_ok'))
    WHERE json_valid(data)
        AND json_extract(data, '$.type') = 'job'
        AND json_type(data, '$.job.id') = 'integer'
        AND json_extract(data, '$.job.id') IN (SELECT id FROM jobs);";

/// Appends the batch's events, and raises `event_seq` to the last one.
pub(super) fn write(tx: &Transaction<'_>, batch: &Batch) -> Result<(), rusqlite::Error> {
    let mut ev =
        tx.prepare_cached("INSERT INTO events (seq, at, data, job) VALUES (?1, ?2, ?3, ?4)")?;
    for e in &batch.events {
        ev.execute(params![
            e.seq as i64,
            e.at.0 as i64,
            e.data,
            e.job.map(|j| j as i64)
        ])?;
    }
    if let Some(last) = batch.events.last() {
        bump(tx, "event_seq", last.seq)?;
    }
    Ok(())
}

/// Events after `after`, oldest first, at most `limit`, whole.
pub(super) fn after(
    conn: &Connection,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let err = io("read events");
    let mut stmt = conn
        .prepare_cached(
            "SELECT e.seq, e.at, e.data, e.job, j.body FROM events e
             LEFT JOIN jobs j ON j.id = e.job
             WHERE e.seq > ?1 ORDER BY e.seq LIMIT ?2",
        )
        .map_err(&err)?;
    let mut rows = stmt
        .query(params![after.min(i64::MAX as u64) as i64, limit as i64])
        .map_err(&err)?;
    let mut x = Expander::default();
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(&err)? {
        let job = r.get::<_, Option<i64>>(3).map_err(&err)?.map(|j| j as u64);
        let body = r.get_ref(4).map_err(&err)?.as_str_or_null().ok().flatten();
        let data = x.expand(r.get(2).map_err(&err)?, job, body);
        out.push(StoredEvent {
            seq: r.get::<_, i64>(0).map_err(&err)? as u64,
            at: Timestamp(r.get::<_, i64>(1).map_err(&err)? as u64),
            data,
            job,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::event_row::tests::{assert_reads_back, old_rows};
    use crate::{SqliteStore, Store, SCHEMA_VERSION};
    use rusqlite::{params, Connection};

    #[test]
    fn a_version_8_store_is_migrated_and_reads_the_same_events_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let (jobs, events) = old_rows();
        {
            // As version 8 wrote them: every event whole, no `job` column.
            let conn = Connection::open(&path).unwrap();
            for sql in &super::super::MIGRATIONS[..8] {
                conn.execute_batch(sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 8).unwrap();
            for (j, live) in &jobs {
                conn.execute(
                    "INSERT INTO jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![j.id as i64, j.owner, j.kind, j.state.as_str(), j.node(),
                        j.idempotency_key, *live as i64, j.finished_at.map(|t| t.0 as i64),
                        serde_json::to_string(j).unwrap()],
                )
                .unwrap();
            }
            for (seq, at, data) in &events {
                conn.execute(
                    "INSERT INTO events (seq, at, data) VALUES (?1, ?2, ?3)",
                    params![*seq as i64, *at as i64, data],
                )
                .unwrap();
            }
        }
        let old_bytes: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT sum(length(data)) FROM events", [], |r| r.get(0))
            .unwrap();
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        assert_reads_back(&events, &s.events_after(0, 100).unwrap());
        let (refs, new_bytes): (i64, i64) = s
            .conn
            .query_row(
                "SELECT count(job), sum(length(data)) FROM events",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            refs as usize,
            events.len() - 2,
            "all but the orphan and the node event"
        );
        assert!(new_bytes * 2 < old_bytes, "{new_bytes} of {old_bytes}");
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        assert_reads_back(&events[3..], &s.events_after(3, 100).unwrap());
    }
}
