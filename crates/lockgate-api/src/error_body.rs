//! The error body of every 4xx/5xx answer: `{"error": {"code", "message", "field"}}`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The body of every 4xx/5xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Stable machine-readable code (`malformed_json`, `invalid_field`, `unauthorized`,
    /// `forbidden`, `not_found`, `lease_lost`, `invalid_policy`, `stale_policy`, ...).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::ErrorCode))]
    pub code: String,
    /// What happened and what was expected, for people.
    pub message: String,
    /// The offending JSON path or config key, where there is one.
    pub field: Option<String>,
    /// The line in a policy document, where there is one (an addition to api.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// With `not_leader`: the leader's advertised URL, where one is known (several servers
    /// on one database; docs/api.md "Several servers").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)?;
        if let Some(field) = &self.field {
            write!(f, " [field {field}]")?;
        }
        Ok(())
    }
}
