//! The volumes a restore moves data back into: one per restored claim whose data the
//! backup moved (a `data-upload` job that succeeded), each a `data-download` job of the
//! server (design: a two-stage agent job, prepare provisions the target, run copies the
//! data back).
//!
//! Where it runs: a claim whose storage class binds on first consumer
//! (`volumeBindingMode: WaitForFirstConsumer`) gets its volume on the node its pod is
//! scheduled to, so its download is pinned to the node the claim's pod ran on when it was
//! backed up (`spec.nodeName`); any other claim's download may run on any agent node that
//! takes the kind.

use super::read::{ArchiveItem, BackupArchive};
use super::Phase;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One volume to move data back into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRestore {
    /// The claim's name in the target (`persistentvolumeclaims/app-copy/data`).
    pub item: String,
    /// Its name in the backup.
    pub from: String,
    /// The target namespace.
    pub namespace: String,
    /// The claim's name.
    pub pvc: String,
    /// The volume it was bound to (`spec.volumeName`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
    /// Its storage class, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// The node its download is pinned to (the storage class binds on first consumer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

const PVC: &str = "persistentvolumeclaims";

/// The volumes of the restored claims in `phases`.
pub(super) fn volumes(archive: &BackupArchive, phases: &[Phase]) -> Vec<VolumeRestore> {
    let by_name = |name: &str| archive.items.iter().find(|i| i.name == name);
    phases
        .iter()
        .filter(|p| p.resource == PVC)
        .flat_map(|p| &p.items)
        .filter(|i| archive.uploaded.contains(&i.from))
        .filter_map(|i| {
            let source = by_name(&i.from)?;
            let spec = &source.manifest["spec"];
            let text = |v: &Value| v.as_str().map(str::to_string);
            let storage_class = text(&spec["storageClassName"]);
            let node = storage_class
                .as_deref()
                .filter(|sc| binds_on_first_consumer(archive, sc))
                .and_then(|_| node_of_claim(archive, source));
            Some(VolumeRestore {
                item: i.name.clone(),
                from: i.from.clone(),
                namespace: text(&i.manifest["metadata"]["namespace"])?,
                pvc: source.short_name.clone(),
                volume_name: text(&spec["volumeName"]),
                storage_class,
                node,
            })
        })
        .collect()
}

fn binds_on_first_consumer(archive: &BackupArchive, class: &str) -> bool {
    archive.items.iter().any(|i| {
        i.kind() == "StorageClass"
            && i.short_name == class
            && i.manifest["volumeBindingMode"] == "WaitForFirstConsumer"
    })
}

/// The node a pod of the claim's namespace that mounts it ran on.
fn node_of_claim(archive: &BackupArchive, claim: &ArchiveItem) -> Option<String> {
    archive
        .items
        .iter()
        .filter(|i| i.kind() == "Pod" && i.namespace == claim.namespace)
        .find(|pod| {
            pod.manifest["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["persistentVolumeClaim"]["claimName"] == claim.short_name.as_str())
        })
        .and_then(|pod| {
            pod.manifest["spec"]["nodeName"]
                .as_str()
                .map(str::to_string)
        })
}
