//! The policy calls: show and apply (or check with `dry_run`).

use crate::{Client, ClientError};
use lockgate_api::{PolicyAnswer, PolicyView};

impl Client {
    /// `GET /v1/policy`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn policy(&self) -> Result<PolicyView, ClientError> {
        self.call("GET", "/v1/policy", None::<&()>)
    }

    /// `PUT /v1/policy` with a TOML document.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn put_policy(
        &self,
        toml: &str,
        dry_run: bool,
        if_match: Option<&str>,
    ) -> Result<PolicyAnswer, ClientError> {
        let headers: Vec<(&str, &str)> = if_match.map(|d| ("If-Match", d)).into_iter().collect();
        self.call_raw(
            "PUT",
            &format!("/v1/policy?dry_run={dry_run}"),
            "application/toml",
            toml,
            &headers,
        )
    }
}
