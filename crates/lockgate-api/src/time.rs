//! RFC 3339 times for the API; the engine counts milliseconds since the Unix epoch.

use lockgate_core::Timestamp;

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC (`2026-03-27T22:17:41.250Z`,
/// no fraction when the milliseconds are zero).
pub fn format(t: Timestamp) -> String {
    let ms = i64::try_from(t.0).unwrap_or(i64::MAX);
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.to_string(),
        Err(_) => jiff::Timestamp::MAX.to_string(),
    }
}

/// Formats an optional time.
pub fn format_opt(t: Option<Timestamp>) -> Option<String> {
    t.map(format)
}

/// Parses an RFC 3339 time (`2026-03-27T22:17:41Z`, offsets allowed).
///
/// # Errors
/// A message naming the value and the expected form.
pub fn parse(text: &str) -> Result<Timestamp, String> {
    let ts: jiff::Timestamp = text.trim().parse().map_err(|e| {
        format!("invalid time {text:?}: expected RFC 3339 such as \"2026-03-27T22:17:41Z\" ({e})")
    })?;
    let ms = ts.as_millisecond();
    u64::try_from(ms)
        .map(Timestamp)
        .map_err(|_| format!("invalid time {text:?}: before 1970"))
}

/// Seconds (as the API writes durations) from milliseconds.
pub fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Milliseconds from API seconds: 0, or 0.001 to 10 years
/// ([`lockgate_core::limits::seconds`]: refused, never clamped).
///
/// # Errors
/// When the number is negative, not finite, longer than 10 years, or a positive value
/// below a millisecond.
pub fn millis(secs: f64) -> Result<u64, String> {
    lockgate_core::limits::seconds("", secs).map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let t = Timestamp(1_774_649_861_250);
        assert_eq!(format(t), "2026-03-27T22:17:41.25Z");
        assert_eq!(parse(&format(t)).unwrap(), t);
        assert_eq!(format(Timestamp(1_774_649_861_000)), "2026-03-27T22:17:41Z");
        assert_eq!(
            parse("2026-03-27T23:17:41+01:00").unwrap(),
            Timestamp(1_774_649_861_000)
        );
        assert!(parse("yesterday").unwrap_err().contains("RFC 3339"));
    }
}
