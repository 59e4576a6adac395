//! The dashboard's own JSON (docs/dashboard.md): its session (`GET /ui/session`), a
//! one-time sign-in code (`POST /v1/ui/codes`), the overview (`GET /v1/ui/overview`) and
//! scope occupancy over time (`GET /v1/ui/occupancy`).
//!
//! Everything else the dashboard shows it reads from the ordinary API, so its numbers are
//! the API's numbers.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `GET /ui/session`: who the browser's session is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiSession {
    /// The principal's name (the token's).
    pub name: String,
    /// Its role.
    pub role: crate::Role,
    /// When the session ends (RFC 3339).
    pub expires: String,
    /// The value to send as `X-CSRF-Token` on every request that is not a read.
    pub csrf: String,
}

/// `POST /v1/ui/codes`: a one-time sign-in code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiCode {
    /// The code, to type into the dashboard's sign-in field (once).
    pub code: String,
    /// When it stops working unused (RFC 3339).
    pub expires: String,
}

/// `GET /v1/ui/overview`: the scopes, the queue and its oldest job, in one answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiOverview {
    /// Every counted scope (node scopes aside: those are the nodes' own), policy order
    /// aside, busiest first within a rule; at most [`UiOverview::MAX_SCOPES`].
    pub scopes: Vec<UiScope>,
    /// Scopes left out past the cap.
    pub scopes_omitted: usize,
    /// Jobs by state, every state present (0 included).
    pub states: BTreeMap<String, usize>,
    /// Queued jobs by kind.
    pub queued_by_kind: BTreeMap<String, usize>,
    /// Queued jobs by owner.
    pub queued_by_owner: BTreeMap<String, usize>,
    /// The queued job that has waited longest, if any.
    pub oldest_waiting: Option<UiOldest>,
    /// When this was read (RFC 3339).
    pub at: String,
    /// The sequence number of the last committed event (a stream resumes after it).
    pub last_seq: u64,
}

impl UiOverview {
    /// Most scopes one overview lists.
    pub const MAX_SCOPES: usize = 500;
}

/// One scope as a bar: its units in use split by the state of the jobs that hold them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiScope {
    /// Scope name (policy.md, "Scope names").
    pub scope: String,
    /// The rule it belongs to.
    pub rule: String,
    /// Units in use (the engine's own count: `running + prepared + preparing`).
    pub used: u64,
    /// Units held by running jobs.
    pub running: u64,
    /// Units held by prepared jobs (two-stage jobs waiting to run).
    pub prepared: u64,
    /// Units held by preparing jobs.
    pub preparing: u64,
    /// The limit in force now; `null` when unlimited.
    pub limit: Option<u64>,
    /// Highest count since the policy was applied.
    pub peak: u64,
    /// `used` is above `limit` (a lowered limit drains; nothing new is admitted).
    pub over_limit: bool,
}

/// The queued job that has waited longest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiOldest {
    /// Job id.
    pub id: u64,
    /// Kind.
    pub kind: String,
    /// Owner.
    pub owner: String,
    /// When it last entered `queued` (RFC 3339).
    pub queued_at: String,
    /// Seconds it has waited.
    pub waited_s: f64,
}

/// `GET /v1/ui/occupancy`: per scope, its units in use over the last hours, rebuilt from
/// the event history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiOccupancy {
    /// Start of the first bucket (RFC 3339).
    pub from: String,
    /// End of the last bucket (RFC 3339).
    pub until: String,
    /// Bucket width, seconds.
    pub step_s: u64,
    /// One series per scope with a limit or any use in the window.
    pub series: Vec<UiSeries>,
    /// Seconds queued jobs of each kind waited before admission, summed over the window
    /// (jobs admitted in the window only).
    pub waits_by_kind: BTreeMap<String, f64>,
    /// Events read; the history is complete when `truncated` is false.
    pub events: usize,
    /// The window held more events than one answer reads.
    pub truncated: bool,
}

/// One scope's occupancy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiSeries {
    /// Scope name.
    pub scope: String,
    /// The limit in force now; `null` when unlimited.
    pub limit: Option<u64>,
    /// Highest units in use seen in each bucket.
    pub peak: Vec<u64>,
}

/// `GET /v1/ui/throughput`: what the admitted jobs moved per second over the last hour,
/// per scope and per node, with each node's pressure, as the server sampled it (every
/// `step_s` while jobs ran; a time without a sample had nothing running).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiThroughput {
    /// Seconds between samples.
    pub step_s: u64,
    /// When each sample was taken (RFC 3339), oldest first.
    pub at: Vec<String>,
    /// Per scope (per rule the busiest, the rest summed as `<rule>:other`), bytes per
    /// second at each sample (the larger direction of each job, summed); `null` where the
    /// scope had no running job.
    pub scopes: Vec<UiRates>,
    /// Per node (the busiest), bytes per second at each sample.
    pub nodes: Vec<UiRates>,
}

/// One scope's or node's series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiRates {
    /// The scope or node.
    pub name: String,
    /// Bytes per second at each sample.
    pub bytes_per_s: Vec<Option<u64>>,
    /// A node's memory pressure (PSI `some avg10`, percent) at each sample, from its
    /// holders' last report; empty for a scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<Option<f64>>,
    /// A node's IO pressure at each sample; empty for a scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<Option<f64>>,
}

/// `GET /v1/ui/policy`: the active policy as TOML, for the dashboard's editor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UiPolicy {
    /// The active policy's digest (send it as `If-Match`).
    pub digest: String,
    /// The active policy as TOML, written from the document (comments are not kept;
    /// secrets inside `[[notify]]` URLs are `***`, which a `PUT` keeps as stored).
    pub toml: String,
}
