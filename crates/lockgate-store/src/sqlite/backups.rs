//! Item-block backup records in SQLite (schema version 3), and restore records in a table
//! of the same shape (schema version 10).
//!
//! One row per backup (per restore), keyed by name (names are unique for ever: a record is
//! replaced as the backup goes from `queued` to `running` to `finished`, never deleted by
//! retention, since it describes an archive, or a restore's files, that still exist). The
//! record itself is the API's JSON; `state` and `created_at` are columns for the restart
//! (unfinished ones) and the listing order.

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

/// Migration 9 -> 10.
pub(super) const RESTORES_MIGRATION: &str = "CREATE TABLE restores (
        name TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );";

/// The tables of records: backups' and restores'.
#[derive(Debug, Clone, Copy)]
pub(super) enum Table {
    Backups,
    Restores,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Backups => "backups",
            Table::Restores => "restores",
        }
    }
}

/// Writes the backup (or restore) part of a batch.
pub(super) fn write(
    tx: &Transaction<'_>,
    table: Table,
    records: &[BackupRecord],
) -> Result<(), rusqlite::Error> {
    for b in records {
        tx.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {} (name, state, created_at, body) VALUES (?1, ?2, ?3, ?4)",
            table.name()
        ))?
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

fn io(table: Table) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Io {
        operation: match table {
            Table::Backups => "read backups",
            Table::Restores => "read restores",
        },
        message: e.to_string(),
    }
}

/// One backup (restore) by name.
pub(super) fn get(
    conn: &Connection,
    table: Table,
    name: &str,
) -> Result<Option<BackupRecord>, StoreError> {
    let io = io(table);
    conn.prepare_cached(&format!(
        "SELECT name, state, created_at, body FROM {} WHERE name = ?1",
        table.name()
    ))
    .map_err(&io)?
    .query_row([name], row)
    .optional()
    .map_err(io)
}

/// Every backup (restore), oldest first.
pub(super) fn all(conn: &Connection, table: Table) -> Result<Vec<BackupRecord>, StoreError> {
    let io = io(table);
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT name, state, created_at, body FROM {} ORDER BY created_at, name",
            table.name()
        ))
        .map_err(&io)?;
    let rows = stmt
        .query_map([], row)
        .map_err(&io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io);
    rows
}
