//! The connection of the client subcommands: the server URL and the token from the global
//! flags, and the [`Client`] built from them.

use crate::GlobalArgs;
use lockgate_client::Client;
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
