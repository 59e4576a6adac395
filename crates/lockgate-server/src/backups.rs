//! Item-block backups in the server (design `item-blocks.md`; API `/v1/backups`).
//!
//! [`Backups`] owns the one [`WorkerPool`] of the server (`--item-block-workers`), shared by
//! every running backup (the pool hands out blocks round-robin between backups). A backup:
//!
//! 1. `POST /v1/backups` ([`routes`]): the input is read from the server's filesystem and
//!    planned ([`Plan::load`], on a blocking thread) with the policy's `[blocks]` section;
//!    any bad file or item refuses the backup (422 naming them) and nothing is started;
//! 2. the loop records it and submits its `resource-backup` job (owned by `backup:<name>`,
//!    attr `namespaces` from [`Plan::namespaces`]) in one commit;
//! 3. a driver task (`driver.rs`) waits for the job's admission (an `overlap = "namespaces"`
//!    conflict queues overlapping backups), starts the plan on the pool, renews the job's
//!    lease every TTL/3 while it runs, and finishes the job and the record with the outcome;
//! 4. PVC uploads and pod-volume backups are scheduler jobs (`mover.rs`): the pool's threads
//!    submit them through the loop and block on long-polls of their state, never the loop.
//!
//! Who may back up what (`confine.rs`): an admin's backup is unconfined; anyone else's
//! reads only inside the backup input roots, takes only its owner's `backup_namespaces`,
//! and runs manifest hooks only when its owner has `allow_hooks`; refused items are named
//! in the answer ([`BackupView::refused`]).
//!
//! Invariants:
//! - a plan is made under the caller's confinement and the `[blocks]` caps, and stops when
//!   the request goes away (the handler holds a `CancelOnDrop`);
//! - a backup's blocks start only once its `resource-backup` job is admitted, and its
//!   lease is held (renewed) until the result is known;
//! - every state a user can see (`queued`, `running`, `finished`) is committed to the store
//!   before it is reported; a backup that was queued or running when the server stopped is
//!   `Failed` after the restart (`Loop::recover`): the honest outcome, since its
//!   archive is incomplete;
//! - a cancel stops handing out the backup's blocks at once, cancels its queued
//!   data-movement jobs and asks the admitted ones to stop, so blocks waiting for a
//!   snapshot end at their next check.

pub(crate) mod confine;
pub(crate) mod driver;
pub(crate) mod mover;
mod ops;
pub mod routes;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::jobs::JobOp;
use crate::protocol::{LoopHandle, Reply};
use lockgate_api::{BackupList, BackupProgress, BackupRequest, BackupView, Role};
use lockgate_blocks::{BackupHandle, Filters, Plan, PlanOptions, WorkerPool};
use lockgate_core::policy::BlocksPolicy;
use lockgate_core::selector::Selector;
use lockgate_core::JobId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use confine::{check_policy_roots, BackupScope};

/// The owner of a backup's jobs.
pub fn backup_owner(name: &str) -> String {
    format!("backup:{name}")
}

/// Backup operations of the loop (see `ops.rs`).
#[derive(Debug)]
pub enum BackupOp {
    /// The active policy's validated `[blocks]` section and the settings of one owner.
    Scope {
        /// The owner (the caller's principal name).
        owner: String,
        /// The answer.
        reply: Reply<BackupScope>,
    },
    /// A plan ended (`made`, `refused`, `too_large`, `canceled`, `failed`): counted in
    /// `/metrics` as `lockgate_backup_plans_total`.
    Planned(&'static str, Reply<()>),
    /// A new backup: `409 already_exists` when the name is taken; else its job is
    /// submitted and the record (with `job` set) stored. Answers the record.
    Create(Box<BackupView>, Reply<BackupView>),
    /// Replaces a backup's record (its driver reports a new state).
    Put(Box<BackupView>, Reply<()>),
    /// One record (404 when unknown).
    Get(String, Reply<BackupView>),
    /// Every record, oldest first.
    List(Reply<BackupList>),
}

/// The plan options of a request under the policy's `[blocks]` section (also used by
/// `lockgate backup create --dry-run`, which plans locally).
///
/// # Errors
/// 422 naming `selector` when the label selector does not parse.
pub fn plan_options(req: &BackupRequest, blocks: &BlocksPolicy) -> Result<PlanOptions, ApiError> {
    Ok(PlanOptions {
        filters: filters(item_selection!(req))?,
        ordered: req.ordered.clone(),
        ..PlanOptions::from_policy(blocks)
    })
}

/// The [`ItemSelection`] of a request with the item filter fields (a backup's, a
/// restore's: they name them alike).
macro_rules! item_selection {
    ($req:expr) => {
        $crate::backups::ItemSelection {
            include_namespaces: &$req.include_namespaces,
            exclude_namespaces: &$req.exclude_namespaces,
            include_resources: &$req.include_resources,
            exclude_resources: &$req.exclude_resources,
            include_cluster_resources: $req.include_cluster_resources,
            selector: $req.selector.as_deref(),
        }
    };
}
pub(crate) use item_selection;

/// The item filters of a backup's or a restore's request.
pub(crate) struct ItemSelection<'a> {
    pub include_namespaces: &'a [String],
    pub exclude_namespaces: &'a [String],
    pub include_resources: &'a [String],
    pub exclude_resources: &'a [String],
    pub include_cluster_resources: Option<bool>,
    pub selector: Option<&'a str>,
}

/// The filters of a request.
///
/// # Errors
/// 422 naming `selector` when the label selector does not parse.
pub(crate) fn filters(s: ItemSelection<'_>) -> Result<Filters, ApiError> {
    let label_selector = match s.selector.map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(Selector::parse_labels(text).map_err(|e| {
            ApiError::invalid(
                "selector",
                format!(
                    "selector {text:?}: {} (at character {})",
                    e.message, e.position
                ),
            )
        })?),
    };
    Ok(Filters {
        include_namespaces: s.include_namespaces.to_vec(),
        exclude_namespaces: s.exclude_namespaces.to_vec(),
        include_resources: s.include_resources.to_vec(),
        exclude_resources: s.exclude_resources.to_vec(),
        label_selector,
        include_cluster_resources: s.include_cluster_resources,
    })
}

/// Worker threads of the shared pool when `--item-block-workers` is not given.
pub const DEFAULT_WORKERS: usize = 4;

/// The backups of one server. See the module docs.
pub struct Backups {
    pub(crate) lp: LoopHandle,
    data_dir: PathBuf,
    /// `--backup-input-root`s (checked at start), unioned with `[blocks] input_roots`.
    input_roots: Vec<PathBuf>,
    pool: Mutex<Option<Arc<WorkerPool>>>,
    running: Mutex<HashMap<String, Arc<Running>>>,
}

/// A backup between its creation and its end.
pub(crate) struct Running {
    pub principal: Principal,
    pub job: JobId,
    pub handle: Mutex<Option<BackupHandle>>,
    pub cancelled: AtomicBool,
    /// Data-movement jobs submitted for it (to cancel with it).
    pub data_jobs: Mutex<Vec<JobId>>,
}

impl Running {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// The internal principal of a backup: a submitter named `backup:<name>`, owner of the
/// backup's jobs.
pub(crate) fn principal(name: &str) -> Principal {
    Principal {
        name: backup_owner(name),
        role: Role::Submitter,
        node: None,
    }
}

impl Backups {
    /// The manager, with a pool of `workers` threads; non-admins read only inside
    /// `input_roots` (and the policy's).
    pub fn new(
        lp: LoopHandle,
        data_dir: PathBuf,
        workers: usize,
        input_roots: Vec<PathBuf>,
    ) -> Backups {
        let workers = workers.max(1);
        let pool = WorkerPool::new(lockgate_blocks::PoolConfig {
            workers,
            channel_capacity: workers,
        });
        Backups {
            lp,
            // Archive paths in records and answers are absolute, whatever --data-dir was.
            data_dir: std::path::absolute(&data_dir).unwrap_or(data_dir),
            input_roots,
            pool: Mutex::new(Some(Arc::new(pool))),
            running: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn archive_path(&self, name: &str) -> PathBuf {
        self.data_dir
            .join(lockgate_host::data_dir::BACKUPS_DIR)
            .join(format!("{name}.tar.gz"))
    }

    /// The active policy's `[blocks]` section and `p`'s owner settings.
    ///
    /// # Cancel safety
    /// Cancel safe: a read; a dropped ask loses only its answer ([`LoopHandle::ask`]).
    ///
    /// [`LoopHandle::ask`]: crate::protocol::LoopHandle::ask
    pub(crate) async fn scope(&self, p: &Principal) -> Result<BackupScope, ApiError> {
        let owner = p.name.clone();
        self.lp
            .ask(Principal::system(), |reply| BackupOp::Scope {
                owner,
                reply,
            })
            .await
    }

    /// The confinement of a backup `p` creates under `scope`.
    pub(crate) fn confinement(
        &self,
        p: &Principal,
        scope: &BackupScope,
    ) -> lockgate_blocks::Confinement {
        confine::confinement(p, scope, &self.input_roots)
    }

    fn pool(&self) -> Option<Arc<WorkerPool>> {
        self.pool.lock().expect("pool lock").clone()
    }

    pub(crate) fn running(&self, name: &str) -> Option<Arc<Running>> {
        self.running
            .lock()
            .expect("running lock")
            .get(name)
            .cloned()
    }

    /// Records a created backup and starts its driver.
    pub(crate) fn launch(
        self: &Arc<Self>,
        view: BackupView,
        plan: Plan,
        blocks: BlocksPolicy,
        job: JobId,
    ) {
        let run = Arc::new(Running {
            principal: principal(&view.name),
            job,
            handle: Mutex::new(None),
            cancelled: AtomicBool::new(false),
            data_jobs: Mutex::new(Vec::new()),
        });
        self.running
            .lock()
            .expect("running lock")
            .insert(view.name.clone(), run.clone());
        let me = self.clone();
        tokio::spawn(async move {
            let name = view.name.clone();
            driver::drive(&me, &run, view, plan, blocks).await;
            me.running.lock().expect("running lock").remove(&name);
        });
    }

    /// A record with the live progress of a running backup.
    pub(crate) fn live(&self, mut view: BackupView) -> BackupView {
        if let Some(run) = self.running(&view.name) {
            if let Some(h) = run.handle.lock().expect("handle lock").as_ref() {
                let p = h.progress();
                view.progress = BackupProgress {
                    blocks_done: p.blocks_done,
                    blocks_total: p.blocks_total,
                    items_done: p.items_done,
                    items_total: p.items_total,
                };
            }
            view.cancel_requested |= run.is_cancelled();
        }
        view
    }

    /// Stops handing out the backup's blocks and cancels its data-movement jobs. Safe to
    /// call more than once.
    ///
    /// # Cancel safety
    /// Not cancel safe: the flag and the pool's cancel are set before the first await, and
    /// a job's cancel, once sent, is applied whether or not its answer is awaited; but the
    /// job ids are taken from the run first, so a drop midway leaves the jobs not yet
    /// asked running to their own end, and a second call does not find them. Callers
    /// await it to its end.
    pub(crate) async fn cancel_running(&self, run: &Running) {
        run.cancelled.store(true, Ordering::SeqCst);
        if let Some(h) = run.handle.lock().expect("handle lock").as_ref() {
            h.cancel();
        }
        let jobs = std::mem::take(&mut *run.data_jobs.lock().expect("data jobs lock"));
        for id in jobs {
            // Already ended jobs answer 409: nothing to do.
            let _ = self
                .lp
                .ask(run.principal.clone(), |r| JobOp::Cancel(id, false, r))
                .await;
        }
    }

    /// Cancels every running backup and stops the pool (server shutdown). Blocks until the
    /// pool's threads have ended: call it off the async workers.
    pub fn shutdown(&self) {
        let runs: Vec<Arc<Running>> = self
            .running
            .lock()
            .expect("running lock")
            .values()
            .cloned()
            .collect();
        for run in runs {
            run.cancelled.store(true, Ordering::SeqCst);
            if let Some(h) = run.handle.lock().expect("handle lock").as_ref() {
                h.cancel();
            }
        }
        let pool = self.pool.lock().expect("pool lock").take();
        drop(pool);
    }
}
