//! Jobs: `POST /v1/jobs`, `GET /v1/jobs[/{id}]`, the long-poll `wait`, `explain`, the lease
//! calls (`heartbeat`, `prepared`, `finish`), `cancel`, and the edits `set` and `retry`
//! (`edit.rs`, with the dependency checks of a submit).
//!
//! `routes.rs` holds the handlers; [`JobOp`] the loop operations, applied in `ops.rs`.
//!
//! # Invariants
//! - Who may see a job: admins and viewers all, a submitter its own, an agent those on its
//!   node (`may_see`); who may act on it: the same minus viewers (`may_act`).
//! - A wait is answered by the commit that changes the job's state away from `from`, or,
//!   when the poll times out, by a fresh read: never by a state the store could lose.

mod batch;
mod edit;
mod list;
mod ops;
mod routes;

pub(crate) use ops::Waiter;
pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::protocol::Reply;
use lockgate_api::{ExplainView, FinishRequest, JobList, JobQuery, JobView, Role, SubmitRequest};
use lockgate_core::job::{Job, JobId, JobState};

/// The answer to a submit: the job, and whether it is new (201) or an idempotent
/// resubmission of an existing one (200).
#[derive(Debug)]
pub struct Submitted {
    /// The job.
    pub job: JobView,
    /// Created by this request.
    pub created: bool,
}

/// Job operations of the loop.
#[derive(Debug)]
pub enum JobOp {
    /// `POST /v1/jobs`.
    Submit(Box<SubmitRequest>, Reply<Submitted>),
    /// `POST /v1/jobs/unadmitted`.
    Unadmitted(Box<lockgate_api::UnadmittedReport>, Reply<Submitted>),
    /// `GET /v1/jobs/{id}`.
    Get(JobId, Reply<JobView>),
    /// `GET /v1/jobs`.
    List(JobQuery, Reply<JobList>),
    /// `GET /v1/jobs/{id}/wait`: answered when the state differs from `from`.
    Wait {
        /// Job.
        id: JobId,
        /// The state the caller knows.
        from: JobState,
        /// Also answer once the job's cancellation is requested (a holder learns of a
        /// cancel at once, not at its next renewal).
        or_cancel: bool,
        /// The job in its new state.
        reply: Reply<JobView>,
    },
    /// `GET /v1/jobs/{id}/explain`.
    Explain(JobId, Reply<ExplainView>),
    /// `POST /v1/jobs/{id}/heartbeat` with the lease token.
    Heartbeat(JobId, lockgate_api::LeaseRequest, Reply<JobView>),
    /// `POST /v1/jobs/{id}/prepared` with the lease token.
    Prepared(JobId, lockgate_api::LeaseRequest, Reply<JobView>),
    /// `POST /v1/jobs/{id}/finish`.
    Finish(JobId, FinishRequest, Reply<JobView>),
    /// `POST /v1/jobs/{id}/cancel` (`force`).
    Cancel(JobId, bool, Reply<JobView>),
    /// `POST /v1/jobs/{id}/set`: a queued job's priority.
    Set(JobId, lockgate_api::JobSetRequest, Reply<JobView>),
    /// `POST /v1/jobs/{id}/retry`: a failed agent job again.
    Retry(JobId, Reply<JobView>),
    /// `POST /v1/batch/*`: many items in one turn of the loop (`batch.rs`).
    Batch(BatchItems, Reply<lockgate_api::BatchAnswer>),
}

/// The items of one batch request, each applied as its single route would be.
#[derive(Debug)]
pub enum BatchItems {
    /// `POST /v1/batch/submit`.
    Submit(Vec<SubmitRequest>),
    /// `POST /v1/batch/finish`.
    Finish(Vec<lockgate_api::BatchFinishItem>),
    /// `POST /v1/batch/heartbeat`.
    Heartbeat(Vec<lockgate_api::BatchLease>),
}

impl BatchItems {
    /// How many items.
    pub fn len(&self) -> usize {
        match self {
            BatchItems::Submit(v) => v.len(),
            BatchItems::Finish(v) => v.len(),
            BatchItems::Heartbeat(v) => v.len(),
        }
    }

    /// No items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// 400 when the batch is longer than [`lockgate_api::MAX_BATCH_ITEMS`].
    ///
    /// # Errors
    /// `invalid_field` naming the list.
    pub(crate) fn check_len(&self) -> Result<(), ApiError> {
        let field = match self {
            BatchItems::Heartbeat(_) => "leases",
            _ => "jobs",
        };
        let max = lockgate_api::MAX_BATCH_ITEMS;
        if self.len() > max {
            return Err(ApiError::invalid(
                field,
                format!(
                    "{} items in one batch; at most {max}: split the batch",
                    self.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Whether `p` may read `job`.
///
/// # Errors
/// 403 naming the job's owner.
pub(crate) fn may_see(p: &Principal, job: &Job) -> Result<(), ApiError> {
    match p.role {
        Role::Admin | Role::Viewer => Ok(()),
        Role::Submitter if job.owner == p.name => Ok(()),
        Role::Agent if job.node().is_some() && job.node() == p.node.as_deref() => Ok(()),
        _ => Err(ApiError::forbidden(format!(
            "job {} belongs to {:?}; a {} token {:?} may only use its own jobs",
            job.id, job.owner, p.role, p.name
        ))),
    }
}

/// Whether `p` may hold, finish or cancel `job`.
///
/// # Errors
/// 403 for viewers, and as [`may_see`].
pub(crate) fn may_act(p: &Principal, job: &Job) -> Result<(), ApiError> {
    if p.role == Role::Viewer {
        return Err(ApiError::forbidden(format!(
            "viewer token {:?} is read-only",
            p.name
        )));
    }
    may_see(p, job)
}
