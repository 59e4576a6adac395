//! Why a call failed, and the one rule for "try again later".
//!
//! [`ClientError::is_temporary`] is the only place that decides whether an error may go
//! away by itself. `lockgate run`, the agent and the lease keeper all retry exactly the
//! errors it accepts, with [`crate::Backoff`]; everything else is permanent for them.
//!
//! # Error rules
//! - A server's error body is kept as it came ([`ClientError::Api`] holds its
//!   `ErrorDetail`: code, message, field); the client never rewrites the server's words,
//!   and decides by [`ClientError::code`], never by comparing messages.
//! - An error the client makes itself names what it called: the URL for
//!   [`ClientError::Unreachable`] and [`ClientError::Decode`], the file for a bad CA
//!   ([`ClientError::Setup`]).
//! - Whether to retry is [`ClientError::is_temporary`]'s to say, and whether a new token
//!   is needed [`ClientError::is_refused`]'s; callers ask them instead of matching
//!   statuses.

use lockgate_api::ErrorDetail;

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
    /// The server answered with an error status. Temporary for a 5xx (a server shutting
    /// down, or whose store failed, answers 503 `unavailable`), permanent for a 4xx.
    #[error("server answered {status}: {detail}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error body (synthesized when the body was not an
        /// [`ErrorBody`](lockgate_api::ErrorBody)).
        detail: ErrorDetail,
    },
    /// The answer could not be decoded. Permanent.
    #[error("cannot decode the server's answer from {url}: {message}")]
    Decode {
        /// The URL called.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The client could not be set up (a bad CA file). Permanent.
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

    /// Whether the same call may succeed later: the server could not be reached, or it
    /// answered a 5xx (503 while it shuts down or its store failed; 502/504 from a proxy in
    /// front of it). A 4xx, an undecodable answer and a setup error are permanent.
    ///
    /// This is the one retry rule of every lockgate client.
    pub fn is_temporary(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Api { status, .. } => *status >= 500,
            ClientError::Decode { .. } | ClientError::Setup(_) => false,
        }
    }

    /// The server refused a request because of its field `name` (400 or 422 naming it, as
    /// a server older than the field does for an unknown one).
    pub fn refuses_field(&self, name: &str) -> bool {
        match self {
            ClientError::Api {
                status: 400 | 422,
                detail,
            } => {
                detail.field.as_deref() == Some(name)
                    || detail.message.contains(&format!("`{name}`"))
            }
            _ => false,
        }
    }

    /// The server refused the token (401) or its role (403): a new token is needed.
    pub fn is_refused(&self) -> bool {
        matches!(self.status(), Some(401) | Some(403))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> ClientError {
        ClientError::Api {
            status,
            detail: ErrorDetail {
                code: "x".into(),
                message: "m".into(),
                field: None,
                line: None,
                leader: None,
            },
        }
    }

    #[test]
    fn one_rule_for_temporary_errors() {
        let unreachable = ClientError::Unreachable {
            url: "u".into(),
            message: "refused".into(),
        };
        let decode = ClientError::Decode {
            url: "u".into(),
            message: "bad".into(),
        };
        let cases = [
            (unreachable, true),
            (api(500), true),
            (api(502), true),
            (api(503), true),
            (api(504), true),
            (api(400), false),
            (api(401), false),
            (api(404), false),
            (api(409), false),
            (api(422), false),
            (decode, false),
            (ClientError::Setup("ca".into()), false),
        ];
        for (e, temporary) in cases {
            assert_eq!(e.is_temporary(), temporary, "{e}");
        }
        assert!(api(401).is_refused() && api(403).is_refused() && !api(409).is_refused());
    }
}
