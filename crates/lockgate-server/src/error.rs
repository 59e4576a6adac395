//! [`ApiError`]: every 4xx/5xx answer, as `{"error": {"code", "message", "field"}}`,
//! and [`parse_json`], the one reading of a JSON body (400 `malformed_json`, also for
//! trailing data after the value; 422 `invalid_field` naming the field).
//!
//! # Error rules
//! - Every error a client sees is an [`ApiError`]; a handler never builds a response of
//!   its own for an error (the framework's own errors are rewritten into this shape by
//!   `http/shape.rs`). The one exception is a page meant for a person: the dashboard's
//!   sign-in page with its error (`HtmlPage`).
//! - Whoever builds one picks its [`ErrorCode`], never an HTTP status: the status follows
//!   from the code, so one kind of failure has one status everywhere.
//! - The message says what was refused in the request's own terms: the value given and
//!   what was expected, or the state that stands in the way (`job 7 already ended
//!   (succeeded)`), and what to do when there is something to do. When one field is at
//!   fault, `field` names it as the JSON spells it.
//! - A message never holds a secret: tokens are named by their name, a URL's password is
//!   masked (lockgate-core `redact_url`).
//! - Errors that never reach a client (a server that cannot start: `ServerError`; reading
//!   a policy file: `ReadError`) are enums of their own module, each naming the path or
//!   address at fault; the binary prints them and exits.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lockgate_api::{ErrorBody, ErrorCode, ErrorDetail};

/// An error answer. Its HTTP status follows from its [`ErrorCode`]
/// ([`ErrorCode::http_status`]): whoever builds one picks what went wrong, never a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {code}: {message}", self.status())]
pub struct ApiError {
    /// Stable code.
    pub code: ErrorCode,
    /// For people: what happened and what was expected.
    pub message: String,
    /// The offending JSON path or config key.
    pub field: Option<String>,
    /// The line in a policy document.
    pub line: Option<usize>,
    /// With `not_leader`: the leader's advertised URL.
    pub leader: Option<String>,
}

impl ApiError {
    /// A new error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            field: None,
            line: None,
            leader: None,
        }
    }

    /// The HTTP status of the answer.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.http_status()).expect("error statuses are valid")
    }

    /// Names the offending field.
    pub fn field(mut self, field: impl Into<String>) -> ApiError {
        self.field = Some(field.into());
        self
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadRequest, message)
    }

    /// 422 `invalid_field` naming the field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidField, message).field(field)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::NotFound, message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unauthorized, message)
    }

    /// 503 `unavailable`: the server is shutting down or its store failed.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unavailable, message)
    }

    /// 503 `unavailable` when the event loop is gone.
    pub fn shutting_down() -> ApiError {
        ApiError::unavailable("the server is shutting down")
    }

    /// 503 `not_leader`: this replica is a standby; `leader` is the leader's advertised
    /// URL when one is known. The answer carries `Retry-After: 1`.
    pub fn not_leader(leader: Option<String>) -> ApiError {
        let message = match &leader {
            Some(url) => {
                format!("this server is a standby: send the request to the leader at {url}")
            }
            None => {
                "this server is a standby and no leader is known yet: try again shortly".to_string()
            }
        };
        let mut e = ApiError::new(ErrorCode::NotLeader, message);
        e.leader = leader;
        e
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Internal, message)
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_string(),
                message: self.message.clone(),
                field: self.field.clone(),
                line: self.line,
                leader: self.leader.clone(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), axum::Json(self.body())).into_response();
        let retry_after = match self.code {
            ErrorCode::NotLeader => Some("1"),
            ErrorCode::QuotaExceeded => Some("5"),
            _ => None,
        };
        if let Some(s) = retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(s),
            );
        }
        resp
    }
}

impl From<lockgate_store::StoreError> for ApiError {
    fn from(e: lockgate_store::StoreError) -> Self {
        match e {
            // Nothing was committed and the database may come back: the client may ask
            // again (503), unlike a fault of the server (500).
            lockgate_store::StoreError::Unreachable { .. } => ApiError::unavailable(e.to_string()),
            lockgate_store::StoreError::Full { .. } => {
                ApiError::new(ErrorCode::InsufficientStorage, e.to_string())
            }
            e => ApiError::internal(e.to_string()),
        }
    }
}

/// A value past its written limit ([`lockgate_core::limits`]): 422 `invalid_field` naming
/// the field, the value and the limit.
impl From<lockgate_core::limits::LimitError> for ApiError {
    fn from(e: lockgate_core::limits::LimitError) -> Self {
        ApiError::invalid(e.field, e.message)
    }
}

/// A policy validation error as a 422 `invalid_policy` naming the field and line.
pub fn policy_error(e: lockgate_core::policy::PolicyError) -> ApiError {
    let mut err = ApiError::new(ErrorCode::InvalidPolicy, e.to_string());
    if !e.field.is_empty() {
        err.field = Some(e.field.clone());
    }
    err.line = e.line;
    err
}

/// A well-formed JSON array where the API takes an object.
fn not_an_object() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidField,
        "the request body is a JSON array: expected a JSON object",
    )
}

/// Parses a JSON body into `T`, answering 400 for malformed JSON and 422 naming the field
/// for an unknown field, a missing field or a value of the wrong type.
///
/// # Errors
/// The [`ApiError`] to answer with.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            ErrorCode::MalformedJson,
            "the request body is empty: expected a JSON object",
        ));
    }
    // serde reads a struct from an array of its fields in order (`[]` is every default):
    // every body of the API is an object, so a well-formed array is refused.
    let array = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let mut de = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(v) => match de.end() {
            Err(e) => Err(ApiError::new(
                ErrorCode::MalformedJson,
                format!("trailing data after the JSON value: {e}"),
            )),
            Ok(()) if array => Err(not_an_object()),
            Ok(()) => Ok(v),
        },
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let message = inner.to_string();
            use serde_json::error::Category;
            match inner.classify() {
                Category::Syntax | Category::Eof | Category::Io => Err(ApiError::new(
                    ErrorCode::MalformedJson,
                    format!("malformed JSON: {message}"),
                )),
                Category::Data if array => Err(not_an_object()),
                Category::Data => {
                    let mut field = if path == "." { String::new() } else { path };
                    let named = message
                        .strip_prefix("unknown field `")
                        .or_else(|| message.strip_prefix("missing field `"))
                        .and_then(|r| r.split('`').next());
                    if let Some(name) = named {
                        if field.is_empty() {
                            field = name.to_string();
                        } else if field != name && !field.ends_with(&format!(".{name}")) {
                            field = format!("{field}.{name}");
                        }
                    }
                    let message = match message.find(" at line ") {
                        Some(i) => message[..i].to_string(),
                        None => message,
                    };
                    let shown = if field.is_empty() {
                        message
                    } else {
                        format!("{field}: {message}")
                    };
                    let mut err = ApiError::new(ErrorCode::InvalidField, shown);
                    if !field.is_empty() {
                        err.field = Some(field);
                    }
                    Err(err)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::SubmitRequest;

    #[test]
    fn json_errors_name_the_field() {
        let e = parse_json::<SubmitRequest>(b"{\"kind\": \"backup\",").unwrap_err();
        assert_eq!(
            (e.status(), e.code),
            (StatusCode::BAD_REQUEST, ErrorCode::MalformedJson)
        );
        let e = parse_json::<SubmitRequest>(br#"{"kind": "backup", "colour": 1}"#).unwrap_err();
        assert_eq!(
            (e.status(), e.field.as_deref()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("colour"))
        );
        let e =
            parse_json::<SubmitRequest>(br#"{"kind": "backup", "priority": "high"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("priority"), "{e:?}");
        // Found by schemathesis: `[]` registered a node with nothing, `["x"]` submitted a job.
        for array in [&b"[]"[..], b" [\"restic\"]"] {
            let e = parse_json::<SubmitRequest>(array).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidField);
            assert!(
                e.message.contains("expected a JSON object"),
                "{}",
                e.message
            );
        }
        let e = parse_json::<SubmitRequest>(br#"{"attrs": {}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("kind"), "{e:?}");
        let e = parse_json::<SubmitRequest>(br#"{"kind": "b", "attrs": {"a": 1}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("attrs.a"), "{e:?}");
    }
}
