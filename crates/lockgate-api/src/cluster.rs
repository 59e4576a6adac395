//! The cluster as `GET /v1/cluster` shows it: the replicas on one database, which one
//! leads, since when and under which term (docs/postgresql.md, "Several servers").
//!
//! Times are RFC 3339 strings as the database's clock gave them: the leadership lease runs
//! on that one clock, never on the replicas' own.

use serde::{Deserialize, Serialize};

/// `GET /v1/cluster`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterView {
    /// This replica's id (`holder` in the leadership row).
    pub me: String,
    /// This replica's role: `leader`, `standby`, or `taking_over` (it won the lead and is
    /// rebuilding from the database; it answers 503 `unavailable` until it admits).
    pub role: String,
    /// The leader as the database last said, when its lease has not run out.
    pub leader: Option<LeaderView>,
    /// The current term: it grows by one at every change of leader.
    pub term: i64,
    /// Changes of role this replica went through since it started.
    pub leader_changes: u64,
    /// The leadership lease (seconds): a leader that cannot renew it for this long loses
    /// it; a standby takes over at most this long, plus a renewal interval, after the
    /// leader's last renewal.
    pub lease_s: f64,
    /// The database (its URL with the password as `***`).
    pub database: String,
    /// How long the last leadership statement took on the database (milliseconds).
    pub last_commit_ms: Option<f64>,
    /// Every replica that has heartbeated into the database.
    pub replicas: Vec<ReplicaView>,
}

/// The leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaderView {
    /// Its id.
    pub holder: String,
    /// Its advertised URL (where clients are sent).
    pub url: String,
    /// Its term.
    pub term: i64,
    /// When it took the lead (RFC 3339, the database's clock).
    pub since: String,
    /// When its lease runs out unless renewed (RFC 3339, the database's clock).
    pub expires_at: String,
}

/// One replica's heartbeat row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicaView {
    /// Its id.
    pub holder: String,
    /// Its advertised URL.
    pub url: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339).
    pub seen_at: String,
    /// Its lockgate version.
    pub version: Option<String>,
    /// Whether it leads now.
    pub leader: bool,
}
