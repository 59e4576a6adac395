//! The data dir's guards: one server per data dir, and no start from a store that is
//! behind what was acknowledged.
//!
//! # Invariants
//! - **One server per data dir.** [`DataDirLock::acquire`] takes an exclusive `flock` on
//!   `<data-dir>/lockgate.lock` (and writes the holder's pid into it) before the store is
//!   opened, and the lock lives as long as the [`crate::Server`]. `flock` locks belong to
//!   an open file description, and each acquire opens the file anew, so a second
//!   [`crate::Server::open`] refuses even inside the same process. The kernel drops the
//!   lock when the holder dies, so `kill -9` never leaves a stale lock; the pid in the
//!   file is only for the message.
//! - **Never behind what was acknowledged.** `<data-dir>/lockgate.watermark` holds the
//!   store's identity (a random id also kept inside the store), the last event sequence
//!   and the highest job id it has committed. [`check_store`] refuses a store whose
//!   identity differs (a replaced file), that has none while a watermark or an
//!   `admin.token` exists (deleted or emptied), or whose counters are below the
//!   watermark's (garbage in the WAL, an older copy put back).
//! - **The watermark is a lower bound, written off the commit path.** [`Watermarked`]
//!   records each commit's counters in memory; a thread writes them (temp file, fsync,
//!   rename) at most every [`WATERMARK_EVERY`], and [`Store::flush`] (clean shutdown)
//!   writes them at once. So the watermark is never ahead of the store, and after a clean
//!   stop it is exact; after a crash it may lag the last acknowledged commit by up to
//!   [`WATERMARK_EVERY`] plus one fsync. A store that lost more than that window is
//!   caught; a loss confined to the window is not (SQLite's `synchronous = FULL` already
//!   keeps that window; the watermark is for damage and replacement, not for fsync lies).
//!   Fsyncing a second file on every commit would halve the commit rate for a guarantee
//!   only a few milliseconds stronger.
//! - **`admin.token` is never overwritten**: [`write_admin_token`] creates it with a hard
//!   link (atomic, fails if the name exists); a stale one is moved aside first.

use crate::auth;
use lockgate_core::job::{Job, JobId};
use lockgate_core::Timestamp;
use lockgate_store::{
    AnyStore, BackupRecord, Batch, JobFilter, Loaded, Pruned, ScheduleRun, Store, StoreError,
    StoredEvent, TokenRecord,
};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub use lockgate_host::data_dir::DB_FILE;
/// The lock file's name in the data dir.
pub const LOCK_FILE: &str = "lockgate.lock";
/// The watermark file's name in the data dir.
pub const WATERMARK_FILE: &str = "lockgate.watermark";
/// The watermark is written at most this often while commits happen.
pub const WATERMARK_EVERY: Duration = Duration::from_millis(100);

/// Why the data dir cannot be served from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// Another process (or another server in this process) holds the data dir.
    #[error("data dir {data_dir} is in use by another lockgate server (pid {pid}); stop it first or use another --data-dir")]
    InUse {
        /// The data dir.
        data_dir: String,
        /// The holder's pid as it wrote it (`unknown` if it has not yet).
        pid: String,
    },
    /// The store is not the one, or not as far as, what this data dir acknowledged.
    #[error("data dir {data_dir}: {problem}; refusing to start, because serving from this store would lose acknowledged jobs and reissue their ids. Restore the store, or start with --start-fresh to accept it as it is (ids continue above the acknowledged ones)")]
    StoreBehind {
        /// The data dir.
        data_dir: String,
        /// What was found.
        problem: String,
    },
    /// A file of the data dir could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        message: String,
    },
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> GuardError {
    GuardError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The exclusive lock on a data dir; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Locks `<dir>/lockgate.lock` without waiting and writes our pid into it.
    ///
    /// # Errors
    /// [`GuardError::InUse`] naming the holder's pid; [`GuardError::Io`].
    pub fn acquire(dir: &Path) -> Result<DataDirLock, GuardError> {
        use rustix::fs::{flock, FlockOperation};
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if e != rustix::io::Errno::WOULDBLOCK {
                return Err(io_err(&path, e));
            }
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(GuardError::InUse {
                data_dir: dir.display().to_string(),
                pid: if pid.is_empty() { "unknown" } else { pid }.to_string(),
            });
        }
        file.set_len(0).map_err(|e| io_err(&path, e))?;
        file.rewind().map_err(|e| io_err(&path, e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io_err(&path, e))?;
        Ok(DataDirLock { _file: file })
    }
}

/// What `lockgate.watermark` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Watermark {
    /// The store's identity ([`AnyStore::identity`]).
    pub store_id: String,
    /// The last event sequence committed.
    pub event_seq: u64,
    /// The highest job id committed.
    pub max_job_id: JobId,
}

impl Watermark {
    fn covers(&self, other: &Watermark) -> bool {
        self.event_seq >= other.event_seq && self.max_job_id >= other.max_job_id
    }
}

pub(crate) fn write_watermark(path: &Path, mark: &Watermark) -> std::io::Result<()> {
    let tmp = path.with_extension("watermark.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(serde_json::to_string(mark).expect("serializes").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub(crate) fn read_watermark(path: &Path) -> Result<Option<Watermark>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{} is unreadable ({e})", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// What is wrong with the store, if anything, given the watermark (`Err`: unreadable).
fn problem(
    dir: &Path,
    mark: &Result<Option<Watermark>, String>,
    store_id: Option<&str>,
    loaded: &Loaded,
) -> Option<String> {
    let found = format!(
        "the store {} holds events up to {} and jobs up to {}",
        dir.join(DB_FILE).display(),
        loaded.last_event_seq,
        loaded.max_job_id
    );
    match mark {
        Err(e) => Some(e.clone()),
        Ok(Some(m)) if store_id.is_none() => Some(format!(
            "the store is empty or new (deleted or truncated?) but {WATERMARK_FILE} says events up to {} and jobs up to {} were acknowledged",
            m.event_seq, m.max_job_id
        )),
        Ok(Some(m)) if store_id != Some(m.store_id.as_str()) => Some(format!(
            "the store was replaced: its id {} is not {}, the id in {WATERMARK_FILE}",
            store_id.unwrap_or_default(),
            m.store_id
        )),
        Ok(Some(m)) if loaded.last_event_seq < m.event_seq || loaded.max_job_id < m.max_job_id => {
            Some(format!(
                "{found}, behind what was acknowledged ({WATERMARK_FILE}: events up to {}, jobs up to {}): damaged WAL or an older copy",
                m.event_seq, m.max_job_id
            ))
        }
        Ok(Some(_)) => None,
        Ok(None) if loaded.tokens.is_empty() && dir.join(lockgate_host::data_dir::ADMIN_TOKEN_FILE).exists() => Some(format!(
            "admin.token exists but the store holds no token: the store was deleted, emptied or replaced ({found})"
        )),
        Ok(None) => None,
    }
}

/// Checks the opened store against the data dir's watermark; on success (or with
/// `start_fresh`) claims the store's identity, raises its counters to the watermark's
/// (updating `loaded` to match), and writes the watermark. Returns it.
///
/// # Errors
/// [`GuardError::StoreBehind`] (see the module docs) unless `start_fresh`;
/// [`GuardError::Io`] when the store or the watermark cannot be written.
pub fn check_store(
    dir: &Path,
    store: &mut AnyStore,
    loaded: &mut Loaded,
    start_fresh: bool,
) -> Result<Watermark, GuardError> {
    let path = dir.join(WATERMARK_FILE);
    let db = dir.join(DB_FILE);
    let store_err = |e: StoreError| io_err(&db, e);
    let mark = read_watermark(&path);
    let store_id = store.identity().map_err(store_err)?;
    if let Some(problem) = problem(dir, &mark, store_id.as_deref(), loaded) {
        if !start_fresh {
            return Err(GuardError::StoreBehind {
                data_dir: dir.display().to_string(),
                problem,
            });
        }
        tracing::warn!("--start-fresh: {problem}; starting from the store as it is");
    }
    let old = mark.ok().flatten().unwrap_or_default();
    let store_id = store
        .claim_identity(&auth::new_token())
        .map_err(store_err)?;
    if old.event_seq > loaded.last_event_seq || old.max_job_id > loaded.max_job_id {
        store
            .raise_counters(old.max_job_id, old.event_seq)
            .map_err(store_err)?;
        loaded.max_job_id = loaded.max_job_id.max(old.max_job_id);
        loaded.last_event_seq = loaded.last_event_seq.max(old.event_seq);
    }
    let now = Watermark {
        store_id,
        event_seq: loaded.last_event_seq,
        max_job_id: loaded.max_job_id,
    };
    write_watermark(&path, &now).map_err(|e| io_err(&path, e))?;
    Ok(now)
}

/// Writes a new `admin.token` without ever overwriting one: an existing file (stale: the
/// store holds no admin token) is first renamed to `admin.token.replaced-<unix ms>`.
///
/// # Errors
/// The I/O error.
pub fn write_admin_token(path: &Path, token: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        let aside = path.with_extension(format!("token.replaced-{}", crate::event_loop::wall_ms()));
        std::fs::rename(path, &aside)?;
        tracing::warn!("moved the stale {} to {}", path.display(), aside.display());
    }
    let tmp = path.with_extension("token.tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    let linked = std::fs::hard_link(&tmp, path);
    std::fs::remove_file(&tmp)?;
    linked
}

#[derive(Debug, Default)]
struct MarkState {
    mark: Watermark,
    dirty: bool,
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    state: Mutex<MarkState>,
    wake: Condvar,
    /// Held while writing; holds what the file has (never written backwards).
    written: Mutex<Watermark>,
}

impl Shared {
    fn write(&self) {
        let mark = {
            let mut s = self.state.lock().expect("not poisoned");
            s.dirty = false;
            s.mark.clone()
        };
        let mut written = self.written.lock().expect("not poisoned");
        if written.covers(&mark) {
            return;
        }
        match write_watermark(&self.path, &mark) {
            Ok(()) => *written = mark,
            Err(e) => tracing::warn!("cannot write {}: {e}", self.path.display()),
        }
    }

    fn writer(&self) {
        loop {
            {
                let mut s = self.state.lock().expect("not poisoned");
                while !s.dirty && !s.closed {
                    s = self.wake.wait(s).expect("not poisoned");
                }
                if !s.dirty {
                    return;
                }
            }
            self.write();
            let s = self.state.lock().expect("not poisoned");
            let _ = self
                .wake
                .wait_timeout_while(s, WATERMARK_EVERY, |s| !s.closed)
                .expect("not poisoned");
        }
    }
}

/// A [`Store`] that keeps `lockgate.watermark` up to date with what it committed (see the
/// module docs for when it is written).
pub struct Watermarked<S> {
    inner: S,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<S: Store> Watermarked<S> {
    /// Wraps `inner`, starting from `mark` (what [`check_store`] wrote into `dir`).
    pub fn new(inner: S, dir: &Path, mark: Watermark) -> Watermarked<S> {
        let shared = Arc::new(Shared {
            path: dir.join(WATERMARK_FILE),
            state: Mutex::new(MarkState {
                mark: mark.clone(),
                ..MarkState::default()
            }),
            wake: Condvar::new(),
            written: Mutex::new(mark),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lockgate-watermark".into())
            .spawn(move || s.writer())
            .expect("spawn the watermark thread");
        Watermarked {
            inner,
            shared,
            thread: Some(thread),
        }
    }
}

impl<S> Drop for Watermarked<S> {
    fn drop(&mut self) {
        self.shared.state.lock().expect("not poisoned").closed = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<S: Store> Store for Watermarked<S> {
    fn load(&mut self) -> Result<Loaded, StoreError> {
        self.inner.load()
    }
    fn load_tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError> {
        self.inner.load_tokens()
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        self.inner.commit(batch)?;
        let seq = batch.events.iter().map(|e| e.seq).max().unwrap_or(0);
        let id = batch.jobs.iter().map(|(j, _)| j.id).max().unwrap_or(0);
        let mut s = self.shared.state.lock().expect("not poisoned");
        if seq > s.mark.event_seq || id > s.mark.max_job_id {
            s.mark.event_seq = s.mark.event_seq.max(seq);
            s.mark.max_job_id = s.mark.max_job_id.max(id);
            s.dirty = true;
            self.shared.wake.notify_all();
        }
        Ok(())
    }
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.inner.job(id)
    }
    fn job_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, StoreError> {
        self.inner.job_by_key(owner, key)
    }
    fn jobs(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        self.inner.jobs(filter)
    }
    fn events_after(&mut self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.events_after(after, limit)
    }
    fn schedule_runs(&mut self, name: &str, limit: usize) -> Result<Vec<ScheduleRun>, StoreError> {
        self.inner.schedule_runs(name, limit)
    }
    fn backup(&mut self, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        self.inner.backup(name)
    }
    fn backups(&mut self) -> Result<Vec<BackupRecord>, StoreError> {
        self.inner.backups()
    }
    fn restore(&mut self, name: &str) -> Result<Option<lockgate_store::RestoreRecord>, StoreError> {
        self.inner.restore(name)
    }
    fn restores(&mut self) -> Result<Vec<lockgate_store::RestoreRecord>, StoreError> {
        self.inner.restores()
    }
    fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned, StoreError> {
        self.inner.prune(cutoff)
    }
    fn audit(
        &mut self,
        filter: &lockgate_store::AuditFilter,
    ) -> Result<Vec<lockgate_store::AuditRecord>, StoreError> {
        self.inner.audit(filter)
    }
    fn job_log(
        &mut self,
        job: JobId,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<lockgate_store::StoredLogLine>, StoreError> {
        self.inner.job_log(job, after, limit, max_bytes)
    }
    fn job_log_tail(
        &mut self,
        job: JobId,
        n: usize,
    ) -> Result<Vec<lockgate_store::StoredLogLine>, StoreError> {
        self.inner.job_log_tail(job, n)
    }
    fn job_log_bytes(&mut self) -> Result<u64, StoreError> {
        self.inner.job_log_bytes()
    }
    /// Flushes the store, then writes the watermark at once (clean shutdown: exact).
    fn flush(&mut self) -> Result<(), StoreError> {
        self.inner.flush()?;
        self.shared.write();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_in_the_same_process_is_refused_naming_our_pid() {
        let dir = tempfile::tempdir().unwrap();
        let held = DataDirLock::acquire(dir.path()).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        assert_eq!(
            err,
            GuardError::InUse {
                data_dir: dir.path().display().to_string(),
                pid: std::process::id().to_string()
            }
        );
        drop(held);
        DataDirLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn the_watermark_is_written_after_commits_and_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = lockgate_store::StoreLocation::Sqlite(dir.path().join("lockgate.db"))
            .open()
            .unwrap();
        let mut loaded = store.load().unwrap();
        let mark = check_store(dir.path(), &mut store, &mut loaded, false).unwrap();
        let mut w = Watermarked::new(store, dir.path(), mark.clone());
        let batch = Batch {
            events: vec![StoredEvent {
                seq: 5,
                at: Timestamp(1),
                data: "{}".into(),
                job: None,
            }],
            ..Batch::default()
        };
        w.commit(&batch).unwrap();
        w.flush().unwrap();
        let on_disk = read_watermark(&dir.path().join(WATERMARK_FILE))
            .unwrap()
            .unwrap();
        assert_eq!(on_disk.event_seq, 5);
        assert_eq!(on_disk.store_id, mark.store_id);
        // An older mark is never written over a newer one.
        w.shared.state.lock().unwrap().mark.event_seq = 2;
        w.shared.write();
        let on_disk = read_watermark(&dir.path().join(WATERMARK_FILE))
            .unwrap()
            .unwrap();
        assert_eq!(on_disk.event_seq, 5);
    }
}
