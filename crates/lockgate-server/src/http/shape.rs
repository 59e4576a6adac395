//! Every answer the framework makes on its own gets the one `{"error": {...}}` shape.
//!
//! axum's extractors (a path segment that is not valid UTF-8 or percent-encoding, a body
//! over the size limit) and its routing answer with `text/plain` bodies. The
//! [`shape_errors`] layer turns every 4xx/5xx answer that is not already JSON into an
//! [`ApiError`] body, keeping its status and its text as the message. [`limit_request`]
//! answers 414 and 431 itself, below hyper's own limits (which close with a bare status),
//! so that a long target or large headers also get the shape.
//!
//! # Invariants
//! - An answer with status >= 400 has `Content-Type: application/json` and an `error`
//!   object with a `code` and a `message`; its status is never changed here.
//! - A request target longer than [`MAX_TARGET`] bytes is answered 414 `uri_too_long`, and
//!   headers larger than [`MAX_HEADER_BYTES`] in total 431 `headers_too_large`, and a
//!   request with more than one `Authorization` header 400, before any handler runs.

use crate::error::ApiError;
use axum::extract::Request;
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lockgate_api::ErrorCode;

/// Longest request target (path and query) answered: 8 KiB, as nginx's default
/// `large_client_header_buffers` line.
pub const MAX_TARGET: usize = 8 * 1024;

/// Largest total of header names and values answered: 32 KiB.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// How much of a framework error's text body is kept as the message.
const MAX_MESSAGE: usize = 4 * 1024;

/// Refuses a request whose target or headers are too large (414, 431), or that carries
/// two `Authorization` headers (400: the first used to win).
///
/// # Cancel safety
/// Cancel safe: it changes nothing before it hands the request on; once handed on, the
/// route's own cancel safety applies (hyper drops the future when the client goes away).
pub async fn limit_request(req: Request, next: Next) -> Response {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_TARGET {
        return ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request target is {target} bytes; at most {MAX_TARGET} are accepted"),
        )
        .into_response();
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if headers > MAX_HEADER_BYTES {
        return ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!(
                "the request headers are {headers} bytes; at most {MAX_HEADER_BYTES} are accepted"
            ),
        )
        .into_response();
    }
    let credentials = req.headers().get_all(AUTHORIZATION).iter().count();
    if credentials > 1 {
        return ApiError::bad_request(format!(
            "the request has {credentials} Authorization headers: send one (which one a proxy or the server would read is not defined)"
        ))
        .field("Authorization")
        .into_response();
    }
    next.run(req).await
}

/// The code of a framework answer with this status.
fn code_of(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        400 => ErrorCode::BadRequest,
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        414 => ErrorCode::UriTooLong,
        415 => ErrorCode::UnsupportedMediaType,
        422 => ErrorCode::InvalidField,
        431 => ErrorCode::HeadersTooLarge,
        503 => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    }
}

/// Marks an answer whose body is an HTML page meant for a person (the dashboard's
/// sign-in page with its error): [`shape_errors`] leaves it as it is.
#[derive(Debug, Clone, Copy)]
pub struct HtmlPage;

/// Rewrites a non-JSON error answer into the `{"error": ...}` shape (same status).
///
/// # Cancel safety
/// Cancel safe: it only reads and rewrites the answer's body.
pub async fn shape_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    if resp.extensions().get::<HtmlPage>().is_some() {
        return resp;
    }
    let json = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_MESSAGE)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_string()
    } else {
        text
    };
    let shaped = ApiError::new(code_of(status), message).into_response();
    let (new_parts, new_body) = shaped.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    for (k, v) in &new_parts.headers {
        parts.headers.insert(k, v.clone());
    }
    Response::from_parts(parts, new_body)
}
