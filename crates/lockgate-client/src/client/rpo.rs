//! The RPO calls: list the rules' values, forget one.

use crate::{encode, Client, ClientError};
use lockgate_api::{RpoForgotten, RpoList};

impl Client {
    /// `GET /v1/rpo`: every rule with its values' last success, age and status.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn rpo(&self) -> Result<RpoList, ClientError> {
        self.call("GET", "/v1/rpo", None::<&()>)
    }

    /// `DELETE /v1/rpo/{rule}/{value}` (admin): retires a value, given as its values in
    /// `per` order (none for a rule without `per`: `DELETE /v1/rpo/{rule}`).
    ///
    /// # Errors
    /// See [`ClientError`]; 404 for an unknown rule or value.
    pub fn rpo_forget(&self, rule: &str, values: &[String]) -> Result<RpoForgotten, ClientError> {
        let path = if values.is_empty() {
            format!("/v1/rpo/{}", encode(rule))
        } else {
            format!("/v1/rpo/{}/{}", encode(rule), encode(&values.join(",")))
        };
        self.call("DELETE", &path, None::<&()>)
    }
}
