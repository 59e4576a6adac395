//! `[quotas]`: what one submitter may put into the server (docs `security.md`, "Quotas").
//!
//! Invariants: every number is at least 1 except `max_attrs` (0 allowed: no attributes);
//! [`QuotasPolicy::bound_message`] never returns more than `max_message_bytes` bytes plus
//! its marker, and always cuts on a character boundary.

/// Default `[quotas].max_attrs`.
pub const DEFAULT_MAX_ATTRS: u32 = 32;
/// Default `[quotas].max_attr_value_bytes` (1 KiB).
pub const DEFAULT_MAX_ATTR_VALUE_BYTES: u32 = 1024;
/// Default `[quotas].max_message_bytes` (64 KiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: u32 = 65536;
/// Default `[quotas].max_queued_per_owner`.
pub const DEFAULT_MAX_QUEUED_PER_OWNER: u32 = 10_000;

/// The validated `[quotas]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotasPolicy {
    /// Attributes per job ([`DEFAULT_MAX_ATTRS`]).
    pub max_attrs: u32,
    /// Bytes per attribute value ([`DEFAULT_MAX_ATTR_VALUE_BYTES`]).
    pub max_attr_value_bytes: u32,
    /// Bytes kept of a holder's message ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: u32,
    /// Jobs not yet ended per submitter-token owner ([`DEFAULT_MAX_QUEUED_PER_OWNER`]).
    pub max_queued_per_owner: u32,
}

impl Default for QuotasPolicy {
    fn default() -> Self {
        QuotasPolicy {
            max_attrs: DEFAULT_MAX_ATTRS,
            max_attr_value_bytes: DEFAULT_MAX_ATTR_VALUE_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_queued_per_owner: DEFAULT_MAX_QUEUED_PER_OWNER,
        }
    }
}

impl QuotasPolicy {
    /// `message` cut to `max_message_bytes` (on a character boundary) with a marker that
    /// says how much was cut and names the quota; unchanged when it fits. A holder's message
    /// is cut rather than refused so that a long failure report never costs the job its
    /// result.
    pub fn bound_message(&self, message: String) -> String {
        let max = self.max_message_bytes as usize;
        if message.len() <= max {
            return message;
        }
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let cut = message.len() - end;
        let mut out = message;
        out.truncate(end);
        out.push_str(&format!(
            " [truncated: {cut} more bytes, [quotas].max_message_bytes = {max}]"
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_message_cuts_long_messages_on_a_char_boundary_with_a_marker() {
        let q = QuotasPolicy {
            max_message_bytes: 5,
            ..QuotasPolicy::default()
        };
        assert_eq!(q.bound_message("short".into()), "short");
        assert_eq!(
            q.bound_message("abcdéfgh".into()),
            "abcd [truncated: 5 more bytes, [quotas].max_message_bytes = 5]"
        );
    }
}
