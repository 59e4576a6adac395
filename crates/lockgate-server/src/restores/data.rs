//! A restore's data movement, once its files are written: a `data-download` job per
//! restored claim whose data the backup moved, submitted at once, and a
//! `pod-volume-restore` job per volume of each restored pod a file-system backup copied,
//! submitted when the pod's node is told (a restored pod has no node until the cluster
//! schedules it: `POST /v1/restores/{name}/pods`, [`super::Restores::bind`]).
//!
//! Invariants:
//! - the restore's lease is renewed the whole time, and a cancel of the restore (or a
//!   lost lease) cancels every job submitted and stops waiting for pods;
//! - a pod is bound once: its jobs are submitted by the driver alone, each recorded in
//!   the restore's `data_jobs` before the bind is answered, and the pod leaves
//!   `pods_waiting` in the same record;
//! - a pod not bound within the restore's `pod_volume_timeout_s` is a failure line, never
//!   a wait without end.

use super::driver::{put, Held};
use super::{not_waiting, Bind};
use crate::backups::driver::wait_until;
use crate::backups::mover::{attrs, is_final};
use crate::error::ApiError;
use crate::jobs::JobOp;
use lockgate_api::{ErrorCode, JobView, RestoreView, SubmitRequest};
use lockgate_blocks::restore::{PodVolumeRestore, VolumeRestore};
use lockgate_core::policy::Executor;
use lockgate_core::JobState;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// What a restore moves back.
pub(super) struct Moves {
    /// Claims: a `data-download` each.
    pub(super) volumes: Vec<VolumeRestore>,
    /// Pods with file-system backed-up volumes: a `pod-volume-restore` per volume.
    pub(super) pods: Vec<PodVolumeRestore>,
    /// How long to wait for the pods' nodes.
    pub(super) timeout: Duration,
}

/// The jobs being waited for: each ends with (what it restores, its last view).
type Waits = JoinSet<(String, Result<JobView, ApiError>)>;

/// Submits the downloads, then waits until every job has ended and every pod was bound
/// (or its wait timed out), renewing the restore's lease; a cancel of the restore cancels
/// the jobs. Returns a line per job that did not succeed and per pod never bound.
pub(super) async fn move_data(
    held: &mut Held<'_>,
    view: &mut RestoreView,
    moves: &Moves,
    told: &mut mpsc::Receiver<Bind>,
    beat: &mut tokio::time::Interval,
) -> Result<Vec<String>, ApiError> {
    let mut waits = Waits::new();
    let mut failed = Vec::new();
    for v in &moves.volumes {
        let req = download_request(&view.name, &view.backup, v);
        if let Err(refused) = submit(held, view, req, &v.item, &mut waits).await? {
            failed.push(refused);
        }
    }
    let mut waiting: BTreeMap<String, &PodVolumeRestore> =
        moves.pods.iter().map(|p| (p.name(), p)).collect();
    record_waiting(held, view, &waiting).await?;
    let deadline = tokio::time::Instant::now() + moves.timeout;
    let mut cancelling = false;
    while !(waits.is_empty() && waiting.is_empty()) {
        tokio::select! {
            Some(joined) = waits.join_next(), if !waits.is_empty() => {
                let (what, ended) = joined.map_err(|e| ApiError::internal(format!("a data job's wait: {e}")))?;
                let job = ended?;
                if job.state != JobState::Succeeded {
                    let msg = job.message.map(|m| format!(": {m}")).unwrap_or_default();
                    failed.push(format!("{what}: {} job {} {}{msg}", job.kind, job.id, job.state));
                }
            }
            Some(bind) = told.recv() => {
                let answer = match waiting.remove(&bind.pod) {
                    Some(pod) => {
                        let answer = bind_pod(held, view, pod, &bind.node, &mut waits, &mut failed).await?;
                        if answer.is_err() {
                            // Nothing submitted: it still waits for a node.
                            waiting.insert(bind.pod.clone(), pod);
                        }
                        answer
                    }
                    None => Err(not_waiting(&view.name, &bind.pod, &view.pods_waiting)),
                };
                record_waiting(held, view, &waiting).await?;
                let _ = bind.reply.send(answer);
            }
            _ = tokio::time::sleep_until(deadline), if !waiting.is_empty() => {
                let waited = moves.timeout.as_secs();
                let why = format!("its node was not told within {waited} s (lockgate restore bind); its volumes were not copied back");
                give_up(&mut waiting, &mut failed, &why);
                record_waiting(held, view, &waiting).await?;
            }
            _ = beat.tick() => {
                held.beat().await?;
                if !cancelling && (held.cancelled.load(Ordering::SeqCst) || held.lease_lost.is_some()) {
                    cancelling = true;
                    for id in view.data_jobs.clone() {
                        let _ = held.r.lp().ask(held.who.clone(), |reply| JobOp::Cancel(id, false, reply)).await;
                    }
                    give_up(&mut waiting, &mut failed, "the restore was cancelled before its node was told");
                    record_waiting(held, view, &waiting).await?;
                }
            }
        }
    }
    Ok(failed)
}

/// The pods still `waiting` in the restore's record (`pods_waiting`), committed.
async fn record_waiting(
    held: &Held<'_>,
    view: &mut RestoreView,
    waiting: &BTreeMap<String, &PodVolumeRestore>,
) -> Result<(), ApiError> {
    view.pods_waiting = waiting.keys().cloned().collect();
    put(held.r, view).await
}

/// Stops waiting for every pod still `waiting`, a failure line each saying `why`.
fn give_up(waiting: &mut BTreeMap<String, &PodVolumeRestore>, failed: &mut Vec<String>, why: &str) {
    failed.extend(waiting.keys().map(|pod| format!("pod {pod}: {why}")));
    waiting.clear();
}

/// Submits the `pod-volume-restore` jobs of `pod`, one per volume, pinned to `node`: the
/// answer to its bind, the jobs' ids. When the first is refused, nothing is submitted and
/// the answer says why (the pod still waits); a later refusal is a failure line of the
/// restore and the answer lists the jobs submitted.
async fn bind_pod(
    held: &mut Held<'_>,
    view: &mut RestoreView,
    pod: &PodVolumeRestore,
    node: &str,
    waits: &mut Waits,
    failed: &mut Vec<String>,
) -> Result<Result<Vec<u64>, ApiError>, ApiError> {
    let mut jobs = Vec::new();
    for volume in &pod.volumes {
        let req = pod_volume_request(&view.name, &view.backup, pod, volume, node);
        let what = format!("{} volume {volume}", pod.item);
        match submit(held, view, req, &what, waits).await? {
            Ok(id) => jobs.push(id),
            Err(refused) if jobs.is_empty() => {
                return Ok(Err(
                    ApiError::new(ErrorCode::InvalidInput, refused).field("node")
                ));
            }
            Err(refused) => failed.push(refused),
        }
    }
    Ok(Ok(jobs))
}

/// Submits one data job of the restore and waits for it in `waits`; its id, or a line
/// saying why the loop refused it. Only a loop that is gone is an error.
async fn submit(
    held: &Held<'_>,
    view: &mut RestoreView,
    req: SubmitRequest,
    what: &str,
    waits: &mut Waits,
) -> Result<Result<u64, String>, ApiError> {
    let kind = req.kind.clone();
    let submitted = held
        .r
        .lp()
        .ask(held.who.clone(), |reply| {
            JobOp::Submit(Box::new(req), reply)
        })
        .await;
    let job = match submitted {
        Ok(s) => s.job,
        Err(e) if e.code == ErrorCode::Unavailable => return Err(e),
        Err(e) => return Ok(Err(format!("{what}: {kind} job refused: {}", e.message))),
    };
    let id = job.id;
    view.data_jobs.push(id);
    let (lp, who, what) = (held.r.lp().clone(), held.who.clone(), what.to_string());
    waits.spawn(async move { (what, wait_until(&lp, &who, job, is_final).await) });
    Ok(Ok(id))
}

/// The `data-download` job of one volume: a two-stage agent job (prepare provisions the
/// target, run copies the data back), pinned to the volume's node when it has one.
fn download_request(restore: &str, backup: &str, v: &VolumeRestore) -> SubmitRequest {
    let attrs = attrs(&[
        ("restore", Some(restore)),
        ("backup", Some(backup)),
        ("item", Some(&v.item)),
        ("from", Some(&v.from)),
        ("namespace", Some(&v.namespace)),
        ("pvc", Some(&v.pvc)),
        ("pv", v.volume_name.as_deref()),
        ("storage_class", v.storage_class.as_deref()),
    ]);
    SubmitRequest {
        kind: "data-download".into(),
        attrs,
        node: v.node.clone(),
        // Unpinned: movable to any agent node that takes the kind.
        node_selector: v.node.is_none().then(String::new),
        executor: Some(Executor::Agent),
        two_stage: Some(true),
        idempotency_key: Some(v.item.clone()),
        ..SubmitRequest::default()
    }
}

/// The `pod-volume-restore` job of one volume of a restored pod: an agent job on the node
/// the pod was scheduled to (as its `pod-volume-backup` ran on the pod's node then).
fn pod_volume_request(
    restore: &str,
    backup: &str,
    pod: &PodVolumeRestore,
    volume: &str,
    node: &str,
) -> SubmitRequest {
    let attrs = attrs(&[
        ("restore", Some(restore)),
        ("backup", Some(backup)),
        ("item", Some(&pod.item)),
        ("from", Some(&pod.from)),
        ("namespace", Some(&pod.namespace)),
        ("pod", Some(&pod.pod)),
        ("volume", Some(volume)),
    ]);
    SubmitRequest {
        kind: "pod-volume-restore".into(),
        attrs,
        node: Some(node.to_string()),
        executor: Some(Executor::Agent),
        two_stage: Some(false),
        idempotency_key: Some(format!("{}/{volume}", pod.item)),
        ..SubmitRequest::default()
    }
}
