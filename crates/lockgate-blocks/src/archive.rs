//! The archive of one backup: a tar.gz written by one writer thread.
//!
//! Workers send finished manifests through a bounded queue of [`QUEUE`] entries (a worker
//! waits when the writer is behind, so memory stays bounded); the writer appends them in
//! arrival order. After `Finish` it waits for the data uploads still moving, then writes
//! `metadata/blocks.json` and `metadata/result.json` (streamed through a temporary file next
//! to the archive, never built in memory), closes the gzip stream and renames
//! `<path>.partial` to `<path>`.
//!
//! Layout: `resources/<resource>/namespaces/<ns>/<name>.json`,
//! `resources/<resource>/cluster/<name>.json`, `metadata/blocks.json`,
//! `metadata/result.json`.

use crate::backup::{Backup, StartError};
use crate::mover::MoverHandle;
use crate::report;
use crossbeam_channel::Receiver;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Entries waiting for the writer.
pub(crate) const QUEUE: usize = 256;

pub(crate) type Tar = tar::Builder<GzEncoder<BufWriter<File>>>;

/// What workers send to the writer.
pub(crate) enum WriterMsg {
    /// A file of the archive.
    Entry { path: String, data: Vec<u8> },
    /// Data uploads whose snapshot is taken and whose data is still moving.
    Pending(Vec<PendingUpload>),
    /// Every block is accounted: wrap up.
    Finish,
}

/// A data upload to wait for before the backup ends.
pub(crate) struct PendingUpload {
    pub item: u32,
    /// Index of its record in the run state's uploads.
    pub record: usize,
    pub handle: Box<dyn MoverHandle>,
    pub submitted: Instant,
}

/// Where the archive at `path` is written until it is whole (`<path>.partial`).
pub fn partial(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

/// Creates `<path>.partial` and the tar.gz stream on it.
pub(crate) fn create(path: &Path) -> Result<Tar, StartError> {
    let partial = partial(path);
    let err = |e: io::Error| StartError::Archive {
        path: partial.clone(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = File::create(&partial).map_err(err)?;
    Ok(tar::Builder::new(GzEncoder::new(
        BufWriter::new(file),
        Compression::fast(),
    )))
}

fn header(len: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(len);
    h.set_mode(0o644);
    h.set_mtime(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    h.set_entry_type(tar::EntryType::Regular);
    h
}

/// Appends one in-memory file.
pub(crate) fn append(tar: &mut Tar, path: &str, data: &[u8]) -> io::Result<()> {
    tar.append_data(&mut header(data.len() as u64), path, data)
}

/// Appends a file produced by `write`, staged in a temporary file next to the archive.
pub(crate) fn append_streamed(
    tar: &mut Tar,
    archive: &Path,
    name: &str,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut tmp = archive.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        let mut f = File::open(&tmp)?;
        let len = f.metadata()?.len();
        tar.append_data(&mut header(len), name, &mut f)
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

/// Spawns the writer thread of `backup`.
pub(crate) fn spawn_writer(backup: Arc<Backup>, tar: Tar, rx: Receiver<WriterMsg>) {
    let name = format!("blocks-writer-{}", backup.id);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || write_loop(&backup, tar, rx))
        .expect("spawn archive writer");
}

fn write_loop(backup: &Backup, mut tar: Tar, rx: Receiver<WriterMsg>) {
    let mut pending = Vec::new();
    let mut failed: Option<String> = None;
    for msg in rx.iter() {
        match msg {
            WriterMsg::Entry { path, data } => {
                if failed.is_none() {
                    if let Err(e) = append(&mut tar, &path, &data) {
                        failed = Some(format!("cannot write {path} to the archive: {e}"));
                    }
                }
            }
            WriterMsg::Pending(p) => pending.extend(p),
            WriterMsg::Finish => break,
        }
    }
    report::finish_uploads(backup, pending);
    if let Some(f) = failed {
        backup.state().fatal.get_or_insert(f);
    }
    let path = &backup.config.archive_path;
    let mut result = report::result(backup, SystemTime::now());
    let written = report::write_metadata(backup, &result, &mut tar).and_then(|()| {
        let gz = tar.into_inner()?;
        gz.finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()?;
        std::fs::rename(partial(path), path)
    });
    if let Err(e) = written {
        result.phase = crate::result::Phase::Failed;
        result
            .reasons
            .push(format!("cannot write archive {}: {e}", path.display()));
    }
    backup.set_result(result);
}
