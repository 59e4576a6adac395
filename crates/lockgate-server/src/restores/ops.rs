//! Restores inside the loop: their records and their `resource-restore` jobs.
//!
//! As a backup's (`crate::records`): [`RestoreOp::Create`] checks that the name is free,
//! submits the job and writes the record in one batch; records go in the same group
//! commit as everything else; at start, [`Loop::recover`] ends the restores that were
//! queued or running when the server stopped.

use super::{restore_owner, RestoreOp};
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::records::driver_job;
use lockgate_api::{BackupState, RestoreList, RestoreView};
use lockgate_core::policy::RESOURCE_RESTORE_KIND;
use lockgate_core::Timestamp;

impl Loop {
    /// Applies one restore operation.
    pub(crate) fn restore_op(&mut self, op: RestoreOp, now: Timestamp) {
        match op {
            RestoreOp::Create(view, reply) => {
                let r = self.restore_create(*view, now);
                self.answer(reply, r);
            }
            RestoreOp::Put(view, reply) => {
                let r = self.put_view(&*view, now);
                self.answer(reply, r);
            }
            RestoreOp::Get(name, reply) => {
                let r = self.view_of(&name);
                self.answer(reply, r);
            }
            RestoreOp::List(reply) => {
                let r = self.views().map(|restores| RestoreList { restores });
                self.answer(reply, r);
            }
        }
    }

    fn restore_create(
        &mut self,
        mut view: RestoreView,
        now: Timestamp,
    ) -> Result<RestoreView, ApiError> {
        self.refuse_taken::<RestoreView>(&view.name)?;
        let mut attrs = std::collections::BTreeMap::new();
        attrs.insert("restore".to_string(), view.name.clone());
        attrs.insert("backup".to_string(), view.backup.clone());
        if !view.namespaces.is_empty() {
            attrs.insert("namespaces".to_string(), view.namespaces.join(","));
        }
        let spec = driver_job(RESOURCE_RESTORE_KIND, restore_owner(&view.name), attrs);
        view.job = Some(self.submit_driver_job(spec, now)?);
        view.state = BackupState::Queued;
        self.put_view(&view, now)?;
        Ok(view)
    }
}
