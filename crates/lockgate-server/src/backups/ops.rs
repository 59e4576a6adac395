//! Item-block backups inside the loop: their records and their `resource-backup` jobs.
//!
//! The backups themselves run outside the loop (the driver and the pool): a driver task per
//! backup and the shared worker pool's threads talk to the loop with ordinary messages,
//! like any client. What only the loop can do is here:
//! - [`BackupOp::Create`] checks that the name is free, submits the backup's
//!   `resource-backup` job (owned by `backup:<name>`, attr `namespaces`) and writes the
//!   record, in one batch: a backup is never recorded without its job, nor the reverse;
//! - records are written in the same group commit as everything else ([`BackupOp::Put`]);
//! - at start, [`Loop::recover`] ends every backup that was queued or running when the
//!   server stopped: the record becomes `Failed` ("the server stopped") and the backup's
//!   live jobs are force-cancelled, so none holds a slot for work nobody does
//!   (`crate::records` holds what backups and restores share).

use super::{backup_owner, BackupOp};
use crate::event_loop::Loop;
use crate::records::driver_job;
use lockgate_api::{BackupList, BackupState, BackupView};
use lockgate_core::policy::RESOURCE_BACKUP_KIND;
use lockgate_core::Timestamp;

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
                let r = self.put_view(&*view, now);
                self.answer(reply, r);
            }
            BackupOp::Get(name, reply) => {
                let r = self.view_of(&name);
                self.answer(reply, r);
            }
            BackupOp::List(reply) => {
                let r = self.views().map(|backups| BackupList { backups });
                self.answer(reply, r);
            }
        }
    }

    fn backup_create(
        &mut self,
        mut view: BackupView,
        now: Timestamp,
    ) -> Result<BackupView, crate::error::ApiError> {
        self.refuse_taken::<BackupView>(&view.name)?;
        let mut attrs = std::collections::BTreeMap::new();
        attrs.insert("backup".to_string(), view.name.clone());
        if !view.namespaces.is_empty() {
            attrs.insert("namespaces".to_string(), view.namespaces.join(","));
        }
        let spec = driver_job(RESOURCE_BACKUP_KIND, backup_owner(&view.name), attrs);
        view.job = Some(self.submit_driver_job(spec, now)?);
        view.state = BackupState::Queued;
        self.put_view(&view, now)?;
        Ok(view)
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
