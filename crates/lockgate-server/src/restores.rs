//! Restores of item-block backups in the server (API `/v1/restores`; the library is
//! `lockgate_blocks::restore`, docs/restores.md).
//!
//! A restore:
//!
//! 1. `POST /v1/restores` ([`routes`]): the backup's archive is read and the restore
//!    planned on a blocking thread (filters, namespace mapping, what the target already
//!    has, the order), under the caller's confinement; a backup that is not finished, an
//!    archive that cannot be read, a bad mapping refuse the restore (nothing recorded);
//! 2. the loop records it and submits its `resource-restore` job (owned by
//!    `restore:<name>`, attrs `restore`, `backup`, `namespaces` and `volumes`: the
//!    namespaces and persistent volumes it writes) in one commit; restores rank ahead of
//!    backups (`lockgate_core::policy::RESTORE_KINDS`), and the built-in conflicts on both
//!    lists (`lockgate_core::policy::Conflict::restores`) queue overlapping restores,
//!    explain naming the one that holds them;
//! 3. a driver task (`driver.rs`) waits for the job's admission, plans the restore again
//!    (a queued restore holds no archive in memory), writes the files
//!    (`<data-dir>/restores/<name>/`, whole or not at all) while it renews the lease, moves
//!    the volumes' data back through `data-download` jobs (and, once each restored pod's
//!    node is told, `POST /v1/restores/{name}/pods`, its pod volumes' through
//!    `pod-volume-restore` jobs on that node: `data.rs`), runs the post-restore hooks,
//!    and finishes the job and the record with the outcome.
//!
//! Who may restore what: an admin anything; a submitter only the backups it created, into
//! its owner's `backup_namespaces` (other items are left out and listed in `refused`), and
//! reads `existing` only inside the backup input roots.
//!
//! Invariants:
//! - a restore's files are written only once its job is admitted, and the lease is held
//!   until they are;
//! - every state a user can see is committed before it is reported; a restore queued or
//!   running when the server stopped is `Failed` after the restart, its jobs cancelled and
//!   its partial directories removed (`Loop::recover`, `crate::records`);
//! - a cancel of a queued restore ends it before anything is written; a running one has its
//!   files written or not at all (the write is one rename), and is then recorded as it
//!   ended, with `cancel_requested`.

mod data;
mod driver;
mod ops;
pub mod routes;

use crate::auth::Principal;
use crate::backups::Backups;
use crate::error::ApiError;
use crate::protocol::Reply;
use lockgate_api::{ErrorCode, RestoreList, RestoreView, Role};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The owner of a restore's jobs.
pub fn restore_owner(name: &str) -> String {
    format!("restore:{name}")
}

/// The internal principal of a restore: a submitter named `restore:<name>`, owner of the
/// restore's jobs.
pub(crate) fn principal(name: &str) -> Principal {
    Principal {
        name: restore_owner(name),
        role: Role::Submitter,
        node: None,
    }
}

/// Restore operations of the loop (see `ops.rs`).
#[derive(Debug)]
pub enum RestoreOp {
    /// A new restore: `409 already_exists` when the name is taken; else its job is
    /// submitted and the record (with `job` set) stored. Answers the record.
    Create(Box<RestoreView>, Reply<RestoreView>),
    /// Replaces a restore's record (its driver reports a new state).
    Put(Box<RestoreView>, Reply<()>),
    /// One record (404 when unknown).
    Get(String, Reply<RestoreView>),
    /// Every record, oldest first.
    List(Reply<RestoreList>),
}

/// A restored pod's node, told to its restore's driver (`POST /v1/restores/{name}/pods`).
pub(crate) struct Bind {
    /// `<namespace>/<pod>` in the target.
    pod: String,
    node: String,
    /// The pod's `pod-volume-restore` jobs, or why it was not waiting.
    reply: tokio::sync::oneshot::Sender<Result<Vec<u64>, ApiError>>,
}

/// The refusal of a bind: restore `name` does not wait for the node of `pod`; `waiting`
/// are the pods it does wait for.
fn not_waiting(name: &str, pod: &str, waiting: &[String]) -> ApiError {
    let waits = match waiting {
        [] => "none".to_string(),
        _ => waiting.join(", "),
    };
    ApiError::new(
        ErrorCode::WrongState,
        format!(
            "restore {name:?} is not waiting for the node of pod {pod:?} (it waits for {waits})"
        ),
    )
    .field("pod")
}

/// What a restore's driver listens on between its creation and its end.
struct Running {
    cancelled: Arc<AtomicBool>,
    binds: tokio::sync::mpsc::Sender<Bind>,
}

/// The restores of one server. See the module docs.
pub struct Restores {
    backups: Arc<Backups>,
    data_dir: PathBuf,
    /// The restores between their creation and their end.
    running: Mutex<HashMap<String, Running>>,
}

impl Restores {
    /// The manager; `backups` gives the loop, the backups' records and their confinement.
    pub fn new(backups: Arc<Backups>, data_dir: PathBuf) -> Restores {
        Restores {
            backups,
            data_dir: std::path::absolute(&data_dir).unwrap_or(data_dir),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn lp(&self) -> &crate::protocol::LoopHandle {
        &self.backups.lp
    }

    /// `<data-dir>/restores/<name>`.
    pub(crate) fn directory(&self, name: &str) -> PathBuf {
        self.data_dir
            .join(lockgate_host::data_dir::RESTORES_DIR)
            .join(name)
    }

    /// Asks a running restore to stop: before its files are written, it writes none; while
    /// its data moves, its downloads are cancelled.
    fn cancel_running(&self, name: &str) {
        if let Some(run) = self.running.lock().expect("running lock").get(name) {
            run.cancelled.store(true, Ordering::SeqCst);
        }
    }

    /// Tells the running restore `name` the node its pod `pod` was scheduled to: the
    /// pod's `pod-volume-restore` jobs, submitted by its driver.
    ///
    /// # Errors
    /// `409 wrong_state` when the restore is not (or no longer) waiting for that pod.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the bind was sent, the driver still submits the jobs
    /// (they are in the restore's record) and its answer is dropped.
    async fn bind(&self, name: &str, pod: String, node: String) -> Result<Vec<u64>, ApiError> {
        // No driver, or it ended before it answered: it waits for nothing.
        let not_waiting = || not_waiting(name, &pod, &[]);
        let binds = self
            .running
            .lock()
            .expect("running lock")
            .get(name)
            .map(|run| run.binds.clone())
            .ok_or_else(not_waiting)?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let bind = Bind {
            pod: pod.clone(),
            node,
            reply,
        };
        binds.send(bind).await.map_err(|_| not_waiting())?;
        answer.await.map_err(|_| not_waiting())?
    }

    /// Starts the driver of a created restore; `creator` is the principal that created it
    /// (the restore is planned again under its confinement once admitted).
    pub(crate) fn launch(self: &Arc<Self>, view: RestoreView, creator: Principal) {
        let cancelled = Arc::new(AtomicBool::new(false));
        let (binds, told) = tokio::sync::mpsc::channel(16);
        let running = Running {
            cancelled: cancelled.clone(),
            binds,
        };
        self.running
            .lock()
            .expect("running lock")
            .insert(view.name.clone(), running);
        let me = self.clone();
        tokio::spawn(async move {
            let name = view.name.clone();
            driver::drive(&me, &cancelled, told, view, creator).await;
            me.running.lock().expect("running lock").remove(&name);
        });
    }
}
