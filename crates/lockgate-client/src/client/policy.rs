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

    /// `PUT /v1/policy` with a TOML document (a policy that limits nothing is refused
    /// where the active one limits something: see [`Client::put_policy_with`]).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn put_policy(
        &self,
        toml: &str,
        dry_run: bool,
        if_match: Option<&str>,
    ) -> Result<PolicyAnswer, ClientError> {
        self.put_policy_with(
            toml,
            &PolicyPut {
                dry_run,
                if_match,
                allow_unlimited: false,
            },
        )
    }

    /// `PUT /v1/policy` with a TOML document and every option.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn put_policy_with(
        &self,
        toml: &str,
        opts: &PolicyPut<'_>,
    ) -> Result<PolicyAnswer, ClientError> {
        let headers: Vec<(&str, &str)> =
            opts.if_match.map(|d| ("If-Match", d)).into_iter().collect();
        let mut path = format!("/v1/policy?dry_run={}", opts.dry_run);
        if opts.allow_unlimited {
            path.push_str("&allow_unlimited=true");
        }
        self.call_raw("PUT", &path, "application/toml", toml, &headers)
    }
}

/// The options of a `PUT /v1/policy`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyPut<'a> {
    /// `?dry_run=true`: only report what would change.
    pub dry_run: bool,
    /// `If-Match`: apply only if the active policy still has this digest.
    pub if_match: Option<&'a str>,
    /// `?allow_unlimited=true`: a policy that limits nothing may replace one that limits
    /// something (else 422 `removes_all_limits`).
    pub allow_unlimited: bool,
}
