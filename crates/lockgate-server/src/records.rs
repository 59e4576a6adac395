//! The records the loop keeps for the work its drivers run: backups and restores.
//!
//! Both are the API's view as JSON in a table of its own (`lockgate_store::BackupRecord`),
//! keyed by a name used once, with a `queued` -> `running` -> `finished` state. What is the
//! same for both is here, once, over [`Recorded`]:
//! - a record is read as the next commit will leave it: the batch wins over the store;
//! - a record keeps the creation time of its first write;
//! - the job of each is a coordinator job its driver holds from admission to the end
//!   ([`driver_job`]);
//! - at start, [`Loop::recover`] ends the ones a previous run left queued or running:
//!   `Failed` ("the server stopped"), their live jobs force-cancelled, what they left half
//!   written removed.

use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{BackupState, BackupView, ErrorCode, RestoreView};
use lockgate_core::job::{JobId, JobSpec, RetrySpec};
use lockgate_core::policy::Executor;
use lockgate_core::Timestamp;
use lockgate_store::{BackupRecord, Batch, Store, StoreError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;

/// A view the loop keeps as a record.
pub(crate) trait Recorded: Serialize + DeserializeOwned {
    /// `backup` or `restore`, as messages name it.
    const WHAT: &'static str;
    /// Its unique name.
    fn name(&self) -> &str;
    /// Its state.
    fn state(&self) -> BackupState;
    /// The owner of its jobs (`backup:<name>`, `restore:<name>`).
    fn owner(&self) -> String;
    /// Its records not yet committed.
    fn pending(batch: &mut Batch) -> &mut Vec<BackupRecord>;
    /// One stored record.
    fn stored(store: &mut dyn Store, name: &str) -> Result<Option<BackupRecord>, StoreError>;
    /// Every stored record, oldest first.
    fn all_stored(store: &mut dyn Store) -> Result<Vec<BackupRecord>, StoreError>;
    /// Ends it `Failed` at `at` (RFC 3339), `why` first among its reasons.
    fn end_failed(&mut self, why: String, at: String);
    /// Removes what it left half written when the server stopped.
    fn remove_partial(&self);
}

/// The methods of [`Recorded`] over the fields both views name alike (`name`, `state`,
/// `phase`, `reasons`, `finished_at`).
macro_rules! same_fields {
    () => {
        fn name(&self) -> &str {
            &self.name
        }
        fn state(&self) -> BackupState {
            self.state
        }
        fn end_failed(&mut self, why: String, at: String) {
            self.state = BackupState::Finished;
            self.phase = Some("Failed".into());
            self.reasons.insert(0, why);
            self.finished_at = Some(at);
        }
    };
}

impl Recorded for BackupView {
    const WHAT: &'static str = "backup";
    same_fields!();
    fn owner(&self) -> String {
        crate::backups::backup_owner(&self.name)
    }
    fn pending(batch: &mut Batch) -> &mut Vec<BackupRecord> {
        &mut batch.backups
    }
    fn stored(store: &mut dyn Store, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        store.backup(name)
    }
    fn all_stored(store: &mut dyn Store) -> Result<Vec<BackupRecord>, StoreError> {
        store.backups()
    }
    fn remove_partial(&self) {
        let _ = std::fs::remove_file(lockgate_blocks::partial_archive(std::path::Path::new(
            &self.archive,
        )));
    }
}

impl Recorded for RestoreView {
    const WHAT: &'static str = "restore";
    same_fields!();
    fn owner(&self) -> String {
        crate::restores::restore_owner(&self.name)
    }
    fn pending(batch: &mut Batch) -> &mut Vec<BackupRecord> {
        &mut batch.restores
    }
    fn stored(store: &mut dyn Store, name: &str) -> Result<Option<BackupRecord>, StoreError> {
        store.restore(name)
    }
    fn all_stored(store: &mut dyn Store) -> Result<Vec<BackupRecord>, StoreError> {
        store.restores()
    }
    fn remove_partial(&self) {
        lockgate_blocks::restore::remove_partials(std::path::Path::new(&self.directory));
    }
}

fn to_record<V: Recorded>(view: &V, created_at: Timestamp) -> BackupRecord {
    BackupRecord {
        name: view.name().to_string(),
        state: view.state(),
        created_at,
        body: serde_json::to_string(view).expect("views serialize"),
    }
}

fn decode<V: Recorded>(rec: &BackupRecord) -> Result<V, ApiError> {
    serde_json::from_str(&rec.body).map_err(|e| {
        ApiError::internal(format!(
            "the stored record of {} {:?} cannot be read: {e}",
            V::WHAT,
            rec.name
        ))
    })
}

/// The job of a backup or a restore: a coordinator `kind` owned by `owner`, held by the
/// server's driver from admission to the end.
pub(crate) fn driver_job(kind: &str, owner: String, attrs: BTreeMap<String, String>) -> JobSpec {
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
    /// The record of `name` as the next commit will leave it (the batch wins over the
    /// store).
    fn record_of<V: Recorded>(&mut self, name: &str) -> Result<Option<BackupRecord>, ApiError> {
        if let Some(r) = V::pending(&mut self.batch)
            .iter()
            .rev()
            .find(|r| r.name == name)
        {
            return Ok(Some(r.clone()));
        }
        Ok(V::stored(self.store.as_mut(), name)?)
    }

    /// The view of `name`; 404 when there is none.
    pub(crate) fn view_of<V: Recorded>(&mut self, name: &str) -> Result<V, ApiError> {
        match self.record_of::<V>(name)? {
            Some(rec) => decode(&rec),
            None => Err(ApiError::not_found(format!(
                "{} {name:?} not found",
                V::WHAT
            ))),
        }
    }

    /// Every view, oldest first (by creation time, then name).
    pub(crate) fn views<V: Recorded>(&mut self) -> Result<Vec<V>, ApiError> {
        let mut recs = V::all_stored(self.store.as_mut())?;
        for p in V::pending(&mut self.batch).iter() {
            match recs.iter_mut().find(|r| r.name == p.name) {
                Some(r) => *r = p.clone(),
                None => recs.push(p.clone()),
            }
        }
        recs.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        recs.iter().map(decode).collect()
    }

    /// Writes `view` in the next commit; its creation time stays that of its first write
    /// (`now` for a new one).
    pub(crate) fn put_view<V: Recorded>(
        &mut self,
        view: &V,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let created_at = self
            .record_of::<V>(view.name())?
            .map_or(now, |r| r.created_at);
        V::pending(&mut self.batch).push(to_record(view, created_at));
        Ok(())
    }

    /// 409 `already_exists` when `name` is taken: names are used once.
    pub(crate) fn refuse_taken<V: Recorded>(&mut self, name: &str) -> Result<(), ApiError> {
        match self.record_of::<V>(name)? {
            Some(rec) => Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "{what} {name:?} already exists ({}); {what} names are unique: choose another",
                    rec.state,
                    what = V::WHAT
                ),
            )
            .field("name")),
            None => Ok(()),
        }
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

    /// Ends the backups (restores) a previous run of the server left queued or running
    /// (see the module docs). Called once at start, before serving; the caller commits.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) fn recover<V: Recorded>(&mut self) -> Result<(), StoreError> {
        let now = self.now();
        for rec in V::all_stored(self.store.as_mut())? {
            if rec.state == BackupState::Finished {
                continue;
            }
            let Ok(mut view) = serde_json::from_str::<V>(&rec.body) else {
                tracing::warn!(
                    "{} {:?}: unreadable record left as it is",
                    V::WHAT,
                    rec.name
                );
                continue;
            };
            let was = view.state();
            let owner = view.owner();
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
            view.remove_partial();
            view.end_failed(
                format!(
                    "the server stopped while the {} was {was}; its jobs were cancelled (start it again under a new name)",
                    V::WHAT
                ),
                lockgate_api::time::format(now),
            );
            tracing::warn!(
                "{} {:?} was {was} when the server stopped: marked Failed, {} jobs cancelled",
                V::WHAT,
                rec.name,
                live.len()
            );
            V::pending(&mut self.batch).push(to_record(&view, rec.created_at));
        }
        Ok(())
    }
}
