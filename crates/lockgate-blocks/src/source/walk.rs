//! The walk over an input: which files are read, and why the others are not.
//!
//! Invariants:
//! - the input path is first resolved by the [`InputScope`]: a confined path outside the
//!   roots ends the load before anything is read;
//! - every directory is walked at most once, keyed by (device, inode), so a symlink loop,
//!   `/proc/self/root` or a second link to a directory cannot make the walk endless;
//! - a symlink is followed only when its canonical target is allowed by the scope (for a
//!   confined caller: inside a root); a confined walk gives one message for every symlink
//!   it does not follow, whether the target is missing or exists outside (no oracle);
//! - only regular files are listed; a FIFO, socket or device is never opened (its type
//!   comes from `symlink_metadata`/`metadata`); one named like a manifest is an
//!   [`InputError`] saying what it is;
//! - at most [`InputLimits::max_entries`](crate::InputLimits::max_entries) entries are
//!   examined, and the [`Cancel`](crate::Cancel) token is checked before each.

use super::{format_by_extension, Format, InputError, LoadError, ScanCtx};
use crate::limits::{special_kind, FileId};
use std::collections::HashSet;
use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Skip notes kept per walk; more are counted.
const MAX_NOTES: usize = 100;

/// The message for a symlink a confined walk does not follow, whatever its target.
const NOT_FOLLOWED: &str =
    "symbolic link not followed: it does not lead to an existing path inside a backup input root";

/// A regular file to read.
#[derive(Debug)]
pub(crate) struct WalkedFile {
    pub path: PathBuf,
    pub format: Format,
    pub id: FileId,
    /// Length when walked.
    pub len: u64,
}

/// The result of a walk.
pub(crate) struct Walk<'a> {
    ctx: &'a ScanCtx<'a>,
    seen: HashSet<FileId>,
    entries: usize,
    /// Files to read, sorted by path.
    pub files: Vec<WalkedFile>,
    /// Entries named like manifests that are not read.
    pub errors: Vec<InputError>,
    /// Other entries passed over, with the reason (at most [`MAX_NOTES`]).
    notes: Vec<String>,
    more_notes: usize,
}

impl<'a> Walk<'a> {
    /// Walks `input` under `ctx`.
    pub fn run(input: &Path, ctx: &'a ScanCtx<'a>) -> Result<Walk<'a>, LoadError> {
        let mut w = Walk {
            ctx,
            seen: HashSet::new(),
            entries: 0,
            files: Vec::new(),
            errors: Vec::new(),
            notes: Vec::new(),
            more_notes: 0,
        };
        let resolved = ctx.confinement.input.resolve(input)?;
        let unreadable = |e: std::io::Error| LoadError::Unreadable {
            path: input.to_path_buf(),
            message: e.to_string(),
        };
        let meta = std::fs::symlink_metadata(&resolved).map_err(unreadable)?;
        let (path, meta) = if meta.file_type().is_symlink() {
            // Only an unconfined input can be a symlink here: a confined one is canonical.
            let target = std::fs::canonicalize(&resolved).map_err(unreadable)?;
            let meta = std::fs::metadata(&target).map_err(unreadable)?;
            (target, meta)
        } else {
            (resolved, meta)
        };
        if meta.is_dir() {
            w.seen.insert(FileId::of(&meta));
            w.dir(&path)?;
        } else if let Some(kind) = special_kind(&meta) {
            return Err(LoadError::NotRegular {
                path: input.to_path_buf(),
                kind,
            });
        } else {
            let id = FileId::of(&meta);
            let format = sniff_format(&path, id);
            w.files.push(WalkedFile {
                path,
                format,
                id,
                len: meta.len(),
            });
        }
        Ok(w)
    }

    /// The skip notes, with a count of those not kept.
    pub fn notes(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        if self.more_notes > 0 {
            out.push(format!("and {} more entries passed over", self.more_notes));
        }
        out
    }

    fn tick(&mut self) -> Result<(), LoadError> {
        if self.ctx.cancel.is_canceled() {
            return Err(LoadError::Canceled);
        }
        self.entries += 1;
        let max = self.ctx.limits.max_entries;
        if self.entries > max {
            return Err(LoadError::Limit {
                cap: "max_entries",
                value: max as u64,
                message: format!("the walk examined more than {max} directory entries"),
            });
        }
        Ok(())
    }

    fn dir(&mut self, dir: &Path) -> Result<(), LoadError> {
        let err = |e: std::io::Error| LoadError::Directory {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(err)? {
            self.tick()?;
            paths.push(entry.map_err(err)?.path());
        }
        paths.sort();
        for path in paths {
            if self.ctx.cancel.is_canceled() {
                return Err(LoadError::Canceled);
            }
            self.entry(&path)?;
        }
        Ok(())
    }

    fn entry(&mut self, path: &Path) -> Result<(), LoadError> {
        let manifest = format_by_extension(path);
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => {
                self.pass_over(path, manifest, format!("cannot read: {e}"));
                return Ok(());
            }
        };
        let (target, meta) = if meta.file_type().is_symlink() {
            match self.follow(path) {
                Ok(t) => t,
                Err(message) => {
                    self.pass_over(path, manifest, message);
                    return Ok(());
                }
            }
        } else {
            (path.to_path_buf(), meta)
        };
        if meta.is_dir() {
            if self.seen.insert(FileId::of(&meta)) {
                self.dir(&target)?;
            } else {
                let why = "directory already walked (a symlink loop or a second link to it); not walked again";
                self.pass_over(path, None, why.into());
            }
        } else if let (None, Some(kind)) = (manifest, special_kind(&meta)) {
            self.pass_over(path, None, format!("a {kind}; not read"));
        } else if let Some(format) = manifest {
            match special_kind(&meta) {
                None => self.files.push(WalkedFile {
                    path: target,
                    format,
                    id: FileId::of(&meta),
                    len: meta.len(),
                }),
                Some(kind) => self.pass_over(
                    path,
                    manifest,
                    format!("a {kind}, not a regular file; not read (only regular files are read)"),
                ),
            }
        }
        Ok(())
    }

    /// The target of a symlink, if the scope lets the walk follow it.
    fn follow(&self, link: &Path) -> Result<(PathBuf, Metadata), String> {
        let scope = &self.ctx.confinement.input;
        match scope.follow(link) {
            Ok(target) => match std::fs::metadata(&target) {
                Ok(meta) => Ok((target, meta)),
                Err(_) if scope.is_confined() => Err(NOT_FOLLOWED.into()),
                Err(e) => Err(format!("symbolic link to {}: {e}", target.display())),
            },
            Err(Some(e)) => Err(format!("symbolic link leads nowhere: {e}")),
            Err(None) => Err(NOT_FOLLOWED.into()),
        }
    }

    /// Records an entry that is not read: an error when it is named like a manifest, else a
    /// note.
    fn pass_over(&mut self, path: &Path, manifest: Option<Format>, message: String) {
        if manifest.is_some() {
            self.errors.push(InputError {
                file: path.to_path_buf(),
                item: String::new(),
                message,
            });
        } else if self.notes.len() < MAX_NOTES {
            self.notes.push(format!("{}: {message}", path.display()));
        } else {
            self.more_notes += 1;
        }
    }
}

/// The format of a file named directly: by extension, else JSON if it starts with `{`/`[`.
fn sniff_format(path: &Path, id: FileId) -> Format {
    if let Some(f) = format_by_extension(path) {
        return f;
    }
    let mut head = Vec::with_capacity(512);
    let _ = crate::limits::open_regular(path, Some(id))
        .and_then(|f| f.take(512).read_to_end(&mut head));
    match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => Format::Json,
        _ => Format::Yaml,
    }
}
