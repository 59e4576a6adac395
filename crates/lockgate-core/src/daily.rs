//! Daily durations: the recurring windows of time-windowed limits and maintenance windows,
//! in the form Proxmox Backup Server uses for traffic control (`mon..fri 08:00-18:00`).
//!
//! Grammar (whitespace between the parts is free):
//!
//! ```text
//! window   = [ days ] time "-" time
//! days     = "*" | range { "," range }
//! range    = weekday [ ".." weekday ]
//! weekday  = mon | tue | wed | thu | fri | sat | sun   (or the full name, any case)
//! time     = HOUR [ ":" MINUTE ]                       (HOUR 0..23, MINUTE 00..59)
//! ```
//!
//! No weekday, or `*`, means every day. A range wraps round the week (`fri..mon` is Friday
//! to Monday). The window covers `[start, end)` in local time.
//!
//! # Deliberate deviations from PBS
//!
//! - An end before the start crosses midnight (`22:00-06:00`); the weekday names the day
//!   the window *starts* on (`fri 22:00-06:00` ends Saturday 06:00). PBS refuses this.
//! - `24:00` is accepted as an end (the end of the day); `*` is accepted for every day.
//! - An empty window (start equal to end) is refused: it would never be active.
//!
//! # Invariants
//!
//! - Pure: local times come from a [`jiff::tz::TimeZone`] the caller passes (the engine's,
//!   set by whoever drives it); no clock, file or environment is read.
//! - A local time in a daylight-saving gap is read as the instant after the gap (jiff's
//!   "compatible" rule), a repeated one as its first occurrence, so every occurrence has a
//!   start and an end instant and [`DailyWindow::occurrences`] is well defined.
//! - Errors carry a 1-based column into the text and say what was expected.

use crate::time::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use std::fmt;

/// A parse error: where and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct DailyError {
    /// 1-based column of the offending text.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A parsed daily duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyWindow {
    text: String,
    /// Bit 0 = Monday .. bit 6 = Sunday: the days an occurrence starts on.
    days: u8,
    /// Minutes after local midnight.
    start: u16,
    /// Minutes after local midnight (1440 for `24:00`); at or before `start`: the next day.
    end: u16,
}

const ALL_DAYS: u8 = 0x7f;
const NAMES: [(&str, &str); 7] = [
    ("mon", "monday"),
    ("tue", "tuesday"),
    ("wed", "wednesday"),
    ("thu", "thursday"),
    ("fri", "friday"),
    ("sat", "saturday"),
    ("sun", "sunday"),
];
const FORM: &str = "the form is [WEEKDAYS] HH:MM-HH:MM, e.g. \"mon..fri 08:00-18:00\"";

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl Cursor<'_> {
    fn skip_space(&mut self) {
        while self.text[self.pos..].starts_with(' ') {
            self.pos += 1;
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, DailyError> {
        self.error_at(self.pos, message)
    }

    fn error_at<T>(&self, pos: usize, message: impl Into<String>) -> Result<T, DailyError> {
        Err(DailyError {
            column: self.text[..pos].chars().count() + 1,
            message: message.into(),
        })
    }

    fn eat(&mut self, s: &str) -> bool {
        let found = self.rest().starts_with(s);
        if found {
            self.pos += s.len();
        }
        found
    }

    fn weekday(&mut self) -> Result<u8, DailyError> {
        let word: String = self
            .rest()
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect();
        let lower = word.to_ascii_lowercase();
        match NAMES.iter().position(|(s, l)| lower == *s || lower == *l) {
            Some(i) => {
                self.pos += word.len();
                Ok(i as u8)
            }
            None if word.is_empty() => self.error("expected a weekday (mon, tue, .., sun)"),
            None => self.error(format!(
                "unknown weekday {word:?}, expected mon, tue, wed, thu, fri, sat or sun"
            )),
        }
    }

    fn days(&mut self) -> Result<u8, DailyError> {
        if self.eat("*") {
            return Ok(ALL_DAYS);
        }
        let mut days = 0u8;
        loop {
            let first = self.weekday()?;
            let last = if self.eat("..") {
                self.weekday()?
            } else {
                first
            };
            let mut d = first;
            loop {
                days |= 1 << d;
                if d == last {
                    break;
                }
                d = (d + 1) % 7;
            }
            if !self.eat(",") {
                return Ok(days);
            }
        }
    }

    fn number(&mut self, what: &str, max: u16) -> Result<u16, DailyError> {
        let start = self.pos;
        let digits: String = self
            .rest()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() || digits.len() > 2 {
            return self.error(format!("expected {what} (one or two digits); {FORM}"));
        }
        self.pos += digits.len();
        let n: u16 = digits.parse().expect("digits");
        if n > max {
            let noun = what.trim_start_matches("an ").trim_start_matches("a ");
            return self.error_at(start, format!("{noun} {n} is out of range 0..{max}"));
        }
        Ok(n)
    }

    /// `HH[:MM]` as minutes after midnight; `24:00` only when `end`.
    fn time(&mut self, end: bool) -> Result<u16, DailyError> {
        let start = self.pos;
        let hour = self.number("an hour", 24)?;
        let minute = if self.eat(":") {
            if !self.rest().starts_with(|c: char| c.is_ascii_digit()) || {
                let two = self.rest().chars().take_while(char::is_ascii_digit).count();
                two != 2
            } {
                return self.error("expected two digits of minutes (00..59)");
            }
            self.number("a minute", 59)?
        } else {
            0
        };
        if hour == 24 && (minute != 0 || !end) {
            return self.error_at(start, "24:00 is allowed only as an end; hours are 0..23");
        }
        Ok(hour * 60 + minute)
    }
}

impl DailyWindow {
    /// Parses a daily duration (see the module docs for the grammar).
    ///
    /// # Errors
    /// A [`DailyError`] with the column of the offending text: an unknown weekday, a missing
    /// `-`, an hour or minute out of range, trailing text, an empty window.
    pub fn parse(text: &str) -> Result<DailyWindow, DailyError> {
        let mut c = Cursor { text, pos: 0 };
        c.skip_space();
        if c.rest().is_empty() {
            return c.error(format!("expected a daily duration; {FORM}"));
        }
        let days = if c
            .rest()
            .starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '*')
        {
            let d = c.days()?;
            if !c.rest().starts_with(' ') {
                return c.error(format!("expected a space after the weekdays; {FORM}"));
            }
            c.skip_space();
            d
        } else {
            ALL_DAYS
        };
        let start = c.time(false)?;
        c.skip_space();
        if !c.eat("-") {
            return c.error(format!("expected \"-\" between start and end; {FORM}"));
        }
        c.skip_space();
        let end_at = c.pos;
        let end = c.time(true)?;
        c.skip_space();
        if !c.rest().is_empty() {
            return c.error(format!("unexpected text after the end time; {FORM}"));
        }
        if end == start {
            return c.error_at(
                end_at,
                "the end equals the start, expected a window that is not empty",
            );
        }
        Ok(DailyWindow {
            text: text.trim().to_string(),
            days,
            start,
            end,
        })
    }

    /// The text as given (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether an occurrence ends on the day after it starts (`22:00-06:00`).
    pub fn crosses_midnight(&self) -> bool {
        self.end <= self.start
    }

    /// Whether an occurrence starts on `weekday` (0 = Monday).
    pub fn starts_on(&self, weekday: u8) -> bool {
        self.days & (1 << weekday) != 0
    }

    /// The occurrences `[start, end)` (ms since the epoch) that start on local dates from
    /// one day before `at`'s date to seven days after it, in order: enough to know whether
    /// `at` is inside one and when the next boundary after `at` is. `None` when `at` is
    /// outside jiff's range.
    pub fn occurrences(&self, at: Timestamp, zone: &TimeZone) -> Option<Vec<(u64, u64)>> {
        let today = jiff::Timestamp::from_millisecond(i64::try_from(at.0).ok()?)
            .ok()?
            .to_zoned_datetime(zone.clone())
            .date();
        let mut day = today.yesterday().ok()?;
        let mut out = Vec::new();
        for _ in 0..9 {
            let weekday = day.weekday().to_monday_one_offset() as u8 - 1;
            if self.starts_on(weekday) {
                let start = instant(day, self.start, zone)?;
                let end_day = if self.end <= self.start || self.end == 1440 {
                    day.tomorrow().ok()?
                } else {
                    day
                };
                let end = instant(end_day, self.end % 1440, zone)?;
                out.push((start, end));
            }
            day = day.tomorrow().ok()?;
        }
        Some(out)
    }

    /// If `at` is inside an occurrence, when that occurrence ends.
    pub fn active_until(&self, at: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        self.occurrences(at, zone)?
            .into_iter()
            .find(|&(s, e)| s <= at.0 && at.0 < e)
            .map(|(_, e)| Timestamp(e))
    }

    /// The first start or end of an occurrence strictly after `at`.
    pub fn next_boundary(&self, at: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        self.occurrences(at, zone)?
            .into_iter()
            .flat_map(|(s, e)| [s, e])
            .filter(|&t| t > at.0)
            .min()
            .map(Timestamp)
    }
}

impl fmt::Display for DailyWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The instant of `minutes` after local midnight on `day`.
fn instant(day: Date, minutes: u16, zone: &TimeZone) -> Option<u64> {
    let dt = day.at((minutes / 60) as i8, (minutes % 60) as i8, 0, 0);
    let ms = dt
        .to_zoned_datetime(zone.clone())
        .ok()?
        .timestamp()
        .as_millisecond();
    u64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days_of(names: &[u8]) -> u8 {
        names.iter().fold(0, |acc, d| acc | 1 << d)
    }

    #[test]
    fn parses_the_forms() {
        let cases: &[(&str, u8, u16, u16)] = &[
            ("mon..fri 08:00-18:00", days_of(&[0, 1, 2, 3, 4]), 480, 1080),
            ("mon..fri 8:00-18:00", days_of(&[0, 1, 2, 3, 4]), 480, 1080),
            ("sat,sun 10-14", days_of(&[5, 6]), 600, 840),
            ("sun 02:00-04:00", days_of(&[6]), 120, 240),
            ("* 22:00-06:00", ALL_DAYS, 1320, 360),
            ("22:00 - 06:00", ALL_DAYS, 1320, 360),
            ("00:00-24:00", ALL_DAYS, 0, 1440),
            ("fri..mon 1:30-2", days_of(&[4, 5, 6, 0]), 90, 120),
            ("Monday,WED 9-17", days_of(&[0, 2]), 540, 1020),
            ("  tue 0-1  ", days_of(&[1]), 0, 60),
        ];
        for &(text, days, start, end) in cases {
            let w = DailyWindow::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!((w.days, w.start, w.end), (days, start, end), "{text}");
        }
    }

    #[test]
    fn errors_name_the_column_and_what_was_expected() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 1, "expected a daily duration"),
            ("mon..xyz 08:00-18:00", 6, "unknown weekday \"xyz\""),
            ("mon 25:00-18:00", 5, "hour 25 is out of range"),
            ("mon 08:60-18:00", 8, "minute 60 is out of range"),
            ("mon 08:5-18:00", 8, "two digits of minutes"),
            ("mon 08:00 18:00", 11, "expected \"-\""),
            ("mon 08:00-", 11, "expected an hour"),
            ("mon 08:00-18:00 x", 17, "unexpected text"),
            ("mon08:00-18:00", 4, "expected a space after the weekdays"),
            ("08:00-08:00", 7, "end equals the start"),
            ("24:00-06:00", 1, "24:00 is allowed only as an end"),
            ("mon, 08:00-18:00", 5, "expected a weekday"),
            ("mon 123:00-18:00", 5, "expected an hour"),
        ];
        for &(text, column, needle) in cases {
            let e = DailyWindow::parse(text).expect_err(text);
            assert_eq!(e.column, column, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
    }

    const HOUR: u64 = 3_600_000;
    /// 2024-03-04T00:00:00Z, a Monday.
    const MONDAY: u64 = 1_709_510_400_000;

    #[test]
    fn active_and_boundaries_in_utc() {
        let w = DailyWindow::parse("mon..fri 08:00-18:00").unwrap();
        let utc = TimeZone::UTC;
        assert_eq!(w.active_until(Timestamp(MONDAY + 7 * HOUR), &utc), None);
        assert_eq!(
            w.active_until(Timestamp(MONDAY + 8 * HOUR), &utc),
            Some(Timestamp(MONDAY + 18 * HOUR))
        );
        assert_eq!(
            w.next_boundary(Timestamp(MONDAY + 8 * HOUR), &utc),
            Some(Timestamp(MONDAY + 18 * HOUR))
        );
        // Friday 18:00 -> next Monday 08:00.
        let fri_evening = MONDAY + 4 * 24 * HOUR + 18 * HOUR;
        assert_eq!(
            w.next_boundary(Timestamp(fri_evening), &utc),
            Some(Timestamp(MONDAY + 7 * 24 * HOUR + 8 * HOUR))
        );
    }

    #[test]
    fn crossing_midnight_belongs_to_the_start_day() {
        let w = DailyWindow::parse("fri 22:00-06:00").unwrap();
        let utc = TimeZone::UTC;
        let sat_3am = MONDAY + 5 * 24 * HOUR + 3 * HOUR;
        assert_eq!(
            w.active_until(Timestamp(sat_3am), &utc),
            Some(Timestamp(MONDAY + 5 * 24 * HOUR + 6 * HOUR))
        );
        let sun_3am = sat_3am + 24 * HOUR;
        assert_eq!(w.active_until(Timestamp(sun_3am), &utc), None);
    }

    #[test]
    fn local_zone_and_daylight_saving() {
        let zone = crate::calendar::zone_by_name("Europe/Berlin").unwrap();
        let w = DailyWindow::parse("sun 02:00-04:00").unwrap();
        // 2024-03-31 is the spring-forward Sunday in Berlin: 02:00 does not exist, so the
        // window opens at 03:00 CEST = 01:00Z and closes at 04:00 CEST = 02:00Z.
        let sun = MONDAY + 27 * 24 * HOUR;
        let occ = w.occurrences(Timestamp(sun), &zone).unwrap();
        assert!(occ.contains(&(sun + HOUR, sun + 2 * HOUR)), "{occ:?}");
        // A winter Sunday: 02:00 CET = 01:00Z.
        let winter = MONDAY + 6 * 24 * HOUR;
        assert_eq!(
            w.active_until(Timestamp(winter + HOUR + 1), &zone),
            Some(Timestamp(winter + 3 * HOUR))
        );
    }
}
