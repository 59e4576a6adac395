//! The policy: `GET /v1/policy` (with its digest as `ETag`), `PUT /v1/policy` (TOML or
//! JSON, `If-Match`, `?dry_run=true`) and the SIGHUP reload of the `--config` file.
//!
//! `routes.rs` holds the handlers; [`PolicyOp`] the loop operations, applied in `ops.rs`.
//!
//! # Invariants
//! - Only a validated [`Policy`] reaches the loop: the handler parses and validates the
//!   document; an invalid one is a 422 `invalid_policy` naming field and line.
//! - The file or the store holds the new policy before it is applied: with `--config` the
//!   file is replaced atomically ([`write_atomic`], the old one kept as `FILE.bak`) before
//!   the engine sees the policy; without, the policy text goes into the same store batch
//!   as the change. With `--database-url` ([`PolicySource::Database`]) the database holds
//!   it: a `PUT` and a SIGHUP reload of `--config` both go into the store batch, and the
//!   file is never written.
//! - A `PUT` never removes every limit by accident: a policy that limits nothing
//!   ([`Policy::limits_anything`]) replaces one that limits something only with
//!   `?allow_unlimited=true` (else 422 `removes_all_limits`). The `--config` file at start
//!   and on SIGHUP is the admin's and is not checked.
//! - The digest ([`policy_digest`]) is the SHA-256 of the canonical JSON, so a TOML and a
//!   JSON spelling of one policy have one digest.

mod ops;
mod routes;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;
pub use write::write_atomic;

use crate::protocol::Reply;
use lockgate_api::{PolicyAnswer, PolicyView};
use lockgate_core::Policy;
use std::path::PathBuf;

/// Where the policy lives.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// `--config FILE`: the file is the source of truth.
    File(PathBuf),
    /// The store holds it.
    Store,
    /// `--database-url`: the database holds it (the replicas share it). `seed` is the
    /// `--config` file: it seeds an empty database, and SIGHUP applies it to the database
    /// as `PUT /v1/policy` would; it is never written.
    Database {
        /// The `--config` file, if any.
        seed: Option<PathBuf>,
    },
}

/// Policy operations of the loop.
#[derive(Debug)]
pub enum PolicyOp {
    /// `GET /v1/policy`.
    Get(Reply<PolicyView>),
    /// `PUT /v1/policy`.
    Put {
        /// `?allow_unlimited=true`: the new policy may limit nothing
        /// ([`Policy::limits_anything`]) where the active one limits something.
        allow_unlimited: bool,
        /// The validated policy.
        policy: Box<Policy>,
        /// Its TOML text (what the file or the store will hold).
        text: String,
        /// `If-Match`.
        if_match: Option<String>,
        /// Only report.
        dry_run: bool,
        /// What changed.
        reply: Reply<PolicyAnswer>,
    },
    /// SIGHUP: read the `--config` file again.
    Reload(Reply<PolicyAnswer>),
}

/// SHA-256 of the policy's canonical JSON, hex. It covers the URL passwords that
/// [`Policy::to_json_value`] shows as `***`, so a changed password is a changed policy.
pub fn policy_digest(p: &Policy) -> String {
    use sha2::{Digest, Sha256};
    let raw = serde_json::to_value(&p.raw).expect("policies serialize");
    let text = serde_json::to_string(&raw).expect("policies serialize");
    crate::auth::hex(&Sha256::digest(text.as_bytes()))
}

mod write {
    use std::path::Path;

    /// Writes `text` to `path` atomically: a temporary file in the same directory with the
    /// old file's permissions, synced, the old file kept as `FILE.bak`, then a rename. A
    /// reader sees the old or the new content, never a truncated or partial file; on any
    /// failure the old file is untouched and the temporary file removed.
    ///
    /// # Errors
    /// The I/O error, with the path.
    pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".{name}.tmp"));
        let r = replace(path, &tmp, &dir.join(format!("{name}.bak")), text);
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    fn replace(path: &Path, tmp: &Path, bak: &Path, text: &str) -> Result<(), String> {
        use std::io::Write;
        let fail =
            |what: &str, p: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", p.display());
        let mut f = std::fs::File::create(tmp).map_err(|e| fail("create", tmp, e))?;
        if let Ok(old) = std::fs::metadata(path) {
            f.set_permissions(old.permissions())
                .map_err(|e| fail("set the permissions of", tmp, e))?;
        }
        f.write_all(text.as_bytes())
            .map_err(|e| fail("write", tmp, e))?;
        f.sync_all().map_err(|e| fail("sync", tmp, e))?;
        if path.exists() {
            std::fs::copy(path, bak).map_err(|e| fail("back up to", bak, e))?;
        }
        std::fs::rename(tmp, path).map_err(|e| fail("replace", path, e))
    }
}
