//! The driver of one restore: admission, the files, lease renewal, outcome.
//!
//! An ordinary client of the loop (principal `restore:<name>`): it long-polls the
//! `resource-restore` job until admitted, writes the restore's files on a blocking thread
//! while it renews the lease every TTL/3, then finishes the job and writes the final
//! record. If the loop goes away (shutdown) it stops where it is: the restart marks the
//! restore `Failed`.

use super::{RestoreOp, Restores};
use crate::backups::driver::admit;
use crate::error::ApiError;
use crate::jobs::JobOp;
use lockgate_api::{time, BackupState, ErrorCode, FinishRequest, RestoreCounts, RestoreView};
use lockgate_blocks::restore::{RestorePlan, RestoreResult};
use lockgate_blocks::Phase;
use lockgate_core::{JobState, Outcome};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn now() -> String {
    time::format(lockgate_core::Timestamp(crate::event_loop::wall_ms()))
}

async fn put(r: &Restores, view: &RestoreView) -> Result<(), ApiError> {
    let v = Box::new(view.clone());
    r.lp()
        .ask(super::principal(&view.name), |reply| {
            RestoreOp::Put(v, reply)
        })
        .await
}

/// Runs one restore to its end (see the module docs).
///
/// # Cancel safety
/// Not cancel safe: it is spawned as the restore's own task and must run to its end.
/// Dropped between its loop operations, the job stays admitted until its lease runs out and
/// no final record is written: the next start marks the restore `Failed`.
pub(crate) async fn drive(
    r: &Arc<Restores>,
    cancelled: &AtomicBool,
    mut view: RestoreView,
    plan: RestorePlan,
) {
    let who = super::principal(&view.name);
    let Some(id) = view.job else {
        return;
    };
    let job = match admit(r.lp(), &who, id).await {
        Ok(job) => job,
        Err(e) => {
            tracing::warn!("restore {:?} stopped: {}", view.name, e.message);
            return;
        }
    };
    let lease = job.lease.clone().filter(|_| job.state == JobState::Running);
    let Some(lease) = lease.filter(|_| !cancelled.load(Ordering::SeqCst)) else {
        let why = if cancelled.load(Ordering::SeqCst) {
            "restore cancelled before it started".to_string()
        } else {
            let msg = job.message.map(|m| format!(": {m}")).unwrap_or_default();
            format!(
                "its resource-restore job {id} ended {} before the restore started{msg}",
                job.state
            )
        };
        if let Some(lease) = &job.lease {
            let finish = FinishRequest {
                token: lease.token,
                outcome: Outcome::Cancelled,
                message: Some(why.clone()),
            };
            let _ = r
                .lp()
                .ask(who.clone(), |reply| JobOp::Finish(id, finish, reply))
                .await;
        }
        view.state = BackupState::Finished;
        view.phase = Some("Failed".into());
        view.reasons = vec![why];
        view.finished_at = Some(now());
        view.cancel_requested = cancelled.load(Ordering::SeqCst);
        let _ = put(r, &view).await;
        return;
    };
    if let Err(e) = execute(r, cancelled, &mut view, plan, lease).await {
        tracing::warn!("restore {:?} stopped: {}", view.name, e.message);
    }
}

async fn execute(
    r: &Restores,
    cancelled: &AtomicBool,
    view: &mut RestoreView,
    plan: RestorePlan,
    lease: lockgate_api::LeaseView,
) -> Result<(), ApiError> {
    let who = super::principal(&view.name);
    let id = view.job.unwrap_or_default();
    view.state = BackupState::Running;
    view.started_at = Some(now());
    put(r, view).await?;
    let name = view.name.clone();
    let dir = r.directory(&name);
    let mut writing = tokio::task::spawn_blocking(move || plan.write(&name, &dir));
    let ttl = Duration::from_secs_f64(lease.ttl_s.max(0.3));
    let mut beat = tokio::time::interval(ttl / 3);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.tick().await;
    let mut lease_lost = None;
    let written = loop {
        tokio::select! {
            done = &mut writing => break done,
            _ = beat.tick(), if lease_lost.is_none() => {
                let hb = r.lp().ask(who.clone(), |reply| JobOp::Heartbeat(id, lease.token, reply));
                match hb.await {
                    Ok(j) => {
                        if j.cancel_requested {
                            cancelled.store(true, Ordering::SeqCst);
                        }
                    }
                    Err(e) if e.code == ErrorCode::LeaseLost => lease_lost = Some(e.message),
                    Err(e) => return Err(e),
                }
            }
        }
    };
    let ended = now();
    let result: Result<RestoreResult, String> = match written {
        Ok(w) => w.map_err(|e| e.to_string()),
        Err(e) => Err(format!("writing the restore: {e}")),
    };
    let (phase, mut reasons) = match &result {
        Ok(res) => {
            view.items = RestoreCounts {
                restored: res.counts.restored,
                skipped: res.counts.skipped,
                failed: res.counts.failed,
            };
            view.files = res.files.clone();
            let reasons = if res.counts.failed > 0 {
                vec![format!(
                    "{} entries of the archive were unusable (restore describe names them)",
                    res.counts.failed
                )]
            } else {
                Vec::new()
            };
            (res.phase, reasons)
        }
        Err(e) => (Phase::Failed, vec![e.clone()]),
    };
    let phase_name = match phase {
        Phase::Completed => "Completed",
        Phase::PartiallyFailed => "PartiallyFailed",
        Phase::Failed => "Failed",
    };
    if let Some(m) = lease_lost {
        reasons.insert(0, format!("the restore's job lost its lease: {m}"));
    } else {
        let (outcome, message) = match phase {
            Phase::Completed => (Outcome::Succeeded, None),
            _ => (
                Outcome::Failed,
                Some(format!("{phase_name}: {}", reasons.join("; "))),
            ),
        };
        let finish = FinishRequest {
            token: lease.token,
            outcome,
            message,
        };
        if let Err(e) = r
            .lp()
            .ask(who.clone(), |reply| JobOp::Finish(id, finish, reply))
            .await
        {
            if e.code == ErrorCode::Unavailable {
                return Err(e);
            }
            reasons.push(format!(
                "the restore's job could not be finished: {}",
                e.message
            ));
        }
    }
    view.state = BackupState::Finished;
    view.phase = Some(phase_name.to_string());
    view.reasons = reasons;
    view.finished_at = Some(ended);
    view.cancel_requested = cancelled.load(Ordering::SeqCst);
    put(r, view).await
}
