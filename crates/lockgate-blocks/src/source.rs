//! Reading items from the input, once to index them and again, lazily, to back them up.
//!
//! The input is a `kubectl get -A -o json` `List` file or a directory of `.json`, `.yaml`
//! and `.yml` manifests (a YAML file may hold several `---` documents, a JSON or YAML
//! document may be a `List`). `scan` walks it in a deterministic order (directory entries
//! sorted by name, recursively) and hands every item to a callback together with its
//! `Location`: file, byte offset and length. `Sources::load` re-reads one item from its
//! location.
//!
//! Invariants:
//! - a JSON `List` file is never held in memory whole: a byte-level scanner (`json_scan`)
//!   finds each element of `items` and only that element's bytes are parsed, one at a time;
//! - a YAML file is read whole while it is indexed (YAML has no cheap structural scan) and
//!   each document is parsed on its own; the items of a YAML `List` (`kubectl get -o yaml`)
//!   are copied as JSON to a temporary spill file, removed with the `Sources`, so reading
//!   one item back never re-parses the whole list;
//! - a bad item (malformed, not an object) becomes an [`InputError`] naming the file and the
//!   item, and the scan goes on with the next one; only a missing or unreadable input path,
//!   a refused one, an exceeded total cap or a cancel is fatal ([`LoadError`]);
//! - which files are read is decided by the walk (`walk`: confinement, regular files only,
//!   no endless walks); every file is opened by `limits::open_regular` and read through a
//!   `limits::Capped` reader, at index time and again when an item is read back, so the
//!   caps of [`InputLimits`] hold even for a file that grows or is swapped meanwhile.

mod json_scan;
mod walk;

use crate::confine::{Confinement, InputRefused};
use crate::limits::{open_regular, size, Cancel, Capped, FileId, InputLimits};
use serde_json::Value;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use walk::{Walk, WalkedFile};

/// How a file is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Yaml,
}

/// Where an item's manifest lives, to read it again when its block runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location {
    start: u64,
    /// The input file the item came from.
    file: u32,
    len: u32,
    /// The bytes are in the spill file, not in `file`.
    spilled: bool,
}

/// A problem with one item or one file of the input; the other items are still read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file the item came from.
    pub file: PathBuf,
    /// Which item of the file: `items[3]`, `document 2 (line 14)`, the item's name, or
    /// empty when the whole file is at fault.
    pub item: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.item.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.item,
                self.message
            )
        }
    }
}

/// The input as a whole could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The input path does not exist or cannot be read.
    #[error("cannot read input {path}: {message}")]
    Unreadable {
        /// The path given.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
    /// A directory below the input cannot be listed.
    #[error("cannot list directory {path}: {message}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
    /// An `ordered` entry or a filter is not well formed.
    #[error("invalid option {option}: {message}")]
    Option {
        /// The option (`ordered`, `include_resources`, ...).
        option: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A confined caller's input path is not inside an input root; nothing was read.
    #[error(transparent)]
    Refused(#[from] InputRefused),
    /// The input path is a FIFO, socket or device: only regular files and directories are
    /// read (it was not opened).
    #[error("cannot read input {path}: it is a {kind}, not a regular file or a directory; only regular files are read")]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// `FIFO`, `socket`, `character device`, `block device`.
        kind: &'static str,
    },
    /// The input exceeds a cap of [`InputLimits`]; the plan was abandoned.
    #[error("input exceeds {cap} = {value}: {message}; narrow the input or raise the cap ([blocks] {cap})")]
    Limit {
        /// The cap's name (`max_total_bytes`, `max_items`, `max_entries`).
        cap: &'static str,
        /// Its value.
        value: u64,
        /// What was found.
        message: String,
    },
    /// The plan's [`Cancel`] token was set (the client went away); the plan was abandoned.
    #[error("planning was canceled")]
    Canceled,
}

/// One item found by [`scan`].
pub(crate) struct Found<'a> {
    /// Where to read it again.
    pub loc: Location,
    /// Its file.
    pub file: &'a Path,
    /// Its position in the file, for error messages (`items[3]`, `document 2 (line 5)`).
    pub position: String,
    /// Its manifest.
    pub value: Value,
}

/// How one scan is bounded.
pub(crate) struct ScanCtx<'a> {
    pub confinement: &'a Confinement,
    pub limits: &'a InputLimits,
    pub cancel: &'a Cancel,
}

/// The files of one input, to re-read items from.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    files: Vec<(PathBuf, Format, FileId)>,
    spill: Option<Spill>,
    /// Entries the walk passed over, with the reason.
    pub notes: Vec<String>,
}

impl Sources {
    /// The input file a location's item came from.
    pub fn path(&self, loc: &Location) -> &Path {
        &self.files[loc.file as usize].0
    }

    /// Reads one item again (from the same regular file that was indexed, never more than
    /// its indexed length).
    pub fn load(&self, loc: &Location) -> Result<Value, String> {
        let (path, format, id) = match (&self.spill, loc.spilled) {
            (Some(spill), true) => (&spill.path, Format::Json, None),
            _ => {
                let (p, f, id) = &self.files[loc.file as usize];
                (p, *f, Some(*id))
            }
        };
        let mut file =
            open_regular(path, id).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        file.seek(SeekFrom::Start(loc.start))
            .map_err(|e| format!("cannot seek in {}: {e}", path.display()))?;
        let mut bytes = Vec::with_capacity(loc.len as usize);
        file.take(u64::from(loc.len))
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if bytes.len() != loc.len as usize {
            return Err(format!("{} changed since it was indexed", path.display()));
        }
        match format {
            Format::Json => {
                serde_json::from_slice(&bytes).map_err(|e| format!("malformed JSON: {e}"))
            }
            Format::Yaml => parse_yaml(&bytes),
        }
    }
}

/// A temporary file holding YAML `List` items as JSON; removed when dropped.
#[derive(Debug)]
struct Spill {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    len: u64,
}

impl Spill {
    fn create() -> std::io::Result<Spill> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("lockgate-blocks-{}-{n}.spill.json", std::process::id());
        let path = std::env::temp_dir().join(name);
        let file = File::options().write(true).create_new(true).open(&path)?;
        Ok(Spill {
            path,
            out: Some(BufWriter::new(file)),
            len: 0,
        })
    }

    /// Appends one item; returns its offset and length.
    fn append(&mut self, v: &Value) -> std::io::Result<(u64, u32)> {
        let bytes = serde_json::to_vec(v)?;
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| std::io::Error::other("spill file closed"))?;
        out.write_all(&bytes)?;
        let start = self.len;
        self.len += bytes.len() as u64;
        Ok((start, bytes.len() as u32))
    }

    fn close(&mut self) -> std::io::Result<()> {
        match self.out.take() {
            Some(mut out) => out.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Walks the input, calling `on_item` for every item, or problem with a single file or
/// item, in a deterministic order (files sorted by path, items in file order; problems of
/// the walk itself first).
pub(crate) fn scan(
    input: &Path,
    ctx: &ScanCtx<'_>,
    on_item: &mut dyn FnMut(Result<Found<'_>, InputError>),
) -> Result<Sources, LoadError> {
    let walk = Walk::run(input, ctx)?;
    let mut sources = Sources {
        notes: walk.notes(),
        ..Sources::default()
    };
    for e in walk.errors {
        on_item(Err(e));
    }
    let mut budget = Budget {
        total_left: ctx.limits.max_total_bytes,
        items: 0,
        stop: None,
    };
    for file in walk.files {
        let mut fs = FileScan {
            id: sources.files.len() as u32,
            file: &file,
            ctx,
            budget: &mut budget,
            on_item,
            spill: &mut sources.spill,
        };
        match file.format {
            Format::Json => fs.json(),
            Format::Yaml => fs.yaml(),
        }
        if ctx.cancel.is_canceled() {
            return Err(LoadError::Canceled);
        }
        if let Some(e) = budget.stop.take() {
            return Err(e);
        }
        sources.files.push((file.path, file.format, file.id));
    }
    if let Some(spill) = &mut sources.spill {
        spill.close().map_err(|e| LoadError::Unreadable {
            path: spill.path.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(sources)
}

fn format_by_extension(path: &Path) -> Option<Format> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "json" => Some(Format::Json),
        "yaml" | "yml" => Some(Format::Yaml),
        _ => None,
    }
}

/// What is left of the caps shared by the files of one scan.
struct Budget {
    total_left: u64,
    items: usize,
    /// Set when a cap is exceeded: the scan stops after the current file.
    stop: Option<LoadError>,
}

fn parse_yaml(bytes: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    yaml_serde::from_str(text).map_err(|e| format!("malformed YAML: {e}"))
}

/// Whether a manifest is a `List`: an `items` array and a `kind` ending in `List` (or no
/// kind), or such a kind with `items` null or missing (an empty list).
pub(crate) fn is_list(value: &Value) -> bool {
    let list_kind = value["kind"].as_str().is_some_and(|k| k.ends_with("List"));
    (value["items"].is_array() && (list_kind || value["kind"].is_null()))
        || (list_kind && value["items"].is_null())
}

struct FileScan<'a> {
    id: u32,
    file: &'a WalkedFile,
    ctx: &'a ScanCtx<'a>,
    budget: &'a mut Budget,
    on_item: &'a mut dyn FnMut(Result<Found<'_>, InputError>),
    spill: &'a mut Option<Spill>,
}

impl FileScan<'_> {
    /// Whether the scan must stop (a cap was exceeded or the scan canceled).
    fn stopped(&self) -> bool {
        self.budget.stop.is_some() || self.ctx.cancel.is_canceled()
    }

    /// Counts one item against `max_items`; false (and the scan stops) past the cap.
    fn count_item(&mut self) -> bool {
        self.budget.items += 1;
        let max = self.ctx.limits.max_items;
        if self.budget.items > max && self.budget.stop.is_none() {
            self.budget.stop = Some(LoadError::Limit {
                cap: "max_items",
                value: max as u64,
                message: format!(
                    "more than {max} items (the last read: {})",
                    self.file.path.display()
                ),
            });
        }
        !self.stopped()
    }

    /// Counts bytes read from this file against `max_total_bytes`.
    fn count_bytes(&mut self, n: u64) {
        if n > self.budget.total_left {
            self.total_exceeded();
        } else {
            self.budget.total_left -= n;
        }
    }

    fn total_exceeded(&mut self) {
        let max = self.ctx.limits.max_total_bytes;
        self.budget.stop.get_or_insert(LoadError::Limit {
            cap: "max_total_bytes",
            value: max,
            message: format!(
                "more than {} read (the last file: {})",
                size(max),
                self.file.path.display()
            ),
        });
    }

    fn error(&mut self, item: String, message: String) {
        if self.stopped() || (!item.is_empty() && !self.count_item()) {
            return;
        }
        (self.on_item)(Err(InputError {
            file: self.file.path.clone(),
            item,
            message,
        }));
    }

    fn emit(&mut self, loc: Location, position: String, value: Value) {
        if self.stopped() || !self.count_item() {
            return;
        }
        (self.on_item)(Ok(Found {
            loc,
            file: &self.file.path,
            position,
            value,
        }));
    }

    /// A reader over this file bounded by `cap`, or an error message.
    fn open(&self, cap: u64) -> Result<Capped, String> {
        let f = open_regular(&self.file.path, Some(self.file.id))
            .map_err(|e| format!("cannot read: {e}"))?;
        Ok(Capped::new(f, cap, self.ctx.cancel))
    }

    /// The whole file, at most `max_file_bytes`; `None` (with the error reported) if it
    /// cannot be read or is too large.
    fn read_whole(&mut self) -> Option<Vec<u8>> {
        let max = self.ctx.limits.max_file_bytes;
        let too_large = |what: String| {
            format!(
                "{what}, larger than max_file_bytes = {}; not read",
                size(max)
            )
        };
        if self.file.len > max {
            self.error(String::new(), too_large(format!("{} bytes", self.file.len)));
            return None;
        }
        if self.file.len > self.budget.total_left {
            self.total_exceeded();
            return None;
        }
        let mut r = match self.open(max) {
            Ok(r) => r,
            Err(e) => {
                self.error(String::new(), e);
                return None;
            }
        };
        let mut bytes = Vec::with_capacity(self.file.len as usize);
        let res = r.read_to_end(&mut bytes);
        self.count_bytes(r.bytes_read());
        if let Err(e) = res {
            self.error(String::new(), format!("cannot read: {e}"));
            return None;
        }
        if r.exceeded() {
            self.error(String::new(), too_large("it grew while read".into()));
            return None;
        }
        Some(bytes)
    }

    fn json(&mut self) {
        let total = self.budget.total_left;
        let max_item = self.ctx.limits.max_file_bytes;
        let (probe, probe_error, probe_read) = match self.open(total) {
            Ok(mut r) => {
                let (p, e) = json_scan::probe(&mut r, max_item);
                let read = r.bytes_read();
                (p, e, read)
            }
            Err(e) => return self.error(String::new(), e),
        };
        if probe.is_list() {
            let mut r = match self.open(total) {
                Ok(r) => r,
                Err(e) => return self.error(String::new(), e),
            };
            let id = self.id;
            let res = json_scan::items(&mut r, max_item, &mut |index, start, bytes| {
                let loc = Location {
                    start,
                    file: id,
                    len: bytes.len() as u32,
                    spilled: false,
                };
                let position = format!("items[{index}]");
                match serde_json::from_slice::<Value>(bytes) {
                    Ok(v) => self.emit(loc, position, v),
                    Err(e) => self.error(position, format!("malformed JSON: {e}")),
                }
                !self.stopped()
            });
            let read = r.bytes_read().max(probe_read);
            self.count_bytes(read);
            if let Err(e) = res {
                self.error(String::new(), e);
            }
        } else if probe_read > total {
            self.total_exceeded();
        } else if let Some(e) = probe_error {
            self.error(String::new(), e);
        } else if probe.kind.as_deref().is_some_and(|k| k.ends_with("List")) {
            // A `List` without an `items` array (`"items": null`) holds nothing.
        } else {
            self.json_whole();
        }
    }

    fn json_whole(&mut self) {
        let Some(bytes) = self.read_whole() else {
            return;
        };
        let loc = Location {
            start: 0,
            file: self.id,
            len: bytes.len() as u32,
            spilled: false,
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => self.emit(loc, String::new(), v),
            Err(e) => self.error(String::new(), format!("malformed JSON: {e}")),
        }
    }

    fn yaml(&mut self) {
        let Some(bytes) = self.read_whole() else {
            return;
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => return self.error(String::new(), format!("not UTF-8: {e}")),
        };
        for (n, (start, end, line)) in yaml_documents(&text).into_iter().enumerate() {
            if self.stopped() {
                return;
            }
            let position = format!("document {} (line {line})", n + 1);
            let loc = Location {
                start: start as u64,
                file: self.id,
                len: (end - start) as u32,
                spilled: false,
            };
            match parse_yaml(&text.as_bytes()[start..end]) {
                Ok(Value::Null) => {}
                Ok(v) if is_list(&v) => self.yaml_list(&position, v),
                Ok(v) => self.emit(loc, position, v),
                Err(e) => self.error(position, e),
            }
        }
    }

    fn yaml_list(&mut self, position: &str, list: Value) {
        let Value::Object(mut map) = list else { return };
        let Some(Value::Array(items)) = map.remove("items") else {
            return;
        };
        for (i, item) in items.into_iter().enumerate() {
            if self.stopped() {
                return;
            }
            let position = format!("{position} items[{i}]");
            match self.spill_item(&item) {
                Ok(loc) => self.emit(loc, position, item),
                Err(e) => self.error(position, format!("cannot write the spill file: {e}")),
            }
        }
    }

    fn spill_item(&mut self, item: &Value) -> std::io::Result<Location> {
        if self.spill.is_none() {
            *self.spill = Some(Spill::create()?);
        }
        let spill = self.spill.as_mut().expect("created above");
        let (start, len) = spill.append(item)?;
        Ok(Location {
            start,
            file: self.id,
            len,
            spilled: true,
        })
    }
}

/// Byte ranges `(start, end, first line)` of the documents of a YAML stream: a line starting
/// with `---` (followed by nothing or whitespace) opens a new document. Such a line can only
/// be a document marker: YAML forbids `---` at column 0 inside content.
fn yaml_documents(text: &str) -> Vec<(usize, usize, usize)> {
    let mut docs = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 1, 0);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let marker = line
            .strip_prefix("---")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
        if marker && offset > start {
            docs.push((start, offset, start_line));
            (start, start_line) = (offset, i + 1);
        } else if marker {
            start_line = i + 1;
        }
        offset += line.len();
    }
    if offset > start {
        docs.push((start, offset, start_line));
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_split_on_markers_only_at_column_zero() {
        let text = "a: 1\n---\nb: |\n  ---\n  x\n--- \nc: 3\n";
        let docs = yaml_documents(text);
        let parts: Vec<&str> = docs.iter().map(|&(s, e, _)| &text[s..e]).collect();
        assert_eq!(
            parts,
            vec!["a: 1\n", "---\nb: |\n  ---\n  x\n", "--- \nc: 3\n"]
        );
        assert_eq!(docs.iter().map(|d| d.2).collect::<Vec<_>>(), vec![1, 2, 6]);
    }

    #[test]
    fn leading_marker_does_not_make_an_empty_document() {
        let docs = yaml_documents("---\na: 1\n");
        assert_eq!(docs, vec![(0, 9, 1)]);
    }
}
