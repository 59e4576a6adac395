//! The audit log as the API shows it (`GET /v1/audit`): who tried to change what, when,
//! and what came of it.
//!
//! An entry never holds a secret: the request is a compact summary (a policy by its hash
//! and the labels it changes, a token by its name and role; values of fields named like a
//! secret and the userinfo of URLs are `***`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What came of an audited act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// Done.
    Ok,
    /// Accepted, but nothing changed (the same policy again, a dry run).
    Unchanged,
    /// 401 or 403: the caller may not do this.
    Refused,
    /// Another 4xx: the request was wrong (the entry's `error` says how).
    Invalid,
    /// 409 or 412: the state did not allow it (already ended, stale `If-Match`, ...).
    Conflict,
    /// 5xx: the server failed.
    Failed,
}

impl AuditOutcome {
    /// Every outcome.
    pub const ALL: [AuditOutcome; 6] = [
        AuditOutcome::Ok,
        AuditOutcome::Unchanged,
        AuditOutcome::Refused,
        AuditOutcome::Invalid,
        AuditOutcome::Conflict,
        AuditOutcome::Failed,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Unchanged => "unchanged",
            AuditOutcome::Refused => "refused",
            AuditOutcome::Invalid => "invalid",
            AuditOutcome::Conflict => "conflict",
            AuditOutcome::Failed => "failed",
        }
    }

    /// The outcome of a wire name.
    pub fn parse(text: &str) -> Option<AuditOutcome> {
        AuditOutcome::ALL.into_iter().find(|o| o.as_str() == text)
    }

    /// The outcome of an HTTP status (a 2xx is `ok`).
    pub fn of_status(status: u16) -> AuditOutcome {
        match status {
            200..=399 => AuditOutcome::Ok,
            401 | 403 => AuditOutcome::Refused,
            409 | 412 => AuditOutcome::Conflict,
            400..=499 => AuditOutcome::Invalid,
            _ => AuditOutcome::Failed,
        }
    }

    /// `ok` or `unchanged`.
    pub fn is_success(self) -> bool {
        matches!(self, AuditOutcome::Ok | AuditOutcome::Unchanged)
    }
}

impl fmt::Display for AuditOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audited act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// Sequence number (the `after` cursor); never reused, also after pruning.
    pub seq: u64,
    /// When it was done (RFC 3339).
    pub at: String,
    /// The token's name (`system` for a SIGHUP reload); `null`: no valid token.
    pub principal: Option<String>,
    /// The token's role; `null`: no valid token.
    pub role: Option<crate::Role>,
    /// `POST`, `PUT`, `DELETE` (or `SIGHUP`).
    pub method: String,
    /// The request path (`/v1/jobs/7/cancel`).
    pub path: String,
    /// A compact summary of the request: the query, the body's fields (secrets as
    /// `***`), a policy's hash and the labels it changes.
    pub summary: String,
    /// What came of it.
    pub outcome: AuditOutcome,
    /// For a refused, invalid, conflicting or failed act: `code: message`.
    pub error: Option<String>,
}

/// `GET /v1/audit`: entries oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditList {
    /// The page, oldest first.
    pub entries: Vec<AuditEntry>,
}
