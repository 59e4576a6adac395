//! The policy document as JSON: `GET /v1/policy` and the answer of `PUT /v1/policy`.

use serde::{Deserialize, Serialize};

/// `GET /v1/policy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyView {
    /// SHA-256 of the canonical JSON document, hex; send it as `If-Match`.
    pub digest: String,
    /// The document as JSON (durations as strings, as in TOML).
    pub policy: serde_json::Value,
}

/// `PUT /v1/policy` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyAnswer {
    /// Digest of the new policy.
    pub digest: String,
    /// Differences from the active policy, one per line.
    pub diff: Vec<String>,
    /// Jobs the new policy admits at once.
    pub admitted_now: Vec<u64>,
    /// Scopes left over their new limit (they drain).
    #[serde(default)]
    pub over_limit: Vec<String>,
    /// True when nothing was applied.
    #[serde(default)]
    pub dry_run: bool,
}
