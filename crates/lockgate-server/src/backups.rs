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
//! Invariants:
//! - a backup's blocks start only once its `resource-backup` job is admitted, and its
//!   lease is held (renewed) until the result is known;
//! - every state a user can see (`queued`, `running`, `finished`) is committed to the store
//!   before it is reported; a backup that was queued or running when the server stopped is
//!   `Failed` after the restart (`Loop::recover_backups`): the honest outcome, since its
//!   archive is incomplete;
//! - a cancel stops handing out the backup's blocks at once, cancels its queued
//!   data-movement jobs and asks the admitted ones to stop, so blocks waiting for a
//!   snapshot end at their next check.

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

/// The owner of a backup's jobs.
pub fn backup_owner(name: &str) -> String {
    format!("backup:{name}")
}

/// Backup operations of the loop (see `ops.rs`).
#[derive(Debug)]
pub enum BackupOp {
    /// The active policy's validated `[blocks]` section.
    Blocks(Reply<BlocksPolicy>),
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
    let label_selector = match req.selector.as_deref().map(str::trim) {
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
    Ok(PlanOptions {
        filters: Filters {
            include_namespaces: req.include_namespaces.clone(),
            exclude_namespaces: req.exclude_namespaces.clone(),
            include_resources: req.include_resources.clone(),
            exclude_resources: req.exclude_resources.clone(),
            label_selector,
            include_cluster_resources: req.include_cluster_resources,
        },
        ordered: req.ordered.clone(),
        ..PlanOptions::from_policy(blocks)
    })
}

/// Worker threads of the shared pool when `--item-block-workers` is not given.
pub const DEFAULT_WORKERS: usize = 4;

/// The backups of one server. See the module docs.
pub struct Backups {
    pub(crate) lp: LoopHandle,
    data_dir: PathBuf,
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
    /// The manager, with a pool of `workers` threads.
    pub fn new(lp: LoopHandle, data_dir: PathBuf, workers: usize) -> Backups {
        let workers = workers.max(1);
        let pool = WorkerPool::new(lockgate_blocks::PoolConfig {
            workers,
            channel_capacity: workers,
        });
        Backups {
            lp,
            // Archive paths in records and answers are absolute, whatever --data-dir was.
            data_dir: std::path::absolute(&data_dir).unwrap_or(data_dir),
            pool: Mutex::new(Some(Arc::new(pool))),
            running: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn archive_path(&self, name: &str) -> PathBuf {
        self.data_dir.join("backups").join(format!("{name}.tar.gz"))
    }

    /// The active policy's `[blocks]` section.
    pub(crate) async fn blocks_policy(&self) -> Result<BlocksPolicy, ApiError> {
        self.lp.ask(Principal::system(), BackupOp::Blocks).await
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
