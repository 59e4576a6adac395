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

/// One restored pod whose volumes a pod-volume (file-system) backup copied: a
/// `pod-volume-restore` job per volume, on the node the pod is scheduled to. A restored
/// pod has no `spec.nodeName`, so that node is known only once the cluster schedules it:
/// it is told to the restore (`lockgate restore bind`, or the wait container of
/// [`super::RestorePlan::wait_for_pod_volumes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodVolumeRestore {
    /// The pod's name in the target (`pods/app-copy/web-0`).
    pub item: String,
    /// Its name in the backup.
    pub from: String,
    /// The target namespace.
    pub namespace: String,
    /// `metadata.name`.
    pub pod: String,
    /// The volumes to copy back, by name.
    pub volumes: Vec<String>,
}

impl PodVolumeRestore {
    /// `<namespace>/<pod>`: how the wait container names the pod to its restore, and how
    /// the restore lists it while it waits for its node.
    pub fn name(&self) -> String {
        format!("{}/{}", self.namespace, self.pod)
    }
}

/// The restored pods in `phases` with volumes a pod-volume backup copied.
pub(super) fn pod_volumes(archive: &BackupArchive, phases: &[Phase]) -> Vec<PodVolumeRestore> {
    phases
        .iter()
        .filter(|p| p.resource == "pods")
        .flat_map(|p| &p.items)
        .filter_map(|i| {
            let volumes = archive.pod_volumes.get(&i.from)?;
            let meta = &i.manifest["metadata"];
            Some(PodVolumeRestore {
                item: i.name.clone(),
                from: i.from.clone(),
                namespace: meta["namespace"].as_str()?.to_string(),
                pod: meta["name"].as_str()?.to_string(),
                volumes: volumes.iter().cloned().collect(),
            })
        })
        .collect()
}

/// The name of the wait container put first in a restored pod with pod volumes.
pub const WAIT_CONTAINER: &str = "lockgate-restore-wait";
/// The secret, in the target namespace, the wait container reads the server's URL
/// (`server`) and a token (`token`) from.
pub const WAIT_SECRET: &str = "lockgate-restore-helper";

/// The wait container of one restored pod (Velero's restore-helper, the other way round:
/// it tells the restore the node its pod was scheduled to, then waits until the pod's
/// volumes are copied back, so the pod's own containers start on restored data).
pub(super) fn wait_container(restore: &str, image: &str, pod: &PodVolumeRestore) -> Value {
    let secret = |key: &str| serde_json::json!({"valueFrom": {"secretKeyRef": {"name": WAIT_SECRET, "key": key}}});
    let env = |name: &str, mut value: Value| {
        value["name"] = Value::from(name);
        value
    };
    serde_json::json!({
        "name": WAIT_CONTAINER,
        "image": image,
        "command": ["lockgate", "restore", "bind", restore,
                    "--pod", pod.name(),
                    "--node", "$(LOCKGATE_NODE)", "--wait"],
        "env": [
            env("LOCKGATE_NODE", serde_json::json!({"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})),
            env("LOCKGATE_SERVER", secret("server")),
            env("LOCKGATE_TOKEN", secret("token")),
        ],
    })
}
