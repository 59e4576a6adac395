//! Schedules: systemd/PBS calendar events and five-field cron lines, and their next times.
//!
//! [`Schedule::parse`] reads either syntax, told apart by shape: a cron line has exactly five
//! whitespace-separated fields (or is an `@daily`-style shorthand); a calendar event has at
//! most four words (`[WEEKDAY] [DATE] [TIME] [ZONE]`) or is a keyword such as `daily`.
//! [`Schedule::next_after`] gives the next planned time strictly after an instant.
//!
//! ```
//! # use lockgate_core::calendar::Schedule;
//! let s = Schedule::parse("sat *-1..7 03:30").unwrap(); // first Saturday of the month
//! // 2024-03-30T12:00:00Z -> 2024-04-06T01:30:00Z (03:30 CEST)
//! assert_eq!(s.next_after(1_711_800_000_000, "Europe/Berlin"), Ok(Some(1_712_367_000_000)));
//! ```
//!
//! # Invariants
//!
//! - Pure: no clock, file or environment is read. Time zones come from the IANA database
//!   bundled into the binary (`jiff`'s `tzdb-bundle-always`), never from the system.
//! - For every calendar event, `next_after` returns the times `systemd-analyze calendar`
//!   prints (systemd 252), including daylight-saving changes: a local time that does not exist
//!   (in the spring-forward gap) is skipped, and a repeated hour in the fall is visited the way
//!   systemd visits it (`clock.rs` reproduces the C library's `mktime` for this). The
//!   integration test `tests/it/calendar.rs` checks this against a table generated with
//!   `systemd-analyze`.
//! - Cron lines follow Vixie cron's field rules (day of month OR day of week when both are
//!   restricted) and the same DST behaviour: a time in the spring-forward gap is skipped, where
//!   Vixie cron would run it at the end of the gap.
//!
//! # Differences from systemd
//!
//! - Zone data is the bundled database's version (which may be newer than the system's), and
//!   only its zone names are known: no `posix/...`, `right/...` or `localtime`.
//! - A trailing abbreviation of the local zone (`CET` on a server in Berlin) is read as the
//!   IANA zone of that name where one exists, not as "local time in standard time".
//! - `@SECONDS` takes digits only (systemd also takes a leading `+`).
//! - Results are whole milliseconds: a sub-millisecond fraction of a second is truncated.
//!
//! # Implementation
//!
//! `event.rs` and `cron.rs` parse into `spec::CalendarSpec` (one list of allowed values per
//! field); `next.rs` searches the next match field by field as systemd does, over the
//! broken-down time of `clock.rs`.

mod clock;

pub(crate) use clock::civil_from_days;
mod cron;
mod event;
mod next;
mod spec;

use jiff::tz::{TimeZone, TimeZoneDatabase};
use spec::{CalendarSpec, ZoneSpec, USEC};
use std::sync::OnceLock;

/// A parse error or a failed computation, naming the part of the expression (or the zone)
/// to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part:?}: {message}")]
pub struct CalendarError {
    /// The offending text: a word or list element of the expression, or a zone name.
    pub part: String,
    /// What is wrong with it and what was expected.
    pub message: String,
}

impl CalendarError {
    fn new(part: &str, message: impl Into<String>) -> CalendarError {
        CalendarError {
            part: part.to_owned(),
            message: message.into(),
        }
    }
}

/// A parsed schedule expression (calendar event or cron line).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    text: String,
    /// The schedule elapses whenever any of these does (two only for cron's day OR rule).
    specs: Vec<CalendarSpec>,
}

impl Schedule {
    /// Parses a calendar event (`mon..fri 02:00`, `*:0/15`, `daily`, `03:30 Europe/Vienna`) or
    /// a cron line (`30 2 * * 1-5`, `@daily`).
    ///
    /// # Errors
    /// A [`CalendarError`] whose `part` is the offending text, e.g. `xyz` in `mon..xyz`, `25`
    /// in `25:00`, `0/0` in `*:0/0`, the zone name in `03:00 Mars/Olympus`, `61` in
    /// `61 * * * *`.
    pub fn parse(expr: &str) -> Result<Schedule, CalendarError> {
        let words = expr.split_ascii_whitespace().count();
        let shorthand = expr.trim_start().starts_with('@')
            && expr.trim_start()[1..].starts_with(|c: char| c.is_ascii_alphabetic());
        let specs = if shorthand || words >= 5 {
            cron::parse(expr)?
        } else {
            vec![event::parse(expr)?]
        };
        Ok(Schedule {
            text: expr.to_owned(),
            specs,
        })
    }

    /// The next planned time strictly after `after_ms` (milliseconds since the Unix epoch,
    /// UTC), or `None` if the schedule never elapses again (a date in the past, or after 2199).
    ///
    /// Wall-clock times of an expression without its own zone are read in `local_zone`, an
    /// IANA name such as `"Europe/Berlin"` or `"UTC"`. Times are whole milliseconds; a
    /// sub-millisecond second fraction (`*:*:0.0005`) is truncated.
    ///
    /// # Errors
    /// `local_zone` is not a zone of the bundled database (and the expression needs it), or
    /// `after_ms` is past the year 9999, or the search gave up as systemd does after 1000
    /// steps.
    pub fn next_after(
        &self,
        after_ms: u64,
        local_zone: &str,
    ) -> Result<Option<u64>, CalendarError> {
        let after_usec = i64::try_from(after_ms)
            .ok()
            .and_then(|ms| ms.checked_mul(1000))
            .map(|us| us + 999)
            .ok_or_else(|| {
                CalendarError::new(&after_ms.to_string(), "time is past the year 9999")
            })?;
        let mut best: Option<i64> = None;
        for spec in &self.specs {
            if let Some(t) = self.next_of(spec, after_usec, local_zone)? {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        Ok(best.map(|usec| (usec / 1000) as u64))
    }

    fn next_of(
        &self,
        spec: &CalendarSpec,
        after_usec: i64,
        local_zone: &str,
    ) -> Result<Option<i64>, CalendarError> {
        let zone = match &spec.zone {
            ZoneSpec::Utc => None,
            ZoneSpec::Named(name) => Some(find_zone(name).ok_or_else(|| unknown_zone(name))?),
            ZoneSpec::Local => Some(find_zone(local_zone).ok_or_else(|| unknown_zone(local_zone))?),
        };
        let mut clock = clock::Clock::new(zone.as_ref());
        next::next_usec(spec, &mut clock, after_usec).map_err(|failure| match failure {
            next::Failure::Stuck => CalendarError::new(
                &self.text,
                "no next time found within 1000 search steps (systemd gives up here too)",
            ),
            next::Failure::OutOfRange => CalendarError::new(
                &(after_usec / USEC).to_string(),
                "time is outside 1970..9999",
            ),
        })
    }

    /// The expression as given to [`Schedule::parse`].
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Checks that `expr` is a valid schedule expression (for policy validation).
///
/// # Errors
/// As [`Schedule::parse`].
pub fn validate_expression(expr: &str) -> Result<(), CalendarError> {
    Schedule::parse(expr).map(|_| ())
}

fn unknown_zone(name: &str) -> CalendarError {
    CalendarError::new(
        name,
        "unknown time zone; expected an IANA zone name such as Europe/Vienna, or UTC",
    )
}

/// The zone `name` of the bundled database, matched case-sensitively like a zoneinfo file.
fn find_zone(name: &str) -> Option<TimeZone> {
    let zone = zone_db().get(name).ok()?;
    (zone.iana_name() == Some(name)).then_some(zone)
}

/// The zone `name` of the bundled database (`UTC`, `Europe/Vienna`), for whoever reads
/// wall-clock times in the server's zone (schedules, windows).
pub(crate) fn zone_by_name(name: &str) -> Option<TimeZone> {
    find_zone(name)
}

/// The IANA database bundled into the binary.
fn zone_db() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}
