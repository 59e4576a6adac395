//! Job logs as the API speaks them: the batch a holder sends (`POST /v1/jobs/{id}/logs`)
//! and the page a reader gets (`GET /v1/jobs/{id}/logs`).
//!
//! A line is one line of the command's output (without its newline), with the stream it
//! came from and the time the holder read it. Lines of stream [`LogStream::Lockgate`] are
//! lockgate's own markers: "N lines dropped" when the holder's buffer overflowed or the
//! server was unreachable, or when the server's per-job or total bound removed old lines.

use serde::{Deserialize, Serialize};

/// Most lines one `POST /v1/jobs/{id}/logs` may carry.
pub const MAX_LOG_BATCH_LINES: usize = 2000;

/// Longest line kept, in bytes; a longer one is cut on a character boundary and ends with
/// `...`.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LogStream {
    /// The command's standard output.
    Stdout,
    /// The command's standard error.
    Stderr,
    /// A marker written by lockgate itself (lines dropped).
    Lockgate,
}

impl LogStream {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
            LogStream::Lockgate => "lockgate",
        }
    }

    /// The stream a stored name names (`None` for anything else).
    pub fn parse(text: &str) -> Option<LogStream> {
        [LogStream::Stdout, LogStream::Stderr, LogStream::Lockgate]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// One line a holder sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LogLineIn {
    /// When the holder read the line (RFC 3339).
    pub at: String,
    /// `stdout` or `stderr` (`lockgate` is refused: markers are the server's to write).
    pub stream: LogStream,
    /// The line, without its newline.
    pub text: String,
}

/// `POST /v1/jobs/{id}/logs`: lines of the job's output, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LogBatch {
    /// The lease token of the job's holder.
    pub token: u64,
    /// Lines the holder dropped before these (its buffer was full or the server did not
    /// answer); the server stores a marker saying how many.
    #[serde(default)]
    pub dropped: u64,
    /// The lines, at most [`MAX_LOG_BATCH_LINES`].
    pub lines: Vec<LogLineIn>,
}

/// The answer to a [`LogBatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogAccepted {
    /// Lines stored (the batch's lines, plus one marker when `dropped` was not 0).
    pub accepted: usize,
}

/// One stored line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogLineView {
    /// Its number in the job's log (1, 2, ...; pass the last one seen as `after`).
    pub seq: u64,
    /// When the holder read it (RFC 3339).
    pub at: String,
    /// `stdout`, `stderr`, or `lockgate` (a marker).
    pub stream: LogStream,
    /// The line.
    pub text: String,
}

/// `GET /v1/jobs/{id}/logs`: one page of a job's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogPage {
    /// Lines after `after`, oldest first (a marker first when older lines were dropped).
    pub lines: Vec<LogLineView>,
    /// The `after` of the next page (the last line's `seq`, or the request's `after`).
    pub next: u64,
    /// The job has ended: once a page is empty, no line will follow.
    pub ended: bool,
}
