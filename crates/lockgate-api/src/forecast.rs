//! Forecasts: a queued job's estimated start and end (`estimate` in its explain), a job's
//! learned durations (`expected` in its view), and `GET /v1/forecast` (docs/forecasts.md).
//!
//! Times are RFC 3339; a time is `null` where history does not allow one (a job of a kind
//! with no successful run and no `[forecast] default_run`, or one that waits for such a job).

use lockgate_core::durations::{Basis, Estimate, Expected};
use serde::{Deserialize, Serialize};

/// A queued job's estimated start and end, from the forward run at p50 and at p90.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EstimateView {
    /// Start (admission) if every job takes its median.
    pub start_p50: Option<String>,
    /// Start if every job takes its 90th percentile.
    pub start_p90: Option<String>,
    /// End at the median.
    pub end_p50: Option<String>,
    /// End at the 90th percentile.
    pub end_p90: Option<String>,
    /// When the forecast was computed (the state it started from).
    pub computed_at: Option<String>,
}

/// One stage's learned duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StageEstimateView {
    /// Median, seconds.
    pub p50_s: f64,
    /// 90th percentile, seconds (the largest seen while there are fewer than 10 runs).
    pub p90_s: f64,
    /// Successful runs it was taken from (0 for a policy default).
    pub samples: usize,
    /// `key` (runs of the same kind and leading `[forecast] key` values), `kind`, or
    /// `default` (`[forecast] default_run` / `default_prepare`).
    pub basis: String,
    /// With basis `key`, the attributes the runs shared with the job, as `name=value`
    /// (`["tool=restic", "repo=main"]`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
}

impl From<Estimate> for StageEstimateView {
    fn from(e: Estimate) -> Self {
        StageEstimateView {
            p50_s: e.p50_ms as f64 / 1000.0,
            p90_s: e.p90_ms as f64 / 1000.0,
            samples: e.samples,
            basis: basis_name(e.basis).to_string(),
            key: Vec::new(),
        }
    }
}

/// An estimate's basis as the API names it.
fn basis_name(b: Basis) -> &'static str {
    match b {
        Basis::Key => "key",
        Basis::Kind => "kind",
        Basis::Default => "default",
    }
}

/// A job's learned size: what runs like it that succeeded moved (their larger direction,
/// read or written), as their holders measured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SizeEstimateView {
    /// Median, bytes.
    pub p50_bytes: u64,
    /// 90th percentile, bytes (the largest seen while there are fewer than 10 runs).
    pub p90_bytes: u64,
    /// Successful runs with a usage report it was taken from.
    pub samples: usize,
    /// `key` or `kind`, as a stage's.
    pub basis: String,
    /// With basis `key`, the attributes the runs shared with the job, as `name=value`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
}

impl From<Estimate> for SizeEstimateView {
    fn from(e: Estimate) -> Self {
        SizeEstimateView {
            p50_bytes: e.p50_ms,
            p90_bytes: e.p90_ms,
            samples: e.samples,
            basis: basis_name(e.basis).to_string(),
            key: Vec::new(),
        }
    }
}

/// A job's learned durations (`expected` in `GET /v1/jobs/{id}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExpectedView {
    /// The prepare stage (two-stage jobs), or null.
    pub prepare: Option<StageEstimateView>,
    /// The run stage, or null when there is no history and no default.
    pub run: Option<StageEstimateView>,
    /// What it moves, learned from runs that reported usage; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<SizeEstimateView>,
    /// A running job only: when it should end at its own recent rate, from what it has
    /// moved to its learned size (the median, or the 90th percentile once past it);
    /// absent without a rate, without a size, or past the 90th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
}

impl From<Expected> for ExpectedView {
    fn from(e: Expected) -> Self {
        ExpectedView {
            prepare: e.prepare.map(Into::into),
            run: e.run.map(Into::into),
            size: e.size.map(Into::into),
            end_at: None,
        }
    }
}

/// The query of `GET /v1/forecast`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
pub struct ForecastQuery {
    /// RFC 3339: scheduled runs up to this time are included, and jobs ending after it
    /// are listed as missing it. Default: 24 hours from now.
    pub until: Option<String>,
    /// Job selector: only matching jobs are counted and listed. Default: every job.
    #[serde(rename = "match")]
    pub r#match: Option<String>,
}

/// One job of a forecast.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForecastJobView {
    /// The job's id; null for a scheduled run not yet submitted.
    pub id: Option<u64>,
    /// The schedule a planned run comes from.
    pub schedule: Option<String>,
    /// Kind.
    pub kind: String,
    /// State now (`planned` for a scheduled run).
    pub state: String,
    /// Its estimate.
    pub estimate: EstimateView,
}

/// `GET /v1/forecast`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForecastView {
    /// The state the forecast starts from.
    pub computed_at: String,
    /// Scheduled runs up to this time are included.
    pub until: String,
    /// Jobs counted (queued, admitted, and planned runs up to `until`, matching `match`).
    pub jobs: usize,
    /// When they are all done at p50; null when one of them has no estimate.
    pub done_p50: Option<String>,
    /// When they are all done at p90.
    pub done_p90: Option<String>,
    /// Jobs whose p90 end is after `until` or unknown.
    pub missing: Vec<ForecastJobView>,
    /// Jobs without an estimate (no history, no default).
    pub unknown: usize,
    /// The scope, among those that reached their limit in the forecast, whose jobs wait
    /// longest in total; null when nothing waits on a full scope.
    pub bottleneck: Option<String>,
    /// Total wait, seconds, per full scope (at p50).
    pub waits_s: std::collections::BTreeMap<String, f64>,
    /// Whether the forward run got to its end within its time bound.
    pub complete: bool,
}
