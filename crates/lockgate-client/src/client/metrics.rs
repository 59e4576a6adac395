//! `GET /metrics`: the Prometheus text, as text (the one call that is not JSON).

use crate::{Client, ClientError};

impl Client {
    /// `GET /metrics`, with the token (a server with `--metrics-auth` needs one).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn metrics(&self) -> Result<String, ClientError> {
        let (url, resp) = self.send("GET", "/metrics", self.plain_timeout(), |req| {
            req.call().map_err(Box::new)
        })?;
        resp.into_string().map_err(|e| ClientError::Unreachable {
            url,
            message: format!("reading the answer: {e}"),
        })
    }
}
