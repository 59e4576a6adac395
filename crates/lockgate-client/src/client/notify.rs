//! The notification calls: a test message through a `[[notify]]` target.

use crate::{Client, ClientError};
use lockgate_api::NotifyTestResult;

impl Client {
    /// `POST /v1/notify/{name}/test` (admin): sends a test event through the target now and
    /// says what the receiver answered.
    ///
    /// # Errors
    /// See [`ClientError`] (an undelivered test is `Ok` with `ok: false`).
    pub fn notify_test(&self, name: &str) -> Result<NotifyTestResult, ClientError> {
        let path = format!("/v1/notify/{}/test", super::encode(name));
        self.call("POST", &path, None::<&()>)
    }
}
