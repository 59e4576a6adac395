//! Running one block on a worker: pre-hooks, items, data, post-hooks.
//!
//! Order within a block (each step starts only when the previous one has ended):
//! 1. read the block's manifests from the input (a manifest that cannot be read fails that
//!    item only);
//! 2. the pre-hooks of all its pods, in item order; a failing `Fail` hook stops here: the
//!    block's items are skipped and the backup is marked `PartiallyFailed`;
//! 3. each item: the [`ItemAction`](crate::ItemAction), then its JSON to the archive, then
//!    for a PVC a data upload and for a pod the pod-volume backups it opts into; a cancel
//!    skips the remaining items;
//! 4. wait until every data upload's snapshot is taken and every pod-volume backup has
//!    finished (Velero issue 8159);
//! 5. the post-hooks: of all pods, or, when step 2 stopped, of the pods whose pre-hook ran,
//!    so that a freeze is always undone.
//!
//! A PVC whose volume a pod of the block backs up file by file gets no data upload; an
//! unbound PVC has no volume data.
//!
//! Under [`HookPolicy::Refuse`] no hook runs, whatever the manifest read back says (it may
//! have been rewritten since planning); a pod with hook annotations the plan did not list
//! is added to the result's `refused` list.

use crate::archive::{PendingUpload, WriterMsg};
use crate::backup::Backup;
use crate::confine::{HookPolicy, RefusalReason, RefusedItem};
use crate::hooks::{self, HookPhase, OnError};
use crate::mover::{MoverHandle, PodVolumeBackup, PvcUpload};
use crate::plan::ItemRef;
use crate::result::{HookResult, ItemStatus, UploadResult};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

/// The annotation naming the pod volumes to back up file by file.
pub const BACKUP_VOLUMES_ANNOTATION: &str = "backup.lockgate.io/backup-volumes";

/// Runs block `block` of `backup`.
pub(crate) fn run(backup: &Backup, block: usize) {
    let started = SystemTime::now();
    backup.state().block_times[block].0 = Some(started);
    let mut run = BlockRun::new(backup, block);
    run.pre_hooks();
    if run.stop.is_none() {
        run.items();
        run.wait_data();
    } else {
        let reason = run.stop.clone().unwrap_or_default();
        for s in run.status.iter_mut().filter(|s| s.0 == ItemStatus::Pending) {
            *s = (ItemStatus::Skipped, Some(reason.clone()), None);
        }
    }
    run.post_hooks();
    run.commit();
}

/// Records a block whose worker panicked: its unfinished items fail.
pub(crate) fn record_panic(backup: &Backup, block: usize) {
    let items: Vec<usize> = backup.plan.block(block).map(|i| i.index).collect();
    let mut st = backup.state();
    for &i in &items {
        if matches!(st.items[i], ItemStatus::Pending) {
            st.items[i] = ItemStatus::Failed;
            st.messages.insert(
                i as u32,
                (
                    Some("internal error: the block's worker panicked".into()),
                    None,
                ),
            );
        }
    }
    st.block_times[block].1 = Some(SystemTime::now());
    st.reasons
        .push(format!("block {block}: internal error (worker panicked)"));
    drop(st);
    backup.items_done.fetch_add(items.len(), Ordering::AcqRel);
    backup.blocks_done.fetch_add(1, Ordering::AcqRel);
}

type Status = (ItemStatus, Option<String>, Option<String>);

/// A data movement of the block being waited for.
struct Wait {
    pos: usize,
    pvc: bool,
    volume: Option<String>,
    handle: Box<dyn MoverHandle>,
    submitted: Instant,
}

struct BlockRun<'a> {
    b: &'a Backup,
    block: usize,
    items: Vec<ItemRef<'a>>,
    manifests: Vec<Option<Value>>,
    status: Vec<Status>,
    pods: Vec<usize>,
    pre_ran: Vec<usize>,
    stop: Option<String>,
    hooks: Vec<HookResult>,
    waits: Vec<Wait>,
    uploads: Vec<(UploadResult, Option<PendingUpload>)>,
    reasons: Vec<String>,
    warnings: Vec<String>,
    refused: Vec<RefusedItem>,
}

impl<'a> BlockRun<'a> {
    fn new(b: &'a Backup, block: usize) -> BlockRun<'a> {
        let items: Vec<ItemRef<'a>> = b.plan.block(block).collect();
        let mut status = vec![(ItemStatus::Pending, None, None); items.len()];
        let manifests: Vec<Option<Value>> = items
            .iter()
            .zip(&mut status)
            .map(|(item, st)| match b.plan.load_item(item.index) {
                Ok(v) => Some(v),
                Err(e) => {
                    *st = (ItemStatus::Failed, Some(e), None);
                    None
                }
            })
            .collect();
        let pods = (0..items.len())
            .filter(|&p| items[p].is_core("Pod") && manifests[p].is_some())
            .collect();
        BlockRun {
            b,
            block,
            items,
            manifests,
            status,
            pods,
            pre_ran: Vec::new(),
            stop: None,
            hooks: Vec::new(),
            waits: Vec::new(),
            uploads: Vec::new(),
            reasons: Vec::new(),
            warnings: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Under [`HookPolicy::Refuse`], names pod `p` as refused if it annotates a hook the
    /// plan did not list (it was rewritten since planning).
    fn refuse_hooks(&mut self, p: usize) {
        let item = self.items[p];
        let manifest = self.manifests[p].as_ref().expect("pods are loaded");
        let named = |r: &RefusedItem| r.item == item.name;
        if !crate::plan::has_hook(manifest)
            || self.refused.iter().any(named)
            || self
                .b
                .plan
                .refused()
                .iter()
                .rev()
                .take_while(|r| r.reason == RefusalReason::HooksNotAllowed)
                .any(named)
        {
            return;
        }
        self.refused.push(RefusedItem {
            item: item.name.to_string(),
            kind: item.kind.to_string(),
            namespace: item.namespace.map(str::to_string),
            name: item.short_name.to_string(),
            reason: RefusalReason::HooksNotAllowed,
        });
    }

    fn pre_hooks(&mut self) {
        for p in self.pods.clone() {
            match self.hook(p, HookPhase::Pre) {
                Ok(_) => self.pre_ran.push(p),
                Err(reason) => {
                    self.stop = Some(reason);
                    return;
                }
            }
        }
    }

    fn post_hooks(&mut self) {
        let pods = if self.stop.is_some() {
            self.pre_ran.clone()
        } else {
            self.pods.clone()
        };
        for p in pods {
            if let Err(reason) = self.hook(p, HookPhase::Post) {
                self.reasons.push(reason);
            }
        }
    }

    /// Runs pod `p`'s hook for `phase`; `Err(reason)` when a `Fail` hook failed.
    fn hook(&mut self, p: usize, phase: HookPhase) -> Result<(), String> {
        if self.b.plan.hook_policy() == HookPolicy::Refuse {
            self.refuse_hooks(p);
            return Ok(());
        }
        let item = self.items[p];
        let manifest = self.manifests[p].as_ref().expect("pods are loaded");
        let ns = item.namespace.unwrap_or_default();
        let pod = format!("{ns}/{}", item.short_name);
        let phase_name = if phase == HookPhase::Pre {
            "pre"
        } else {
            "post"
        };
        let mut record = HookResult {
            block: self.block,
            pod: pod.clone(),
            phase,
            container: String::new(),
            command: Vec::new(),
            on_error: OnError::Fail,
            exit_code: None,
            duration_ms: 0,
            error: None,
            stdout: String::new(),
            stderr: String::new(),
        };
        match hooks::pod_hook(manifest, phase) {
            Ok(None) => return Ok(()),
            Ok(Some(h)) => {
                let argv = hooks::expand_template(
                    &self.b.config.exec_template,
                    ns,
                    item.short_name,
                    &h.container,
                    &h.command,
                );
                let out = hooks::run(&argv, h.timeout);
                record.container = h.container;
                record.command = h.command;
                record.on_error = h.on_error;
                record.exit_code = out.exit_code;
                record.duration_ms = out.duration.as_millis() as u64;
                record.error = out.error;
                record.stdout = out.stdout;
                record.stderr = out.stderr;
            }
            Err((message, on_error)) => {
                record.on_error = on_error;
                record.error = Some(message);
            }
        }
        let failure = record.error.clone().map(|e| {
            format!(
                "block {}: {phase_name}-hook of pod {pod} (container {:?}) failed: {e}",
                self.block, record.container
            )
        });
        let fail = record.on_error == OnError::Fail;
        self.hooks.push(record);
        match failure {
            Some(reason) if fail => Err(reason),
            Some(reason) => {
                self.warnings.push(format!("{reason} (on-error Continue)"));
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn items(&mut self) {
        let covered = self.pod_volume_claims();
        for p in 0..self.items.len() {
            if self.status[p].0 != ItemStatus::Pending {
                continue;
            }
            if self.b.is_canceled() {
                self.status[p] = (ItemStatus::Skipped, Some("backup canceled".into()), None);
                continue;
            }
            self.status[p] = match self.item(p, &covered) {
                Ok(note) => (ItemStatus::Completed, None, note),
                Err(e) => (ItemStatus::Failed, Some(e), None),
            };
        }
    }

    /// Backs up item `p`; `Ok(note)`.
    fn item(
        &mut self,
        p: usize,
        covered: &HashSet<(String, String)>,
    ) -> Result<Option<String>, String> {
        let item = self.items[p];
        let manifest = self.manifests[p]
            .as_mut()
            .expect("pending items are loaded");
        if let Some(action) = &self.b.config.item_action {
            // A panicking action fails its item only: the block goes on to its post-hooks.
            let run = std::panic::AssertUnwindSafe(|| action.execute(&item, manifest));
            std::panic::catch_unwind(run).map_err(|_| "the item action panicked".to_string())??;
        }
        let data = serde_json::to_vec(&*manifest).map_err(|e| format!("cannot serialize: {e}"))?;
        let path = item.archive_path();
        self.b
            .writer
            .send(WriterMsg::Entry { path, data })
            .map_err(|_| "the archive writer has stopped".to_string())?;
        if item.is_core("PersistentVolumeClaim") {
            return self.submit_pvc(p, covered);
        }
        if item.is_core("Pod") {
            self.submit_pod_volumes(p)?;
        }
        Ok(None)
    }

    /// `(namespace, claim)` of every PVC a pod of the block backs up file by file.
    fn pod_volume_claims(&self) -> HashSet<(String, String)> {
        let mut out = HashSet::new();
        for &p in &self.pods {
            let pod = self.manifests[p].as_ref().expect("pods are loaded");
            for vol in opted_volumes(pod) {
                if let Some(claim) = volume_of(pod, &vol)
                    .and_then(|v| v["persistentVolumeClaim"]["claimName"].as_str())
                {
                    out.insert((
                        self.items[p].namespace.unwrap_or_default().to_string(),
                        claim.to_string(),
                    ));
                }
            }
        }
        out
    }

    fn submit_pvc(
        &mut self,
        p: usize,
        covered: &HashSet<(String, String)>,
    ) -> Result<Option<String>, String> {
        let item = self.items[p];
        let pvc = self.manifests[p].as_ref().expect("loaded");
        let ns = item.namespace.unwrap_or_default().to_string();
        if covered.contains(&(ns.clone(), item.short_name.to_string())) {
            return Ok(Some("volume backed up by a pod-volume backup".into()));
        }
        let Some(volume_name) = pvc["spec"]["volumeName"].as_str().filter(|v| !v.is_empty()) else {
            return Ok(Some("not bound: no volume data to upload".into()));
        };
        let request = PvcUpload {
            backup: self.b.config.name.clone(),
            item: item.name.to_string(),
            namespace: ns,
            pvc: item.short_name.to_string(),
            volume_name: volume_name.to_string(),
            storage_class: pvc["spec"]["storageClassName"].as_str().map(str::to_string),
            node_selector: self.b.config.data_upload_selector.clone(),
        };
        let handle = self
            .b
            .config
            .data_mover
            .submit_pvc_upload(&request)
            .map_err(|e| e.to_string())?;
        self.waits.push(Wait {
            pos: p,
            pvc: true,
            volume: None,
            handle,
            submitted: Instant::now(),
        });
        Ok(None)
    }

    fn submit_pod_volumes(&mut self, p: usize) -> Result<(), String> {
        let item = self.items[p];
        let pod = self.manifests[p].as_ref().expect("loaded");
        let volumes = opted_volumes(pod);
        if volumes.is_empty() {
            return Ok(());
        }
        let node = pod["spec"]["nodeName"]
            .as_str()
            .ok_or_else(|| format!("{BACKUP_VOLUMES_ANNOTATION} names volumes but the pod has no spec.nodeName (not scheduled)"))?
            .to_string();
        let mut requests = Vec::new();
        for vol in volumes {
            let spec = volume_of(pod, &vol).ok_or_else(|| {
                format!(
                    "{BACKUP_VOLUMES_ANNOTATION} names volume {vol:?}, which the pod does not have"
                )
            })?;
            requests.push(PodVolumeBackup {
                backup: self.b.config.name.clone(),
                item: item.name.to_string(),
                namespace: item.namespace.unwrap_or_default().to_string(),
                pod: item.short_name.to_string(),
                node: node.clone(),
                pvc: spec["persistentVolumeClaim"]["claimName"]
                    .as_str()
                    .map(str::to_string),
                volume: vol,
            });
        }
        for r in requests {
            let handle = self
                .b
                .config
                .data_mover
                .submit_pod_volume_backup(&r)
                .map_err(|e| e.to_string())?;
            self.waits.push(Wait {
                pos: p,
                pvc: false,
                volume: Some(r.volume),
                handle,
                submitted: Instant::now(),
            });
        }
        Ok(())
    }

    /// Waits until every snapshot is taken and every pod-volume backup has finished.
    fn wait_data(&mut self) {
        for mut w in std::mem::take(&mut self.waits) {
            let outcome = if w.pvc {
                w.handle.wait_snapshot_taken()
            } else {
                w.handle.wait_finished()
            };
            let ms = Some(w.submitted.elapsed().as_millis() as u64);
            let item = self.items[w.pos];
            let mut rec = UploadResult {
                item: item.name.to_string(),
                kind: if w.pvc {
                    "data-upload"
                } else {
                    "pod-volume-backup"
                }
                .to_string(),
                volume: w.volume.take(),
                snapshot_ms: if w.pvc { ms } else { None },
                finished_ms: if w.pvc { None } else { ms },
                error: None,
            };
            if let Err(e) = outcome {
                rec.error = Some(e.to_string());
                self.status[w.pos] = (ItemStatus::Failed, Some(format!("{}: {e}", rec.kind)), None);
                self.uploads.push((rec, None));
                continue;
            }
            let pending = w.pvc.then(|| PendingUpload {
                item: item.index as u32,
                record: 0,
                handle: w.handle,
                submitted: w.submitted,
            });
            self.uploads.push((rec, pending));
        }
    }

    /// Publishes the block's outcome to the backup and hands pending uploads to the writer.
    fn commit(self) {
        let b = self.b;
        let mut pending = Vec::new();
        let mut st = b.state();
        for (item, (status, error, note)) in self.items.iter().zip(self.status) {
            st.items[item.index] = status;
            if error.is_some() || note.is_some() {
                st.messages.insert(item.index as u32, (error, note));
            }
        }
        for (rec, p) in self.uploads {
            if let Some(mut p) = p {
                p.record = st.uploads.len();
                pending.push(p);
            }
            st.uploads.push(rec);
        }
        st.hooks.extend(self.hooks);
        st.reasons.extend(self.stop);
        st.reasons.extend(self.reasons);
        st.warnings.extend(self.warnings);
        st.refused.extend(self.refused);
        st.block_times[self.block].1 = Some(SystemTime::now());
        drop(st);
        if !pending.is_empty() {
            let _ = b.writer.send(WriterMsg::Pending(pending));
        }
        b.items_done.fetch_add(self.items.len(), Ordering::AcqRel);
        b.blocks_done.fetch_add(1, Ordering::AcqRel);
        b.report_progress(false);
    }
}

/// Volume names a pod opts into pod-volume backup.
fn opted_volumes(pod: &Value) -> Vec<String> {
    pod["metadata"]["annotations"][BACKUP_VOLUMES_ANNOTATION]
        .as_str()
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn volume_of<'v>(pod: &'v Value, name: &str) -> Option<&'v Value> {
    pod["spec"]["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
}
