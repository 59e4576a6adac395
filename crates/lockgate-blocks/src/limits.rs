//! Bounds on reading a backup's input: [`InputLimits`] (bytes per file, bytes in total,
//! items, directory entries), a [`Cancel`] token, and the one way input files are opened.
//!
//! Invariants:
//! - only regular files are read: a file's type is taken from `symlink_metadata`/`metadata`
//!   *before* it is opened, it is opened with `O_NONBLOCK | O_NOFOLLOW` (so a FIFO swapped
//!   in after the check cannot block the open, and a symlink swapped in is not followed),
//!   and the open file is checked again with `fstat` (still a regular file, still the same
//!   device and inode as when it was walked) before a byte is read;
//! - every read goes through `Capped`, which stops after `cap + 1` bytes whatever the file
//!   does meanwhile (grows, is a `/proc` file claiming length 0) and checks the [`Cancel`]
//!   token before every underlying read (at most 64 KiB apart when buffered).

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Default [`InputLimits::max_file_bytes`]: 64 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// Default [`InputLimits::max_total_bytes`]: 2 GiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 2 << 30;
/// Default [`InputLimits::max_items`]: 500,000.
pub const DEFAULT_MAX_ITEMS: usize = 500_000;
/// Default [`InputLimits::max_entries`]: 1,000,000.
pub const DEFAULT_MAX_ENTRIES: usize = 1_000_000;

/// How much of the input one plan may read. Every refusal names the cap and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Largest file read whole (a YAML file, a JSON file that is not a `List`) and largest
    /// single item of a JSON `List`, in bytes. Default 64 MiB: such a file is held in memory
    /// while it is indexed (a YAML file plus its parsed documents), so this bounds the
    /// plan's peak memory per file; a Kubernetes object is at most 1.5 MiB (etcd's request
    /// limit), so 64 MiB is dozens of large manifests in one file. A bigger file is an
    /// [`InputError`](crate::InputError) naming the cap; it is not read.
    pub max_file_bytes: u64,
    /// Bytes read from the whole input (a JSON `List` streams and counts here only).
    /// Default 2 GiB, etcd's default space quota: a cluster's whole state fits; it bounds
    /// the time a plan takes, not its memory. Exceeded: [`LoadError::Limit`](crate::LoadError::Limit).
    pub max_total_bytes: u64,
    /// Items found in the input. Default 500,000: above Kubernetes' documented scalability
    /// envelope (150,000 pods) with room for their PVCs and other objects; a plan costs
    /// about 200 bytes per item, so about 100 MB. Exceeded: [`LoadError::Limit`](crate::LoadError::Limit).
    pub max_items: usize,
    /// Directory entries the walk examines (manifests, other files, directories, skipped
    /// entries). Default 1,000,000: bounds a walk over a tree with few manifests and many
    /// other files. Exceeded: [`LoadError::Limit`](crate::LoadError::Limit).
    pub max_entries: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_items: DEFAULT_MAX_ITEMS,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// A cancellation flag shared by the caller and a running plan; cloning shares it.
///
/// The scan checks it between directory entries, between items and before every read of
/// at most 64 KiB, and then ends with [`LoadError::Canceled`](crate::LoadError::Canceled).
/// A server holds a [`CancelOnDrop`] in its request handler, so a client that goes away
/// (the handler's future is dropped) stops the plan.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token not canceled yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks the work to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_canceled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// A guard that cancels this token when dropped (unless [`CancelOnDrop::disarm`]ed).
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

/// Cancels its [`Cancel`] when dropped. See [`Cancel::on_drop`].
#[derive(Debug)]
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// Drops the guard without canceling (the work finished and its answer was sent).
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

/// Device and inode of a walked file, to check that the file opened is the file walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(meta: &Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// What a file that is not regular is, for messages; `None` for a regular file.
pub(crate) fn special_kind(meta: &Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    })
}

/// Opens a file that was walked as a regular file with identity `id`, without following a
/// final symlink and without blocking, and checks it is still that regular file.
pub(crate) fn open_regular(path: &Path, id: Option<FileId>) -> io::Result<File> {
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    let file = File::options()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(kind) = special_kind(&meta) {
        return Err(io::Error::other(format!(
            "it is now a {kind}, not a regular file; not read"
        )));
    }
    if id.is_some_and(|id| id != FileId::of(&meta)) {
        return Err(io::Error::other(
            "it was replaced by another file since it was walked; not read",
        ));
    }
    Ok(file)
}

/// A reader that yields at most `cap + 1` bytes and fails once `cancel` is set.
pub(crate) struct Capped {
    inner: File,
    left: u64,
    read: u64,
    cap: u64,
    cancel: Cancel,
}

impl Capped {
    pub fn new(inner: File, cap: u64, cancel: &Cancel) -> Capped {
        Capped {
            inner,
            left: cap.saturating_add(1),
            read: 0,
            cap,
            cancel: cancel.clone(),
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Whether more than `cap` bytes were read (the file is larger than the cap).
    pub fn exceeded(&self) -> bool {
        self.read > self.cap
    }
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_canceled() {
            return Err(io::Error::other("canceled"));
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if max == 0 {
            return Ok(0);
        }
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        self.read += n as u64;
        Ok(n)
    }
}

/// Human size for messages: `64 MiB`, `1500 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_growing_while_read_is_cut_at_the_cap() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&[b'a'; 10]).unwrap();
        let meta = std::fs::metadata(f.path()).unwrap();
        let file = open_regular(f.path(), Some(FileId::of(&meta))).unwrap();
        // It grows after the size check and the open.
        f.write_all(&[b'b'; 10_000]).unwrap();
        f.flush().unwrap();
        let mut r = Capped::new(file, 100, &Cancel::new());
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 101);
        assert!(r.exceeded());
    }

    #[test]
    fn a_canceled_read_stops() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), "abc").unwrap();
        let cancel = Cancel::new();
        let mut r = Capped::new(open_regular(f.path(), None).unwrap(), 10, &cancel);
        cancel.cancel();
        assert!(r.read(&mut [0u8; 8]).is_err());
    }

    #[test]
    fn a_replaced_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        std::fs::write(&p, "{}").unwrap();
        let id = FileId::of(&std::fs::metadata(&p).unwrap());
        // Written while the first still exists, so it cannot reuse its inode.
        std::fs::write(dir.path().join("b"), "{}").unwrap();
        std::fs::rename(dir.path().join("b"), &p).unwrap();
        let err = open_regular(&p, Some(id)).unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
    }

    #[test]
    fn the_guard_cancels_when_dropped_unless_disarmed() {
        let c = Cancel::new();
        c.on_drop().disarm();
        assert!(!c.is_canceled());
        drop(c.on_drop());
        assert!(c.is_canceled());
    }

    /// The policy's `[blocks]` defaults (in lockgate-core, which cannot see this crate) are
    /// these defaults.
    #[test]
    fn the_policy_defaults_are_the_input_limits_defaults() {
        let policy = lockgate_core::policy::BlocksPolicy::default();
        let options = crate::PlanOptions::from_policy(&policy);
        assert_eq!(options.limits, InputLimits::default());
    }

    #[test]
    fn sizes_read_as_units() {
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(2 << 30), "2 GiB");
        assert_eq!(size(1500), "1500 bytes");
    }
}
