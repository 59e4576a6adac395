//! The event-log calls: one page, or the Server-Sent Events stream.

use crate::{Client, ClientError};
use lockgate_api::{EventList, EventView};
use std::io::{BufRead, BufReader};
use std::time::Duration;

impl Client {
    /// `GET /v1/events?after=SEQ`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn events(&self, after: u64) -> Result<EventList, ClientError> {
        self.call("GET", &format!("/v1/events?after={after}"), None::<&()>)
    }

    /// `GET /v1/events/stream` (Server-Sent Events): calls `f` for every event until the
    /// stream ends or `f` returns false.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn follow_events(
        &self,
        after: u64,
        mut f: impl FnMut(EventView) -> bool,
    ) -> Result<(), ClientError> {
        let last = after.to_string();
        let (url, resp) = self.send(
            "GET",
            "/v1/events/stream",
            Duration::from_secs(365 * 86_400),
            |req| req.set("Last-Event-ID", &last).call().map_err(Box::new),
        )?;
        let reader = BufReader::new(resp.into_reader());
        let mut data = String::new();
        for line in reader.lines() {
            let line = line.map_err(|e| ClientError::Unreachable {
                url: url.clone(),
                message: e.to_string(),
            })?;
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                let ev: EventView =
                    serde_json::from_str(&data).map_err(|e| ClientError::Decode {
                        url: url.clone(),
                        message: e.to_string(),
                    })?;
                data.clear();
                if !f(ev) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
