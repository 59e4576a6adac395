//! Item-block backup records in SQLite (schema version 3).
//!
//! One row per backup, keyed by name (names are unique for ever: a record is replaced as the
//! backup goes from `queued` to `running` to `finished`, never deleted by retention, since
//! it describes an archive that still exists). The record itself is the API's JSON; `state`
//! and `created_at` are columns for the restart (unfinished backups) and the listing order.

use crate::{BackupRecord, StoreError};
use lockgate_api::BackupState;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

/// Migration 2 -> 3.
pub(super) const MIGRATION: &str = "CREATE TABLE backups (
        name TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );";

/// Writes the backup part of a batch.
pub(super) fn write(tx: &Transaction<'_>, backups: &[BackupRecord]) -> Result<(), rusqlite::Error> {
    for b in backups {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO backups (name, state, created_at, body) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            b.name,
            b.state.as_str(),
            b.created_at.0 as i64,
            b.body
        ])?;
    }
    Ok(())
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BackupRecord> {
    Ok(BackupRecord {
        name: r.get(0)?,
        state: state(&r.get::<_, String>(1)?),
        created_at: lockgate_core::Timestamp(r.get::<_, i64>(2)? as u64),
        body: r.get(3)?,
    })
}

/// A stored state name. Only `finished` ends a backup for good; anything else is read as
/// `running`, so that a restart ends it (`Failed`) rather than leaving it hanging.
fn state(name: &str) -> BackupState {
    match name {
        "finished" => BackupState::Finished,
        "queued" => BackupState::Queued,
        _ => BackupState::Running,
    }
}

fn io(e: rusqlite::Error) -> StoreError {
    StoreError::Io {
        operation: "read backups",
        message: e.to_string(),
    }
}

/// One backup by name.
pub(super) fn get(conn: &Connection, name: &str) -> Result<Option<BackupRecord>, StoreError> {
    conn.prepare_cached("SELECT name, state, created_at, body FROM backups WHERE name = ?1")
        .map_err(io)?
        .query_row([name], row)
        .optional()
        .map_err(io)
}

/// Every backup, oldest first.
pub(super) fn all(conn: &Connection) -> Result<Vec<BackupRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, state, created_at, body FROM backups ORDER BY created_at, name",
        )
        .map_err(io)?;
    let rows = stmt
        .query_map([], row)
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io);
    rows
}
