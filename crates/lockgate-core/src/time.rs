//! Time as the engine sees it: milliseconds on a clock the caller owns.
//!
//! The engine never reads a clock. The server passes wall-clock milliseconds since the Unix
//! epoch; the simulator passes virtual milliseconds from the start of a run. Both are a
//! [`Timestamp`]; durations are [`std::time::Duration`] in the policy and plain
//! milliseconds inside the engine.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A point in time, in milliseconds on the caller's clock.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// This instant plus a duration (saturating).
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(u64::MAX as u128) as u64),
        )
    }

    /// Milliseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Parses a policy duration string: a whole number followed by `ms`, `s`, `m`, `h` or `d`
/// (`250ms`, `30s`, `10m`, `2h`, `1d`).
///
/// # Errors
/// A message saying what was expected, for the caller to attach to a field.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let expected = "expected a whole number followed by ms, s, m, h or d (e.g. \"30s\", \"10m\")";
    if num.is_empty() {
        return Err(format!("invalid duration {text:?}: {expected}"));
    }
    let too_long = || {
        format!(
            "invalid duration {text:?}: too long, expected at most {}d (10 years)",
            crate::limits::MAX_DURATION_MS / 86_400_000
        )
    };
    let n: u64 = num.parse().map_err(|_| too_long())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(format!("invalid duration {text:?}: {expected}")),
    };
    match ms {
        Some(ms) if ms <= crate::limits::MAX_DURATION_MS => Ok(Duration::from_millis(ms)),
        _ => Err(too_long()),
    }
}

/// Formats a duration the way the policy writes it, using the largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms != 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        for (text, ms) in [
            ("250ms", 250),
            ("30s", 30_000),
            ("10m", 600_000),
            ("2h", 7_200_000),
            ("1d", 86_400_000),
        ] {
            let d = parse_duration(text).unwrap();
            assert_eq!(d.as_millis() as u64, ms);
            assert_eq!(format_duration(d), text);
        }
    }

    #[test]
    fn bad_durations_say_what_was_expected() {
        for bad in ["", "10", "s", "-1s", "1.5s", "10 weeks", "3y"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_duration_past_ten_years_is_refused_not_clamped() {
        assert_eq!(parse_duration("3650d").unwrap().as_secs(), 3650 * 86_400);
        for bad in ["3651d", "315360000001ms", "99999999999999999999999s"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("at most 3650d"), "{bad}: {err}");
        }
    }
}
