//! Writing a planned restore: one file per phase and `metadata/result.json`, all or
//! nothing.
//!
//! `<dir>/NNN-<resource>.json` holds one phase as a JSON `List` (`kubectl apply -f` takes
//! it as it is); the numbers give the order to apply them in, and sort as text in that
//! order, so `kubectl apply -f <dir>` (which reads a directory's files in name order and
//! does not descend without `-R`) applies them in order too. `<dir>/metadata/result.json`
//! is the [`RestoreResult`]: every item with its status.
//!
//! # Invariants
//! - `<dir>` appears only complete: the files are written and synced into a directory of
//!   this writer's own beside it (`.<name>.<pid>-<n>.partial`), which is then renamed; an
//!   error removes it. Two writers of one name never share a partial directory, and the
//!   rename of the second fails on the first's directory (a directory is not renamed
//!   over one that has files), so it answers that the name exists.
//! - A restore never writes into an existing restore's directory.

use super::{RestoreItem, RestorePlan};
use crate::result::Phase;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An item's outcome in a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RestoreItemStatus {
    /// Written to its phase's file.
    Restored,
    /// Left out: the target has it and the policy is `none`.
    Skipped,
    /// The archive's entry is not a usable manifest.
    Failed,
}

/// One item of a restore's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreItemResult {
    /// Its name in the target (the archive's entry when it failed).
    pub item: String,
    /// Its name in the backup.
    pub from: String,
    /// What happened to it.
    pub status: RestoreItemStatus,
    /// The phase file it is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// A remark (`exists in the target: updated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RestoreItemResult {
    pub(super) fn skipped(from: &str, item: &str, same: bool) -> Self {
        let note = if same {
            "exists in the target, the same: not written (existing-resource-policy none)"
        } else {
            "exists in the target and differs: not updated (existing-resource-policy none)"
        };
        RestoreItemResult {
            item: item.into(),
            from: from.into(),
            status: RestoreItemStatus::Skipped,
            file: None,
            note: Some(note.into()),
            error: None,
        }
    }

    pub(super) fn failed(entry: &str, why: &str) -> Self {
        RestoreItemResult {
            item: entry.into(),
            from: entry.into(),
            status: RestoreItemStatus::Failed,
            file: None,
            note: None,
            error: Some(why.into()),
        }
    }

    fn restored(i: &RestoreItem, file: &str) -> Self {
        RestoreItemResult {
            item: i.name.clone(),
            from: i.from.clone(),
            status: RestoreItemStatus::Restored,
            file: Some(file.into()),
            note: i
                .existed
                .then(|| "exists in the target: updated (existing-resource-policy update)".into()),
            error: None,
        }
    }
}

/// How many items ended how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreCounts {
    /// Written.
    pub restored: usize,
    /// Left out because the target has them.
    pub skipped: usize,
    /// Unusable in the archive.
    pub failed: usize,
}

/// `metadata/result.json` of a restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreResult {
    /// The restore's name.
    pub restore: String,
    /// The backup it restores.
    pub backup: String,
    /// `Completed`, or `PartiallyFailed` when an entry of the archive was unusable.
    pub phase: Phase,
    /// The phase files, in the order to apply them.
    pub files: Vec<String>,
    /// Items by outcome.
    pub counts: RestoreCounts,
    /// Every item, in the order of the files, then the ones left out.
    pub items: Vec<RestoreItemResult>,
    /// The restored claims whose data the backup moved (each a data download).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<super::VolumeRestore>,
    /// The restored pods whose volumes a pod-volume backup copied (each volume a
    /// pod-volume restore once the pod's node is known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_volumes: Vec<super::PodVolumeRestore>,
}

/// Why a restore's files could not be written; nothing is left behind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The restore's directory exists already.
    #[error("{}: a restore of this name exists already", path.display())]
    Exists {
        /// The directory.
        path: PathBuf,
    },
    /// A file could not be written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

impl RestorePlan {
    /// The phase files' names, in order.
    pub fn file_names(&self) -> Vec<String> {
        let width = self.phases.len().saturating_sub(1).to_string().len().max(3);
        self.phases
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{i:0width$}-{}.json", p.resource))
            .collect()
    }

    /// The result of writing this plan as restore `name` (what [`Self::write`] stores).
    pub fn result(&self, name: &str) -> RestoreResult {
        let files = self.file_names();
        let mut items: Vec<RestoreItemResult> = self
            .phases
            .iter()
            .zip(&files)
            .flat_map(|(p, f)| {
                p.items
                    .iter()
                    .map(move |i| RestoreItemResult::restored(i, f))
            })
            .collect();
        items.extend(self.left_out.iter().cloned());
        let count = |s| items.iter().filter(|i| i.status == s).count();
        let counts = RestoreCounts {
            restored: count(RestoreItemStatus::Restored),
            skipped: count(RestoreItemStatus::Skipped),
            failed: count(RestoreItemStatus::Failed),
        };
        RestoreResult {
            restore: name.into(),
            backup: self.backup.clone(),
            phase: if counts.failed > 0 {
                Phase::PartiallyFailed
            } else {
                Phase::Completed
            },
            files,
            counts,
            items,
            volumes: self.volumes.clone(),
            pod_volumes: self.pod_volumes.clone(),
        }
    }

    /// Writes the restore `name` into `dir` (`<data-dir>/restores/<name>`).
    ///
    /// # Errors
    /// [`WriteError::Exists`] when `dir` exists; [`WriteError::Io`] when a file cannot be
    /// written (the partial directory is removed).
    pub fn write(&self, name: &str, dir: &Path) -> Result<RestoreResult, WriteError> {
        let exists = || WriteError::Exists { path: dir.into() };
        if dir.exists() {
            return Err(exists());
        }
        let partial = partial_dir(dir);
        let result = self.result(name);
        let written =
            self.write_into(&partial, &result).and_then(|()| {
                fs::rename(&partial, dir).map_err(|e| {
                    if dir.exists() {
                        exists()
                    } else {
                        io(dir, e)
                    }
                })?;
                if let Some(parent) = dir.parent() {
                    File::open(parent)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| io(parent, e))?;
                }
                Ok(())
            });
        if written.is_err() {
            let _ = fs::remove_dir_all(&partial);
        }
        written.map(|()| result)
    }

    fn write_into(&self, partial: &Path, result: &RestoreResult) -> Result<(), WriteError> {
        if let Some(parent) = partial.parent() {
            fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        if partial.exists() {
            // Left by an earlier process with this pid and count, which is gone.
            fs::remove_dir_all(partial).map_err(|e| io(partial, e))?;
        }
        fs::create_dir(partial).map_err(|e| io(partial, e))?;
        for (phase, file) in self.phases.iter().zip(&result.files) {
            let items: Vec<&serde_json::Value> = phase.items.iter().map(|i| &i.manifest).collect();
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            write_json(&partial.join(file), &list)?;
        }
        let meta = partial.join("metadata");
        fs::create_dir(&meta).map_err(|e| io(&meta, e))?;
        write_json(&meta.join("result.json"), result)?;
        File::open(&meta)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(&meta, e))?;
        File::open(partial)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(partial, e))
    }
}

/// This writer's partial directory for `dir`: hidden, beside it (the same file system, so
/// the rename is atomic), named after this process and this write.
fn partial_dir(dir: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let name = dir
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let file = format!(".{name}.{}-{n}.partial", std::process::id());
    dir.with_file_name(file)
}

/// Removes the hidden directories writers of `dir` left behind (`.<name>.<pid>-<n>.partial`
/// beside it, the names `RestorePlan::write` gives them): a restore whose writer stopped
/// midway. Another restore's are left alone, also one whose name begins with this one's
/// (`a.b`'s `.a.b.<pid>-<n>.partial` is not `a`'s).
pub fn remove_partials(dir: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        let writer = n
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".partial"))
            .and_then(|w| w.split_once('-'));
        if writer.is_some_and(|(pid, n)| digits(pid) && digits(n)) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), WriteError> {
    let f = File::create(path).map_err(|e| io(path, e))?;
    let mut w = BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value).map_err(|e| io(path, e))?;
    w.write_all(b"\n").map_err(|e| io(path, e))?;
    let f = w.into_inner().map_err(|e| io(path, e.into_error()))?;
    f.sync_all().map_err(|e| io(path, e))
}

fn io(path: &Path, e: impl std::fmt::Display) -> WriteError {
    WriteError::Io {
        path: path.into(),
        message: e.to_string(),
    }
}

/// Where a restore's result is, in its directory.
pub const RESULT_FILE: &str = "metadata/result.json";

/// Reads a written restore's `metadata/result.json`.
///
/// # Errors
/// The file is missing or does not decode.
pub fn read_result(dir: &Path) -> Result<RestoreResult, WriteError> {
    let path = dir.join(RESULT_FILE);
    let text = fs::read_to_string(&path).map_err(|e| io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| io(&path, e))
}
