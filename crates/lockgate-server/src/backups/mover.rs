//! [`JobMover`]: the library's [`DataMover`] as scheduler jobs.
//!
//! A PVC upload is a two-stage agent `data-upload` job, movable with the selector
//! `[blocks].data_upload_selector`; a pod-volume backup is an agent `pod-volume-backup`
//! job pinned to the pod's node. Both are owned by `backup:<name>` and carry the attrs
//! `backup`, `namespace`, `item` and `pvc`/`pv`/`storage_class` or `pod`/`volume`.
//!
//! The pool's threads are plain threads, so they may block: a submit is a message to the
//! loop and a blocking wait for its answer; a wait is a chain of [`JobOp::Wait`] long-polls,
//! each answered by the loop in the batch that changes the job's state. The loop itself
//! never waits for them.
//!
//! "Snapshot taken" means the job reached `prepared` or later (it reported its prepare
//! step done); "finished" means it ended for good: a failed or lost job with a retry
//! pending (`retry_at`) is waited for again.

use super::Running;
use crate::auth::Principal;
use crate::jobs::JobOp;
use crate::protocol::LoopHandle;
use lockgate_api::{JobView, SubmitRequest};
use lockgate_blocks::{DataMover, MoverError, MoverHandle, PodVolumeBackup, PvcUpload};
use lockgate_core::policy::Executor;
use lockgate_core::JobState;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Submits and follows data-movement jobs for one backup.
pub(crate) struct JobMover {
    lp: LoopHandle,
    run: Arc<Running>,
}

impl JobMover {
    pub(crate) fn new(lp: LoopHandle, run: Arc<Running>) -> JobMover {
        JobMover { lp, run }
    }

    fn submit(&self, req: SubmitRequest) -> Result<Box<dyn MoverHandle>, MoverError> {
        if self.run.is_cancelled() {
            return Err(MoverError::Canceled);
        }
        let kind = req.kind.clone();
        let job = self
            .lp
            .ask_blocking(self.run.principal.clone(), |r| {
                JobOp::Submit(Box::new(req), r)
            })
            .map_err(|e| MoverError::Submit(format!("{kind} job: {}", e.message)))?
            .job;
        self.run
            .data_jobs
            .lock()
            .expect("data jobs lock")
            .push(job.id);
        if self.run.is_cancelled() {
            // The cancel may have taken the list before this job was in it.
            let id = job.id;
            let _ = self
                .lp
                .ask_blocking(self.run.principal.clone(), |r| JobOp::Cancel(id, false, r));
        }
        Ok(Box::new(JobHandle {
            lp: self.lp.clone(),
            principal: self.run.principal.clone(),
            job,
        }))
    }
}

/// The attributes of a data-movement job: the pairs with a value.
pub(crate) fn attrs(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.to_string())))
        .collect()
}

impl DataMover for JobMover {
    fn submit_pvc_upload(&self, r: &PvcUpload) -> Result<Box<dyn MoverHandle>, MoverError> {
        self.submit(SubmitRequest {
            kind: "data-upload".into(),
            attrs: attrs(&[
                ("backup", Some(&r.backup)),
                ("item", Some(&r.item)),
                ("namespace", Some(&r.namespace)),
                ("pvc", Some(&r.pvc)),
                ("pv", Some(&r.volume_name)),
                ("storage_class", r.storage_class.as_deref()),
            ]),
            node_selector: Some(r.node_selector.clone()),
            executor: Some(Executor::Agent),
            two_stage: Some(true),
            idempotency_key: Some(r.item.clone()),
            ..SubmitRequest::default()
        })
    }

    fn submit_pod_volume_backup(
        &self,
        r: &PodVolumeBackup,
    ) -> Result<Box<dyn MoverHandle>, MoverError> {
        self.submit(SubmitRequest {
            kind: "pod-volume-backup".into(),
            attrs: attrs(&[
                ("backup", Some(&r.backup)),
                ("item", Some(&r.item)),
                ("namespace", Some(&r.namespace)),
                ("pod", Some(&r.pod)),
                ("volume", Some(&r.volume)),
                ("pvc", r.pvc.as_deref()),
            ]),
            node: Some(r.node.clone()),
            executor: Some(Executor::Agent),
            two_stage: Some(false),
            idempotency_key: Some(format!("{}/{}", r.item, r.volume)),
            ..SubmitRequest::default()
        })
    }
}

/// One submitted job, followed through the loop.
struct JobHandle {
    lp: LoopHandle,
    principal: Principal,
    job: JobView,
}

/// Ended for good (no retry pending).
pub(crate) fn is_final(j: &JobView) -> bool {
    j.state.is_terminal() && j.retry_at.is_none()
}

fn snapshot_taken(j: &JobView) -> bool {
    matches!(
        j.state,
        JobState::Prepared | JobState::Running | JobState::Succeeded
    ) || j.prepared_at.is_some()
}

impl JobHandle {
    fn wait_until(&mut self, done: impl Fn(&JobView) -> bool) -> Result<(), MoverError> {
        while !done(&self.job) {
            let (id, from) = (self.job.id, self.job.state);
            self.job = self
                .lp
                .ask_blocking(self.principal.clone(), |reply| JobOp::Wait {
                    id,
                    from,
                    or_cancel: false,
                    reply,
                })
                .map_err(|e| MoverError::Failed(format!("job {id}: {}", e.message)))?;
        }
        Ok(())
    }

    fn error(&self) -> MoverError {
        let j = &self.job;
        if j.state == JobState::Cancelled {
            return MoverError::Canceled;
        }
        let msg = j
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        MoverError::Failed(format!("{} job {} {}{msg}", j.kind, j.id, j.state))
    }
}

impl MoverHandle for JobHandle {
    fn wait_snapshot_taken(&mut self) -> Result<(), MoverError> {
        self.wait_until(|j| snapshot_taken(j) || is_final(j))?;
        if snapshot_taken(&self.job) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn wait_finished(&mut self) -> Result<(), MoverError> {
        self.wait_until(is_final)?;
        if self.job.state == JobState::Succeeded {
            Ok(())
        } else {
            Err(self.error())
        }
    }
}
