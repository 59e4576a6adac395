//! Reading a policy (`lockgate server --config`, `lockgate policy check`, `simulate
//! --policy`): one TOML file, or a directory (`conf.d`) whose `*.toml` files merge
//! in name order (`Policy::from_toml_parts`: tables key by key, arrays of tables appended,
//! a key set in two files refused; every error with its file and line).
//!
//! # Invariants
//! - In a directory only regular `*.toml` files count, in byte order of their names;
//!   hidden files (`.name`, editors' swap and lock files) and anything else are skipped,
//!   so a half-written `.policy.toml.swp` never joins the policy.
//! - A directory without a `*.toml` file is an error, never an empty (unlimited) policy.

use lockgate_core::policy::PolicyError;
use lockgate_core::Policy;
use std::path::{Path, PathBuf};

/// Why a policy could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// A file or the directory could not be read.
    #[error("cannot read the policy {path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// Cause.
        message: String,
    },
    /// The policy is invalid (the error names the file and line).
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ReadError + '_ {
    move |e| ReadError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The files `path` stands for: itself, or a directory's `*.toml` in name order.
///
/// # Errors
/// [`ReadError::Io`], and a directory without a `*.toml` file.
fn files(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io(path))? {
        let entry = entry.map_err(io(path))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file = entry.path();
        if name.starts_with('.') || !name.ends_with(".toml") || !file.is_file() {
            continue;
        }
        files.push(file);
    }
    files.sort();
    if files.is_empty() {
        return Err(ReadError::Io {
            path: path.display().to_string(),
            message: "the directory has no *.toml file".into(),
        });
    }
    Ok(files)
}

/// Reads and validates the policy at `path` (a file or a directory). Returns it with its
/// text: the file's, or the merged document of a directory's files.
///
/// # Errors
/// [`ReadError`]: a file that cannot be read, or a policy that is invalid.
pub fn read(path: &Path) -> Result<(Policy, String), ReadError> {
    if !path.is_dir() {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let policy = Policy::from_toml(&text, Some(&path.display().to_string()))?;
        return Ok((policy, text));
    }
    let mut parts = Vec::new();
    for file in files(path)? {
        let text = std::fs::read_to_string(&file).map_err(io(&file))?;
        parts.push((file.display().to_string(), text));
    }
    Ok(Policy::from_toml_parts(&parts)?)
}
