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
        let max = self.engine.policy().quotas.max_attr_value_bytes as usize;
        for (attr, list) in [("namespaces", &view.namespaces), ("volumes", &view.volumes)] {
            if !list.is_empty() {
                attrs.insert(attr.to_string(), overlap_value(list, max));
            }
        }
        let spec = driver_job(RESOURCE_RESTORE_KIND, restore_owner(&view.name), attrs);
        view.job = Some(self.submit_driver_job(spec, now)?);
        view.state = BackupState::Queued;
        self.put_view(&view, now)?;
        Ok(view)
    }
}

/// A restore's list attribute (`namespaces`, `volumes`), or `*` when the list is longer
/// than an attribute may be: it then overlaps every other restore's list, so the built-in
/// conflicts still keep apart what it writes (`lockgate_core::policy::Conflict::restores`).
fn overlap_value(list: &[String], max: usize) -> String {
    let joined = list.join(",");
    if joined.len() > max {
        "*".to_string()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::overlap_value;

    #[test]
    fn a_list_too_long_for_an_attribute_overlaps_everything() {
        let list = ["pv-a".to_string(), "pv-b".to_string()];
        assert_eq!(overlap_value(&list, 9), "pv-a,pv-b");
        assert_eq!(overlap_value(&list, 8), "*");
    }
}
