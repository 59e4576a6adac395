//! RPO values in SQLite (schema version 5).
//!
//! One row per value of an `[[rpo]]` rule, keyed by the rule's name and the value (a JSON
//! array of `[key, value]` pairs in `per` order, the same text for the same value every
//! time). A row is written in the batch that commits the job event it reflects, so a
//! restart restores exactly the acknowledged ages; it is deleted only when the value is
//! retired, never by retention (an old last success is what the rule is about).

use super::{decode, io};
use crate::{RpoRecord, StoreError};
use lockgate_core::job::JobState;
use lockgate_core::Timestamp;
use rusqlite::{params, Connection, Transaction};

/// Migration 4 -> 5.
pub(super) const MIGRATION: &str = "CREATE TABLE rpo_values (
    rule TEXT NOT NULL,
    value TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    last_job INTEGER,
    last_state TEXT,
    last_success INTEGER,
    last_success_job INTEGER,
    alerting INTEGER NOT NULL,
    PRIMARY KEY (rule, value)
);";

fn value_text(value: &[(String, String)]) -> String {
    serde_json::to_string(value).expect("pairs serialize")
}

/// Writes the RPO part of a batch: changed values, then retired ones.
pub(super) fn write(
    tx: &Transaction<'_>,
    values: &[RpoRecord],
    removed: &[(String, Vec<(String, String)>)],
) -> Result<(), rusqlite::Error> {
    for r in values {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO rpo_values (rule, value, first_seen, last_seen, last_job,
             last_state, last_success, last_success_job, alerting)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            r.rule,
            value_text(&r.value),
            r.first_seen.0 as i64,
            r.last_seen.0 as i64,
            r.last_job.map(|(id, _)| id as i64),
            r.last_job.map(|(_, s)| s.as_str()),
            r.last_success.map(|(t, _)| t.0 as i64),
            r.last_success.map(|(_, id)| id as i64),
            r.alerting as i64,
        ])?;
    }
    for (rule, value) in removed {
        tx.prepare_cached("DELETE FROM rpo_values WHERE rule = ?1 AND value = ?2")?
            .execute(params![rule, value_text(value)])?;
    }
    Ok(())
}

type Row = (
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
);

/// Every stored value, by rule and value.
pub(super) fn load(conn: &Connection) -> Result<Vec<RpoRecord>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT rule, value, first_seen, last_seen, last_job, last_state, last_success,
             last_success_job, alerting FROM rpo_values ORDER BY rule, value",
        )
        .map_err(io("read rpo values"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .map_err(io("read rpo values"))?
        .collect::<Result<Vec<Row>, _>>()
        .map_err(io("read rpo values"))?;
    rows.into_iter().map(record).collect()
}

fn record(row: Row) -> Result<RpoRecord, StoreError> {
    let (rule, value, first, last, job, state, success, success_job, alerting) = row;
    let last_job = match (job, state) {
        (Some(id), Some(s)) => Some((
            id as u64,
            JobState::parse(&s).ok_or_else(|| StoreError::Corrupt {
                what: "rpo value",
                message: format!("unknown job state {s:?}"),
            })?,
        )),
        _ => None,
    };
    Ok(RpoRecord {
        rule,
        value: decode("rpo value", &value)?,
        first_seen: Timestamp(first as u64),
        last_seen: Timestamp(last as u64),
        last_job,
        last_success: success.map(|t| (Timestamp(t as u64), success_job.unwrap_or(0) as u64)),
        alerting: alerting != 0,
    })
}

#[cfg(test)]
mod tests {
    use crate::{Batch, RpoRecord, SqliteStore, Store};
    use lockgate_core::job::JobState;
    use lockgate_core::Timestamp;

    #[test]
    fn rpo_values_survive_a_reopen_a_retired_one_is_gone_a_version_4_store_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A version-4 database (as the previous release wrote it).
            let mut conn = rusqlite::Connection::open(&path).unwrap();
            for sql in &super::super::MIGRATIONS[..4] {
                let tx = conn.transaction().unwrap();
                tx.execute_batch(sql).unwrap();
                tx.commit().unwrap();
            }
            conn.pragma_update(None, "user_version", 4).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let rec = |group: &str, success: Option<u64>| RpoRecord {
            rule: "vms".into(),
            value: vec![("group".into(), group.into())],
            first_seen: Timestamp(1_000),
            last_seen: Timestamp(5_000),
            last_job: Some((7, JobState::Failed)),
            last_success: success.map(|t| (Timestamp(t), 6)),
            alerting: success.is_none(),
        };
        s.commit(&Batch {
            rpo: vec![rec("vm/100", Some(4_000)), rec("vm/101", None)],
            ..Batch::default()
        })
        .unwrap();
        s.commit(&Batch {
            rpo: vec![rec("vm/100", Some(4_500))],
            removed_rpo: vec![("vms".into(), vec![("group".into(), "vm/101".into())])],
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.load().unwrap().rpo, vec![rec("vm/100", Some(4_500))]);
    }
}
