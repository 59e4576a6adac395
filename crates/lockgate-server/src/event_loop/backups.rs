//! Item-block backups on the loop side: their records and their `resource-backup` jobs.
//!
//! The backups themselves run outside the loop (`crate::backups`): a driver task per
//! backup and the shared worker pool's threads talk to the loop with ordinary messages,
//! like any client. What only the loop can do is here:
//! - [`BackupOp::Create`] checks that the name is free, submits the backup's
//!   `resource-backup` job (owned by `backup:<name>`, attr `namespaces`) and writes the
//!   record, in one batch: a backup is never recorded without its job, nor the reverse;
//! - records are written in the same group commit as everything else ([`BackupOp::Put`]);
//! - at start, [`Loop::recover_backups`] ends every backup that was queued or running when
//!   the server stopped: the record becomes `Failed` ("the server stopped") and the
//!   backup's live jobs are force-cancelled, so none holds a slot for work nobody does.

use super::{json, ok, Answer, Loop, Reply};
use crate::error::ApiError;
use axum::http::StatusCode;
use lockgate_api::{BackupState, BackupView};
use lockgate_core::job::{JobId, JobSpec, RetrySpec};
use lockgate_core::policy::{BlocksPolicy, Executor, RESOURCE_BACKUP_KIND};
use lockgate_core::Timestamp;
use lockgate_store::BackupRecord;
use tokio::sync::oneshot;

/// The owner of a backup's jobs.
pub fn backup_owner(name: &str) -> String {
    format!("backup:{name}")
}

/// Backup operations of the loop.
#[derive(Debug)]
pub enum BackupOp {
    /// The active policy's validated `[blocks]` section (sent on the channel; the reply
    /// is `null`).
    Blocks(oneshot::Sender<BlocksPolicy>),
    /// A new backup: `409 already_exists` when the name is taken; else its job is
    /// submitted and the record (with `job` set) stored. Answers the record (201).
    Create(Box<BackupView>),
    /// Replaces a backup's record (its driver reports a new state). Answers `null`.
    Put(Box<BackupView>),
    /// One record (404 when unknown).
    Get(String),
    /// Every record, oldest first.
    List,
}

fn record(view: &BackupView, created_at: Timestamp) -> BackupRecord {
    BackupRecord {
        name: view.name.clone(),
        state: view.state.as_str().to_string(),
        created_at,
        body: serde_json::to_string(view).expect("backup views serialize"),
    }
}

fn decode(rec: &BackupRecord) -> Result<BackupView, ApiError> {
    serde_json::from_str(&rec.body).map_err(|e| {
        ApiError::internal(format!(
            "the stored record of backup {:?} cannot be read: {e}",
            rec.name
        ))
    })
}

impl Loop {
    pub(crate) fn backup_op(&mut self, op: BackupOp, now: Timestamp) -> Reply {
        match op {
            BackupOp::Blocks(tx) => {
                let _ = tx.send(self.engine.policy().blocks.clone());
                ok(serde_json::Value::Null)
            }
            BackupOp::Create(view) => self.backup_create(*view, now),
            BackupOp::Put(view) => {
                let created = self.backup_created_at(&view.name)?.unwrap_or(now);
                self.batch.backups.push(record(&view, created));
                ok(serde_json::Value::Null)
            }
            BackupOp::Get(name) => match self.backup_record(&name)? {
                Some(rec) => ok(json(&decode(&rec)?)),
                None => Err(ApiError::not_found(format!("backup {name:?} not found"))),
            },
            BackupOp::List => {
                let mut recs = self.store.backups()?;
                for pending in &self.batch.backups {
                    match recs.iter_mut().find(|r| r.name == pending.name) {
                        Some(r) => *r = pending.clone(),
                        None => recs.push(pending.clone()),
                    }
                }
                recs.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
                let views = recs.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
                ok(serde_json::json!({ "backups": views }))
            }
        }
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

    fn backup_create(&mut self, mut view: BackupView, now: Timestamp) -> Reply {
        if let Some(rec) = self.backup_record(&view.name)? {
            return Err(ApiError::conflict(
                "already_exists",
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
        let spec = JobSpec {
            kind: RESOURCE_BACKUP_KIND.to_string(),
            attrs,
            owner: backup_owner(&view.name),
            executor: Some(Executor::Client),
            // The driver holds the job from admission to the end: one stage, whatever the
            // kind's defaults say.
            two_stage: Some(false),
            idempotency_key: Some(backup_owner(&view.name)),
            // The server runs the backup once; a retried job would have no one to run it.
            retry: Some(RetrySpec::default()),
            ..JobSpec::default()
        };
        let job = self
            .engine
            .submit(spec, now)
            .map_err(
                |lockgate_core::engine::SubmitError::Invalid { field, message }| {
                    ApiError::invalid(field, message)
                },
            )?
            .job;
        view.job = Some(job.id);
        view.state = BackupState::Queued;
        self.batch.backups.push(record(&view, now));
        Ok(Answer::Json(StatusCode::CREATED, json(&view)))
    }

    /// Ends the backups a previous run of the server left queued or running (see the
    /// module docs). Called once at start, before serving; the caller commits.
    ///
    /// # Errors
    /// The store's error.
    pub fn recover_backups(&mut self) -> Result<(), lockgate_store::StoreError> {
        let now = self.now();
        for rec in self.store.backups()? {
            if rec.state == BackupState::Finished.as_str() {
                continue;
            }
            let Ok(mut view) = serde_json::from_str::<BackupView>(&rec.body) else {
                tracing::warn!("backup {:?}: unreadable record left as it is", rec.name);
                continue;
            };
            let was = view.state;
            let owner = backup_owner(&view.name);
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
                live.len()
            );
            self.batch.backups.push(record(&view, rec.created_at));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Msg, Op, PolicySource};
    use super::*;
    use crate::auth::{Principal, Tokens};
    use lockgate_core::job::JobState;
    use lockgate_core::{Engine, Mode, Policy};

    fn ask(lp: &mut Loop, op: Op) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        let now = lp.now();
        lp.handle(
            Msg {
                principal: Principal::system(),
                op,
                reply,
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
        let mut rx = ask(&mut lp, Op::Submit(Box::new(req)));
        end_batch(&mut lp);
        let Ok(Ok(Answer::Json(_, job))) = rx.try_recv() else {
            panic!("submitted")
        };
        let id = job["id"].as_u64().unwrap();
        assert_eq!(job["state"], "queued");

        let _cancel = ask(&mut lp, Op::Cancel(id, false));
        let mut wait = ask(
            &mut lp,
            Op::Wait {
                id,
                from: JobState::Queued,
            },
        );
        end_batch(&mut lp);
        match wait.try_recv() {
            Ok(Ok(Answer::Json(_, v))) => assert_eq!(v["state"], "cancelled"),
            other => panic!("the wait was not answered: {other:?}"),
        }
    }
}
