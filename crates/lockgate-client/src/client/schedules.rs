//! The schedule calls: create, list, show, delete.

use super::encode;
use crate::{Client, ClientError};
use lockgate_api::{ScheduleList, ScheduleRequest, ScheduleView};

impl Client {
    /// `POST /v1/schedules`.
    ///
    /// # Errors
    /// See [`ClientError`]; 422 names the offending field, 409 a name in use.
    pub fn create_schedule(&self, req: &ScheduleRequest) -> Result<ScheduleView, ClientError> {
        self.call("POST", "/v1/schedules", Some(req))
    }

    /// `GET /v1/schedules`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn schedules(&self) -> Result<ScheduleList, ClientError> {
        self.call("GET", "/v1/schedules", None::<&()>)
    }

    /// `GET /v1/schedules/{name}?limit=N`: the schedule with its latest `limit` runs.
    ///
    /// # Errors
    /// See [`ClientError`]; 404 when there is no such schedule.
    pub fn schedule(&self, name: &str, limit: u32) -> Result<ScheduleView, ClientError> {
        let path = format!("/v1/schedules/{}?limit={limit}", encode(name));
        self.call("GET", &path, None::<&()>)
    }

    /// `DELETE /v1/schedules/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 for a schedule of the policy document.
    pub fn delete_schedule(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        let path = format!("/v1/schedules/{}", encode(name));
        self.call("DELETE", &path, None::<&()>)
    }
}
