//! The audit log: every act that changes or tries to change the system, with who, when,
//! what (method, path and a compact summary) and what came of it (`GET /v1/audit`,
//! admins only).
//!
//! How an act is recorded, without touching the handlers:
//! - `record` is a route layer over every route. For a request that is not a read (not
//!   `GET`, `HEAD` or `OPTIONS`) it reads the caller, the body's [`summary`] and whether
//!   it is a dry run into an [`AuditTag`], and runs the handler inside the tag's
//!   task-local scope (`scope`).
//! - [`crate::protocol::LoopHandle::ask`] puts the current tag on the [`crate::protocol::Msg`].
//!   When the loop answers a tagged message, it writes the tag's row into the batch that
//!   answers it (`Loop::audit_answered`), so **an act's row is committed in the same
//!   transaction as the change it describes**. A handler that asks the loop twice writes
//!   the row twice; the store replaces it by the request's id (one row per request).
//! - After the handler, if the answer's outcome differs from what the loop wrote (a
//!   refusal or bad body before the loop was asked, a handler that failed after it), the
//!   layer asks the loop to write the final outcome ([`AuditOp::Record`]) before the
//!   answer leaves: no refused or invalid act goes unrecorded.
//!
//! # Invariants
//! - No row holds a secret: a policy body is recorded by its hash and the labels it
//!   changes, never its text; JSON fields named like a secret and the userinfo of URLs
//!   are `***`; a token's secret is only in an answer, never in a request.
//! - The lease and agent protocol and plain submits ([`is_protocol`]) are recorded only
//!   when refused (401/403): their successes are the event log's job events, which name
//!   the owner, and an audit row per heartbeat would double the store's writes.
//! - A batch (`/v1/batch/*`) is audited in full: one row for the request (per-item
//!   refusal rows are not written yet: the request's row overwrites them).
//! - Rows are pruned with the events, by `[retention] days`.

mod ops;
mod routes;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::auth::{authenticate, Principal};
use crate::error::ApiError;
use crate::http::AppState;
use crate::protocol::Reply;
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lockgate_api::{AuditList, AuditOutcome, ErrorCode};
use lockgate_core::Timestamp;
use lockgate_store::{AuditFilter, AuditRecord};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Bodies above this are refused with 413 (axum's own default body limit).
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Longest summary kept.
const MAX_SUMMARY: usize = 600;

/// Longest string value shown in a summary.
const MAX_VALUE: usize = 60;

/// `(method, route)` of the holder and agent protocol and of submits: audited only when
/// refused (see the module docs). Every other non-read route is audited in full.
pub const PROTOCOL_ROUTES: [(&str, &str); 6] = [
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/{id}/heartbeat"),
    ("POST", "/v1/jobs/{id}/prepared"),
    ("POST", "/v1/jobs/{id}/finish"),
    ("POST", "/v1/nodes/{name}/heartbeat"),
    ("POST", "/v1/nodes/{name}/assignments/{job}/ack"),
];

/// Whether `(method, route)` is one of [`PROTOCOL_ROUTES`].
pub fn is_protocol(method: &str, route: &str) -> bool {
    PROTOCOL_ROUTES.contains(&(method, route))
}

tokio::task_local! {
    static TAG: Arc<AuditTag>;
}

/// The audited request being handled on this task, if any.
pub(crate) fn current() -> Option<Arc<AuditTag>> {
    TAG.try_with(Arc::clone).ok()
}

/// Runs `f` with `tag` as the current audited request: every loop operation it asks for
/// carries the tag.
///
/// # Cancel safety
/// As cancel safe as `f`: dropping it drops `f` (the tag goes with it).
pub(crate) async fn scope<F: std::future::Future>(tag: Arc<AuditTag>, f: F) -> F::Output {
    TAG.scope(tag, f).await
}

/// One audited request: who, what, and what the loop last wrote for it.
#[derive(Debug)]
pub struct AuditTag {
    request: String,
    principal: Option<Principal>,
    method: String,
    path: String,
    summary: String,
    dry_run: bool,
    /// What the loop last wrote, and the detail an operation added (a policy's diff).
    written: Mutex<(Option<AuditOutcome>, Option<String>)>,
}

impl AuditTag {
    /// A tag for an act with a fresh request id.
    pub fn new(
        principal: Option<Principal>,
        method: impl Into<String>,
        path: impl Into<String>,
        summary: String,
        dry_run: bool,
    ) -> Arc<AuditTag> {
        Arc::new(AuditTag {
            request: crate::auth::new_token()[..32].to_string(),
            principal,
            method: method.into(),
            path: path.into(),
            summary,
            dry_run,
            written: Mutex::new((None, None)),
        })
    }

    fn written(&self) -> std::sync::MutexGuard<'_, (Option<AuditOutcome>, Option<String>)> {
        self.written.lock().expect("audit tag lock")
    }

    /// The row for `outcome` (a `detail` replaces the one kept; `None` keeps it).
    fn row(
        &self,
        outcome: AuditOutcome,
        error: Option<String>,
        detail: Option<String>,
        at: Timestamp,
    ) -> AuditRecord {
        let mut w = self.written();
        w.0 = Some(outcome);
        if detail.is_some() {
            w.1 = detail;
        }
        let summary = match (&w.1, self.summary.is_empty()) {
            (Some(d), true) => d.clone(),
            (Some(d), false) => format!("{}; {d}", self.summary),
            (None, _) => self.summary.clone(),
        };
        AuditRecord {
            seq: 0,
            request: self.request.clone(),
            at,
            principal: self.principal.as_ref().map(|p| p.name.clone()),
            role: self.principal.as_ref().map(|p| p.role),
            method: self.method.clone(),
            path: self.path.clone(),
            summary: clip(summary, MAX_SUMMARY),
            outcome,
            error,
        }
    }

    /// Whether the loop already wrote the outcome the answer has (`ok` and `unchanged`
    /// agree with any success).
    fn agrees(&self, outcome: AuditOutcome) -> bool {
        match self.written().0 {
            Some(w) if w.is_success() => outcome.is_success(),
            Some(w) => w == outcome,
            None => false,
        }
    }
}

/// Audit operations of the loop.
#[derive(Debug)]
pub enum AuditOp {
    /// Write (or replace) a request's row with its final outcome, in this batch.
    Record {
        /// The request.
        tag: Arc<AuditTag>,
        /// What came of it.
        outcome: AuditOutcome,
        /// `code: message` of an error answer.
        error: Option<String>,
        /// Done.
        reply: Reply<()>,
    },
    /// `GET /v1/audit`.
    List(AuditFilter, Reply<AuditList>),
}

/// The route layer of the module docs: tags every request that is not a read, and
/// records what the loop did not.
///
/// # Cancel safety
/// Not fully: dropped after the route ran (the client went away) and before the audit row
/// of an answer the loop did not record was asked for, that row is not written; every
/// operation that reached the loop was recorded there, in its own batch.
pub(crate) async fn record(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    if matches!(method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let protocol = req
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|m| is_protocol(method.as_str(), m.as_str()));
    let path = req.uri().path().to_string();
    if protocol {
        // The hot path: the caller is looked up again only for a refusal.
        let header = req.headers().get(AUTHORIZATION).cloned();
        let resp = next.run(req).await;
        if AuditOutcome::of_status(resp.status().as_u16()) != AuditOutcome::Refused {
            return resp;
        }
        let header = header.as_ref().and_then(|v| v.to_str().ok());
        let principal = authenticate(&st.tokens, header).ok();
        let tag = AuditTag::new(principal, method.as_str(), path, String::new(), false);
        return finish(&st, tag, resp).await;
    }
    let principal = caller(&st, &req);
    let (parts, body) = req.into_parts();
    let bytes = match to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            let tag = AuditTag::new(principal, method.as_str(), path, String::new(), false);
            let too_large = ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the request body is over {BODY_LIMIT} bytes"),
            );
            return finish(&st, tag, too_large.into_response()).await;
        }
    };
    let query = parts.uri.query().unwrap_or("");
    let (summary, dry_run) = summary(&path, query, &bytes);
    let tag = AuditTag::new(principal, method.as_str(), path, summary, dry_run);
    let req = Request::from_parts(parts, Body::from(bytes));
    let resp = scope(tag.clone(), next.run(req)).await;
    finish(&st, tag, resp).await
}

/// The principal of a request's token; `None` without a valid one.
fn caller(st: &AppState, req: &Request) -> Option<Principal> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    authenticate(&st.tokens, header).ok().or_else(|| {
        let id = crate::ui::session::cookie(req.headers())?;
        st.sessions.get(&st.tokens, id).map(|s| s.principal)
    })
}

/// Records the answer's outcome unless the loop already wrote it, then gives the answer.
async fn finish(st: &AppState, tag: Arc<AuditTag>, resp: Response) -> Response {
    let mut outcome = AuditOutcome::of_status(resp.status().as_u16());
    if tag.agrees(outcome) {
        return resp;
    }
    if outcome == AuditOutcome::Ok && tag.dry_run {
        outcome = AuditOutcome::Unchanged;
    }
    let (resp, error) = if outcome.is_success() {
        (resp, None)
    } else {
        error_of(resp).await
    };
    let asked = st
        .lp
        .ask(Principal::system(), |reply| AuditOp::Record {
            tag,
            outcome,
            error,
            reply,
        })
        .await;
    if let Err(e) = asked {
        tracing::warn!("audit entry not recorded: {}", e.message);
    }
    resp
}

/// The `code: message` of an error answer (its body is read and put back).
async fn error_of(resp: Response) -> (Response, Option<String>) {
    let (parts, body) = resp.into_parts();
    if parts
        .extensions
        .get::<crate::http::shape::HtmlPage>()
        .is_some()
    {
        // A page for a person (the dashboard's refused sign-in): its status says it.
        return (Response::from_parts(parts, body), None);
    }
    let bytes = to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            Some(format!(
                "{}: {}",
                e.get("code")?.as_str()?,
                e.get("message")?.as_str()?
            ))
        })
        .unwrap_or_else(|| format!("{}: {}", parts.status, String::from_utf8_lossy(&bytes)));
    (
        Response::from_parts(parts, Body::from(bytes)),
        Some(clip(text, MAX_SUMMARY)),
    )
}

/// The compact summary of a request, and whether it is a dry run.
///
/// The query comes first (`force=true`); then, for the policy, the body's SHA-256 and
/// size (the loop adds the labels it changes); for a JSON object, its fields as `k=v`
/// in name order (strings clipped and quoted, arrays as their length, objects as `{..}`, secrets as
/// `***`); for any other body its size and hash.
pub fn summary(path: &str, query: &str, body: &Bytes) -> (String, bool) {
    let mut parts: Vec<String> = Vec::new();
    let mut dry_run = false;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        dry_run |= k == "dry_run" && v == "true";
        parts.push(format!("{k}={}", shown_string(&k, &v)));
    }
    // The dashboard's forms carry a token, a sign-in code or a CSRF token: not even their
    // hash is kept.
    if body.is_empty() || path.starts_with("/ui/") {
        return (parts.join(" "), dry_run);
    }
    let json = serde_json::from_slice::<Value>(body).ok();
    match json {
        Some(Value::Object(fields)) if !path.starts_with("/v1/policy") => {
            for (k, v) in &fields {
                dry_run |= k == "dry_run" && v == &Value::Bool(true);
                let shown = match v {
                    Value::String(s) => format!("{:?}", shown_string(k, s)),
                    Value::Array(a) => format!("[{}]", a.len()),
                    Value::Object(_) => "{..}".to_string(),
                    _ if secret_name(k) => "***".to_string(),
                    other => other.to_string(),
                };
                parts.push(format!("{k}={shown}"));
            }
        }
        _ => {
            let digest = crate::auth::hex(&<sha2::Sha256 as sha2::Digest>::digest(body));
            parts.push(format!(
                "body sha256:{} ({} bytes)",
                &digest[..16],
                body.len()
            ));
        }
    }
    (parts.join(" "), dry_run)
}

/// Whether a field's name says it holds a secret.
fn secret_name(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "secret",
        "token",
        "password",
        "passwd",
        "credential",
        "auth",
    ]
    .iter()
    .any(|w| k.contains(w))
}

/// A string value as a summary shows it: `***` for a secret field, a URL's userinfo as
/// `***`, clipped to [`MAX_VALUE`] characters.
fn shown_string(key: &str, value: &str) -> String {
    if secret_name(key) {
        return "***".into();
    }
    let value = match value.split_once("://") {
        Some((scheme, rest)) if rest.split('/').next().is_some_and(|a| a.contains('@')) => {
            let after = rest.split_once('@').map_or("", |(_, a)| a);
            format!("{scheme}://***@{after}")
        }
        _ => value.to_string(),
    };
    clip(value, MAX_VALUE)
}

/// `text` cut to at most `max` characters (an ellipsis marks a cut).
fn clip(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_fields_and_hides_secrets_and_policy_text() {
        let body = Bytes::from(
            r#"{"name":"ci","role":"submitter","token":"abc","url":"https://u:p@h/x","n":3,"tags":[1,2],"attrs":{"a":"b"}}"#,
        );
        let (s, dry) = summary("/v1/tokens", "force=true", &body);
        assert_eq!(
            s,
            r#"force=true attrs={..} n=3 name="ci" role="submitter" tags=[2] token="***" url="https://***@h/x""#
        );
        assert!(!dry);
        let policy = Bytes::from("[global]\nmax_running = 3\n# secret inside\n");
        let (s, dry) = summary("/v1/policy", "dry_run=true", &policy);
        assert!(s.starts_with("dry_run=true body sha256:"), "{s}");
        assert!(!s.contains("secret") && !s.contains("max_running"), "{s}");
        assert!(dry);
        let (s, dry) = summary("/v1/backups", "", &Bytes::from(r#"{"dry_run":true}"#));
        assert_eq!((s.as_str(), dry), ("dry_run=true", true));
        assert_eq!(summary("/v1/pauses", "", &Bytes::new()).0, "");
    }

    #[test]
    fn outcomes_follow_the_status() {
        use AuditOutcome::*;
        let got: Vec<_> = [200, 201, 401, 403, 404, 409, 412, 422, 429, 500, 503]
            .map(AuditOutcome::of_status)
            .to_vec();
        assert_eq!(
            got,
            [
                Ok, Ok, Refused, Refused, Invalid, Conflict, Conflict, Invalid, Invalid, Failed,
                Failed
            ]
        );
    }

    #[test]
    fn every_protocol_route_is_a_post() {
        assert!(PROTOCOL_ROUTES.iter().all(|(m, _)| *m == "POST"));
        assert!(is_protocol("POST", "/v1/jobs/{id}/heartbeat"));
        assert!(!is_protocol("POST", "/v1/jobs/{id}/cancel"));
    }
}
