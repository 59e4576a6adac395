//! The parsed form of a calendar event: one list of allowed values per field.
//!
//! Both syntaxes compile to [`CalendarSpec`]: a calendar event to one, a cron line to one or
//! two (cron's day-of-month OR day-of-week rule is the union of two specs).
//!
//! Invariants: every [`Item`] in a spec went through [`finish_item`], so its values are within
//! the field's bounds, `stop` (if any) is not below `start`, and `repeat` is at most the
//! field's span; the search in `next.rs` relies on this to stay within `i64` and to end.

use super::CalendarError;

/// One element of a field's list: `start`, `start..stop`, `start/repeat` or
/// `start..stop/repeat`. Seconds are in microseconds, as in systemd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Item {
    pub start: i64,
    /// Last value of a range (inclusive), if it is one.
    pub stop: Option<i64>,
    /// Step from `start`; 0 for a single value.
    pub repeat: i64,
}

impl Item {
    /// The single value `v`.
    pub const fn single(v: i64) -> Item {
        Item {
            start: v,
            stop: None,
            repeat: 0,
        }
    }
}

/// A field's allowed values: any of the items; an empty list allows every value.
pub(crate) type Chain = Vec<Item>;

/// Which zone a spec's wall-clock times are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ZoneSpec {
    /// The zone the caller passes (the server's local zone).
    Local,
    /// UTC (`... UTC`, or an `@seconds` timestamp).
    Utc,
    /// A zone of the bundled IANA database, by the name as written.
    Named(String),
}

/// Weekday bits, Monday = bit 0 .. Sunday = bit 6; this value allows every day.
pub(crate) const ALL_WEEKDAYS: u8 = 0x7f;

/// A calendar event as systemd holds it (`CalendarSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CalendarSpec {
    pub weekdays: u8,
    pub year: Chain,
    pub month: Chain,
    pub day: Chain,
    /// Day values count back from the month's last day (`~`).
    pub end_of_month: bool,
    pub hour: Chain,
    pub minute: Chain,
    /// Seconds in microseconds.
    pub second: Chain,
    pub zone: ZoneSpec,
}

/// Microseconds per second.
pub(crate) const USEC: i64 = 1_000_000;

impl CalendarSpec {
    /// Every second of every day, in the local zone; callers narrow the fields they set.
    pub fn any() -> CalendarSpec {
        CalendarSpec {
            weekdays: ALL_WEEKDAYS,
            year: Chain::new(),
            month: Chain::new(),
            day: Chain::new(),
            end_of_month: false,
            hour: Chain::new(),
            minute: Chain::new(),
            second: vec![Item {
                start: 0,
                stop: None,
                repeat: USEC,
            }],
            zone: ZoneSpec::Local,
        }
    }

    /// The spec of a systemd keyword (`daily`, ...), case-insensitively, if `word` is one.
    pub fn keyword(word: &str) -> Option<CalendarSpec> {
        let zero = || vec![Item::single(0)];
        let mut spec = CalendarSpec {
            second: zero(),
            ..CalendarSpec::any()
        };
        let (months, day, hour, minute): (&[i64], bool, bool, bool) =
            match word.to_ascii_lowercase().as_str() {
                "minutely" => (&[], false, false, false),
                "hourly" => (&[], false, false, true),
                "daily" => (&[], false, true, true),
                "weekly" => {
                    spec.weekdays = 1;
                    (&[], false, true, true)
                }
                "monthly" => (&[], true, true, true),
                "quarterly" => (&[1, 4, 7, 10], true, true, true),
                "semiannually" | "semi-annually" => (&[1, 7], true, true, true),
                "yearly" | "annually" => (&[1], true, true, true),
                _ => return None,
            };
        spec.month = months.iter().map(|&m| Item::single(m)).collect();
        if day {
            spec.day = vec![Item::single(1)];
        }
        if hour {
            spec.hour = zero();
        }
        if minute {
            spec.minute = zero();
        }
        Some(spec)
    }
}

/// The fields of a calendar event, with their bounds, for validation and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

impl Field {
    /// Smallest and largest value (systemd's limits; seconds in microseconds).
    pub fn bounds(self) -> (i64, i64) {
        match self {
            Field::Year => (1970, 2199),
            Field::Month => (1, 12),
            Field::Day => (1, 31),
            Field::Hour => (0, 23),
            Field::Minute => (0, 59),
            Field::Second => (0, 60 * USEC - 1),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Field::Year => "year",
            Field::Month => "month",
            Field::Day => "day",
            Field::Hour => "hour",
            Field::Minute => "minute",
            Field::Second => "second",
        }
    }

    /// A value as the user wrote it (seconds back from microseconds).
    fn show(self, v: i64) -> String {
        if self != Field::Second {
            return v.to_string();
        }
        let frac = v % USEC;
        if frac == 0 {
            return (v / USEC).to_string();
        }
        let digits = format!("{frac:06}");
        format!("{}.{}", v / USEC, digits.trim_end_matches('0'))
    }
}

/// A parsed list element and the text it came from.
#[derive(Debug, Clone)]
pub(crate) struct RawItem {
    pub item: Item,
    pub text: String,
}

/// Normalises and validates one element of `field` the way systemd does
/// (`fix_year`, `normalize_chain`, `chain_valid`).
///
/// # Errors
/// The element's text and what is wrong with it.
pub(crate) fn finish_item(
    raw: &RawItem,
    field: Field,
    end_of_month: bool,
) -> Result<Item, CalendarError> {
    let Item {
        mut start,
        mut stop,
        mut repeat,
    } = raw.item;
    if field == Field::Year {
        start = fix_year(start);
        stop = stop.map(fix_year);
    }
    if let Some(s) = stop {
        if s > start && repeat > 0 {
            stop = Some(s - (s - start) % repeat);
        }
    }
    if let Some(s) = stop {
        if (s > start && start + repeat > s) || s == start {
            (stop, repeat) = (None, 0);
        }
    }
    check_item(
        &raw.text,
        field,
        end_of_month,
        Item {
            start,
            stop,
            repeat,
        },
    )?;
    Ok(Item {
        start,
        stop,
        repeat,
    })
}

/// Two-digit years as systemd reads them: 00..69 are 2000..2069, 70..99 are 1970..1999.
fn fix_year(y: i64) -> i64 {
    match y {
        0..=69 => y + 2000,
        70..=99 => y + 1900,
        _ => y,
    }
}

fn check_item(text: &str, field: Field, eom: bool, item: Item) -> Result<(), CalendarError> {
    let (from, mut to) = field.bounds();
    if eom {
        to -= 3;
    }
    let name = field.name();
    let bad = |message: String| Err(CalendarError::new(text, message));
    let (show_from, show_to) = (field.show(from), field.show(to));
    if item.start < from || item.start > to {
        let what = if eom {
            "day counted back from the month's end"
        } else {
            name
        };
        return bad(format!(
            "{what} {} is out of range {show_from}..{show_to}",
            field.show(item.start)
        ));
    }
    if item.repeat > to - from {
        return bad(format!(
            "repetition {} is too large for the {name} (at most {})",
            field.show(item.repeat),
            field.show(to - from)
        ));
    }
    match item.stop {
        Some(s) if s < from || s > to => bad(format!(
            "{name} {} is out of range {show_from}..{show_to}",
            field.show(s)
        )),
        Some(s) if item.start + item.repeat > s => bad(format!(
            "range {}..{} runs backwards; write the smaller {name} first",
            field.show(item.start),
            field.show(s)
        )),
        None if eom && item.start - item.repeat < from => bad(format!(
            "~{}/{} would repeat past the month's end; the repetition must be smaller than {}",
            field.show(item.start),
            field.show(item.repeat),
            field.show(item.start)
        )),
        None if !eom && item.start + item.repeat > to => bad(format!(
            "{name} {}/{} never repeats: {} is past {show_to}",
            field.show(item.start),
            field.show(item.repeat),
            field.show(item.start + item.repeat)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(start: i64, stop: Option<i64>, repeat: i64) -> RawItem {
        RawItem {
            item: Item {
                start,
                stop,
                repeat,
            },
            text: "x".into(),
        }
    }

    #[test]
    fn ranges_are_trimmed_to_their_last_repetition() {
        let item = finish_item(&raw(8, Some(17), 2), Field::Hour, false).unwrap();
        assert_eq!(
            item,
            Item {
                start: 8,
                stop: Some(16),
                repeat: 2
            }
        );
        let item = finish_item(&raw(5, Some(6), 10), Field::Minute, false).unwrap();
        assert_eq!(item, Item::single(5));
    }

    #[test]
    fn systemd_limits() {
        assert!(finish_item(&raw(0, None, 59), Field::Minute, false).is_ok());
        assert!(finish_item(&raw(0, None, 60), Field::Minute, false).is_err());
        assert!(finish_item(&raw(5, None, 55), Field::Minute, false).is_err());
        assert!(finish_item(&raw(10, Some(5), 1), Field::Hour, false).is_err());
        assert!(finish_item(&raw(28, None, 0), Field::Day, true).is_ok());
        assert!(finish_item(&raw(29, None, 0), Field::Day, true).is_err());
        assert!(finish_item(&raw(1, None, 2), Field::Day, true).is_err());
        assert_eq!(
            finish_item(&raw(69, None, 0), Field::Year, false)
                .unwrap()
                .start,
            2069
        );
    }

    #[test]
    fn seconds_show_as_written() {
        assert_eq!(Field::Second.show(1_500_000), "1.5");
        assert_eq!(Field::Second.show(60 * USEC - 1), "59.999999");
    }
}
