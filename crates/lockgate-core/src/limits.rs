//! The written limits of everything lockgate takes from outside: every string, list, map
//! and number a request, a policy file or a command line can carry, in one place.
//!
//! docs/security.md ("Limits") lists each with the test that shows it. The `[quotas]`
//! of the policy (attributes, message bytes, queued jobs per owner) are settings and live
//! in [`crate::policy::QuotasPolicy`]; what is here is fixed.
//!
//! # Invariants
//! - **Refused, never clamped.** A value outside its range is an error that names the
//!   field, the value (shortened) and the range ([`LimitError`]); nothing is rounded to fit,
//!   and a positive duration never rounds down to zero.
//! - **Arithmetic cannot overflow.** A priority is within [`PRIORITY`] and a duration at
//!   most [`MAX_DURATION_MS`], so the engine's rank (`plan - priority * aging_ms`, in `f64`)
//!   stays below 2^59 and every timestamp plus a duration fits a `u64` until the year
//!   584 million.

use std::ops::RangeInclusive;

/// The longest duration anywhere (waits, runs, jitter, retries, TTLs): 10 years of 365
/// days, in milliseconds.
pub const MAX_DURATION_MS: u64 = 3650 * 86_400_000;

/// The priorities a job, a kind, a schedule or a token's `max_priority` may name.
pub const PRIORITY: RangeInclusive<i64> = -1_000_000..=1_000_000;

/// Bytes of a job's `node` (a node's name is a DNS subdomain: at most 253).
pub const MAX_NAME_BYTES: usize = 253;

/// Bytes of an idempotency key.
pub const MAX_KEY_BYTES: usize = 256;

/// Bytes of an expression: a label selector, a pause's `match`, a schedule's `when`.
pub const MAX_EXPR_BYTES: usize = 4096;

/// Bytes of a reason given by a person (a pause's `reason`).
pub const MAX_REASON_BYTES: usize = 1024;

/// Labels of one node.
pub const MAX_NODE_LABELS: usize = 64;

/// Job kinds one node's agent may declare.
pub const MAX_NODE_KINDS: usize = 256;

/// Per-node pools one node may declare.
pub const MAX_NODE_RESOURCES: usize = 64;

// The extremes cannot overflow: the rank's product stays below 2^59, and now (before
// 2100) plus the longest duration fits a u64.
const _: () = assert!((*PRIORITY.end() as u64) * MAX_DURATION_MS < 1 << 59);
const _: () = assert!(u64::MAX - 4_102_444_800_000 > MAX_DURATION_MS);

/// A value outside its written limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct LimitError {
    /// The field, as the request or the policy names it.
    pub field: String,
    /// The value given (shortened) and the limit.
    pub message: String,
}

fn err(field: &str, message: String) -> LimitError {
    LimitError {
        field: field.to_string(),
        message,
    }
}

/// At most 80 characters of a text for an error message (a refused value may be
/// megabytes).
pub fn shorten(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// A string of at most `max` bytes.
///
/// # Errors
/// Names the field, the length and the limit.
pub fn text(field: &str, value: &str, max: usize) -> Result<(), LimitError> {
    if value.len() <= max {
        return Ok(());
    }
    Err(err(
        field,
        format!(
            "{} bytes ({:?}), expected at most {max} bytes",
            value.len(),
            shorten(value)
        ),
    ))
}

/// A list or map of at most `max` entries.
///
/// # Errors
/// Names the field, the count and the limit.
pub fn count(field: &str, n: usize, max: usize) -> Result<(), LimitError> {
    if n <= max {
        return Ok(());
    }
    Err(err(field, format!("{n} entries, expected at most {max}")))
}

/// A priority within [`PRIORITY`].
///
/// # Errors
/// Names the field, the value and the range.
pub fn priority(field: &str, value: i64) -> Result<(), LimitError> {
    if PRIORITY.contains(&value) {
        return Ok(());
    }
    Err(err(
        field,
        format!(
            "priority {value} is out of range, expected {} to {}",
            PRIORITY.start(),
            PRIORITY.end()
        ),
    ))
}

/// A duration of at most [`MAX_DURATION_MS`].
///
/// # Errors
/// Names the field, the value and the limit.
pub fn duration_ms(field: &str, ms: u64) -> Result<(), LimitError> {
    if ms <= MAX_DURATION_MS {
        return Ok(());
    }
    Err(err(
        field,
        format!(
            "{} s is too long, expected at most {} s (10 years)",
            ms / 1000,
            MAX_DURATION_MS / 1000
        ),
    ))
}

/// Milliseconds from a number of seconds as the API writes durations: 0, or 0.001 to
/// 315,360,000 (10 years); finite. A value that would round to another is not changed
/// silently: fractions below a millisecond are rounded to the nearest millisecond, but a
/// positive value below half a millisecond (it would become 0) is refused.
///
/// # Errors
/// Names the field, the value and the range.
pub fn seconds(field: &str, secs: f64) -> Result<u64, LimitError> {
    let range = || {
        format!(
            "expected 0 or a number of seconds from 0.001 to {} (10 years)",
            MAX_DURATION_MS / 1000
        )
    };
    if !secs.is_finite() || secs < 0.0 || secs > (MAX_DURATION_MS / 1000) as f64 {
        return Err(err(field, format!("{}, got {secs:?}", range())));
    }
    let ms = (secs * 1000.0).round() as u64;
    if ms == 0 && secs > 0.0 {
        return Err(err(
            field,
            format!("{}, got {secs:?} (below a millisecond)", range()),
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuses_what_it_would_change_and_keeps_the_rest() {
        assert_eq!(seconds("max_wait_s", 0.0), Ok(0));
        assert_eq!(seconds("max_wait_s", 0.001), Ok(1));
        assert_eq!(seconds("max_wait_s", 1.5), Ok(1500));
        assert_eq!(seconds("max_wait_s", 315_360_000.0), Ok(MAX_DURATION_MS));
        for bad in [
            1e308,
            18_446_744_073_709_551_616.0,
            315_360_000.5,
            1e-320,
            0.0004,
            -1.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            let e = seconds("max_wait_s", bad).unwrap_err();
            assert_eq!(e.field, "max_wait_s");
            assert!(e.message.contains("315360000"), "{bad}: {}", e.message);
            assert!(e.message.len() < 160, "{bad}: {}", e.message);
        }
    }

    #[test]
    fn priorities_outside_the_range_are_refused_naming_it() {
        assert!(priority("priority", 1_000_000).is_ok());
        assert!(priority("priority", -1_000_000).is_ok());
        for bad in [i64::MIN, i64::MAX, 1_000_001, -1_000_001] {
            let e = priority("priority", bad).unwrap_err();
            assert!(e.message.contains("-1000000 to 1000000"), "{}", e.message);
        }
    }

    #[test]
    fn a_text_at_its_limit_passes_and_one_byte_more_is_refused() {
        assert!(text("idempotency_key", &"k".repeat(MAX_KEY_BYTES), MAX_KEY_BYTES).is_ok());
        let e = text(
            "idempotency_key",
            &"k".repeat(MAX_KEY_BYTES + 1),
            MAX_KEY_BYTES,
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("257 bytes") && e.message.contains("at most 256"),
            "{}",
            e.message
        );
        assert!(
            e.message.len() < 160,
            "the value is shortened: {}",
            e.message
        );
    }
}
