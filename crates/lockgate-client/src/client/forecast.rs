//! The forecast call.

use crate::{Client, ClientError};
use lockgate_api::{ForecastQuery, ForecastView};

impl Client {
    /// `GET /v1/forecast`: when the queue and the scheduled runs up to `until` are done.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn forecast(&self, q: &ForecastQuery) -> Result<ForecastView, ClientError> {
        let mut parts = Vec::new();
        if let Some(u) = &q.until {
            parts.push(format!("until={}", super::encode(u)));
        }
        if let Some(m) = &q.r#match {
            parts.push(format!("match={}", super::encode(m)));
        }
        let path = match parts.is_empty() {
            true => "/v1/forecast".to_string(),
            false => format!("/v1/forecast?{}", parts.join("&")),
        };
        self.call("GET", &path, None::<&()>)
    }
}
