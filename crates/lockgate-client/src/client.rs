//! The transport: one [`Client`] per server and token, JSON in and out, errors mapped to
//! [`ClientError`]. The calls of each resource are in the submodules.
//!
//! Blocking on purpose: `lockgate run` is a short-lived wrapper that may run by the
//! hundred on one host; a thread per call is cheaper than a runtime per process.
//! Connection failures are [`ClientError::Unreachable`]; answers with an error status are
//! [`ClientError::Api`] with the server's [`ErrorDetail`]. Every call has a timeout
//! ([`CALL_TIMEOUT`] unless the call says otherwise), so no call blocks for ever.

mod audit;
mod backups;
mod events;
mod forecast;
mod joblogs;
mod jobs;
mod nodes;
mod notify;
mod pauses;
mod policy;
mod rpo;
pub use audit::AuditQuery;
pub use policy::PolicyPut;
mod schedules;
mod tokens;
mod ui;

use crate::ClientError;
use lockgate_api::{ErrorBody, ErrorDetail};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A connection to one server with one token.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// How long a plain call may take; long-polls add their own timeout.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client for `base` (`http://127.0.0.1:7400`). For `https` with a private CA, set
    /// `LOCKGATE_CA_CERT` to a PEM file (else the webpki roots are trusted).
    ///
    /// # Errors
    /// [`ClientError::Setup`] when the CA file cannot be read.
    pub fn new(base: &str, token: Option<String>) -> Result<Client, ClientError> {
        let ca = std::env::var("LOCKGATE_CA_CERT")
            .ok()
            .filter(|p| !p.is_empty());
        Client::with_ca(base, token, ca.as_deref())
    }

    /// A client that trusts the CA certificates in the PEM file `ca` (for a server with a
    /// private or self-signed certificate).
    ///
    /// # Errors
    /// [`ClientError::Setup`] when the file cannot be read or holds no certificate.
    pub fn with_ca(
        base: &str,
        token: Option<String>,
        ca: Option<&str>,
    ) -> Result<Client, ClientError> {
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .max_idle_connections_per_host(16);
        if let Some(path) = ca {
            builder = builder.tls_config(Arc::new(tls_config(path)?));
        }
        Ok(Client {
            agent: builder.build(),
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        timeout: Duration,
    ) -> (String, ureq::Request) {
        let url = format!("{}{}", self.base, path);
        let mut req = self.agent.request(method, &url).timeout(timeout);
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        (url, req)
    }

    fn finish<T: DeserializeOwned>(
        url: &str,
        result: Result<ureq::Response, ureq::Error>,
    ) -> Result<(u16, T), ClientError> {
        let resp = result.map_err(|e| map_error(url, e))?;
        let status = resp.status();
        let text = resp.into_string().map_err(|e| ClientError::Unreachable {
            url: url.to_string(),
            message: format!("reading the answer: {e}"),
        })?;
        serde_json::from_str(&text)
            .map(|v| (status, v))
            .map_err(|e| ClientError::Decode {
                url: url.to_string(),
                message: format!("{e}: {}", snippet(&text)),
            })
    }

    /// A call with an optional JSON body.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T, ClientError> {
        self.call_status(method, path, body, CALL_TIMEOUT)
            .map(|(_, v)| v)
    }

    pub(crate) fn call_status<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<(u16, T), ClientError> {
        let (url, req) = self.request(method, path, timeout);
        let result = match body {
            Some(b) => {
                let text = serde_json::to_string(b).expect("request types serialize");
                req.set("Content-Type", "application/json")
                    .send_string(&text)
            }
            None => req.call(),
        };
        Self::finish(&url, result)
    }

    /// A call with a raw body and content type (policy documents).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn call_raw<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> Result<T, ClientError> {
        let (url, mut req) = self.request(method, path, CALL_TIMEOUT);
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = req.set("Content-Type", content_type).send_string(body);
        Self::finish(&url, result).map(|(_, v)| v)
    }
}

pub(crate) fn map_error(url: &str, e: ureq::Error) -> ClientError {
    match e {
        ureq::Error::Status(status, resp) => {
            let text = resp.into_string().unwrap_or_default();
            let detail = serde_json::from_str::<ErrorBody>(&text)
                .map(|b| b.error)
                .unwrap_or_else(|_| ErrorDetail {
                    code: format!("http_{status}"),
                    message: snippet(&text),
                    field: None,
                    line: None,
                });
            ClientError::Api { status, detail }
        }
        ureq::Error::Transport(t) => ClientError::Unreachable {
            url: url.to_string(),
            message: t.to_string(),
        },
    }
}

fn snippet(text: &str) -> String {
    let t: String = text.chars().take(200).collect();
    if t.is_empty() {
        "(empty body)".into()
    } else {
        t
    }
}

/// Percent-encodes a path segment or query value.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn tls_config(path: &str) -> Result<rustls::ClientConfig, ClientError> {
    let setup = |m: String| ClientError::Setup(format!("LOCKGATE_CA_CERT={path}: {m}"));
    let pem = std::fs::read(path).map_err(|e| setup(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| setup(e.to_string()))?;
        roots.add(cert).map_err(|e| setup(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(e.to_string()))
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}
