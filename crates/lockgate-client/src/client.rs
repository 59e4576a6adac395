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
mod batch;
mod cluster;
mod events;
mod forecast;
mod joblogs;
mod jobs;
mod metrics;
mod nodes;
mod notify;
mod pauses;
mod policy;
mod restores;
mod rpo;
pub use audit::AuditQuery;
pub use policy::PolicyPut;
mod schedules;
mod tokens;
mod ui;

use crate::servers::{Round, Servers, FOLLOW_LIMIT};
use crate::ClientError;
use lockgate_api::{ErrorBody, ErrorCode, ErrorDetail};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection to one server, or to the replicas of one cluster (the URLs
/// comma-separated: the client follows the leader, see `servers.rs`), with one token.
/// Clones share which server they ask first.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    servers: Arc<Servers>,
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &self.servers.urls())
            .field("current", &self.servers.current())
            .finish_non_exhaustive()
    }
}

/// How long a plain call may take; long-polls add their own timeout.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// With several servers, how long a plain call may take: a paused leader accepts
/// connections and never answers, so a call to it must end soon enough for the caller's
/// retry (which starts at the next server) to reach the new leader while the holder's
/// lease still runs. A commit on the leader takes milliseconds; 5 s is the slack.
pub const CLUSTER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// With several servers, the longest a long-poll waits on the server, and the most its
/// answer may be late: a `lockgate run` waiting on a paused leader learns of its
/// admission by the new leader within 4 s, well within any lease TTL it must renew in.
pub const CLUSTER_POLL: Duration = Duration::from_secs(2);

impl Client {
    /// A client for `base` (`http://127.0.0.1:7400`, or several replicas' URLs
    /// comma-separated: `http://a:7400,http://b:7400`). For `https` with a private CA, set
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
            servers: Servers::new(base),
            token,
        })
    }

    /// The base URL calls go to first: the one given, or the leader found last.
    pub fn base(&self) -> String {
        self.servers.current()
    }

    /// The timeout of a plain call: [`CALL_TIMEOUT`], or [`CLUSTER_CALL_TIMEOUT`] with
    /// several servers.
    pub(crate) fn plain_timeout(&self) -> Duration {
        if self.servers.several() {
            CLUSTER_CALL_TIMEOUT
        } else {
            CALL_TIMEOUT
        }
    }

    /// A long-poll of `poll` on the server: the poll to ask for and the call's timeout
    /// (`poll + margin`); with several servers both shrink to [`CLUSTER_POLL`] (the caller
    /// polls again on an unchanged answer), so a paused leader holds a poll for 4 s at most.
    pub(crate) fn long_poll(&self, poll: Duration, margin: Duration) -> (Duration, Duration) {
        if self.servers.several() {
            let poll = poll.min(CLUSTER_POLL);
            (poll, poll + CLUSTER_POLL)
        } else {
            (poll, poll + margin)
        }
    }

    /// Every server URL given.
    pub fn servers(&self) -> &[String] {
        self.servers.urls()
    }

    fn request(&self, method: &str, url: &str, timeout: Duration) -> ureq::Request {
        let mut req = self.agent.request(method, url).timeout(timeout);
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        req
    }

    /// Sends one request (`send` adds headers and the body), trying the next server while
    /// the request did nothing (see `servers.rs`); `timeout` bounds the whole call.
    /// Returns the URL that answered and its answer.
    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        timeout: Duration,
        send: impl Fn(ureq::Request) -> Result<ureq::Response, Box<ureq::Error>>,
    ) -> Result<(String, ureq::Response), ClientError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let follow_until = start + FOLLOW_LIMIT.min(timeout);
        let mut round = Round::new(&self.servers);
        let mut base = self.servers.current();
        loop {
            let url = format!("{base}{path}");
            let left = deadline.saturating_duration_since(Instant::now());
            let result = send(self.request(method, &url, left.max(Duration::from_millis(1))));
            let e = match result {
                Ok(resp) => {
                    self.servers.settle(&base);
                    return Ok((url, resp));
                }
                Err(e) => e,
            };
            let never_connected = matches!(&*e, ureq::Error::Transport(t)
                if matches!(t.kind(), ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns));
            let err = map_error(&url, *e);
            let standby = match &err {
                ClientError::Api { detail, .. }
                    if detail.error_code() == Some(ErrorCode::NotLeader) =>
                {
                    Some(detail.leader.clone())
                }
                _ => None,
            };
            if standby.is_none() && !never_connected {
                if err.is_temporary() && self.servers.several() {
                    self.servers.pass_over(&base);
                }
                return Err(err);
            }
            let leader = standby.flatten();
            match round.next(&base, leader.as_deref()) {
                Some((next, pause)) if Instant::now() + pause < follow_until => {
                    std::thread::sleep(pause);
                    base = next;
                }
                _ => {
                    self.servers.pass_over(&base);
                    return Err(err);
                }
            }
        }
    }

    fn finish<T: DeserializeOwned>(
        url: &str,
        resp: ureq::Response,
    ) -> Result<(u16, T), ClientError> {
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
        self.call_status(method, path, body, self.plain_timeout())
            .map(|(_, v)| v)
    }

    pub(crate) fn call_status<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<(u16, T), ClientError> {
        let text = body.map(|b| serde_json::to_string(b).expect("request types serialize"));
        let (url, resp) = self.send(method, path, timeout, |req| match &text {
            Some(t) => req
                .set("Content-Type", "application/json")
                .send_string(t)
                .map_err(Box::new),
            None => req.call().map_err(Box::new),
        })?;
        Self::finish(&url, resp)
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
        let (url, resp) = self.send(method, path, self.plain_timeout(), |mut req| {
            for (k, v) in headers {
                req = req.set(k, v);
            }
            req.set("Content-Type", content_type)
                .send_string(body)
                .map_err(Box::new)
        })?;
        Self::finish(&url, resp).map(|(_, v)| v)
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
                    leader: None,
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
