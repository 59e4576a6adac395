//! `lockgate admin restore-db`: a copy of the SQLite store put back into a stopped
//! server's data dir.
//!
//! # Invariants
//! - **Only into a stopped server's data dir.** The data dir's lock
//!   ([`DataDirLock`]) is taken first and held to the end: a running server makes the
//!   restore refuse, and no server starts halfway through it.
//! - **The copy is checked before anything is touched** (not a lockgate store, from a
//!   newer schema, damaged: refused, and the data dir is as it was); what is counted at
//!   the end is the file lockgate itself wrote from it, so it is not checked twice.
//! - **Nothing is deleted.** The store it replaces (with its `-wal` and `-shm`) is moved
//!   aside to `lockgate.db.before-restore-<unix ms>`, never removed; the admin removes it
//!   once the restored server is trusted.
//! - **Ids are never reissued.** The restored store's counters are raised to the data
//!   dir's watermark, as `--start-fresh` does: jobs and events acknowledged after the copy
//!   was taken are gone with the replaced store, but their ids and sequence numbers are not
//!   given again. The watermark is then rewritten for the restored store, so the server
//!   starts from it without `--start-fresh`.

use crate::datadir::{self, DataDirLock, GuardError, Watermark, DB_FILE};
use lockgate_store::copy::{self, sibling, CopyError, Summary};
use lockgate_store::SqliteStore;
use std::path::{Path, PathBuf};

/// What a restore did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Restored {
    /// What the restored store holds (after its upgrade to this build's schema).
    pub summary: Summary,
    /// Where the replaced store was moved (`None`: the data dir had none).
    pub moved_aside: Option<PathBuf>,
    /// The data dir's watermark as rewritten.
    pub watermark: Watermark,
}

/// Why a restore refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The data dir is in use, or its files cannot be handled.
    #[error(transparent)]
    DataDir(#[from] GuardError),
    /// The copy is not one to restore.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// The restored store could not be opened or written.
    #[error("{path}: {message}")]
    Store {
        /// The file.
        path: PathBuf,
        /// Cause.
        message: String,
    },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> RestoreError + '_ {
    move |e| {
        RestoreError::DataDir(GuardError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

/// Restores the copy `from` into the data dir `dir` (created if missing). See the module
/// docs.
///
/// # Errors
/// [`GuardError::InUse`] while a server runs on `dir`; the copy's refusals
/// ([`copy::inspect`]); I/O errors naming the file.
pub fn restore(dir: &Path, from: &Path) -> Result<Restored, RestoreError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let _lock = DataDirLock::acquire(dir)?;
    copy::inspect(from)?;
    let db = dir.join(DB_FILE);
    let incoming = dir.join(format!("{DB_FILE}.restoring"));
    let _ = std::fs::remove_file(&incoming);
    std::fs::copy(from, &incoming).map_err(io_err(&incoming))?;
    if let Err(e) = copy::stand_alone(&incoming) {
        let _ = std::fs::remove_file(&incoming);
        return Err(e.into());
    }
    let old_mark = datadir::read_watermark(&dir.join(datadir::WATERMARK_FILE))
        .ok()
        .flatten()
        .unwrap_or_default();
    let moved_aside = move_aside(&db)?;
    std::fs::rename(&incoming, &db).map_err(io_err(&db))?;
    copy::sync_parent(&db);
    let store_err = |e: lockgate_store::StoreError| RestoreError::Store {
        path: db.clone(),
        message: e.to_string(),
    };
    let mut store = SqliteStore::open(&db).map_err(store_err)?;
    let store_id = store
        .claim_identity(&crate::auth::new_token())
        .map_err(store_err)?;
    store
        .raise_counters(old_mark.max_job_id, old_mark.event_seq)
        .map_err(store_err)?;
    drop(store);
    let summary = copy::summarize(&db)?;
    let watermark = Watermark {
        store_id,
        event_seq: summary.event_seq,
        max_job_id: summary.max_job_id,
    };
    let mark_path = dir.join(datadir::WATERMARK_FILE);
    datadir::write_watermark(&mark_path, &watermark).map_err(io_err(&mark_path))?;
    Ok(Restored {
        summary,
        moved_aside,
        watermark,
    })
}

/// Moves `db` with its `-wal` and `-shm` aside under one new name; `None` when there is
/// none of them. The store is first switched to the rollback journal where it can be, so
/// its WAL is folded into it; where it cannot (damaged), the three files move together.
/// Nothing is deleted: a `-wal` left beside the restored file would be replayed into it.
fn move_aside(db: &Path) -> Result<Option<PathBuf>, RestoreError> {
    let parts = ["", "-wal", "-shm"];
    if !parts.iter().any(|p| sibling(db, p).exists()) {
        return Ok(None);
    }
    if db.exists() {
        if let Err(e) = copy::stand_alone(db) {
            tracing::warn!("the replaced store keeps its WAL beside it: {e}");
        }
    }
    let aside = sibling(
        db,
        &format!(".before-restore-{}", crate::event_loop::wall_ms()),
    );
    for part in parts {
        let from = sibling(db, part);
        if from.exists() {
            std::fs::rename(&from, sibling(&aside, part)).map_err(io_err(&from))?;
        }
    }
    Ok(Some(aside))
}
