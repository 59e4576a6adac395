//! The event-log calls: one page, or the Server-Sent Events stream.

use crate::{Client, ClientError};
use lockgate_api::{EventList, EventView, StreamCut};
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
    /// See [`ClientError`]. A stream the server ended itself (its last message,
    /// `event: cut`, a [`StreamCut`]) is [`ClientError::Unreachable`] with the server's
    /// reason: a temporary error, after which the caller resumes from the last event it
    /// was given.
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
        let (mut data, mut kind) = (String::new(), String::new());
        for line in reader.lines() {
            let line = line.map_err(|e| ClientError::Unreachable {
                url: url.clone(),
                message: e.to_string(),
            })?;
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            } else if let Some(k) = line.strip_prefix("event:") {
                kind = k.trim().to_string();
            } else if line.is_empty() {
                // A message ends: its type is `kind` (none for an event), and both reset.
                let (text, name) = (std::mem::take(&mut data), std::mem::take(&mut kind));
                if name == "cut" {
                    let message = serde_json::from_str::<StreamCut>(&text).map_or_else(
                        |_| format!("the server ended the stream: {text}"),
                        |c| c.message,
                    );
                    return Err(ClientError::Unreachable { url, message });
                }
                if !name.is_empty() || text.is_empty() {
                    continue;
                }
                let ev: EventView =
                    serde_json::from_str(&text).map_err(|e| ClientError::Decode {
                        url: url.clone(),
                        message: e.to_string(),
                    })?;
                if !f(ev) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
