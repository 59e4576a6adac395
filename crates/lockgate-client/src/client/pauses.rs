//! The pause calls: pause, list, resume one, resume all.

use crate::{Client, ClientError};
use lockgate_api::{PauseList, PauseRequest, PauseView, Resumed};

impl Client {
    /// `POST /v1/pauses` (admin): the new pause.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn pause(&self, req: &PauseRequest) -> Result<PauseView, ClientError> {
        self.call("POST", "/v1/pauses", Some(req))
    }

    /// `GET /v1/pauses`: every active pause.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn pauses(&self) -> Result<PauseList, ClientError> {
        self.call("GET", "/v1/pauses", None::<&()>)
    }

    /// `DELETE /v1/pauses/{id}` (admin): the pause that ended.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn resume(&self, id: u64) -> Result<PauseView, ClientError> {
        self.call("DELETE", &format!("/v1/pauses/{id}"), None::<&()>)
    }

    /// `DELETE /v1/pauses` (admin): resumes every pause.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn resume_all(&self) -> Result<Resumed, ClientError> {
        self.call("DELETE", "/v1/pauses", None::<&()>)
    }
}
