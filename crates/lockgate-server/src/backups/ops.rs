//! Item-block backups inside the loop: their records and their `resource-backup` jobs.
//!
//! The backups themselves run outside the loop (the driver and the pool): a driver task per
//! backup and the shared worker pool's threads talk to the loop with ordinary messages,
//! like any client. What only the loop can do is here:
//! - [`BackupOp::Create`] checks that the name is free, submits the backup's
//!   `resource-backup` job (owned by `backup:<name>`, attr `namespaces`) and writes the
//!   record, in one batch: a backup is never recorded without its job, nor the reverse;
//! - records are written in the same group commit as everything else ([`BackupOp::Put`]);
//! - at start, [`Loop::recover_backups`] ends every backup that was queued or running when
//!   the server stopped: the record becomes `Failed` ("the server stopped") and the
//!   backup's live jobs are force-cancelled, so none holds a slot for work nobody does.

use super::{backup_owner, BackupOp};
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{BackupList, BackupState, BackupView, ErrorCode};
use lockgate_core::job::{JobId, JobSpec, RetrySpec};
use lockgate_core::policy::{Executor, RESOURCE_BACKUP_KIND};
use lockgate_core::Timestamp;
use lockgate_store::BackupRecord;

/// The stored record of a backup's (or a restore's) view.
pub(crate) fn record<V: serde::Serialize>(
    name: &str,
    state: BackupState,
    view: &V,
    created_at: Timestamp,
) -> BackupRecord {
    BackupRecord {
        name: name.to_string(),
        state,
        created_at,
        body: serde_json::to_string(view).expect("views serialize"),
    }
}

fn to_record(view: &BackupView, created_at: Timestamp) -> BackupRecord {
    record(&view.name, view.state, view, created_at)
}

/// The view a stored record holds (`what`: `backup` or `restore`).
pub(crate) fn decode<V: serde::de::DeserializeOwned>(
    what: &str,
    rec: &BackupRecord,
) -> Result<V, ApiError> {
    serde_json::from_str(&rec.body).map_err(|e| {
        ApiError::internal(format!(
            "the stored record of {what} {:?} cannot be read: {e}",
            rec.name
        ))
    })
}

/// The stored records with the batch's pending ones over them, oldest first.
pub(crate) fn merged(mut recs: Vec<BackupRecord>, pending: &[BackupRecord]) -> Vec<BackupRecord> {
    for p in pending {
        match recs.iter_mut().find(|r| r.name == p.name) {
            Some(r) => *r = p.clone(),
            None => recs.push(p.clone()),
        }
    }
    recs.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
    recs
}

/// The job of a backup or a restore: a coordinator `kind` owned by `owner`, held by the
/// server's driver from admission to the end.
pub(crate) fn driver_job(
    kind: &str,
    owner: String,
    attrs: std::collections::BTreeMap<String, String>,
) -> JobSpec {
    JobSpec {
        kind: kind.to_string(),
        attrs,
        idempotency_key: Some(owner.clone()),
        owner,
        executor: Some(Executor::Client),
        // The driver holds the job from admission to the end: one stage, whatever the
        // kind's defaults say.
        two_stage: Some(false),
        // The server runs it once; a retried job would have no one to run it.
        retry: Some(RetrySpec::default()),
        ..JobSpec::default()
    }
}

impl Loop {
    /// Applies one backup operation.
    pub(crate) fn backup_op(&mut self, op: BackupOp, now: Timestamp) {
        match op {
            BackupOp::Scope { owner, reply } => {
                let policy = self.engine.policy();
                let scope = super::BackupScope {
                    blocks: policy.blocks.clone(),
                    owner: policy.owners.get(&owner).cloned().unwrap_or_default(),
                };
                self.answer(reply, Ok(scope));
            }
            BackupOp::Planned(outcome, reply) => {
                *self.metrics.backup_plans.entry(outcome).or_default() += 1;
                self.answer(reply, Ok(()));
            }
            BackupOp::Create(view, reply) => {
                let r = self.backup_create(*view, now);
                self.answer(reply, r);
            }
            BackupOp::Put(view, reply) => {
                let r = self.backup_put(*view, now);
                self.answer(reply, r);
            }
            BackupOp::Get(name, reply) => {
                let r = self.backup_get(&name);
                self.answer(reply, r);
            }
            BackupOp::List(reply) => {
                let r = self.backup_list();
                self.answer(reply, r);
            }
        }
    }

    fn backup_put(&mut self, view: BackupView, now: Timestamp) -> Result<(), ApiError> {
        let created = self.backup_created_at(&view.name)?.unwrap_or(now);
        self.batch.backups.push(to_record(&view, created));
        Ok(())
    }

    fn backup_get(&mut self, name: &str) -> Result<BackupView, ApiError> {
        match self.backup_record(name)? {
            Some(rec) => decode("backup", &rec),
            None => Err(ApiError::not_found(format!("backup {name:?} not found"))),
        }
    }

    fn backup_list(&mut self) -> Result<BackupList, ApiError> {
        let recs = merged(self.store.backups()?, &self.batch.backups);
        let backups = recs
            .iter()
            .map(|r| decode("backup", r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BackupList { backups })
    }

    /// The record as the next commit will leave it (the batch wins over the store).
    fn backup_record(&mut self, name: &str) -> Result<Option<BackupRecord>, ApiError> {
        if let Some(r) = self.batch.backups.iter().rev().find(|r| r.name == name) {
            return Ok(Some(r.clone()));
        }
        Ok(self.store.backup(name)?)
    }

    fn backup_created_at(&mut self, name: &str) -> Result<Option<Timestamp>, ApiError> {
        Ok(self.backup_record(name)?.map(|r| r.created_at))
    }

    fn backup_create(
        &mut self,
        mut view: BackupView,
        now: Timestamp,
    ) -> Result<BackupView, ApiError> {
        if let Some(rec) = self.backup_record(&view.name)? {
            return Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "backup {:?} already exists ({}); backup names are unique: choose another",
                    view.name, rec.state
                ),
            )
            .field("name"));
        }
        let mut attrs = std::collections::BTreeMap::new();
        attrs.insert("backup".to_string(), view.name.clone());
        if !view.namespaces.is_empty() {
            attrs.insert("namespaces".to_string(), view.namespaces.join(","));
        }
        let spec = driver_job(RESOURCE_BACKUP_KIND, backup_owner(&view.name), attrs);
        view.job = Some(self.submit_driver_job(spec, now)?);
        view.state = BackupState::Queued;
        self.batch.backups.push(to_record(&view, now));
        Ok(view)
    }

    /// Submits a [`driver_job`]; its id.
    pub(crate) fn submit_driver_job(
        &mut self,
        spec: JobSpec,
        now: Timestamp,
    ) -> Result<JobId, ApiError> {
        let submitted = self.engine.submit(spec, now).map_err(
            |lockgate_core::engine::SubmitError::Invalid { field, message }| {
                ApiError::invalid(field, message)
            },
        )?;
        Ok(submitted.job.id)
    }

    /// Force-cancels the live jobs of `owner` (a backup or a restore the server stopped
    /// running); how many.
    pub(crate) fn cancel_owned(&mut self, owner: &str, now: Timestamp) -> usize {
        let live: Vec<JobId> = self
            .engine
            .jobs()
            .filter(|j| j.owner == owner)
            .map(|j| j.id)
            .collect();
        for id in &live {
            let _ = self.engine.cancel(*id, true, now);
        }
        self.drain_events(now);
        live.len()
    }

    /// Ends the backups a previous run of the server left queued or running (see the
    /// module docs). Called once at start, before serving; the caller commits.
    ///
    /// # Errors
    /// The store's error.
    pub fn recover_backups(&mut self) -> Result<(), lockgate_store::StoreError> {
        let now = self.now();
        for rec in self.store.backups()? {
            if rec.state == BackupState::Finished {
                continue;
            }
            let Ok(mut view) = serde_json::from_str::<BackupView>(&rec.body) else {
                tracing::warn!("backup {:?}: unreadable record left as it is", rec.name);
                continue;
            };
            let was = view.state;
            let cancelled = self.cancel_owned(&backup_owner(&view.name), now);
            let _ = std::fs::remove_file(format!("{}.partial", view.archive));
            view.state = BackupState::Finished;
            view.phase = Some("Failed".into());
            view.reasons.insert(
                0,
                format!(
                    "the server stopped while the backup was {was}; its jobs were cancelled (start it again under a new name)"
                ),
            );
            view.finished_at = Some(lockgate_api::time::format(now));
            tracing::warn!(
                "backup {:?} was {was} when the server stopped: marked Failed, {} jobs cancelled",
                view.name,
                cancelled
            );
            self.batch.backups.push(to_record(&view, rec.created_at));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::{Principal, Tokens};
    use crate::event_loop::Loop;
    use crate::jobs::JobOp;
    use crate::policy::PolicySource;
    use crate::protocol::{Msg, Op, Reply};
    use lockgate_api::JobView;
    use lockgate_core::job::JobState;
    use lockgate_core::{Engine, Mode, Policy};
    use tokio::sync::oneshot;

    type Answer<T> = oneshot::Receiver<Result<T, crate::error::ApiError>>;

    fn ask<T, O: Into<Op>>(lp: &mut Loop, make: impl FnOnce(Reply<T>) -> O) -> Answer<T> {
        let (reply, rx) = oneshot::channel();
        let now = lp.now();
        let op = make(reply).into();
        lp.handle(
            Msg {
                principal: Principal::system(),
                op,
                audit: None,
            },
            now,
        );
        lp.drain_events(now);
        rx
    }

    fn end_batch(lp: &mut Loop) {
        lp.commit().unwrap();
        lp.send_replies();
    }

    /// A backup's driver waits for its queued job while a cancel ends it: when the wait
    /// came in the same batch as the cancel, the job was neither in the engine nor in the
    /// store yet, the store's older `queued` row was taken, and the wait never returned.
    #[test]
    fn a_wait_in_the_batch_that_ended_the_job_answers_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = lockgate_store::SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let policy = Policy::from_toml("[[limit]]\nname = \"none\"\nmax = 0\n", None).unwrap();
        let (events, _) = tokio::sync::broadcast::channel(16);
        let mut lp = Loop::new(
            Engine::new(policy, Mode::Indexed),
            Box::new(store),
            Tokens::default(),
            PolicySource::Store,
            events,
            0,
            0,
        );
        let req = lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        };
        let mut rx = ask(&mut lp, |r| JobOp::Submit(Box::new(req), r));
        end_batch(&mut lp);
        let Ok(Ok(submitted)) = rx.try_recv() else {
            panic!("submitted")
        };
        let id = submitted.job.id;
        assert_eq!(submitted.job.state, JobState::Queued);

        let _cancel = ask(&mut lp, |r| JobOp::Cancel(id, false, r));
        let mut wait: Answer<JobView> = ask(&mut lp, |reply| JobOp::Wait {
            id,
            from: JobState::Queued,
            or_cancel: false,
            reply,
        });
        end_batch(&mut lp);
        match wait.try_recv() {
            Ok(Ok(v)) => {
                assert_eq!(v.state, JobState::Cancelled);
                assert_eq!(serde_json::to_value(&v).unwrap()["state"], "cancelled");
            }
            other => panic!("the wait was not answered: {other:?}"),
        }
    }
}
