//! The driver of one backup: admission, run, lease renewal, outcome.
//!
//! It is an ordinary client of the loop (messages under the principal `backup:<name>`):
//! it long-polls its `resource-backup` job until admitted, starts the plan on the shared
//! pool, renews the lease every TTL/3 until the pool reports the end (a `cancel_requested`
//! on the job, e.g. `lockgate job cancel` or `max_run`, cancels the backup), then finishes
//! the job and writes the final record. If the loop goes away
//! (shutdown) it stops where it is: the restart marks the backup `Failed`.

use super::mover::JobMover;
use super::{BackupOp, Backups, Running};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::jobs::JobOp;
use crate::protocol::LoopHandle;
use lockgate_api::{
    time, BackupCounts, BackupProgress, BackupState, BackupView, ErrorCode, FinishRequest, JobView,
    LeaseRequest,
};
use lockgate_blocks::{BackupConfig, BackupHandle, BackupResult, Counts, Phase, Plan, Progress};
use lockgate_core::policy::BlocksPolicy;
use lockgate_core::{JobState, Outcome};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

fn now() -> String {
    time::format(lockgate_core::Timestamp(crate::event_loop::wall_ms()))
}

fn counts(c: Counts) -> BackupCounts {
    BackupCounts {
        total: c.total,
        completed: c.completed,
        failed: c.failed,
        skipped: c.skipped,
    }
}

fn progress(p: Progress) -> BackupProgress {
    BackupProgress {
        blocks_done: p.blocks_done,
        blocks_total: p.blocks_total,
        items_done: p.items_done,
        items_total: p.items_total,
    }
}

/// Runs one backup to its end (see the module docs).
///
/// # Cancel safety
/// Not cancel safe: it is spawned as the backup's own task and must run to its end.
/// Dropped between its loop operations, the backup's job stays admitted until its lease
/// runs out (then lost), the pool's plan keeps going until its next block, and no final
/// record is written: the next start marks the backup `Failed`, as after a crash.
pub(crate) async fn drive(
    b: &Arc<Backups>,
    run: &Arc<Running>,
    mut view: BackupView,
    plan: Plan,
    blocks: BlocksPolicy,
) {
    match admit(&b.lp, &run.principal, run.job).await {
        Ok(job) if job.state == JobState::Running => {
            if let Err(e) = execute(b, run, &mut view, plan, blocks, job).await {
                tracing::warn!("backup {:?} stopped: {}", view.name, e.message);
            }
        }
        Ok(job) => {
            let why = if run.is_cancelled() {
                "backup cancelled before it started".to_string()
            } else {
                let msg = job.message.map(|m| format!(": {m}")).unwrap_or_default();
                format!(
                    "its resource-backup job {} ended {} before the backup started{msg}",
                    job.id, job.state
                )
            };
            view.state = BackupState::Finished;
            view.phase = Some("Failed".into());
            view.reasons = vec![why];
            view.finished_at = Some(now());
            view.cancel_requested = run.is_cancelled();
            let _ = put(b, run, &view).await;
        }
        Err(e) => tracing::warn!("backup {:?} stopped: {}", view.name, e.message),
    }
}

async fn put(b: &Backups, run: &Running, view: &BackupView) -> Result<(), ApiError> {
    let view = Box::new(view.clone());
    b.lp.ask(run.principal.clone(), |r| BackupOp::Put(view, r))
        .await
}

/// Long-polls job `id` (a backup's or a restore's, asked as `who`) until it leaves
/// `queued`.
pub(crate) async fn admit(
    lp: &LoopHandle,
    who: &Principal,
    id: lockgate_core::JobId,
) -> Result<JobView, ApiError> {
    let job = lp.ask(who.clone(), |r| JobOp::Get(id, r)).await?;
    wait_until(lp, who, job, |j| j.state != JobState::Queued).await
}

/// Long-polls `job` (asked as `who`) until `done` holds for it.
pub(crate) async fn wait_until(
    lp: &LoopHandle,
    who: &Principal,
    mut job: JobView,
    done: impl Fn(&JobView) -> bool,
) -> Result<JobView, ApiError> {
    while !done(&job) {
        let (id, from) = (job.id, job.state);
        job = lp
            .ask(who.clone(), |reply| JobOp::Wait {
                id,
                from,
                or_cancel: false,
                reply,
            })
            .await?;
    }
    Ok(job)
}

async fn execute(
    b: &Arc<Backups>,
    run: &Arc<Running>,
    view: &mut BackupView,
    plan: Plan,
    blocks: BlocksPolicy,
    job: JobView,
) -> Result<(), ApiError> {
    let lease = job
        .lease
        .clone()
        .ok_or_else(|| ApiError::internal("an admitted job without a lease"))?;
    let token = lease.token;
    let ttl = Duration::from_secs_f64(lease.ttl_s.max(0.3));
    let (started, prx) = start_on_pool(b, run, view, plan, &blocks);
    let handle = match started {
        Ok(h) => h,
        Err(e) => return fail_to_start(b, run, view, token, &e).await,
    };
    *run.handle.lock().expect("handle lock") = Some(handle.clone());
    view.state = BackupState::Running;
    view.started_at = Some(now());
    put(b, run, view).await?;
    if run.is_cancelled() {
        b.cancel_running(run).await;
    }
    let lease_lost = hold_lease(b, run, token, ttl, prx).await?;
    let result = tokio::task::spawn_blocking(move || handle.wait())
        .await
        .map_err(|e| ApiError::internal(format!("backup result: {e}")))?;
    finish(b, run, view, &result, token, lease_lost).await
}

/// Starts the plan on the shared pool (sets the view's totals first); the receiver sees
/// the pool's progress reports.
fn start_on_pool(
    b: &Backups,
    run: &Arc<Running>,
    view: &mut BackupView,
    plan: Plan,
    blocks: &BlocksPolicy,
) -> (Result<BackupHandle, String>, watch::Receiver<Progress>) {
    let (ptx, prx) = watch::channel(Progress::default());
    let mut config = BackupConfig::new(
        view.name.clone(),
        b.archive_path(&view.name),
        Arc::new(JobMover::new(b.lp.clone(), run.clone())),
    );
    config.exec_template = blocks.exec_template.clone();
    config.data_upload_selector = blocks.data_upload_selector.clone();
    config.progress = Some(Arc::new(move |p: Progress| {
        ptx.send_replace(p);
    }));
    view.progress = BackupProgress {
        blocks_total: plan.block_count(),
        items_total: plan.item_count(),
        ..BackupProgress::default()
    };
    let started = match b.pool() {
        Some(pool) => pool.start(plan, config).map_err(|e| e.to_string()),
        None => Err("the server is shutting down".to_string()),
    };
    (started, prx)
}

/// The pool refused the backup: fails its job and writes the final record.
async fn fail_to_start(
    b: &Backups,
    run: &Running,
    view: &mut BackupView,
    token: u64,
    e: &str,
) -> Result<(), ApiError> {
    let ended = now();
    let finish = FinishRequest {
        token,
        outcome: Outcome::Failed,
        message: Some(format!("the backup could not start: {e}")),
        usage: None,
    };
    let _ =
        b.lp.ask(run.principal.clone(), |r| JobOp::Finish(run.job, finish, r))
            .await;
    view.state = BackupState::Finished;
    view.phase = Some("Failed".into());
    view.reasons = vec![format!("the backup could not start: {e}")];
    view.finished_at = Some(ended);
    put(b, run, view).await
}

/// Renews the lease every TTL/3 until the pool reports the end; a `cancel_requested` on
/// the job, or a lost lease, cancels the backup. Returns why the lease was lost, if it was.
async fn hold_lease(
    b: &Backups,
    run: &Running,
    token: u64,
    ttl: Duration,
    mut prx: watch::Receiver<Progress>,
) -> Result<Option<String>, ApiError> {
    let mut lease_lost = None;
    let mut beat = tokio::time::interval(ttl / 3);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.tick().await;
    loop {
        tokio::select! {
            changed = prx.changed() => {
                if changed.is_err() || prx.borrow().finished {
                    break;
                }
            }
            _ = beat.tick(), if lease_lost.is_none() => {
                let beat = b.lp.ask(run.principal.clone(), |r| JobOp::Heartbeat(run.job, LeaseRequest::new(token), r));
                match beat.await {
                    Ok(j) => {
                        if j.cancel_requested && !run.is_cancelled() {
                            b.cancel_running(run).await;
                        }
                    }
                    Err(e) if e.code == ErrorCode::LeaseLost => {
                        lease_lost = Some(e.message);
                        b.cancel_running(run).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(lease_lost)
}

async fn finish(
    b: &Backups,
    run: &Running,
    view: &mut BackupView,
    result: &BackupResult,
    token: u64,
    lease_lost: Option<String>,
) -> Result<(), ApiError> {
    // The backup ended when its work did, before its job frees the slot: a backup
    // admitted into that slot starts after this instant, never before it.
    let ended = now();
    let phase = result.phase.as_str();
    let mut reasons = result.reasons.clone();
    if let Some(m) = &lease_lost {
        reasons.insert(0, format!("the backup's job lost its lease: {m}"));
    } else {
        let (outcome, message) = match result.phase {
            Phase::Completed => (Outcome::Succeeded, None),
            _ if run.is_cancelled() => (Outcome::Cancelled, Some("backup cancelled".to_string())),
            _ => (
                Outcome::Failed,
                Some(format!("{phase}: {}", reasons.join("; "))),
            ),
        };
        let finish = FinishRequest {
            token,
            outcome,
            message,
            usage: None,
        };
        if let Err(e) =
            b.lp.ask(run.principal.clone(), |r| JobOp::Finish(run.job, finish, r))
                .await
        {
            if e.code == ErrorCode::Unavailable {
                return Err(e);
            }
            reasons.push(format!(
                "the backup's job could not be finished: {}",
                e.message
            ));
        }
    }
    view.state = BackupState::Finished;
    view.phase = Some(
        if lease_lost.is_some() {
            "Failed"
        } else {
            phase
        }
        .to_string(),
    );
    view.reasons = reasons;
    view.finished_at = Some(ended);
    if !result.refused.is_empty() {
        view.refused = super::confine::refusals(&result.refused);
    }
    view.items = Some(counts(result.item_counts));
    view.blocks = Some(counts(result.blocks));
    view.cancel_requested = run.is_cancelled();
    if let Some(h) = run.handle.lock().expect("handle lock").as_ref() {
        view.progress = progress(h.progress());
    }
    put(b, run, view).await
}
