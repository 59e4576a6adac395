//! Schedules and their run history in SQLite (schema version 2).
//!
//! `schedules` holds one row per schedule (its durable state); `schedule_runs` one row per
//! planned time, keyed by `(schedule, planned)` so recording a time twice replaces it.
//! Removing a schedule deletes its history; retention deletes runs decided before the
//! cutoff (the schedule's `last_planned` is kept, so nothing is planned twice).

use crate::{ScheduleRecord, ScheduleRun, ScheduleSource, StoreError};
use rusqlite::{params, Connection, Transaction};

/// Migration 1 -> 2.
pub(super) const MIGRATION: &str = "CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        spec TEXT,
        last_planned INTEGER NOT NULL,
        last_job INTEGER,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE schedule_runs (
        schedule TEXT NOT NULL,
        planned INTEGER NOT NULL,
        job INTEGER,
        note TEXT,
        at INTEGER NOT NULL,
        PRIMARY KEY (schedule, planned)
    );
    CREATE INDEX schedule_runs_at ON schedule_runs(at);";

/// Writes the schedule part of a batch.
pub(super) fn write(
    tx: &Transaction<'_>,
    schedules: &[ScheduleRecord],
    removed: &[String],
    runs: &[ScheduleRun],
) -> Result<(), rusqlite::Error> {
    for name in removed {
        tx.prepare_cached("DELETE FROM schedules WHERE name = ?1")?
            .execute([name])?;
        tx.prepare_cached("DELETE FROM schedule_runs WHERE schedule = ?1")?
            .execute([name])?;
    }
    for s in schedules {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO schedules (name, source, spec, last_planned, last_job, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            s.name,
            s.source.as_str(),
            s.spec,
            s.last_planned.0 as i64,
            s.last_job.map(|j| j as i64),
            s.created_at.0 as i64
        ])?;
    }
    for r in runs {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO schedule_runs (schedule, planned, job, note, at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            r.schedule,
            r.planned.0 as i64,
            r.job.map(|j| j as i64),
            r.note,
            r.at.0 as i64
        ])?;
    }
    Ok(())
}

/// Every schedule's state, by name.
pub(super) fn load(conn: &Connection) -> Result<Vec<ScheduleRecord>, StoreError> {
    let err = super::io("read schedules");
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, source, spec, last_planned, last_job, created_at FROM schedules ORDER BY name",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ScheduleRecord {
                name: r.get(0)?,
                // Anything but `api` was written as `policy` (the only other value).
                source: match r.get::<_, String>(1)?.as_str() {
                    "api" => ScheduleSource::Api,
                    _ => ScheduleSource::Policy,
                },
                spec: r.get(2)?,
                last_planned: lockgate_core::Timestamp(r.get::<_, i64>(3)? as u64),
                last_job: r.get::<_, Option<i64>>(4)?.map(|j| j as u64),
                created_at: lockgate_core::Timestamp(r.get::<_, i64>(5)? as u64),
            })
        })
        .map_err(&err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&err);
    rows
}

/// A schedule's latest runs, newest first.
pub(super) fn runs(
    conn: &Connection,
    name: &str,
    limit: usize,
) -> Result<Vec<ScheduleRun>, StoreError> {
    let err = super::io("read schedule runs");
    let mut stmt = conn
        .prepare_cached(
            "SELECT schedule, planned, job, note, at FROM schedule_runs
             WHERE schedule = ?1 ORDER BY planned DESC LIMIT ?2",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map(params![name, limit as i64], |r| {
            Ok(ScheduleRun {
                schedule: r.get(0)?,
                planned: lockgate_core::Timestamp(r.get::<_, i64>(1)? as u64),
                job: r.get::<_, Option<i64>>(2)?.map(|j| j as u64),
                note: r.get(3)?,
                at: lockgate_core::Timestamp(r.get::<_, i64>(4)? as u64),
            })
        })
        .map_err(&err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&err);
    rows
}

/// Deletes runs decided before `cutoff`.
pub(super) fn prune(tx: &Transaction<'_>, cutoff: i64) -> Result<usize, rusqlite::Error> {
    tx.execute("DELETE FROM schedule_runs WHERE at < ?1", [cutoff])
}
