//! Notifications as the API shows them: the answer of `POST /v1/notify/{name}/test`.

use serde::{Deserialize, Serialize};

/// What a test message through a `[[notify]]` target did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotifyTestResult {
    /// The target's name.
    pub target: String,
    /// Whether the receiver took it (a 2xx answer; the SMTP server accepted the mail).
    pub ok: bool,
    /// What the receiver answered, or why sending failed.
    pub detail: String,
    /// How long the attempt took, milliseconds.
    pub elapsed_ms: u64,
}
