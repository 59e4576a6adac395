//! The data dir: where the server keeps its store and writes what it makes, and where the
//! command line finds them on the same host.
//!
//! Layout (docs/operations.md): [`DB_FILE`] (the SQLite store, with its `-wal` and `-shm`
//! files), [`ADMIN_TOKEN_FILE`], [`BACKUPS_DIR`] (item-block backup archives),
//! [`RESTORES_DIR`] (restores' manifests).

use std::path::PathBuf;

/// The SQLite store's file in the data dir.
pub const DB_FILE: &str = "lockgate.db";
/// The first admin token, written by the server (mode 0600) when its store has none.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// Item-block backups' archives: `<BACKUPS_DIR>/<name>.tar.gz`.
pub const BACKUPS_DIR: &str = "backups";
/// Restores' manifests: `<RESTORES_DIR>/<name>/`.
pub const RESTORES_DIR: &str = "restores";

/// The default data dir: `$XDG_DATA_HOME/lockgate`, else `~/.local/share/lockgate`, else
/// `./lockgate-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("lockgate");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h).join(".local/share/lockgate");
    }
    PathBuf::from("lockgate-data")
}
