//! Restores of item-block backups as JSON: `POST /v1/restores`, `GET /v1/restores`,
//! `GET /v1/restores/{name}`, `GET /v1/restores/{name}/result`,
//! `POST /v1/restores/{name}/cancel`, `POST /v1/restores/{name}/pods` (the calls are in
//! `lockgate-client`).
//!
//! A restore's life is a backup's: `queued` (its `resource-restore` job waits for
//! admission, e.g. behind an overlapping restore) -> `running` (its files are being
//! written) -> `finished`, with a `phase` of `Completed`, `PartiallyFailed` or `Failed`.

use crate::{BackupRefusal, BackupState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What to do with an item the target already has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ExistingResourcePolicy {
    /// Leave it as it is: the item is not written (Velero's default).
    #[default]
    None,
    /// Write the backup's version, so applying the files updates it.
    Update,
}

/// `POST /v1/restores`: what to restore, from which backup of the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// Unique restore name (the rule of a backup name). The files are written into
    /// `<data-dir>/restores/<name>/`.
    pub name: String,
    /// The backup to restore: the name of a finished backup of this server.
    pub backup: String,
    /// Namespaces to take, as the backup names them (empty or `*`: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_namespaces: Vec<String>,
    /// Namespaces to leave out (wins over the include list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_namespaces: Vec<String>,
    /// Resources to take (`pods`, `deployments.apps`, `Deployment`; empty or `*`: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_resources: Vec<String>,
    /// Resources to leave out (wins over the include list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_resources: Vec<String>,
    /// `true`: every cluster-scoped item; `false`: none; absent: all of them without a
    /// namespace filter, only those an included item relates to under one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_cluster_resources: Option<bool>,
    /// Label selector over the items (`kubectl get -l` syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Source namespace -> target namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace_mappings: BTreeMap<String, String>,
    /// What the target already has: a `kubectl get -A -o json` `List` file or a
    /// directory of manifests (an earlier restore's directory too), as an absolute path
    /// on the server. Absent: nothing, every item is new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<String>,
    /// An item the target has: `none` leaves it out, `update` writes it again.
    #[serde(default)]
    pub existing_resource_policy: ExistingResourcePolicy,
    /// Keep each item's `status` (default: removed; the cluster sets it again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore_status: bool,
    /// Keep Services' node ports (default: removed; the cluster assigns free ones).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preserve_node_ports: bool,
    /// The order of the phases: resources first, then `-`, then resources last
    /// (`namespaces,pods,-,ingresses`). Absent: Velero's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_resource_priorities: Option<String>,
    /// Write nothing; answer the result the restore would write (its
    /// `metadata/result.json`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// How long the restore waits, once its files are written, to be told the node of
    /// each restored pod whose volumes it copies back (`POST
    /// /v1/restores/{name}/pods`); a pod not bound by then is a failure of the restore.
    /// Absent: [`POD_VOLUME_TIMEOUT_S`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_volume_timeout_s: Option<u64>,
}

/// The default of [`RestoreRequest::pod_volume_timeout_s`]: 4 hours (Velero's file-system
/// backup timeout).
pub const POD_VOLUME_TIMEOUT_S: u64 = 4 * 3600;

/// `POST /v1/restores/{name}/pods`: the node a restored pod was scheduled to, so its
/// volumes are copied back there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RestorePodBind {
    /// `<namespace>/<pod>` in the target, one of the restore's `pods_waiting`.
    pub pod: String,
    /// The node the cluster scheduled it to (its `spec.nodeName`).
    pub node: String,
}

/// The answer to a [`RestorePodBind`]: the pod's `pod-volume-restore` jobs, one per
/// volume, pinned to its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestorePodBound {
    /// The restore.
    pub restore: String,
    /// `<namespace>/<pod>`.
    pub pod: String,
    /// The node.
    pub node: String,
    /// The jobs, in the order of the pod's volumes.
    pub jobs: Vec<u64>,
}

/// Items of a finished restore by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestoreCounts {
    /// Written into a phase file.
    pub restored: usize,
    /// Left out: the target has it (`existing_resource_policy = none`).
    pub skipped: usize,
    /// Left out: its entry in the archive is unusable.
    pub failed: usize,
}

/// A restore as JSON (`GET /v1/restores/{name}`); the same record the store keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestoreView {
    /// Name.
    pub name: String,
    /// `queued`, `running` or `finished`.
    pub state: BackupState,
    /// `Completed`, `PartiallyFailed` or `Failed` once finished, else `null`.
    pub phase: Option<String>,
    /// The restore's `resource-restore` job, owned by `restore:<name>`.
    pub job: Option<u64>,
    /// The principal that created it.
    pub created_by: String,
    /// The backup it restores.
    pub backup: String,
    /// The `namespaces` attribute of its job: the namespaces it writes into (after the
    /// mapping).
    pub namespaces: Vec<String>,
    /// The `volumes` attribute of its job: the persistent volumes it writes (their names
    /// are cluster-wide, kept under a mapping).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// The directory of its files (`<data-dir>/restores/<name>`); it exists once the
    /// restore has finished with files.
    pub directory: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Its job was admitted and the files started to be written.
    pub started_at: Option<String>,
    /// Ended.
    pub finished_at: Option<String>,
    /// Items planned: restored, skipped, failed (final once finished).
    pub items: RestoreCounts,
    /// The phase files, in the order to apply them (`kubectl apply -f <directory>`).
    #[serde(default)]
    pub files: Vec<String>,
    /// Its `data-download` jobs, one per restored claim whose data the backup moved
    /// (submitted once the files are written), and its `pod-volume-restore` jobs, one per
    /// pod volume a file-system backup copied (submitted once the pod's node is known);
    /// the restore ends when they have.
    #[serde(default)]
    pub data_jobs: Vec<u64>,
    /// Restored pods (`<namespace>/<pod>`) whose volumes wait for the node the pod is
    /// scheduled to (`POST /v1/restores/{name}/pods`, `lockgate restore bind`). A restore
    /// the server stopped while it waited keeps them here once `Failed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_waiting: Vec<String>,
    /// The restored pods' post-restore hooks (`post.hook.restore.lockgate.io/*`), run once
    /// the data is back, in order.
    #[serde(default)]
    pub hooks: Vec<RestoreHookResult>,
    /// Why the phase is not `Completed`, one line per cause.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// A cancel was asked for.
    #[serde(default)]
    pub cancel_requested: bool,
    /// The request it was created from.
    pub request: RestoreRequest,
    /// Items the restore's confinement left out (a non-admin's restore: namespaces its
    /// owner may not back up, cluster-scoped items).
    #[serde(default)]
    pub refused: Vec<BackupRefusal>,
}

impl RestoreView {
    /// Whether it has ended.
    pub fn is_finished(&self) -> bool {
        self.state == BackupState::Finished
    }
}

/// How one post-restore hook ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestoreHookResult {
    /// `<namespace>/<pod>` in the target.
    pub pod: String,
    /// The container it ran in.
    pub container: String,
    /// The hook's argv as annotated.
    pub command: Vec<String>,
    /// Exit code (none when killed, not started or malformed).
    pub exit_code: Option<i64>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `Continue` or `Fail`: what its failure does to the restore.
    pub on_error: String,
}

/// `GET /v1/restores`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestoreList {
    /// Every restore the caller may see, oldest first.
    pub restores: Vec<RestoreView>,
}
