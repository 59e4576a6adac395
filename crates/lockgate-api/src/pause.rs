//! Pauses as the API shows them (`/v1/pauses`), and the request that creates one.

use crate::time;
use lockgate_core::engine::Pause;
use serde::{Deserialize, Serialize};

/// `POST /v1/pauses`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// Match expression over `kind`, `owner`, `node` and attributes (a limit's `match`
    /// syntax); absent: every job.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Ends by itself at this time (RFC 3339); absent: until resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Why (required, shown by explain).
    pub reason: String,
}

/// A pause as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PauseView {
    /// Id (`pause:<id>` in explain).
    pub id: u64,
    /// The match expression; `null`: every job.
    #[serde(rename = "match")]
    pub selector: Option<String>,
    /// Why.
    pub reason: String,
    /// Who paused (the token's principal).
    pub by: String,
    /// When (RFC 3339).
    pub created_at: String,
    /// When it ends by itself; `null`: until resumed.
    pub until: Option<String>,
}

impl From<&Pause> for PauseView {
    fn from(p: &Pause) -> PauseView {
        PauseView {
            id: p.id,
            selector: p.selector.clone(),
            reason: p.reason.clone(),
            by: p.by.clone(),
            created_at: time::format(p.created_at),
            until: time::format_opt(p.until),
        }
    }
}

/// `GET /v1/pauses`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PauseList {
    /// Every active pause, by id.
    pub pauses: Vec<PauseView>,
}

/// `DELETE /v1/pauses` (`--all`): the pauses that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Resumed {
    /// The pauses resumed, by id.
    pub resumed: Vec<PauseView>,
}
