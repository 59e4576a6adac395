//! RPO rules and their values as the API shows them (`GET /v1/rpo`, `DELETE
//! /v1/rpo/{rule}/{value}`).
//!
//! A value is named two ways: as an object (`{"group": "vm/100"}`, its `per` keys and
//! values) and as its `label`, the values comma-joined in `per` order (`vm/100`), which is
//! the `value` label of the `lockgate_rpo_*` metrics and the `{value}` of the forget path.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a value stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RpoStatus {
    /// Its last success is younger than `max_age`.
    Ok,
    /// No success yet, and its first job was seen less than `max_age` ago.
    New,
    /// Its last success (or, with none, its first job) is `max_age` old or older.
    Overdue,
}

impl RpoStatus {
    /// The name as JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RpoStatus::Ok => "ok",
            RpoStatus::New => "new",
            RpoStatus::Overdue => "overdue",
        }
    }
}

/// One value of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RpoValueView {
    /// The rule's name.
    pub rule: String,
    /// The `per` keys and this value's values (`{}` for a rule without `per`).
    pub value: BTreeMap<String, String>,
    /// The values comma-joined in `per` order: the metrics' `value` label.
    pub label: String,
    /// When its first job was seen (RFC 3339).
    pub first_seen: String,
    /// When its latest job was seen (RFC 3339).
    pub last_seen: String,
    /// The latest job seen; `null` when unknown.
    pub last_job: Option<u64>,
    /// That job's state when it was seen.
    pub last_state: Option<String>,
    /// When its latest successful job ended (RFC 3339); `null`: never.
    pub last_success: Option<String>,
    /// That job.
    pub last_success_job: Option<u64>,
    /// Seconds since the last success (since the first job, without one).
    pub age_s: u64,
    /// The rule's `max_age` in seconds.
    pub max_age_s: u64,
    /// `ok`, `new` or `overdue`.
    pub status: RpoStatus,
}

/// One rule with its values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RpoRuleView {
    /// Its name (given, or derived from `match` and `per`).
    pub name: String,
    /// Its `match` as written; `null`: every job.
    #[serde(rename = "match")]
    pub selector: Option<String>,
    /// Its `per` keys.
    pub per: Vec<String>,
    /// `max_age` in seconds.
    pub max_age_s: u64,
    /// Its values, by label.
    pub values: Vec<RpoValueView>,
}

/// `GET /v1/rpo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RpoList {
    /// Every `[[rpo]]` rule of the active policy, in document order.
    pub rules: Vec<RpoRuleView>,
}

/// `DELETE /v1/rpo/{rule}/{value}`: the values retired (as they stood).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RpoForgotten {
    /// The values no longer tracked (one, unless a comma inside a value made two labels
    /// equal).
    pub forgotten: Vec<RpoValueView>,
}
