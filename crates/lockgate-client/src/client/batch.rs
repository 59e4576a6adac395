//! The batch calls (`/v1/batch/*`): many submits, finishes or heartbeats in one request.
//! Each item has its own answer ([`BatchItem`]); a refused item does not fail the call.

use crate::{Client, ClientError, CALL_TIMEOUT};
use lockgate_api::{
    BatchAnswer, BatchFinishItem, BatchFinishRequest, BatchHeartbeatRequest, BatchItem, BatchLease,
    BatchSubmitRequest, SubmitRequest,
};

impl Client {
    /// `POST /v1/batch/submit`: one answer per job, in order (status 201 created, 200 an
    /// idempotent resubmission, else the error the single submit would have given).
    ///
    /// # Errors
    /// See [`ClientError`]; a batch over [`lockgate_api::MAX_BATCH_ITEMS`] is refused whole.
    pub fn submit_batch(&self, jobs: Vec<SubmitRequest>) -> Result<Vec<BatchItem>, ClientError> {
        self.batch("/v1/batch/submit", &BatchSubmitRequest { jobs })
    }

    /// `POST /v1/batch/finish`: one answer per finish, in order.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn finish_batch(&self, jobs: Vec<BatchFinishItem>) -> Result<Vec<BatchItem>, ClientError> {
        self.batch("/v1/batch/finish", &BatchFinishRequest { jobs })
    }

    /// `POST /v1/batch/heartbeat`: one answer per lease, in order.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn heartbeat_batch(&self, leases: Vec<BatchLease>) -> Result<Vec<BatchItem>, ClientError> {
        self.batch("/v1/batch/heartbeat", &BatchHeartbeatRequest { leases })
    }

    fn batch<B: serde::Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<Vec<BatchItem>, ClientError> {
        let (_, a): (u16, BatchAnswer) =
            self.call_status("POST", path, Some(body), CALL_TIMEOUT)?;
        Ok(a.items)
    }
}
