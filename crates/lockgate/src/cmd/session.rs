//! The connection of the client subcommands: the server URL and the token from the global
//! flags, and the [`Client`] built from them.
//!
//! The token is looked for in this order, and [`TokenSource`] remembers where it was
//! found, so that a refused or missing token is explained in the CLI's terms (which flag,
//! which variable, which file) rather than the HTTP API's: `--token`, then
//! `LOCKGATE_TOKEN`, then the admin token file in the default data dir.

use crate::GlobalArgs;
use lockgate_client::{Client, ClientError};
use std::path::{Path, PathBuf};

/// Where the token came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token` or `LOCKGATE_TOKEN` (clap reads both into one value).
    Given,
    /// The admin token file at this path.
    File(PathBuf),
    /// None was found: neither flag nor variable, and no (non-empty) file at this path.
    Missing(PathBuf),
}

/// The admin token file the CLI reads when neither `--token` nor `LOCKGATE_TOKEN` is set:
/// `admin.token` in the server's default data dir (`$XDG_DATA_HOME/lockgate`, else
/// `~/.local/share/lockgate`).
pub fn admin_token_file() -> PathBuf {
    lockgate_host::data_dir::default_data_dir().join(lockgate_host::data_dir::ADMIN_TOKEN_FILE)
}

/// The token and where it came from ([`TokenSource`]).
pub fn find_token(global: &GlobalArgs) -> (Option<String>, TokenSource) {
    if let Some(t) = &global.token {
        return (Some(t.trim().to_string()), TokenSource::Given);
    }
    let path = admin_token_file();
    match std::fs::read_to_string(&path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
    {
        Some(t) => (Some(t), TokenSource::File(path)),
        None => (None, TokenSource::Missing(path)),
    }
}

/// The token: `--token`/`LOCKGATE_TOKEN`, else the admin token file in the default data
/// dir (`$XDG_DATA_HOME/lockgate/admin.token` or `~/.local/share/lockgate/admin.token`).
pub fn token(global: &GlobalArgs) -> Option<String> {
    find_token(global).0
}

/// A client for the global flags.
///
/// # Errors
/// A bad `LOCKGATE_CA_CERT`.
pub fn client(global: &GlobalArgs) -> anyhow::Result<Client> {
    Ok(Client::new(&global.server, token(global))?)
}

/// What to tell the user about a 401 the server answered, given where the token came
/// from; `None` for any other error.
pub fn token_advice(err: &ClientError, source: &TokenSource) -> Option<String> {
    if err.status() != Some(401) {
        return None;
    }
    let lookup = |path: &Path| {
        format!(
            "without them lockgate reads the admin token file {} ($XDG_DATA_HOME/lockgate/admin.token, else ~/.local/share/lockgate/admin.token; the server writes it to <data-dir>/admin.token)",
            path.display()
        )
    };
    Some(match source {
        TokenSource::Missing(path) => format!(
            "no token: pass --token TOKEN or set LOCKGATE_TOKEN; {}, and there is none there",
            lookup(path)
        ),
        TokenSource::Given => {
            "the server refused the token given by --token or LOCKGATE_TOKEN (unknown or revoked): check it, or create one with `lockgate token create`".to_string()
        }
        TokenSource::File(path) => format!(
            "the server refused the admin token read from {} (neither --token nor LOCKGATE_TOKEN is set): it belongs to another data dir, or was revoked; pass --token TOKEN or set LOCKGATE_TOKEN",
            path.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::ErrorDetail;

    #[test]
    fn token_advice_names_the_flag_the_variable_and_the_file() {
        let e = ClientError::Api {
            status: 401,
            detail: ErrorDetail {
                code: "unauthorized".into(),
                message: "missing Authorization header: send `Authorization: Bearer <token>`"
                    .into(),
                field: None,
                line: None,
                leader: None,
            },
        };
        let file = PathBuf::from("/home/ops/.local/share/lockgate/admin.token");
        let text: Vec<String> = [
            TokenSource::Missing(file.clone()),
            TokenSource::Given,
            TokenSource::File(file),
        ]
        .iter()
        .map(|s| token_advice(&e, s).expect("a 401"))
        .collect();
        insta::assert_snapshot!(text.join("\n"));
        let other = ClientError::Setup("x".into());
        assert_eq!(token_advice(&other, &TokenSource::Given), None);
    }
}
