//! Copies of the SQLite store taken while the server runs (`lockgate admin backup-db`), and
//! the check a copy passes before it is reported or restored (`lockgate admin restore-db`).
//!
//! # Invariants
//! - **A copy is one snapshot.** [`backup`] runs `VACUUM INTO` on a connection of its own:
//!   one read transaction, so the copy holds every commit made before it started and no
//!   part of a later one. Under WAL the server's commits go on meanwhile; the copy never
//!   blocks them.
//! - **Nothing half-made under the asked name.** The copy is written as `FILE.partial`
//!   beside `FILE`, checked with [`inspect`], and only then renamed to `FILE`; a failed or
//!   interrupted backup leaves no file that looks like a good copy. An existing `FILE` is
//!   never overwritten.
//! - **A copy stands alone.** It is switched to the rollback journal (`journal_mode =
//!   DELETE`) before it is checked, so it is one file, with no `-wal` beside it to lose.
//! - **[`inspect`] reads only.** It opens the file read-only: checking a file never
//!   migrates or changes it.

use super::{meta_number, meta_text, SCHEMA_VERSION};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};

/// What a checked copy holds: what `backup-db` and `restore-db` report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its schema version (`PRAGMA user_version`).
    pub schema_version: u32,
    /// The store's identity (`None`: no server used it yet).
    pub store_id: Option<String>,
    /// Jobs, live and finished.
    pub jobs: u64,
    /// Jobs that had not ended (the queue and what runs).
    pub live_jobs: u64,
    /// The highest job id the store committed.
    pub max_job_id: u64,
    /// Event rows kept.
    pub events: u64,
    /// The last event sequence the store committed.
    pub event_seq: u64,
    /// API tokens.
    pub tokens: u64,
    /// Periodic schedules.
    pub schedules: u64,
}

/// Why a copy could not be made or is not one to restore.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The destination exists; a copy never overwrites a file.
    #[error("{0} exists; a copy never overwrites a file: remove it or name another")]
    Exists(PathBuf),
    /// The file is not a lockgate store (not SQLite, or without lockgate's tables).
    #[error("{path} is not a lockgate store: {why}")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// A newer lockgate wrote the file.
    #[error("{path} has schema version {found}; this lockgate knows up to {known}: restore it with the lockgate that wrote it, or a newer one")]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// Ours.
        known: u32,
    },
    /// SQLite's integrity check found damage.
    #[error("{path} is damaged (SQLite's integrity check: {report})")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The check's first lines.
        report: String,
    },
    /// SQLite or the file system failed.
    #[error("{operation} {path}: {message}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        message: String,
    },
}

fn io_err<'a>(
    operation: &'static str,
    path: &'a Path,
) -> impl Fn(rusqlite::Error) -> CopyError + 'a {
    move |e| CopyError::Io {
        operation,
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// `path` with `suffix` appended to its file name (`lockgate.db` + `-wal`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Copies the store `source` (in use by a server or not) into `dest`, checks the copy and
/// returns what it holds. See the module docs.
///
/// # Errors
/// [`CopyError::Exists`] when `dest` (or a `dest.partial` left by another backup) exists;
/// [`CopyError::NotAStore`] when `source` is not a lockgate store; the check's errors
/// ([`inspect`]); [`CopyError::Io`].
pub fn backup(source: &Path, dest: &Path) -> Result<Summary, CopyError> {
    if dest.exists() {
        return Err(CopyError::Exists(dest.to_path_buf()));
    }
    let partial = sibling(dest, ".partial");
    if partial.exists() {
        return Err(CopyError::Exists(partial));
    }
    if !source.exists() {
        return Err(CopyError::NotAStore {
            path: source.to_path_buf(),
            why: "no such file (is --data-dir the server's?)".into(),
        });
    }
    // Read-only: the copy can never create, migrate or write the server's file.
    let conn = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(io_err("open", source))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(io_err("open", source))?;
    check_is_store(&conn, source)?;
    let target = partial.to_str().ok_or_else(|| CopyError::Io {
        operation: "name",
        path: partial.clone(),
        message: "the path is not UTF-8".into(),
    })?;
    let made = conn
        .execute("VACUUM INTO ?1", [target])
        .map_err(io_err("copy into", &partial));
    drop(conn);
    let checked = made.and_then(|_| {
        stand_alone(&partial)?;
        inspect(&partial)
    });
    let summary = match checked {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    // A hard link fails if `dest` appeared meanwhile; a rename would replace it.
    std::fs::hard_link(&partial, dest).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            CopyError::Exists(dest.to_path_buf())
        } else {
            CopyError::Io {
                operation: "name the copy",
                path: dest.to_path_buf(),
                message: e.to_string(),
            }
        }
    })?;
    let _ = std::fs::remove_file(&partial);
    sync_parent(dest);
    Ok(Summary {
        path: dest.to_path_buf(),
        ..summary
    })
}

/// Switches a copy to the rollback journal and syncs it, so that it is one file.
///
/// # Errors
/// [`CopyError::Io`].
pub fn stand_alone(path: &Path) -> Result<(), CopyError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(io_err("open", path))?;
    let _: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .map_err(io_err("set the journal mode of", path))?;
    drop(conn);
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| CopyError::Io {
            operation: "sync",
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Syncs the directory `file` is in, so that a rename or link there is on disk.
pub fn sync_parent(file: &Path) {
    if let Some(dir) = file.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// The tables every lockgate store has, whatever its version.
const CORE_TABLES: [&str; 4] = ["jobs", "events", "tokens", "meta"];

fn check_is_store(conn: &Connection, path: &Path) -> Result<u32, CopyError> {
    let not_store = |why: String| CopyError::NotAStore {
        path: path.to_path_buf(),
        why,
    };
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| not_store(format!("SQLite cannot read it ({e})")))?;
    if version > SCHEMA_VERSION {
        return Err(CopyError::TooNew {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    for table in CORE_TABLES {
        let found: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not_store(format!("SQLite cannot read it ({e})")))?;
        if found.is_none() {
            return Err(not_store(format!(
                "it has no `{table}` table (schema version {version})"
            )));
        }
    }
    if version == 0 {
        return Err(not_store("its schema version is 0".into()));
    }
    Ok(version)
}

/// Opens `path` read-only, checks that it is an intact lockgate store this build can
/// open (a version it knows, SQLite's integrity check passing), and counts what it holds.
///
/// # Errors
/// [`CopyError::NotAStore`], [`CopyError::TooNew`], [`CopyError::Damaged`],
/// [`CopyError::Io`].
pub fn inspect(path: &Path) -> Result<Summary, CopyError> {
    let (conn, bytes) = open_read_only(path)?;
    let schema_version = check_is_store(&conn, path)?;
    check_integrity(&conn, path)?;
    count(&conn, path, bytes, schema_version)
}

/// What the store at `path` holds, without SQLite's integrity check: for a file
/// [`inspect`] has passed and lockgate itself wrote since.
///
/// # Errors
/// As [`inspect`], but never [`CopyError::Damaged`].
pub fn summarize(path: &Path) -> Result<Summary, CopyError> {
    let (conn, bytes) = open_read_only(path)?;
    let schema_version = check_is_store(&conn, path)?;
    count(&conn, path, bytes, schema_version)
}

fn open_read_only(path: &Path) -> Result<(Connection, u64), CopyError> {
    let meta = std::fs::metadata(path).map_err(|e| CopyError::NotAStore {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    if !meta.is_file() {
        return Err(CopyError::NotAStore {
            path: path.to_path_buf(),
            why: "not a regular file".into(),
        });
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(io_err("open", path))?;
    Ok((conn, meta.len()))
}

fn check_integrity(conn: &Connection, path: &Path) -> Result<(), CopyError> {
    let damaged = |e: rusqlite::Error| CopyError::Damaged {
        path: path.to_path_buf(),
        report: e.to_string(),
    };
    let mut report = Vec::new();
    let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(damaged)?;
    let mut rows = stmt.query([]).map_err(damaged)?;
    while let Some(row) = rows.next().map_err(damaged)? {
        let line: String = row.get(0).map_err(damaged)?;
        if report.len() < 5 {
            report.push(line);
        }
    }
    if report != ["ok"] {
        return Err(CopyError::Damaged {
            path: path.to_path_buf(),
            report: report.join("; "),
        });
    }
    Ok(())
}

fn count(
    conn: &Connection,
    path: &Path,
    bytes: u64,
    schema_version: u32,
) -> Result<Summary, CopyError> {
    let count = |sql: &str| -> Result<u64, CopyError> {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(io_err("count", path))
    };
    let number = |key: &str| meta_number(conn, key).map_err(io_err("read", path));
    let schedules = if schema_version >= 2 {
        count("SELECT count(*) FROM schedules")?
    } else {
        0
    };
    let event_seq = number("event_seq")?.max(count("SELECT coalesce(max(seq), 0) FROM events")?);
    let max_job_id = number("max_job_id")?.max(count("SELECT coalesce(max(id), 0) FROM jobs")?);
    Ok(Summary {
        path: path.to_path_buf(),
        bytes,
        schema_version,
        store_id: meta_text(conn, "store_id").map_err(io_err("read", path))?,
        jobs: count("SELECT count(*) FROM jobs")?,
        live_jobs: count("SELECT count(*) FROM jobs WHERE live = 1")?,
        max_job_id,
        events: count("SELECT count(*) FROM events")?,
        event_seq,
        tokens: count("SELECT count(*) FROM tokens")?,
        schedules,
    })
}
