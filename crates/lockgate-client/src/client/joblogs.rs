//! The job log calls: a holder's `POST /v1/jobs/{id}/logs`, a reader's `GET`.

use crate::{Client, ClientError};
use lockgate_api::{LogAccepted, LogBatch, LogPage};
use std::time::Duration;

impl Client {
    /// `POST /v1/jobs/{id}/logs`, giving up after `timeout` (a log batch is worth less
    /// than the command's time: [`crate::logs`] drops it instead of waiting long).
    ///
    /// # Errors
    /// See [`ClientError`]; `lease_lost` when the job is no longer held with this token.
    pub fn post_logs(
        &self,
        id: u64,
        batch: &LogBatch,
        timeout: Duration,
    ) -> Result<LogAccepted, ClientError> {
        self.call_status("POST", &format!("/v1/jobs/{id}/logs"), Some(batch), timeout)
            .map(|(_, v)| v)
    }

    /// `GET /v1/jobs/{id}/logs?after=`: the lines after `after`; with `timeout_s`, a
    /// long-poll answered once a line follows or the job has ended.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn job_logs(
        &self,
        id: u64,
        after: u64,
        timeout_s: Option<u64>,
    ) -> Result<LogPage, ClientError> {
        let mut path = format!("/v1/jobs/{id}/logs?after={after}");
        let mut timeout = crate::CALL_TIMEOUT;
        if let Some(w) = timeout_s {
            path.push_str(&format!("&timeout_s={w}"));
            timeout += Duration::from_secs(w);
        }
        self.call_status("GET", &path, None::<&()>, timeout)
            .map(|(_, v)| v)
    }
}
