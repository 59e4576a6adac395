//! Item-block backups as JSON (design `item-blocks.md`): `POST /v1/backups`,
//! `GET /v1/backups`, `GET /v1/backups/{name}`, `GET /v1/backups/{name}/result`,
//! `POST /v1/backups/{name}/cancel` (the calls are in `lockgate-client`).
//!
//! A backup's life: `queued` (its `resource-backup` job waits for admission, e.g. behind
//! an overlapping backup) -> `running` (blocks are being backed up) -> `finished`, with a
//! `phase` of `Completed`, `PartiallyFailed` or `Failed` (Velero's phases).

use serde::{Deserialize, Serialize};

/// `POST /v1/backups`: what to back up. `from` is a path **on the server's filesystem**
/// (the CLI sends an absolute path).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// Unique backup name: 1-63 characters of `a-z`, `0-9`, `-`, `.` and `_`, starting
    /// with a letter or digit. The archive is `<data-dir>/backups/<name>.tar.gz`.
    pub name: String,
    /// A `kubectl get -A -o json` `List` file or a directory of `.json`/`.yaml`
    /// manifests, as an absolute path on the server.
    pub from: String,
    /// Namespaces to take (empty or `*`: all).
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
    /// Item names (`pods/ns/name`) whose blocks run first, one at a time, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ordered: Vec<String>,
    /// Run nothing; answer a [`BackupDryRun`]: the blocks (the JSON of
    /// `metadata/blocks.json`, without times), the refused items and the notes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// Where a backup is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum BackupState {
    /// Its `resource-backup` job waits for admission.
    Queued,
    /// Its blocks are being backed up.
    Running,
    /// Ended; see `phase`.
    Finished,
}

impl BackupState {
    /// The name as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            BackupState::Queued => "queued",
            BackupState::Running => "running",
            BackupState::Finished => "finished",
        }
    }
}

impl std::fmt::Display for BackupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Blocks and items done so far (a progress bar).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupProgress {
    /// Blocks finished or skipped.
    pub blocks_done: usize,
    /// Blocks in the plan.
    pub blocks_total: usize,
    /// Items finished or skipped.
    pub items_done: usize,
    /// Items in the plan.
    pub items_total: usize,
}

/// Counts of one kind of unit once a backup has finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupCounts {
    /// All.
    pub total: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

/// A backup as JSON (`GET /v1/backups/{name}`); the same record the store keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupView {
    /// Name.
    pub name: String,
    /// `queued`, `running` or `finished`.
    pub state: BackupState,
    /// `Completed`, `PartiallyFailed` or `Failed` once finished, else `null`.
    pub phase: Option<String>,
    /// The backup's `resource-backup` job. It and the backup's data-movement jobs
    /// (`data-upload`, `pod-volume-backup`) are owned by `backup:<name>`.
    pub job: Option<u64>,
    /// The principal that created it.
    pub created_by: String,
    /// The `namespaces` attribute of its job (the namespaces of the items it takes).
    pub namespaces: Vec<String>,
    /// The archive (`<data-dir>/backups/<name>.tar.gz`); it exists once the backup ran.
    pub archive: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Its job was admitted and the first block could start.
    pub started_at: Option<String>,
    /// Ended.
    pub finished_at: Option<String>,
    /// Blocks and items done; live while running.
    pub progress: BackupProgress,
    /// Item counts, once finished.
    pub items: Option<BackupCounts>,
    /// Block counts, once finished.
    pub blocks: Option<BackupCounts>,
    /// Why the phase is not `Completed`, one line per cause.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// A cancel was asked for.
    #[serde(default)]
    pub cancel_requested: bool,
    /// The request it was created from.
    pub request: BackupRequest,
    /// Items the backup's confinement refused (a non-admin's backup: namespaces its owner
    /// may not back up, hooks it may not run). Known at creation, from the plan.
    #[serde(default)]
    pub refused: Vec<BackupRefusal>,
}

/// One item a confined backup did not take, or whose manifest hooks it did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupRefusal {
    /// Item name (`pods/kube-system/etcd-0`).
    pub item: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Namespace, `null` for a cluster-scoped item.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `namespace_not_allowed`, `cluster_scoped_not_allowed` or `hooks_not_allowed` (the
    /// pod itself is backed up, its hooks are not run).
    pub reason: String,
}

/// The answer of `POST /v1/backups` with `dry_run`: nothing is run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupDryRun {
    /// The blocks in start order: `{index, items: [item names]}`.
    pub blocks: Vec<BackupDryBlock>,
    /// Items the confinement refused (see [`BackupView::refused`]).
    pub refused: Vec<BackupRefusal>,
    /// Notes about the input (special files skipped, ordered items not found).
    pub warnings: Vec<String>,
}

/// One block of a [`BackupDryRun`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupDryBlock {
    /// Position in start order.
    pub index: usize,
    /// Item names, in backup order.
    pub items: Vec<String>,
}

impl BackupView {
    /// Whether it has ended.
    pub fn is_finished(&self) -> bool {
        self.state == BackupState::Finished
    }
}

/// `GET /v1/backups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BackupList {
    /// Every backup the caller may see, oldest first.
    pub backups: Vec<BackupView>,
}

/// Checks a backup name (see [`BackupRequest::name`]).
///
/// # Errors
/// What is wrong with it and what is expected.
pub fn check_backup_name(name: &str) -> Result<(), String> {
    check_name("backup", name)
}

/// Whether `name` is a valid name for a backup or a restore (`what`): it names a file or
/// a directory in the data dir, so 1-63 characters of a-z, 0-9, '-', '.' and '_',
/// starting with a letter or digit.
///
/// # Errors
/// The message names `what`, the name and the rule.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c);
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() || name.len() > 63 || !first_ok || !name.chars().all(ok_char) {
        return Err(format!(
            "invalid {what} name {name:?}: expected 1-63 characters of a-z, 0-9, '-', '.' and '_', starting with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names() {
        for ok in ["nightly", "a", "app-1.2_x", "0day"] {
            assert_eq!(check_backup_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Nightly",
            "-x",
            ".hidden",
            "a/b",
            "a b",
            &"x".repeat(64),
        ] {
            assert!(check_backup_name(bad).is_err(), "{bad}");
        }
    }
}
