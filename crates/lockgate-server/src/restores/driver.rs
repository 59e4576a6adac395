//! The driver of one restore: admission, the files, lease renewal, outcome.
//!
//! An ordinary client of the loop (principal `restore:<name>`): it long-polls the
//! `resource-restore` job until admitted, writes the restore's files on a blocking thread
//! while it renews the lease every TTL/3, then finishes the job and writes the final
//! record. If the loop goes away (shutdown) it stops where it is: the restart marks the
//! restore `Failed`.

use super::data::{move_data, Moves};
use super::{Bind, RestoreOp, Restores};
use crate::auth::Principal;
use crate::backups::driver::admit;
use crate::error::ApiError;
use crate::jobs::JobOp;
use lockgate_api::{
    time, BackupState, ErrorCode, FinishRequest, LeaseRequest, RestoreCounts, RestoreHookResult,
    RestoreView,
};
use lockgate_blocks::hooks::{expand_template, OnError};
use lockgate_blocks::restore::{RestoreHook, RestorePlan, RestoreResult};
use lockgate_blocks::Phase;
use lockgate_core::{JobState, Outcome};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

fn now() -> String {
    time::format(lockgate_core::Timestamp(crate::event_loop::wall_ms()))
}

pub(super) async fn put(r: &Restores, view: &RestoreView) -> Result<(), ApiError> {
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
    told: mpsc::Receiver<Bind>,
    mut view: RestoreView,
    creator: Principal,
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
        let token = job.lease.map(|l| l.token);
        end_unstarted(r, cancelled, &mut view, token, Outcome::Cancelled, why).await;
        return;
    };
    // Planned again now that it runs: a queued restore holds no archive in memory, and
    // what the target has (`existing`) is read as it is when the files are written.
    let planned = match super::routes::plan_again(r, &creator, &view).await {
        Ok(p) => p,
        Err(e) => {
            let why = format!(
                "the restore could not be planned when its job was admitted: {}",
                e.message
            );
            end_unstarted(
                r,
                cancelled,
                &mut view,
                Some(lease.token),
                Outcome::Failed,
                why,
            )
            .await;
            return;
        }
    };
    view.refused = crate::backups::confine::refusals(&planned.refused);
    let (plan, exec_template) = (planned.plan, planned.exec_template);
    if let Err(e) = execute(r, cancelled, told, &mut view, plan, lease, exec_template).await {
        tracing::warn!("restore {:?} stopped: {}", view.name, e.message);
    }
}

/// Ends a restore that wrote nothing: its job (when it holds the lease `token`) ends
/// `outcome`, its record `Failed` with `why`.
async fn end_unstarted(
    r: &Restores,
    cancelled: &AtomicBool,
    view: &mut RestoreView,
    token: Option<u64>,
    outcome: Outcome,
    why: String,
) {
    let who = super::principal(&view.name);
    if let (Some(token), Some(id)) = (token, view.job) {
        let finish = FinishRequest {
            token,
            outcome,
            message: Some(why.clone()),
            usage: None,
        };
        let _ = r
            .lp()
            .ask(who, |reply| JobOp::Finish(id, finish, reply))
            .await;
    }
    view.state = BackupState::Finished;
    view.phase = Some("Failed".into());
    view.reasons = vec![why];
    view.finished_at = Some(now());
    view.cancel_requested = cancelled.load(Ordering::SeqCst);
    let _ = put(r, view).await;
}

/// The restore's lease, renewed every TTL/3 by [`Held::beat`].
pub(super) struct Held<'a> {
    pub(super) r: &'a Restores,
    pub(super) who: Principal,
    id: lockgate_core::JobId,
    token: u64,
    pub(super) cancelled: &'a AtomicBool,
    pub(super) lease_lost: Option<String>,
}

impl Held<'_> {
    /// One renewal: a `cancel_requested` on the job cancels the restore; a lost lease is
    /// kept to report.
    pub(super) async fn beat(&mut self) -> Result<(), ApiError> {
        if self.lease_lost.is_some() {
            return Ok(());
        }
        let (id, token) = (self.id, self.token);
        match self
            .r
            .lp()
            .ask(self.who.clone(), |reply| {
                JobOp::Heartbeat(id, LeaseRequest::new(token), reply)
            })
            .await
        {
            Ok(j) => {
                if j.cancel_requested {
                    self.cancelled.store(true, Ordering::SeqCst);
                }
                Ok(())
            }
            Err(e) if e.code == ErrorCode::LeaseLost => {
                self.lease_lost = Some(e.message);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Held<'_> {
    /// Awaits `task` (work on a blocking thread) while renewing the lease on `beat`.
    async fn hold_while<T>(
        &mut self,
        beat: &mut tokio::time::Interval,
        mut task: tokio::task::JoinHandle<T>,
    ) -> Result<Result<T, tokio::task::JoinError>, ApiError> {
        loop {
            tokio::select! {
                done = &mut task => return Ok(done),
                _ = beat.tick() => self.beat().await?,
            }
        }
    }
}

fn beats(ttl_s: f64) -> tokio::time::Interval {
    let ttl = Duration::from_secs_f64(ttl_s.max(0.3));
    let mut beat = tokio::time::interval(ttl / 3);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat
}

async fn execute(
    r: &Restores,
    cancelled: &AtomicBool,
    mut told: mpsc::Receiver<Bind>,
    view: &mut RestoreView,
    plan: RestorePlan,
    lease: lockgate_api::LeaseView,
    exec_template: Vec<String>,
) -> Result<(), ApiError> {
    let mut held = Held {
        r,
        who: super::principal(&view.name),
        id: view.job.unwrap_or_default(),
        token: lease.token,
        cancelled,
        lease_lost: None,
    };
    view.state = BackupState::Running;
    view.started_at = Some(now());
    put(r, view).await?;
    let name = view.name.clone();
    let dir = r.directory(&name);
    let moves = Moves {
        volumes: plan.volumes.clone(),
        pods: plan.pod_volumes.clone(),
        timeout: Duration::from_secs(
            view.request
                .pod_volume_timeout_s
                .unwrap_or(lockgate_api::POD_VOLUME_TIMEOUT_S),
        ),
    };
    let hooks = plan.hooks.clone();
    let mut beat = beats(lease.ttl_s);
    beat.tick().await;
    let writing = tokio::task::spawn_blocking(move || plan.write(&name, &dir));
    let written = held.hold_while(&mut beat, writing).await?;
    let result: Result<RestoreResult, String> = match written {
        Ok(w) => w.map_err(|e| e.to_string()),
        Err(e) => Err(format!("writing the restore: {e}")),
    };
    let (mut phase, mut reasons) = match &result {
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
    if result.is_ok() && !(moves.volumes.is_empty() && moves.pods.is_empty()) {
        let failed = move_data(&mut held, view, &moves, &mut told, &mut beat).await?;
        if !failed.is_empty() {
            phase = phase.with_failures();
        }
        reasons.extend(failed);
    }
    if result.is_ok() && !hooks.is_empty() && !cancelled.load(Ordering::SeqCst) {
        let running = tokio::task::spawn_blocking(move || run_hooks(&hooks, &exec_template));
        let ran = held.hold_while(&mut beat, running).await?;
        let (results, failed) =
            ran.map_err(|e| ApiError::internal(format!("the restore's hooks: {e}")))?;
        view.hooks = results;
        if !failed.is_empty() {
            phase = phase.with_failures();
        }
        reasons.extend(failed);
    }
    let ended = now();
    let phase_name = phase.as_str();
    if let Some(m) = held.lease_lost.take() {
        reasons.insert(0, format!("the restore's job lost its lease: {m}"));
    } else {
        let (outcome, message) = match phase {
            Phase::Completed => (Outcome::Succeeded, None),
            _ if cancelled.load(Ordering::SeqCst) => {
                (Outcome::Cancelled, Some("restore cancelled".to_string()))
            }
            _ => (
                Outcome::Failed,
                Some(format!("{phase_name}: {}", reasons.join("; "))),
            ),
        };
        let finish = FinishRequest {
            token: lease.token,
            outcome,
            message,
            usage: None,
        };
        let id = held.id;
        if let Err(e) = r
            .lp()
            .ask(held.who.clone(), |reply| JobOp::Finish(id, finish, reply))
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

/// Runs the post-restore hooks one after the other through `template` (the backup hooks'
/// exec template and process-group timeout); their results, and a line per failed hook
/// whose `on-error` is `Fail`.
fn run_hooks(hooks: &[RestoreHook], template: &[String]) -> (Vec<RestoreHookResult>, Vec<String>) {
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for h in hooks {
        let pod = format!("{}/{}", h.namespace, h.pod);
        let (result, on_error) = match &h.hook {
            Ok(hook) => {
                let argv = expand_template(
                    template,
                    &h.namespace,
                    &h.pod,
                    &hook.container,
                    &hook.command,
                );
                let run = lockgate_blocks::hooks::run(&argv, hook.timeout);
                let result = RestoreHookResult {
                    pod: pod.clone(),
                    container: hook.container.clone(),
                    command: hook.command.clone(),
                    exit_code: run.exit_code.map(i64::from),
                    duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
                    error: run.error,
                    on_error: format!("{:?}", hook.on_error),
                };
                (result, hook.on_error)
            }
            Err((message, on_error)) => (
                RestoreHookResult {
                    pod: pod.clone(),
                    container: String::new(),
                    command: Vec::new(),
                    exit_code: None,
                    duration_ms: 0,
                    error: Some(message.clone()),
                    on_error: format!("{on_error:?}"),
                },
                *on_error,
            ),
        };
        if let (Some(e), OnError::Fail) = (&result.error, on_error) {
            failed.push(format!("post-restore hook of pod {pod} failed: {e}"));
        }
        results.push(result);
    }
    (results, failed)
}
