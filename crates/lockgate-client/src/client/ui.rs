//! The dashboard's calls (docs/dashboard.md).

use super::Client;
use crate::ClientError;
use lockgate_api::{UiCode, UiOverview};

impl Client {
    /// `POST /v1/ui/codes` (admin): a one-time dashboard sign-in code, valid 10 minutes.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn ui_code(&self) -> Result<UiCode, ClientError> {
        self.call("POST", "/v1/ui/codes", None::<&()>)
    }

    /// `GET /v1/ui/overview`: scopes split by state, the queue's depth, its oldest job.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn ui_overview(&self) -> Result<UiOverview, ClientError> {
        self.call("GET", "/v1/ui/overview", None::<&()>)
    }
}
