//! What the client subcommands share: the connection (server URL and token), JSON output
//! and plain tables.

use crate::{GlobalArgs, Output};
use lockgate_api::Client;
use std::path::PathBuf;

/// The token: `--token`/`LOCKGATE_TOKEN`, else the admin token file in the default data
/// dir (`$XDG_DATA_HOME/lockgate/admin.token` or `~/.local/share/lockgate/admin.token`).
pub fn token(global: &GlobalArgs) -> Option<String> {
    if let Some(t) = &global.token {
        return Some(t.trim().to_string());
    }
    let path: PathBuf = lockgate_server::default_data_dir().join("admin.token");
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// A client for the global flags.
///
/// # Errors
/// A bad `LOCKGATE_CA_CERT`.
pub fn client(global: &GlobalArgs) -> anyhow::Result<Client> {
    Ok(Client::new(&global.server, token(global))?)
}

/// Prints JSON to stdout (pretty).
pub fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializes"));
}

/// Whether to print JSON.
pub fn json(global: &GlobalArgs) -> bool {
    global.output == Output::Json
}

/// Prints rows as a table with a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
}

/// `-` for a missing value.
pub fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Parses `k=v`.
///
/// # Errors
/// A message naming the argument.
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Parses `pool=n`.
///
/// # Errors
/// A message naming the argument.
pub fn cost(text: &str) -> Result<(String, u64), String> {
    let (k, v) = key_value(text)?;
    let n = v
        .parse()
        .map_err(|_| format!("expected POOL=N with a whole number N, got {text:?}"))?;
    Ok((k, n))
}

/// Parses a policy-style duration (`250ms`, `30s`, `2h`).
///
/// # Errors
/// What was expected.
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    lockgate_core::time::parse_duration(text)
}
