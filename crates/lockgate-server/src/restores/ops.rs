//! Restores inside the loop: their records and their `resource-restore` jobs.
//!
//! As a backup's: [`RestoreOp::Create`] checks that the name is free, submits the job and
//! writes the record in one batch; records go in the same group commit as everything
//! else; at start, [`Loop::recover_restores`] ends the restores that were queued or running
//! when the server stopped.

use super::{restore_owner, RestoreOp};
use crate::backups::ops::{decode, driver_job, merged, record};
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{BackupState, ErrorCode, RestoreList, RestoreView};
use lockgate_core::policy::RESOURCE_RESTORE_KIND;
use lockgate_core::Timestamp;
use lockgate_store::RestoreRecord;
use std::path::Path;

fn to_record(view: &RestoreView, created_at: Timestamp) -> RestoreRecord {
    record(&view.name, view.state, view, created_at)
}

impl Loop {
    /// Applies one restore operation.
    pub(crate) fn restore_op(&mut self, op: RestoreOp, now: Timestamp) {
        match op {
            RestoreOp::Create(view, reply) => {
                let r = self.restore_create(*view, now);
                self.answer(reply, r);
            }
            RestoreOp::Put(view, reply) => {
                let r = self.restore_put(*view, now);
                self.answer(reply, r);
            }
            RestoreOp::Get(name, reply) => {
                let r = match self.restore_record(&name) {
                    Ok(Some(rec)) => decode("restore", &rec),
                    Ok(None) => Err(ApiError::not_found(format!("restore {name:?} not found"))),
                    Err(e) => Err(e),
                };
                self.answer(reply, r);
            }
            RestoreOp::List(reply) => {
                let r = self.restore_list();
                self.answer(reply, r);
            }
        }
    }

    fn restore_list(&mut self) -> Result<RestoreList, ApiError> {
        let recs = merged(self.store.restores()?, &self.batch.restores);
        let restores = recs
            .iter()
            .map(|r| decode("restore", r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RestoreList { restores })
    }

    /// The record as the next commit will leave it (the batch wins over the store).
    fn restore_record(&mut self, name: &str) -> Result<Option<RestoreRecord>, ApiError> {
        if let Some(r) = self.batch.restores.iter().rev().find(|r| r.name == name) {
            return Ok(Some(r.clone()));
        }
        Ok(self.store.restore(name)?)
    }

    fn restore_put(&mut self, view: RestoreView, now: Timestamp) -> Result<(), ApiError> {
        let created = self
            .restore_record(&view.name)?
            .map_or(now, |r| r.created_at);
        self.batch.restores.push(to_record(&view, created));
        Ok(())
    }

    fn restore_create(
        &mut self,
        mut view: RestoreView,
        now: Timestamp,
    ) -> Result<RestoreView, ApiError> {
        if let Some(rec) = self.restore_record(&view.name)? {
            return Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "restore {:?} already exists ({}); restore names are unique: choose another",
                    view.name, rec.state
                ),
            )
            .field("name"));
        }
        let mut attrs = std::collections::BTreeMap::new();
        attrs.insert("restore".to_string(), view.name.clone());
        attrs.insert("backup".to_string(), view.backup.clone());
        if !view.namespaces.is_empty() {
            attrs.insert("namespaces".to_string(), view.namespaces.join(","));
        }
        let spec = driver_job(RESOURCE_RESTORE_KIND, restore_owner(&view.name), attrs);
        view.job = Some(self.submit_driver_job(spec, now)?);
        view.state = BackupState::Queued;
        self.batch.restores.push(to_record(&view, now));
        Ok(view)
    }

    /// Ends the restores a previous run of the server left queued or running: the record
    /// becomes `Failed` ("the server stopped"), the restore's live jobs are force-cancelled
    /// and its hidden partial directories removed. Called once at start, before serving;
    /// the caller commits.
    ///
    /// # Errors
    /// The store's error.
    pub fn recover_restores(&mut self) -> Result<(), lockgate_store::StoreError> {
        let now = self.now();
        for rec in self.store.restores()? {
            if rec.state == BackupState::Finished {
                continue;
            }
            let Ok(mut view) = serde_json::from_str::<RestoreView>(&rec.body) else {
                tracing::warn!("restore {:?}: unreadable record left as it is", rec.name);
                continue;
            };
            let was = view.state;
            let cancelled = self.cancel_owned(&restore_owner(&view.name), now);
            remove_partials(Path::new(&view.directory));
            view.state = BackupState::Finished;
            view.phase = Some("Failed".into());
            view.reasons.insert(
                0,
                format!(
                    "the server stopped while the restore was {was}; its jobs were cancelled (start it again under a new name)"
                ),
            );
            view.finished_at = Some(lockgate_api::time::format(now));
            tracing::warn!(
                "restore {:?} was {was} when the server stopped: marked Failed, {cancelled} jobs cancelled",
                view.name
            );
            self.batch.restores.push(to_record(&view, rec.created_at));
        }
        Ok(())
    }
}

/// Removes the hidden partial directories a writer of `dir` left (`.<name>.<pid>-<n>.partial`
/// beside it): a restore the server stopped in the middle of writing.
fn remove_partials(dir: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        // `<pid>-<n>` exactly: restore `a`'s prefix `.a.` also begins `.a.b.<pid>-<n>.partial`.
        let writer = n
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".partial"))
            .and_then(|w| w.split_once('-'));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if writer.is_some_and(|(pid, n)| digits(pid) && digits(n)) {
            if let Err(err) = std::fs::remove_dir_all(e.path()) {
                tracing::warn!("{}: {err}", e.path().display());
            }
        }
    }
}
