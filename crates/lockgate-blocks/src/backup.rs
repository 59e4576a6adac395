//! One running backup: its configuration, its shared state and the handle its caller holds.
//!
//! Invariants:
//! - every block is *accounted* exactly once: run by a worker, or skipped (canceled before
//!   it started); the thread whose accounting reaches the block count sends `Finish` to the
//!   archive writer, after every entry and pending upload of every block (each block's
//!   worker sends those before accounting it);
//! - the state holds one status byte per item, times per block, and the hooks, uploads and
//!   reasons of the run: item contents never live here.

use crate::archive::WriterMsg;
use crate::confine::RefusedItem;
use crate::hooks::DEFAULT_EXEC_TEMPLATE;
use crate::mover::{DataMover, ItemAction};
use crate::plan::Plan;
use crate::pool::Ctrl;
use crate::result::{BackupResult, HookResult, ItemStatus, Progress, UploadResult};
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// A progress callback; called from pool threads after every block and once at the end.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// How to run one backup.
#[derive(Clone)]
pub struct BackupConfig {
    /// Backup name (recorded in the result and passed to the data mover).
    pub name: String,
    /// Where the tar.gz goes (`<data-dir>/backups/<name>.tar.gz`); written as
    /// `<path>.partial` and renamed when complete.
    pub archive_path: PathBuf,
    /// Hook exec template as an argv (default [`DEFAULT_EXEC_TEMPLATE`]).
    pub exec_template: Vec<String>,
    /// Node selector of data-upload jobs (default `""`: any node).
    pub data_upload_selector: String,
    /// Moves volume data.
    pub data_mover: Arc<dyn DataMover>,
    /// Called for every item before it is written (default none).
    pub item_action: Option<Arc<dyn ItemAction>>,
    /// Progress callback (default none); [`BackupHandle::progress`] polls instead.
    pub progress: Option<ProgressFn>,
}

impl BackupConfig {
    /// A configuration with the defaults above.
    pub fn new(
        name: impl Into<String>,
        archive_path: impl Into<PathBuf>,
        data_mover: Arc<dyn DataMover>,
    ) -> Self {
        BackupConfig {
            name: name.into(),
            archive_path: archive_path.into(),
            exec_template: DEFAULT_EXEC_TEMPLATE
                .iter()
                .map(|s| s.to_string())
                .collect(),
            data_upload_selector: String::new(),
            data_mover,
            item_action: None,
            progress: None,
        }
    }
}

impl std::fmt::Debug for BackupConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupConfig")
            .field("name", &self.name)
            .field("archive_path", &self.archive_path)
            .field("exec_template", &self.exec_template)
            .field("data_upload_selector", &self.data_upload_selector)
            .finish_non_exhaustive()
    }
}

/// Why a backup could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The archive file cannot be created.
    #[error("cannot create archive {path}: {message}")]
    Archive {
        /// The `.partial` path.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
    /// The exec template is empty or has no `{command}`.
    #[error("invalid exec template {template:?}: expected an argv with a {{command}} element")]
    Template {
        /// The template given.
        template: Vec<String>,
    },
    /// The pool has shut down.
    #[error("the worker pool has shut down")]
    PoolStopped,
}

/// Mutable record of a run.
pub(crate) struct RunState {
    pub items: Vec<ItemStatus>,
    /// Error and note per item, only for items that have one.
    pub messages: BTreeMap<u32, (Option<String>, Option<String>)>,
    pub block_times: Vec<(Option<SystemTime>, Option<SystemTime>)>,
    pub hooks: Vec<HookResult>,
    pub uploads: Vec<UploadResult>,
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
    /// Pods found at run time with hooks that were not run (beyond the plan's list).
    pub refused: Vec<RefusedItem>,
    pub fatal: Option<String>,
}

/// A backup shared by the dispatcher, the workers, the writer and the handle.
pub(crate) struct Backup {
    pub id: u64,
    pub plan: Plan,
    pub config: BackupConfig,
    pub started: SystemTime,
    pub canceled: AtomicBool,
    accounted: AtomicUsize,
    pub blocks_done: AtomicUsize,
    pub items_done: AtomicUsize,
    state: Mutex<RunState>,
    pub writer: Sender<WriterMsg>,
    /// The result once computed, and whether `wait` may return it (after the final
    /// progress callback).
    result: Mutex<(Option<BackupResult>, bool)>,
    result_ready: Condvar,
}

impl Backup {
    pub fn new(id: u64, plan: Plan, config: BackupConfig, writer: Sender<WriterMsg>) -> Backup {
        let state = RunState {
            items: vec![ItemStatus::Pending; plan.item_count()],
            messages: BTreeMap::new(),
            block_times: vec![(None, None); plan.block_count()],
            hooks: Vec::new(),
            uploads: Vec::new(),
            reasons: Vec::new(),
            warnings: plan.warnings().to_vec(),
            refused: Vec::new(),
            fatal: None,
        };
        Backup {
            id,
            plan,
            config,
            started: SystemTime::now(),
            canceled: AtomicBool::new(false),
            accounted: AtomicUsize::new(0),
            blocks_done: AtomicUsize::new(0),
            items_done: AtomicUsize::new(0),
            state: Mutex::new(state),
            writer,
            result: Mutex::new((None, false)),
            result_ready: Condvar::new(),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_canceled(&self) -> bool {
        self.canceled.load(Ordering::Acquire)
    }

    /// Counts `n` blocks as run or skipped; the last one sends `Finish` to the writer.
    pub fn account(&self, n: usize) {
        let prev = self.accounted.fetch_add(n, Ordering::AcqRel);
        if prev + n == self.plan.block_count() {
            let _ = self.writer.send(WriterMsg::Finish);
        }
    }

    /// Marks a block that never started as skipped (items `Skipped`), without accounting it.
    pub fn skip_block(&self, block: usize, reason: &str) {
        let items: Vec<usize> = self.plan.block(block).map(|i| i.index).collect();
        let mut st = self.state();
        for &i in &items {
            st.items[i] = ItemStatus::Skipped;
            st.messages
                .insert(i as u32, (Some(reason.to_string()), None));
        }
        drop(st);
        self.items_done.fetch_add(items.len(), Ordering::AcqRel);
        self.blocks_done.fetch_add(1, Ordering::AcqRel);
    }

    pub fn progress(&self, finished: bool) -> Progress {
        Progress {
            blocks_done: self.blocks_done.load(Ordering::Acquire),
            blocks_total: self.plan.block_count(),
            items_done: self.items_done.load(Ordering::Acquire),
            items_total: self.plan.item_count(),
            finished,
        }
    }

    pub fn report_progress(&self, finished: bool) {
        if let Some(cb) = &self.config.progress {
            cb(self.progress(finished));
        }
    }

    /// Publishes the final result (called once, by the writer): visible to
    /// [`BackupHandle::try_result`] first, then the final progress callback runs, then
    /// [`BackupHandle::wait`] returns.
    pub fn set_result(&self, result: BackupResult) {
        self.result.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(result);
        self.report_progress(true);
        self.result.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.result_ready.notify_all();
    }

    fn peek_result(&self) -> Option<BackupResult> {
        self.result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    fn wait_result(&self, timeout: Option<Duration>) -> Option<BackupResult> {
        let mut guard = self.result.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            if guard.1 {
                return guard.0.clone();
            }
            guard = match deadline {
                None => self
                    .result_ready
                    .wait(guard)
                    .unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.checked_duration_since(std::time::Instant::now())?;
                    self.result_ready
                        .wait_timeout(guard, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }
}

/// The caller's handle on a running backup. Cloning it is cheap.
///
/// From a tokio server, call [`BackupHandle::wait`] inside `spawn_blocking`, or pass a
/// [`BackupConfig::progress`] callback that forwards the final [`Progress`] (`finished`)
/// to a channel and then read the result with [`BackupHandle::try_result`].
#[derive(Clone)]
pub struct BackupHandle {
    pub(crate) backup: Arc<Backup>,
    pub(crate) ctrl: Sender<Ctrl>,
}

impl BackupHandle {
    /// The backup's name.
    pub fn name(&self) -> &str {
        &self.backup.config.name
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.backup.plan
    }

    /// Blocks and items done so far.
    pub fn progress(&self) -> Progress {
        self.backup.progress(self.try_result().is_some())
    }

    /// Stops handing out this backup's blocks at once; running blocks skip their remaining
    /// items (post-hooks still run). The result will be `Failed`.
    pub fn cancel(&self) {
        self.backup.canceled.store(true, Ordering::Release);
        let _ = self.ctrl.send(Ctrl::Cancel(self.backup.id));
    }

    /// Blocks until the backup has ended (archive closed) and returns its result.
    pub fn wait(&self) -> BackupResult {
        self.backup.wait_result(None).expect("no timeout")
    }

    /// Like [`BackupHandle::wait`], giving up after `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<BackupResult> {
        self.backup.wait_result(Some(timeout))
    }

    /// The result if the backup has ended (already inside the final progress callback).
    pub fn try_result(&self) -> Option<BackupResult> {
        self.backup.peek_result()
    }
}
