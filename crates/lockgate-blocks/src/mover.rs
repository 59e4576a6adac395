//! Extension points of a running backup: moving volume data ([`DataMover`]) and acting on
//! each item ([`ItemAction`]).
//!
//! Both are called from the worker pool's threads (plain `std` threads, never a tokio
//! worker), so their methods may block; an implementation backed by an async client can use
//! `tokio::runtime::Handle::block_on` inside them.
//!
//! Invariant (Velero issue 8159): a block's post-hooks run only after every PVC upload of
//! the block reported [`MoverHandle::wait_snapshot_taken`] and every pod-volume backup
//! reported [`MoverHandle::wait_finished`].

use crate::plan::ItemRef;
use serde_json::Value;

/// Why a data movement failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoverError {
    /// The job could not be submitted (scheduler unreachable, rejected). Retrying may help.
    #[error("submit failed (temporary): {0}")]
    Submit(String),
    /// The job ran and failed. Permanent for this backup.
    #[error("data movement failed: {0}")]
    Failed(String),
    /// The job was canceled.
    #[error("data movement canceled")]
    Canceled,
}

/// A PVC's volume to upload: a two-stage `data-upload` job (prepare/expose, then move).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvcUpload {
    /// Backup name.
    pub backup: String,
    /// Item name (`persistentvolumeclaims/<ns>/<name>`).
    pub item: String,
    /// PVC namespace.
    pub namespace: String,
    /// PVC name.
    pub pvc: String,
    /// Bound PV (`spec.volumeName`).
    pub volume_name: String,
    /// `spec.storageClassName`, if any.
    pub storage_class: Option<String>,
    /// Node selector for the job (`[blocks].data_upload_selector`, `""` = any node).
    pub node_selector: String,
}

/// A pod volume to back up file by file: a `pod-volume-backup` job pinned to the pod's node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolumeBackup {
    /// Backup name.
    pub backup: String,
    /// Item name of the pod.
    pub item: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// `spec.nodeName` of the pod: the job must run there.
    pub node: String,
    /// Volume name (from `backup.lockgate.io/backup-volumes`).
    pub volume: String,
    /// The PVC behind the volume, if it is one.
    pub pvc: Option<String>,
}

/// A submitted data movement.
pub trait MoverHandle: Send {
    /// Blocks until the snapshot is taken (the job is `prepared` or later).
    ///
    /// # Errors
    /// When the job failed or was canceled before its snapshot was taken.
    fn wait_snapshot_taken(&mut self) -> Result<(), MoverError>;

    /// Blocks until the data is moved (the job finished).
    ///
    /// # Errors
    /// When the job failed or was canceled.
    fn wait_finished(&mut self) -> Result<(), MoverError>;
}

/// Moves volume data; the server implements it with scheduler jobs.
pub trait DataMover: Send + Sync {
    /// Submits the upload of a PVC's volume.
    ///
    /// # Errors
    /// [`MoverError::Submit`] when the job cannot be submitted.
    fn submit_pvc_upload(&self, request: &PvcUpload) -> Result<Box<dyn MoverHandle>, MoverError>;

    /// Submits a file-system backup of one pod volume, on the pod's node.
    ///
    /// # Errors
    /// [`MoverError::Submit`] when the job cannot be submitted.
    fn submit_pod_volume_backup(
        &self,
        request: &PodVolumeBackup,
    ) -> Result<Box<dyn MoverHandle>, MoverError>;
}

/// A [`DataMover`] for manifest-only backups and tests: every movement is done at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMover;

struct Done;

impl MoverHandle for Done {
    fn wait_snapshot_taken(&mut self) -> Result<(), MoverError> {
        Ok(())
    }
    fn wait_finished(&mut self) -> Result<(), MoverError> {
        Ok(())
    }
}

impl DataMover for NoopMover {
    fn submit_pvc_upload(&self, _: &PvcUpload) -> Result<Box<dyn MoverHandle>, MoverError> {
        Ok(Box::new(Done))
    }
    fn submit_pod_volume_backup(
        &self,
        _: &PodVolumeBackup,
    ) -> Result<Box<dyn MoverHandle>, MoverError> {
        Ok(Box::new(Done))
    }
}

/// Called for every item before its manifest is written (Velero's BackupItemAction hook
/// point): it may change the manifest, or fail the item with a message.
pub trait ItemAction: Send + Sync {
    /// Acts on one item.
    ///
    /// # Errors
    /// A message; the item is recorded as failed and not written.
    fn execute(&self, item: &ItemRef<'_>, manifest: &mut Value) -> Result<(), String>;
}

impl<F> ItemAction for F
where
    F: Fn(&ItemRef<'_>, &mut Value) -> Result<(), String> + Send + Sync,
{
    fn execute(&self, item: &ItemRef<'_>, manifest: &mut Value) -> Result<(), String> {
        self(item, manifest)
    }
}
