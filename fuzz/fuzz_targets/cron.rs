//! Five-field cron lines and `@daily`-style shorthands (`lockgate_core::calendar`,
//! `cron.rs`). An input of fewer than five words gets `*` fields appended, so that almost
//! every input reaches the cron parser rather than the calendar-event one.
//!
//! Properties: those of `common/schedule.rs`, and every next time in UTC is a whole
//! minute (cron has no seconds).
#![no_main]

#[path = "common/schedule.rs"]
mod schedule;

use libfuzzer_sys::fuzz_target;
use lockgate_core::calendar::Schedule;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('@') && !trimmed[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
        return; // `@SECONDS` is a calendar event, the `calendar` target's input
    }
    let mut line = text.to_string();
    if !trimmed.starts_with('@') {
        let words = line.split_ascii_whitespace().count();
        for _ in words..5 {
            line.push_str(" *");
        }
    }
    let Ok(s) = Schedule::parse(&line) else {
        return;
    };
    schedule::check(&s, true);
});
