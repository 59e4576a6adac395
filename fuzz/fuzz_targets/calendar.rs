//! systemd-style calendar events (`lockgate_core::calendar`, `event.rs`): inputs that
//! `Schedule::parse` reads as a calendar event (at most four words, not `@shorthand`).
//!
//! Properties: those of `common/schedule.rs`; parsing is deterministic and agrees with
//! `validate_expression`; an expression without a zone read in local zone UTC has the
//! same next times as the expression with ` UTC` appended read in another local zone.
#![no_main]

#[path = "common/schedule.rs"]
mod schedule;

use libfuzzer_sys::fuzz_target;
use lockgate_core::calendar::{validate_expression, Schedule};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let trimmed = text.trim_start();
    let shorthand =
        trimmed.starts_with('@') && trimmed[1..].starts_with(|c: char| c.is_ascii_alphabetic());
    if shorthand || text.split_ascii_whitespace().count() >= 5 {
        return; // a cron line: the `cron` target's input
    }
    let parsed = Schedule::parse(text);
    assert_eq!(
        parsed.is_ok(),
        validate_expression(text).is_ok(),
        "{text:?}"
    );
    let Ok(s) = parsed else {
        return;
    };
    assert_eq!(Schedule::parse(text).as_ref(), Ok(&s));
    assert_eq!(s.text(), text);
    schedule::check(&s, false);

    if text.split_ascii_whitespace().count() <= 3 {
        if let Ok(utc) = Schedule::parse(&format!("{text} UTC")) {
            for &t in schedule::BASES {
                if let (Ok(a), Ok(b)) = (s.next_after(t, "UTC"), utc.next_after(t, "Europe/Berlin"))
                {
                    assert_eq!(a, b, "{text:?} in UTC vs {text:?} UTC, after {t}");
                }
            }
        }
    }
});
