//! [`ErrorCode`]: the stable `code` of every error body (`{"error": {"code", ...}}`).
//!
//! The server answers with one of these; the agent and the CLI match on them instead of
//! comparing strings. On the wire a code is its snake_case name (`lease_lost`), exactly as
//! api.md lists them; [`ErrorDetail::code`] stays a string so that a client keeps working
//! when a newer server adds a code ([`ErrorDetail::error_code`] is `None` for those).
//!
//! # Invariant
//! [`ErrorCode::as_str`] and the serde name of every variant are the same string (the
//! test `as_str_is_the_serde_name` checks every variant in [`ErrorCode::ALL`]).
//!
//! # Error rules
//! - A code names a kind of failure a client can act on differently from the others;
//!   details go in the message. A new code is added only with its HTTP status
//!   ([`ErrorCode::http_status`]), its line in api.md and its variant in
//!   [`ErrorCode::ALL`].
//! - A code, once served, is never renamed or removed: clients match on it.

use crate::ErrorDetail;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The stable, machine-readable code of an error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the request cannot be read (e.g. a policy that is not UTF-8).
    BadRequest,
    /// 400: the body is not JSON (or is empty).
    MalformedJson,
    /// 422: a field (named in `field`) has an unknown name, is missing or has a bad value.
    InvalidField,
    /// 422: a policy document does not validate (`field` and `line` name the place).
    InvalidPolicy,
    /// 422: a backup's input on the server's filesystem cannot be read or planned.
    InvalidInput,
    /// 403: a non-admin's backup input is not an existing path inside a backup input root
    /// (one answer whether or not the path exists), or the server has no input roots.
    InputNotAllowed,
    /// 422: a backup's input exceeds a `[blocks]` cap; the message names the cap.
    InputTooLarge,
    /// 401: no token, a malformed header or an unknown token.
    Unauthorized,
    /// 403: the token's role may not do this.
    Forbidden,
    /// 404: no such job, node, token, schedule, backup or endpoint.
    NotFound,
    /// 405: the path exists, the method does not.
    MethodNotAllowed,
    /// 409: the lease token is stale, the lease expired or the job already ended.
    LeaseLost,
    /// 409: the job is not in a state that allows this (e.g. `prepared` twice).
    WrongState,
    /// 409: the job or backup already ended.
    AlreadyEnded,
    /// 409: a backup with this name exists.
    AlreadyExists,
    /// 409: a token with this name exists.
    Exists,
    /// 409: a schedule with this name exists (in the policy or created through the API).
    ScheduleExists,
    /// 409: the schedule belongs to the policy and cannot be removed through the API.
    PolicySchedule,
    /// 409: a reload was asked for and the server has no `--config` file.
    NoConfig,
    /// 409: the backup has not finished, so it has no result yet.
    NotFinished,
    /// 412: `If-Match` does not match the active policy's digest.
    StalePolicy,
    /// 415: the policy's `Content-Type` is neither TOML nor JSON, or a JSON body was sent
    /// with a type that is not JSON.
    UnsupportedMediaType,
    /// 413: the request body is larger than the server accepts.
    PayloadTooLarge,
    /// 414: the request target (path and query) is longer than the server accepts.
    UriTooLong,
    /// 431: the request's headers are larger than the server accepts.
    HeadersTooLarge,
    /// 422: a `PUT /v1/policy` would remove every limit; send `?allow_unlimited=true` to
    /// mean it.
    RemovesAllLimits,
    /// 429: a `[quotas]` bound would be passed (the message names the quota and its value).
    QuotaExceeded,
    /// 500: the server failed (its store, or writing the policy file).
    Internal,
    /// 503: the server is shutting down (or not ready); try again.
    Unavailable,
    /// 507: free space is below the watermark (or the store is over its quota): new
    /// submits are refused until space returns; heartbeats, finishes, cancels and reads
    /// go on.
    InsufficientStorage,
    /// 503: this replica is a standby (several servers on one database); `leader` names
    /// the leader's URL when one is known. The request did nothing here: send it to the
    /// leader.
    NotLeader,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 31] = [
        ErrorCode::BadRequest,
        ErrorCode::MalformedJson,
        ErrorCode::InvalidField,
        ErrorCode::InvalidPolicy,
        ErrorCode::InvalidInput,
        ErrorCode::InputNotAllowed,
        ErrorCode::InputTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::LeaseLost,
        ErrorCode::WrongState,
        ErrorCode::AlreadyEnded,
        ErrorCode::AlreadyExists,
        ErrorCode::Exists,
        ErrorCode::ScheduleExists,
        ErrorCode::PolicySchedule,
        ErrorCode::NoConfig,
        ErrorCode::NotFinished,
        ErrorCode::StalePolicy,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UriTooLong,
        ErrorCode::HeadersTooLarge,
        ErrorCode::RemovesAllLimits,
        ErrorCode::QuotaExceeded,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
        ErrorCode::InsufficientStorage,
        ErrorCode::NotLeader,
    ];

    /// The wire name (`lease_lost`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::MalformedJson => "malformed_json",
            ErrorCode::InvalidField => "invalid_field",
            ErrorCode::InvalidPolicy => "invalid_policy",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::InputNotAllowed => "input_not_allowed",
            ErrorCode::InputTooLarge => "input_too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::WrongState => "wrong_state",
            ErrorCode::AlreadyEnded => "already_ended",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::Exists => "exists",
            ErrorCode::ScheduleExists => "schedule_exists",
            ErrorCode::PolicySchedule => "policy_schedule",
            ErrorCode::NoConfig => "no_config",
            ErrorCode::NotFinished => "not_finished",
            ErrorCode::StalePolicy => "stale_policy",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::RemovesAllLimits => "removes_all_limits",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::NotLeader => "not_leader",
        }
    }

    /// The code of a wire name; `None` for a code this build does not know.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The HTTP status the server answers this code with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest | ErrorCode::MalformedJson => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden | ErrorCode::InputNotAllowed => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::LeaseLost
            | ErrorCode::WrongState
            | ErrorCode::AlreadyEnded
            | ErrorCode::AlreadyExists
            | ErrorCode::Exists
            | ErrorCode::ScheduleExists
            | ErrorCode::PolicySchedule
            | ErrorCode::NoConfig
            | ErrorCode::NotFinished => 409,
            ErrorCode::StalePolicy => 412,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UriTooLong => 414,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::InvalidField
            | ErrorCode::InvalidPolicy
            | ErrorCode::InvalidInput
            | ErrorCode::InputTooLarge
            | ErrorCode::RemovesAllLimits => 422,
            ErrorCode::HeadersTooLarge => 431,
            ErrorCode::QuotaExceeded => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
            ErrorCode::InsufficientStorage => 507,
            ErrorCode::NotLeader => 503,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ErrorDetail {
    /// The code as an [`ErrorCode`]; `None` when a newer server sent one this build does
    /// not know.
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_is_the_serde_name() {
        for c in ErrorCode::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), c);
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::parse("a_code_from_the_future"), None);
    }
}
