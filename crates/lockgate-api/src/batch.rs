//! Batch requests: many submits, finishes or heartbeats in one request
//! (`POST /v1/batch/submit`, `/v1/batch/finish`, `/v1/batch/heartbeat`).
//!
//! Each item keeps its own answer: one bad item does not fail the others. The whole batch
//! is applied in one turn of the server's loop, so its writes share one group commit, and
//! the answer is sent only after that commit (as for the single routes).

use crate::{ErrorBody, FinishRequest, JobView, SubmitRequest};
use serde::{Deserialize, Serialize};

/// The most items one batch request may carry; a longer batch is refused whole with 400
/// (`invalid_field`, field `jobs`/`leases`) before any item is applied.
pub const MAX_BATCH_ITEMS: usize = 1000;

/// `POST /v1/batch/submit` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchSubmitRequest {
    /// The jobs, each as the body of `POST /v1/jobs` (at most [`MAX_BATCH_ITEMS`]).
    pub jobs: Vec<SubmitRequest>,
}

/// One finish in `POST /v1/batch/finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchFinishItem {
    /// The job's id.
    pub id: u64,
    /// The lease's fencing token.
    pub token: u64,
    /// `succeeded`, `failed` or `cancelled`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::OutcomeSchema))]
    pub outcome: lockgate_core::Outcome,
    /// Free text (an exit status, a failure reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl BatchFinishItem {
    /// The single route's body for this item.
    pub fn request(self) -> FinishRequest {
        FinishRequest {
            token: self.token,
            outcome: self.outcome,
            message: self.message,
            usage: None,
        }
    }
}

/// `POST /v1/batch/finish` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchFinishRequest {
    /// The finishes (at most [`MAX_BATCH_ITEMS`]).
    pub jobs: Vec<BatchFinishItem>,
}

/// One lease in `POST /v1/batch/heartbeat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchLease {
    /// The job's id.
    pub id: u64,
    /// The lease's fencing token.
    pub token: u64,
}

/// `POST /v1/batch/heartbeat` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchHeartbeatRequest {
    /// The leases to renew (at most [`MAX_BATCH_ITEMS`]).
    pub leases: Vec<BatchLease>,
}

/// The answer to one item of a batch: the status the single route would have answered,
/// and its body (the job, or the error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchItem {
    /// The HTTP status the single route would have answered (201, 200, 403, 409, ...).
    pub status: u16,
    /// The job, when the item succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobView>,
    /// The error, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// The answer to a batch request: one item per item asked, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAnswer {
    /// The items' answers, in the order of the request.
    pub items: Vec<BatchItem>,
}
