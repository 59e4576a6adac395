//! The audit log in SQLite (schema version 6).
//!
//! One row per audited request. `seq` is `AUTOINCREMENT`, so a sequence number is never
//! given twice, also once old rows are pruned (the `after` cursor of a reader stays
//! valid). `request` is unique: a second write of the same request (the loop answered it
//! twice, or the HTTP side corrects the final outcome) replaces the outcome, summary and
//! error and keeps `seq`, `at` and the principal. Rows are pruned by `at` under the
//! events' retention.

use super::io;
use crate::{AuditFilter, AuditRecord, StoreError};
use lockgate_api::{AuditOutcome, Role};
use lockgate_core::Timestamp;
use rusqlite::{params, Connection, Transaction};

/// Migration 5 -> 6.
pub(super) const MIGRATION: &str = "CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        request TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        principal TEXT,
        role TEXT,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        summary TEXT NOT NULL,
        outcome TEXT NOT NULL,
        error TEXT
    );
    CREATE INDEX audit_at ON audit(at);
    CREATE INDEX audit_principal ON audit(principal, seq);";

/// Writes the audit part of a batch (insert, or replace the outcome by `request`).
pub(super) fn write(tx: &Transaction<'_>, rows: &[AuditRecord]) -> Result<(), rusqlite::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut put = tx.prepare_cached(
        "INSERT INTO audit (request, at, principal, role, method, path, summary, outcome, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(request) DO UPDATE SET
            summary = excluded.summary, outcome = excluded.outcome, error = excluded.error",
    )?;
    for r in rows {
        put.execute(params![
            r.request,
            r.at.0 as i64,
            r.principal,
            r.role.map(Role::as_str),
            r.method,
            r.path,
            r.summary,
            r.outcome.as_str(),
            r.error,
        ])?;
    }
    Ok(())
}

/// The entries matching `f`, oldest first.
pub(super) fn query(conn: &Connection, f: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, request, at, principal, role, method, path, summary, outcome, error
             FROM audit WHERE seq > ?1 AND at >= ?2 AND (?3 IS NULL OR principal = ?3)
             ORDER BY seq LIMIT ?4",
        )
        .map_err(io("read audit"))?;
    let since = f.since.map_or(0, |t| t.0 as i64);
    let rows = stmt
        .query_map(
            params![
                f.after.min(i64::MAX as u64) as i64,
                since,
                f.principal,
                f.limit as i64
            ],
            |r| {
                let outcome: String = r.get(8)?;
                Ok((
                    AuditRecord {
                        seq: r.get::<_, i64>(0)? as u64,
                        request: r.get(1)?,
                        at: Timestamp(r.get::<_, i64>(2)? as u64),
                        principal: r.get(3)?,
                        role: r.get::<_, Option<String>>(4)?.and_then(|s| Role::parse(&s)),
                        method: r.get(5)?,
                        path: r.get(6)?,
                        summary: r.get(7)?,
                        outcome: AuditOutcome::Ok,
                        error: r.get(9)?,
                    },
                    outcome,
                ))
            },
        )
        .map_err(io("read audit"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io("read audit"))?;
    rows.into_iter()
        .map(|(mut rec, outcome)| {
            rec.outcome = AuditOutcome::parse(&outcome).ok_or_else(|| StoreError::Corrupt {
                what: "audit",
                message: format!("unknown outcome {outcome:?}"),
            })?;
            Ok(rec)
        })
        .collect()
}

/// Deletes the entries older than `cutoff`.
pub(super) fn prune(tx: &Transaction<'_>, cutoff: i64) -> Result<usize, rusqlite::Error> {
    tx.execute("DELETE FROM audit WHERE at < ?1", [cutoff])
}

#[cfg(test)]
mod tests {
    use crate::{AuditFilter, AuditRecord, Batch, SqliteStore, Store};
    use lockgate_api::{AuditOutcome, Role};
    use lockgate_core::Timestamp;

    fn rec(request: &str, at: u64, who: &str, outcome: AuditOutcome) -> AuditRecord {
        AuditRecord {
            seq: 0,
            request: request.into(),
            at: Timestamp(at),
            principal: Some(who.into()),
            role: Some(Role::Admin),
            method: "POST".into(),
            path: "/v1/tokens".into(),
            summary: "name=\"ci\"".into(),
            outcome,
            error: None,
        }
    }

    #[test]
    fn entries_are_replaced_by_request_survive_a_reopen_and_seq_never_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let all = AuditFilter {
            limit: 100,
            ..AuditFilter::default()
        };
        s.commit(&Batch {
            audit: vec![
                rec("a", 1_000, "root", AuditOutcome::Ok),
                rec("b", 2_000, "ci", AuditOutcome::Refused),
            ],
            ..Batch::default()
        })
        .unwrap();
        let mut again = rec("a", 9_000, "someone", AuditOutcome::Invalid);
        again.error = Some("not_found: no such job".into());
        s.commit(&Batch {
            audit: vec![again],
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let rows = s.audit(&all).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].seq, rows[0].at, rows[0].principal.as_deref()),
            (1, Timestamp(1_000), Some("root")),
            "a replacing write keeps seq, time and principal"
        );
        assert_eq!(rows[0].outcome, AuditOutcome::Invalid);
        assert_eq!(rows[0].error.as_deref(), Some("not_found: no such job"));
        let ci = AuditFilter {
            principal: Some("ci".into()),
            ..all.clone()
        };
        assert_eq!(s.audit(&ci).unwrap().len(), 1);
        let since = AuditFilter {
            since: Some(Timestamp(1_500)),
            ..all.clone()
        };
        assert_eq!(s.audit(&since).unwrap()[0].request, "b");
        assert_eq!(s.prune(Timestamp(5_000)).unwrap().audit, 2);
        s.commit(&Batch {
            audit: vec![rec("c", 10_000, "root", AuditOutcome::Ok)],
            ..Batch::default()
        })
        .unwrap();
        assert!(
            s.audit(&all).unwrap()[0].seq > 2,
            "pruned numbers are not reused"
        );
    }
}
