//! A small blocking HTTP client for the CLI, `lockgate run` and tests.
//!
//! Blocking on purpose: `lockgate run` is a short-lived wrapper that may run by the
//! hundred on one host; a thread per call is cheaper than a runtime per process.
//! Connection failures are [`ClientError::Unreachable`] (retry them); answers with an
//! error status are [`ClientError::Api`] with the server's [`ErrorDetail`].

use crate::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::Duration;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached (connection refused, reset, timed out). Temporary:
    /// the same call may succeed later.
    #[error("cannot reach the lockgate server at {url}: {message}")]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport's error.
        message: String,
    },
    /// The server answered with an error status.
    #[error("server answered {status}: {detail}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error body (synthesized when the body was not an [`ErrorBody`]).
        detail: ErrorDetail,
    },
    /// The answer could not be decoded.
    #[error("cannot decode the server's answer from {url}: {message}")]
    Decode {
        /// The URL called.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The client could not be set up (a bad CA file).
    #[error("{0}")]
    Setup(String),
}

impl ClientError {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code of an API error (`lease_lost`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { detail, .. } => Some(&detail.code),
            _ => None,
        }
    }

    /// A connection problem: retrying may help.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Unreachable { .. })
    }
}

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
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

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

    fn request(&self, method: &str, path: &str, timeout: Duration) -> (String, ureq::Request) {
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

    fn call_status<T: DeserializeOwned>(
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

    /// `POST /v1/jobs`: the job, and whether it was created (false: an idempotent
    /// resubmission returned the existing job).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn submit(&self, req: &SubmitRequest) -> Result<(JobView, bool), ClientError> {
        let (status, job) = self.call_status("POST", "/v1/jobs", Some(req), CALL_TIMEOUT)?;
        Ok((job, status == 201))
    }

    /// `GET /v1/jobs/{id}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn job(&self, id: u64) -> Result<JobView, ClientError> {
        self.call("GET", &format!("/v1/jobs/{id}"), None::<&()>)
    }

    /// `GET /v1/jobs` with a query.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn jobs(&self, q: &JobQuery) -> Result<JobList, ClientError> {
        let mut parts = Vec::new();
        for (k, v) in [
            ("state", &q.state),
            ("kind", &q.kind),
            ("owner", &q.owner),
            ("node", &q.node),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}={}", encode(v)));
            }
        }
        if let Some(l) = q.limit {
            parts.push(format!("limit={l}"));
        }
        if let Some(a) = q.after {
            parts.push(format!("after={a}"));
        }
        let qs = if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        };
        self.call("GET", &format!("/v1/jobs{qs}"), None::<&()>)
    }

    /// `GET /v1/jobs/{id}/wait`: answers when the state differs from `from`, or after
    /// `timeout_s` with the job unchanged.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn wait(
        &self,
        id: u64,
        from: lockgate_core::JobState,
        timeout_s: u64,
    ) -> Result<JobView, ClientError> {
        let path = format!("/v1/jobs/{id}/wait?from={from}&timeout_s={timeout_s}");
        let timeout = Duration::from_secs(timeout_s + 15);
        self.call_status("GET", &path, None::<&()>, timeout)
            .map(|(_, v)| v)
    }

    /// `GET /v1/jobs/{id}/explain`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn explain(&self, id: u64) -> Result<ExplainView, ClientError> {
        self.call("GET", &format!("/v1/jobs/{id}/explain"), None::<&()>)
    }

    /// `POST /v1/jobs/{id}/heartbeat`; `lease_lost` comes back as a 409 [`ClientError::Api`].
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn heartbeat(&self, id: u64, token: u64) -> Result<JobView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/jobs/{id}/heartbeat"),
            Some(&LeaseRequest { token }),
        )
    }

    /// `POST /v1/jobs/{id}/prepared`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn prepared(&self, id: u64, token: u64) -> Result<JobView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/jobs/{id}/prepared"),
            Some(&LeaseRequest { token }),
        )
    }

    /// `POST /v1/jobs/{id}/finish`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn finish_job(
        &self,
        id: u64,
        token: u64,
        outcome: lockgate_core::Outcome,
        message: Option<String>,
    ) -> Result<JobView, ClientError> {
        let body = FinishRequest {
            token,
            outcome,
            message,
        };
        self.call("POST", &format!("/v1/jobs/{id}/finish"), Some(&body))
    }

    /// `POST /v1/jobs/{id}/cancel?force=..`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn cancel(&self, id: u64, force: bool) -> Result<JobView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/jobs/{id}/cancel?force={force}"),
            None::<&()>,
        )
    }

    /// `GET /v1/policy`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn policy(&self) -> Result<PolicyView, ClientError> {
        self.call("GET", "/v1/policy", None::<&()>)
    }

    /// `PUT /v1/policy` with a TOML document.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn put_policy(
        &self,
        toml: &str,
        dry_run: bool,
        if_match: Option<&str>,
    ) -> Result<PolicyAnswer, ClientError> {
        let headers: Vec<(&str, &str)> = if_match.map(|d| ("If-Match", d)).into_iter().collect();
        self.call_raw(
            "PUT",
            &format!("/v1/policy?dry_run={dry_run}"),
            "application/toml",
            toml,
            &headers,
        )
    }

    /// `POST /v1/tokens`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn create_token(&self, req: &TokenCreate) -> Result<TokenCreated, ClientError> {
        self.call("POST", "/v1/tokens", Some(req))
    }

    /// `GET /v1/tokens`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, ClientError> {
        self.call("GET", "/v1/tokens", None::<&()>)
    }

    /// `DELETE /v1/tokens/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn revoke_token(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        self.call(
            "DELETE",
            &format!("/v1/tokens/{}", encode(name)),
            None::<&()>,
        )
    }

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
        let (url, req) = self.request(
            "GET",
            "/v1/events/stream",
            Duration::from_secs(365 * 86_400),
        );
        let resp = req
            .set("Last-Event-ID", &after.to_string())
            .call()
            .map_err(|e| map_error(&url, e))?;
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

    /// `GET /v1/nodes`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn nodes(&self) -> Result<NodeList, ClientError> {
        self.call("GET", "/v1/nodes", None::<&()>)
    }

    /// `GET /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn node(&self, name: &str) -> Result<NodeView, ClientError> {
        self.call("GET", &format!("/v1/nodes/{}", encode(name)), None::<&()>)
    }

    /// `PUT /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn register_node(&self, name: &str, reg: &NodeRegister) -> Result<NodeView, ClientError> {
        self.call("PUT", &format!("/v1/nodes/{}", encode(name)), Some(reg))
    }

    /// `POST /v1/nodes/{name}/cordon` or `/uncordon`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn cordon(&self, name: &str, cordon: bool) -> Result<NodeView, ClientError> {
        let verb = if cordon { "cordon" } else { "uncordon" };
        self.call(
            "POST",
            &format!("/v1/nodes/{}/{verb}", encode(name)),
            None::<&()>,
        )
    }

    /// `DELETE /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn remove_node(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        self.call(
            "DELETE",
            &format!("/v1/nodes/{}", encode(name)),
            None::<&()>,
        )
    }
}

fn map_error(url: &str, e: ureq::Error) -> ClientError {
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
