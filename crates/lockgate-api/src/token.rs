//! API tokens as JSON: roles, `POST /v1/tokens` and its answer, `GET /v1/tokens`.
//!
//! A token's secret appears in [`TokenCreated`] only, never in a listing ([`TokenInfo`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything.
    Admin,
    /// Submits and manages its own jobs.
    Submitter,
    /// Bound to one node: that node and the jobs placed on it.
    Agent,
    /// Read only.
    Viewer,
}

impl Role {
    /// The name as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Submitter => "submitter",
            Role::Agent => "agent",
            Role::Viewer => "viewer",
        }
    }

    /// Parses a role name.
    pub fn parse(text: &str) -> Option<Role> {
        [Role::Admin, Role::Submitter, Role::Agent, Role::Viewer]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `POST /v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenCreate {
    /// The principal's name (a job's owner).
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The node an agent token is bound to (required for `agent`, refused otherwise).
    #[serde(default)]
    pub node: Option<String>,
}

/// `POST /v1/tokens` answer: the only time the token is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreated {
    /// Principal.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Bound node.
    pub node: Option<String>,
    /// The secret.
    pub token: String,
}

/// `GET /v1/tokens` entry (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    /// Principal.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Bound node.
    pub node: Option<String>,
    /// Created (RFC 3339).
    pub created_at: String,
}
