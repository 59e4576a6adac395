//! Checks shared by the `calendar` and `cron` targets: properties of
//! `lockgate_core::calendar::Schedule::next_after` for a parsed expression.
//!
//! For each of a few zones (one with a 30-minute DST shift) and base times (the epoch,
//! just before and inside the 2024 EU DST changes, the last hour before 2200):
//! - a next time is strictly after the base;
//! - it is also the next time after one millisecond before it (nothing was skipped, the
//!   search is a function of the instant and not of where it started);
//! - the time after it is later still;
//! - once there is no next time, there is none after any later base.

use lockgate_core::calendar::Schedule;

pub const ZONES: &[&str] = &["UTC", "Europe/Berlin", "Australia/Lord_Howe"];

pub const BASES: &[u64] = &[
    0,
    1_711_800_000_000, // 2024-03-30T12:00:00Z
    1_711_845_000_000, // 2024-03-31T00:30:00Z, 30 min before CET -> CEST
    1_729_989_000_000, // 2024-10-27T00:30:00Z, 30 min before CEST -> CET
    7_258_114_800_000, // 2199-12-31T23:00:00Z
];

/// Checks the properties above; `minute_aligned`: every next time in UTC is a whole minute.
pub fn check(s: &Schedule, minute_aligned: bool) {
    let text = s.text();
    for &zone in ZONES {
        let mut ended_at = None;
        for &t in BASES {
            let Ok(next) = s.next_after(t, zone) else {
                continue;
            };
            let Some(n) = next else {
                ended_at.get_or_insert(t);
                continue;
            };
            if let Some(e) = ended_at {
                panic!("{text:?} in {zone}: no next time after {e}, but {n} after {t}");
            }
            assert!(n > t, "{text:?} in {zone}: next after {t} is {n}");
            if minute_aligned && zone == "UTC" {
                assert_eq!(n % 60_000, 0, "{text:?}: {n} is not a whole minute");
            }
            if let Ok(again) = s.next_after(n - 1, zone) {
                assert_eq!(
                    again,
                    Some(n),
                    "{text:?} in {zone}: next after {t} is {n}, but next after {} is {again:?}",
                    n - 1
                );
            }
            if let Ok(Some(m)) = s.next_after(n, zone) {
                assert!(m > n, "{text:?} in {zone}: next after {n} is {m}");
            }
        }
    }
}
