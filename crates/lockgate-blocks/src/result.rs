//! What a backup reports: [`Progress`] while it runs, [`BackupResult`] when it ends.
//!
//! `metadata/result.json` in the archive is a [`BackupResult`] plus `item_status`, the status
//! of every item (the in-memory [`BackupResult::items`] lists only the items that did not
//! complete, so the result stays small for large backups).
//!
//! Phase rules: `Failed` when the archive could not be written or the backup was canceled;
//! else `PartiallyFailed` when an item failed or was skipped, a `Fail` hook failed, a data
//! movement failed, the input had bad items, or the backup's confinement refused items or
//! hooks (named in [`BackupResult::refused`]); else `Completed`. `Continue` hooks that
//! fail are recorded and do not change the phase.

use crate::confine::RefusedItem;

/// The archive entry that holds a backup's result; written last, so an archive that has it
/// is whole.
pub const RESULT_ENTRY: &str = "metadata/result.json";
use crate::hooks::{HookPhase, OnError};
use serde::{Deserialize, Serialize};

/// The outcome of a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Everything was backed up.
    Completed,
    /// Some items, hooks or data movements failed; the rest was backed up.
    PartiallyFailed,
    /// The archive is unusable (write error, canceled).
    Failed,
}

impl Phase {
    /// The name as results and the API write it (`PartiallyFailed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Completed => "Completed",
            Phase::PartiallyFailed => "PartiallyFailed",
            Phase::Failed => "Failed",
        }
    }

    /// This phase once some part failed: `Completed` becomes `PartiallyFailed`, the others
    /// stay.
    pub fn with_failures(self) -> Phase {
        match self {
            Phase::Completed => Phase::PartiallyFailed,
            other => other,
        }
    }
}

/// The outcome of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemStatus {
    /// Not run yet (only seen in an unfinished backup).
    Pending,
    /// Written to the archive (and its data moved, if any).
    Completed,
    /// Could not be backed up; see the error.
    Failed,
    /// Not attempted: a `Fail` hook failed or the backup was canceled.
    Skipped,
}

/// One item's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemResult {
    /// Item name.
    pub item: String,
    /// Status.
    pub status: ItemStatus,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A remark (e.g. "not bound: no volume data").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One hook run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookResult {
    /// Block index in the plan.
    pub block: usize,
    /// `<namespace>/<pod>`.
    pub pod: String,
    /// Pre or post.
    pub phase: HookPhase,
    /// Container.
    pub container: String,
    /// The hook's argv as annotated.
    pub command: Vec<String>,
    /// Continue or Fail.
    pub on_error: OnError,
    /// Exit code (none when killed, not started or malformed).
    pub exit_code: Option<i32>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Start of stdout.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// Start of stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

/// One data movement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadResult {
    /// The PVC's or pod's item name.
    pub item: String,
    /// `data-upload` or `pod-volume-backup`.
    pub kind: String,
    /// Pod volume name, for pod-volume backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// Milliseconds from submission to snapshot taken (data uploads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_ms: Option<u64>,
    /// Milliseconds from submission to finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Counts of one kind of unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// All.
    pub total: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

/// One block's run, as `metadata/blocks.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRun {
    /// Index in the plan.
    pub index: usize,
    /// Item names.
    pub items: Vec<String>,
    /// RFC 3339, absent when the block never started.
    pub started_at: Option<String>,
    /// RFC 3339.
    pub finished_at: Option<String>,
}

/// The outcome of a backup (`metadata/result.json` without `item_status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupResult {
    /// Backup name.
    pub name: String,
    /// Phase.
    pub phase: Phase,
    /// Why the phase is not `Completed`, one line per cause.
    pub reasons: Vec<String>,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub finished_at: String,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Block counts (a block counts as failed when one of its items failed).
    pub blocks: Counts,
    /// Item counts.
    pub item_counts: Counts,
    /// Items that did not complete.
    pub items: Vec<ItemResult>,
    /// Every hook run.
    pub hooks: Vec<HookResult>,
    /// Every data movement.
    pub uploads: Vec<UploadResult>,
    /// Bad items and files of the input.
    pub input_errors: Vec<String>,
    /// Notes that did not change the phase.
    pub warnings: Vec<String>,
    /// Items the backup's confinement refused, and pods whose hooks were not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedItem>,
}

/// How far a backup is, for a progress bar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Blocks finished (or skipped).
    pub blocks_done: usize,
    /// Blocks in the plan.
    pub blocks_total: usize,
    /// Items finished (or skipped).
    pub items_done: usize,
    /// Items in the plan.
    pub items_total: usize,
    /// Whether the result is final.
    pub finished: bool,
}
