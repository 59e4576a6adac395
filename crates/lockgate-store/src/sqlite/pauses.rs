//! Pauses in SQLite (schema version 4).
//!
//! One row per active pause, keyed by id, holding the engine's [`Pause`] as JSON; a resumed
//! or ended pause is deleted (its events stay in the log). `meta.max_pause_id` keeps the
//! highest id ever stored, so a pause id never repeats after a restart even once its row is
//! gone.

use super::{decode, io};
use crate::StoreError;
use lockgate_core::engine::Pause;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

/// Migration 3 -> 4.
pub(super) const MIGRATION: &str =
    "CREATE TABLE pauses (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";

/// Writes the pause part of a batch: new pauses, then ended ones.
pub(super) fn write(
    tx: &Transaction<'_>,
    pauses: &[Pause],
    removed: &[u64],
) -> Result<(), rusqlite::Error> {
    let mut max = 0;
    for p in pauses {
        let body = serde_json::to_string(p).expect("pauses serialize");
        tx.prepare_cached("INSERT OR REPLACE INTO pauses (id, body) VALUES (?1, ?2)")?
            .execute(params![p.id as i64, body])?;
        max = max.max(p.id);
    }
    for id in removed {
        tx.prepare_cached("DELETE FROM pauses WHERE id = ?1")?
            .execute([*id as i64])?;
    }
    if max > 0 {
        super::bump(tx, "max_pause_id", max)?;
    }
    Ok(())
}

/// Every stored pause by id, and the highest pause id ever stored.
pub(super) fn load(conn: &Connection) -> Result<(Vec<Pause>, u64), StoreError> {
    let mut stmt = conn
        .prepare("SELECT body FROM pauses ORDER BY id")
        .map_err(io("read pauses"))?;
    let pauses = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(io("read pauses"))?
        .collect::<Result<Vec<String>, _>>()
        .map_err(io("read pauses"))?
        .iter()
        .map(|b| decode("pause", b))
        .collect::<Result<Vec<Pause>, _>>()?;
    let max: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'max_pause_id'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(io("read meta"))?;
    let max = max.and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok((pauses, max))
}

#[cfg(test)]
mod tests {
    use crate::{Batch, SqliteStore, Store};
    use lockgate_core::engine::Pause;
    use lockgate_core::Timestamp;

    #[test]
    fn pauses_survive_a_reopen_and_their_ids_never_repeat_a_version_3_store_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A version-3 database (as the previous release wrote it).
            let mut conn = rusqlite::Connection::open(&path).unwrap();
            for sql in &super::super::MIGRATIONS[..3] {
                let tx = conn.transaction().unwrap();
                tx.execute_batch(sql).unwrap();
                tx.commit().unwrap();
            }
            conn.pragma_update(None, "user_version", 3).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let p = |id| Pause {
            id,
            selector: Some("repo=main".into()),
            reason: "fsck".into(),
            by: "admin".into(),
            created_at: Timestamp(1_000),
            until: Some(Timestamp(9_000)),
        };
        s.commit(&Batch {
            pauses: vec![p(1), p(2)],
            ..Batch::default()
        })
        .unwrap();
        s.commit(&Batch {
            removed_pauses: vec![2],
            ..Batch::default()
        })
        .unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let loaded = s.load().unwrap();
        assert_eq!(loaded.pauses, vec![p(1)]);
        assert_eq!(loaded.max_pause_id, 2, "the ended pause's id is kept");
    }
}
