//! Reading a backup's archive for a restore.
//!
//! The archive is the tar.gz a backup writes (`crate::archive`): manifests under
//! `resources/<resource>/namespaces/<ns>/<name>.json` and
//! `resources/<resource>/cluster/<name>.json`, then `metadata/blocks.json` and, last,
//! `metadata/result.json`. An item's name comes from its path, as the backup wrote it.
//!
//! # Invariants
//! - Decompressed bytes are counted as they are read: an entry above
//!   [`InputLimits::max_file_bytes`], a total above [`InputLimits::max_total_bytes`] or more
//!   than [`InputLimits::max_items`] items refuses the archive; no entry is read whole
//!   before its size is checked.
//! - Nothing is extracted to disk; a path with an empty, `.` or `..` segment, or a resource
//!   that is not a lowercase resource name, is a bad item and never names a file.
//! - A manifest whose path and `metadata` disagree (another name or namespace) is a bad
//!   item: the restore says so instead of writing one of the two.

use crate::limits::InputLimits;
use crate::names::{
    group_of, is_resource_name, item_name, parse_archive_path, KindTable, DEFAULT_NAMESPACE,
};
use crate::restore::ARCHIVE_FORMAT;
use crate::result::RESULT_ENTRY;
use flate2::read::GzDecoder;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// One manifest of the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveItem {
    /// `<resource>/<ns>/<name>` or `<resource>/<name>`.
    pub name: String,
    /// Qualified resource (`pods`, `deployments.apps`).
    pub resource: String,
    /// Namespace, `None` for a cluster-scoped item.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub short_name: String,
    /// The manifest as the backup took it.
    pub manifest: Value,
}

impl ArchiveItem {
    /// `apiVersion` (empty when missing).
    pub fn api_version(&self) -> &str {
        self.manifest["apiVersion"].as_str().unwrap_or("")
    }

    /// `kind` (empty when missing).
    pub fn kind(&self) -> &str {
        self.manifest["kind"].as_str().unwrap_or("")
    }

    /// An item of the target named from its manifest (`kubectl get -o json` output);
    /// `None` when it has no kind or name.
    pub(crate) fn from_manifest(manifest: Value, kinds: &KindTable) -> Option<ArchiveItem> {
        let kind = manifest["kind"].as_str()?;
        let short_name = manifest["metadata"]["name"].as_str()?.to_string();
        let info = kinds.resolve(
            group_of(manifest["apiVersion"].as_str().unwrap_or("")),
            kind,
        );
        let namespace = (!info.cluster).then(|| {
            manifest["metadata"]["namespace"]
                .as_str()
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_string()
        });
        Some(ArchiveItem {
            name: item_name(&info.resource, namespace.as_deref(), &short_name),
            resource: info.resource,
            namespace,
            short_name,
            manifest,
        })
    }
}

/// A finished backup's archive, read.
#[derive(Debug, Clone, PartialEq)]
pub struct BackupArchive {
    /// The backup's name (the archive's file name without `.tar.gz`).
    pub backup: String,
    /// Its manifests, in archive order.
    pub items: Vec<ArchiveItem>,
    /// Entries that are not a usable item: (archive path, why).
    pub bad: Vec<(String, String)>,
    /// The items whose volume data the backup moved (`data-upload` jobs that succeeded,
    /// from `metadata/result.json`): PVC item names (`persistentvolumeclaims/app/data`).
    pub uploaded: BTreeSet<String>,
    /// The pod volumes a pod-volume (file-system) backup copied (`pod-volume-backup` jobs
    /// that succeeded): pod item name -> volume names.
    pub pod_volumes: BTreeMap<String, BTreeSet<String>>,
}

/// Why an archive cannot be restored from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// No archive at the path.
    #[error("{}: no such backup archive", path.display())]
    Missing {
        /// The path looked at.
        path: PathBuf,
    },
    /// The backup is still writing its archive (`<path>.partial` exists).
    #[error("{}: the backup is still running; restore from it once it has finished", path.display())]
    StillRunning {
        /// The archive's path.
        path: PathBuf,
    },
    /// Not a readable tar.gz, or cut short.
    #[error("{}: damaged or truncated archive: {message}", path.display())]
    Damaged {
        /// The archive's path.
        path: PathBuf,
        /// What the reader found.
        message: String,
    },
    /// Over one of the caps of [`InputLimits`].
    #[error("{}: {what} exceeds {cap} (the archive is refused)", path.display())]
    Limit {
        /// The archive's path.
        path: PathBuf,
        /// Which cap.
        what: String,
        /// Its value.
        cap: u64,
    },
    /// Written by a newer lockgate.
    #[error("{}: archive format {format} is newer than this lockgate reads ({ARCHIVE_FORMAT}); restore with a newer lockgate", path.display())]
    Newer {
        /// The archive's path.
        path: PathBuf,
        /// Its format.
        format: u64,
    },
    /// The backup failed: its archive is not a backup to restore from.
    #[error("{}: the backup failed ({reasons}); it cannot be restored from", path.display())]
    Failed {
        /// The archive's path.
        path: PathBuf,
        /// The backup's reasons.
        reasons: String,
    },
}

/// Reads the archive at `path` within `limits`.
///
/// # Errors
/// See [`ArchiveError`].
pub fn read(path: &Path, limits: &InputLimits) -> Result<BackupArchive, ArchiveError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(if crate::archive::partial(path).exists() {
                ArchiveError::StillRunning { path: path.into() }
            } else {
                ArchiveError::Missing { path: path.into() }
            });
        }
        Err(e) => return Err(damaged(path, e)),
    };
    read_tar(GzDecoder::new(BufReader::new(file)), path, limits)
}

/// Reads an archive's tar stream (already decompressed); `path` names the archive in
/// errors and gives the backup's name.
///
/// # Errors
/// See [`ArchiveError`] (all but `Missing` and `StillRunning`).
pub fn read_tar(
    stream: impl Read,
    path: &Path,
    limits: &InputLimits,
) -> Result<BackupArchive, ArchiveError> {
    let backup = path
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".tar.gz").to_string())
        .unwrap_or_default();
    let mut reader = Reader {
        path,
        limits,
        total: 0,
        out: BackupArchive {
            backup,
            items: Vec::new(),
            bad: Vec::new(),
            uploaded: BTreeSet::new(),
            pod_volumes: BTreeMap::new(),
        },
        result: None,
    };
    let mut tar = tar::Archive::new(stream);
    for entry in tar.entries().map_err(|e| damaged(path, e))? {
        let entry = entry.map_err(|e| damaged(path, e))?;
        reader.entry(entry)?;
    }
    reader.finish()
}

fn damaged(path: &Path, e: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::Damaged {
        path: path.into(),
        message: e.to_string(),
    }
}

struct Reader<'a> {
    path: &'a Path,
    limits: &'a InputLimits,
    total: u64,
    out: BackupArchive,
    result: Option<Value>,
}

impl Reader<'_> {
    fn entry(&mut self, mut entry: tar::Entry<'_, impl Read>) -> Result<(), ArchiveError> {
        let name = entry
            .path()
            .map_err(|e| damaged(self.path, e))?
            .to_string_lossy()
            .into_owned();
        if !entry.header().entry_type().is_file() {
            return Ok(());
        }
        let bytes = self.contents(&mut entry, &name)?;
        if name == RESULT_ENTRY {
            let v = serde_json::from_slice(&bytes)
                .map_err(|e| damaged(self.path, format!("{RESULT_ENTRY}: {e}")))?;
            self.result = Some(v);
        } else if name.starts_with("resources/") {
            if self.out.items.len() + self.out.bad.len() >= self.limits.max_items {
                return Err(self.limit("the number of items", self.limits.max_items as u64));
            }
            match item(&name, &bytes) {
                Ok(i) => self.out.items.push(i),
                Err(why) => self.out.bad.push((name, why)),
            }
        }
        Ok(())
    }

    /// The entry's bytes, counted against the caps as they are read.
    fn contents(&mut self, entry: &mut impl Read, name: &str) -> Result<Vec<u8>, ArchiveError> {
        let cap = self.limits.max_file_bytes;
        let mut bytes = Vec::new();
        entry
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| damaged(self.path, format!("{name}: {e}")))?;
        if bytes.len() as u64 > cap {
            return Err(self.limit(&format!("entry {name}"), cap));
        }
        self.total += bytes.len() as u64;
        if self.total > self.limits.max_total_bytes {
            return Err(self.limit("the archive's unpacked size", self.limits.max_total_bytes));
        }
        Ok(bytes)
    }

    fn limit(&self, what: &str, cap: u64) -> ArchiveError {
        ArchiveError::Limit {
            path: self.path.into(),
            what: what.to_string(),
            cap,
        }
    }

    fn finish(self) -> Result<BackupArchive, ArchiveError> {
        let Some(result) = self.result else {
            return Err(damaged(
                self.path,
                format!("no {RESULT_ENTRY} (a backup writes it last)"),
            ));
        };
        let format = result["format"].as_u64().unwrap_or(1);
        if format > ARCHIVE_FORMAT {
            return Err(ArchiveError::Newer {
                path: self.path.into(),
                format,
            });
        }
        if result["phase"] == "Failed" {
            let reasons: Vec<&str> = result["reasons"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            return Err(ArchiveError::Failed {
                path: self.path.into(),
                reasons: reasons.join("; "),
            });
        }
        let mut out = self.out;
        let moved = |kind: &'static str| {
            result["uploads"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(move |u| u["kind"] == kind && u.get("error").is_none_or(Value::is_null))
                .filter_map(|u| Some((u["item"].as_str()?, u["volume"].as_str())))
        };
        out.uploaded = moved("data-upload")
            .map(|(item, _)| item.to_string())
            .collect();
        for (pod, volume) in moved("pod-volume-backup") {
            if let Some(volume) = volume {
                let volumes = out.pod_volumes.entry(pod.to_string()).or_default();
                volumes.insert(volume.to_string());
            }
        }
        Ok(out)
    }
}

/// The item of one `resources/...` entry.
fn item(path: &str, bytes: &[u8]) -> Result<ArchiveItem, String> {
    let Some((resource, namespace, short)) = parse_archive_path(path) else {
        return Err("not a resources/<resource>/... path".into());
    };
    let segments = [resource, namespace.unwrap_or("x"), short];
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Err("an empty, '.' or '..' path segment".into());
    }
    if !is_resource_name(resource) {
        return Err(format!("{resource:?} is not a resource name"));
    }
    let manifest: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let meta = &manifest["metadata"];
    if meta["name"].as_str() != Some(short) {
        return Err(format!(
            "metadata.name {} does not match the path",
            meta["name"]
        ));
    }
    if let Some(ns) = namespace {
        let stated = meta["namespace"].as_str().unwrap_or(DEFAULT_NAMESPACE);
        if stated != ns {
            return Err(format!(
                "metadata.namespace {stated:?} does not match the path"
            ));
        }
    }
    if manifest["kind"].as_str().is_none_or(str::is_empty) {
        return Err("no kind".into());
    }
    Ok(ArchiveItem {
        name: item_name(resource, namespace, short),
        resource: resource.to_string(),
        namespace: namespace.map(str::to_string),
        short_name: short.to_string(),
        manifest,
    })
}
