//! Parser for five-field cron lines (`minute hour day-of-month month day-of-week`) and the
//! `@daily`-style shorthands, compiled to [`CalendarSpec`]s.
//!
//! Semantics are Vixie cron's: each field is `*` or a comma list of `N`, `N-M`, `*/S`, `N-M/S`
//! (and `N/S`, meaning `N-max/S`); months and weekdays also take three-letter English names;
//! day of week 0 and 7 are Sunday, and a weekday range ending on Sunday as 0 ends on 7
//! (`6-0`, `mon-sun`, as cronie reads them); a step may exceed the field's range (`*/15` in
//! the month field: January only, as in cronie). Deliberately stricter than cronie: a range
//! that runs backwards otherwise (`5-1`) is refused, where cronie silently sets nothing for it
//! (also for `mon-sun/2`, where cronie applies its Sunday rule only without a step; here the
//! rule holds with a step too). When both day fields are restricted (neither starts with
//! `*`), a day matches if EITHER matches; this compiles to two specs whose union is taken.
//! Times are wall-clock times in the local zone and go through the same DST handling as
//! calendar events: a time in a spring-forward gap is skipped.
//!
//! Invariants: every produced item is within the field's bounds with `stop >= start` and a
//! step of at least 1, as `next.rs` requires.

use super::spec::{CalendarSpec, Chain, Item, ALL_WEEKDAYS};
use super::CalendarError;

/// One cron field: its name, bounds and (for months and weekdays) names for its values.
struct CronField {
    name: &'static str,
    min: i64,
    max: i64,
    /// Names of `first_named`, `first_named + 1`, ...
    names: &'static [&'static str],
    first_named: i64,
}

const MINUTE: CronField = CronField {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    first_named: 0,
};
const HOUR: CronField = CronField {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    first_named: 0,
};
const DOM: CronField = CronField {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
    first_named: 0,
};
const MONTH: CronField = CronField {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    first_named: 1,
};
const DOW: CronField = CronField {
    name: "day of week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    first_named: 0,
};

/// The shorthands and the lines they stand for.
const SHORTHANDS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// A `start..=stop` range stepping by `step`.
type Span = (i64, i64, i64);

/// Parses a cron line or shorthand into one spec, or two whose union is the schedule.
///
/// # Errors
/// The offending field element and what was expected.
pub(crate) fn parse(text: &str) -> Result<Vec<CalendarSpec>, CalendarError> {
    let trimmed = text.trim();
    if trimmed.starts_with('@') {
        let Some(&(_, line)) = SHORTHANDS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
        else {
            let msg = "unknown cron shorthand; expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly";
            return Err(CalendarError::new(trimmed, msg));
        };
        return parse(line);
    }
    let fields: Vec<&str> = trimmed.split_ascii_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields[..] else {
        let msg = "a cron line has five fields: minute hour day-of-month month day-of-week";
        return Err(CalendarError::new(text, msg));
    };
    let base = CalendarSpec {
        minute: chain(minute, &MINUTE)?,
        hour: chain(hour, &HOUR)?,
        month: chain(month, &MONTH)?,
        second: vec![Item::single(0)],
        ..CalendarSpec::any()
    };
    let day = chain(dom, &DOM)?;
    let weekdays = weekday_bits(&spans(dow, &DOW)?);
    if dom.starts_with('*') || dow.starts_with('*') {
        return Ok(vec![CalendarSpec {
            day,
            weekdays,
            ..base
        }]);
    }
    Ok(vec![
        CalendarSpec {
            day,
            ..base.clone()
        },
        CalendarSpec { weekdays, ..base },
    ])
}

/// A field as a chain; a lone `*` is the empty chain (any value).
fn chain(text: &str, field: &CronField) -> Result<Chain, CalendarError> {
    let spans = spans(text, field)?;
    if text == "*" {
        return Ok(Chain::new());
    }
    let item = |(start, stop, step): Span| {
        if start == stop {
            Item::single(start)
        } else {
            Item {
                start,
                stop: Some(stop),
                repeat: step,
            }
        }
    };
    Ok(spans.into_iter().map(item).collect())
}

/// Day-of-week spans as weekday bits (Monday = bit 0).
fn weekday_bits(spans: &[Span]) -> u8 {
    let mut bits = 0u8;
    for &(start, stop, step) in spans {
        let mut d = start;
        while d <= stop {
            bits |= 1 << ((d + 6) % 7);
            d += step;
        }
    }
    if bits == ALL_WEEKDAYS {
        ALL_WEEKDAYS
    } else {
        bits
    }
}

/// The comma-separated elements of a field.
fn spans(text: &str, field: &CronField) -> Result<Vec<Span>, CalendarError> {
    text.split(',')
        .map(|element| span(element, text, field))
        .collect()
}

/// One element: `*`, `N`, `N-M`, each optionally `/S`.
fn span(element: &str, whole: &str, field: &CronField) -> Result<Span, CalendarError> {
    let name = field.name;
    if element.is_empty() {
        return Err(CalendarError::new(
            whole,
            format!("empty element in the {name} list"),
        ));
    }
    let (range, step) = match element.split_once('/') {
        Some((range, step)) => (range, Some(step_value(step, element, field)?)),
        None => (element, None),
    };
    let (start, stop) = if range == "*" {
        (field.min, field.max)
    } else if let Some((a, b)) = range.split_once('-') {
        let (a, mut b) = (value(a, field)?, value(b, field)?);
        if field.name == DOW.name && a > b && b == 0 {
            b = 7; // cronie: a weekday range that ends on Sunday as 0 (`6-0`, `mon-sun`) ends on 7
        }
        if a > b {
            let msg = format!("{name} range {range} runs backwards; write the smaller value first or list the values");
            return Err(CalendarError::new(range, msg));
        }
        (a, b)
    } else {
        let v = value(range, field)?;
        (v, if step.is_some() { field.max } else { v })
    };
    Ok((start, stop, step.unwrap_or(1)))
}

fn step_value(text: &str, element: &str, field: &CronField) -> Result<i64, CalendarError> {
    let step = text
        .parse::<i64>()
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_digit()));
    // cronie takes any positive step, also one past the field's range (`*/15` in the month
    // field is January only); it warns, and so does nothing here: the schedule is what cron
    // would run. The bound keeps the arithmetic in `next.rs` far from overflow.
    match step {
        Some(s) if (1..=i64::from(i32::MAX)).contains(&s) => Ok(s),
        _ => Err(CalendarError::new(
            element,
            format!(
                "step {text:?} in the {}: expected a whole number of at least 1",
                field.name
            ),
        )),
    }
}

/// A number or (for months and weekdays) a three-letter name, within the field's bounds.
fn value(text: &str, field: &CronField) -> Result<i64, CalendarError> {
    let named = field
        .names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(text));
    if let Some(i) = named {
        return Ok(field.first_named + i as i64);
    }
    let (name, min, max) = (field.name, field.min, field.max);
    match text.parse::<i64>() {
        Ok(v) if text.bytes().all(|b| b.is_ascii_digit()) && (min..=max).contains(&v) => Ok(v),
        Ok(_) if text.bytes().all(|b| b.is_ascii_digit()) => Err(CalendarError::new(
            text,
            format!("{name} {text} is out of range {min}..{max}"),
        )),
        _ if field.names.is_empty() => Err(CalendarError::new(
            text,
            format!("expected a {name} {min}..{max}, * or */STEP"),
        )),
        _ => Err(CalendarError::new(
            text,
            format!(
                "expected a {name} {min}..{max} or a name {}..{}",
                field.names[0],
                field.names[field.names.len() - 1]
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_day_fields_restricted_gives_two_specs() {
        assert_eq!(parse("0 0 13 * fri").unwrap().len(), 2);
        assert_eq!(parse("0 0 */2 * fri").unwrap().len(), 1);
        assert_eq!(parse("0 0 13 * *").unwrap().len(), 1);
    }

    #[test]
    fn weekday_names_numbers_and_seven_agree() {
        let a = parse("0 0 * * mon-fri").unwrap();
        let b = parse("0 0 * * 1-5").unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].weekdays, 0b001_1111);
        assert_eq!(parse("0 0 * * 0").unwrap(), parse("0 0 * * 7").unwrap());
        assert_eq!(parse("0 0 * * 0-6").unwrap()[0].weekdays, ALL_WEEKDAYS);
    }

    #[test]
    fn errors_name_the_element() {
        assert_eq!(parse("61 * * * *").unwrap_err().part, "61");
        assert_eq!(parse("* * * 13 *").unwrap_err().part, "13");
        assert_eq!(parse("*/0 * * * *").unwrap_err().part, "*/0");
        assert_eq!(parse("* 5-1 * * *").unwrap_err().part, "5-1");
        assert_eq!(parse("* * * foo *").unwrap_err().part, "foo");
        assert_eq!(parse("@reboot").unwrap_err().part, "@reboot");
    }
}
