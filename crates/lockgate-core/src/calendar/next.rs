//! The next elapse of a [`CalendarSpec`], computed the way systemd computes it.
//!
//! The search walks the broken-down time from the year down to the second. At each field it
//! moves to the smallest allowed value not below the current one. If there is none, it bumps
//! the next larger field and starts over; if the result does not exist as written (the 31st
//! of a 30-day month, a local time in a DST gap), it starts over from where normalising puts
//! it. Every step goes through [`Clock::mktime`], so times in a spring-forward gap are skipped
//! and a repeated hour is visited as systemd visits it.
//!
//! Invariants: the search ends: it finds a time, or the year passes 2199 (no next elapse), or
//! after 1000 restarts it gives up as systemd does. Restarts normally move forward; the limit
//! matters only where systemd's arithmetic cycles (a month repetition past December landing
//! on January 1st in daylight-saving time), and there both report an error.

use super::clock::{Clock, Tm};
use super::spec::{CalendarSpec, Chain, ALL_WEEKDAYS, USEC};

/// systemd's limit on restarts of the search.
const MAX_ITERATIONS: usize = 1000;
/// Last year systemd's calendar code considers.
const MAX_YEAR: i64 = 2199;
/// Largest input systemd accepts (9999-12-30 23:59:59.999999 UTC), in microseconds.
const MAX_USEC: i64 = 253_402_214_399_999_999;

/// Why there is no next elapse to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The search gave up after `MAX_ITERATIONS` restarts.
    Stuck,
    /// The start time or the result is outside what the arithmetic supports.
    OutOfRange,
}

/// The first elapse of `spec` strictly after `usec` (microseconds since the epoch), with
/// wall-clock times read in `clock`'s zone; `Ok(None)` if it never elapses again.
pub(crate) fn next_usec(
    spec: &CalendarSpec,
    clock: &mut Clock<'_>,
    usec: i64,
) -> Result<Option<i64>, Failure> {
    if !(0..=MAX_USEC).contains(&usec) {
        return Err(Failure::OutOfRange);
    }
    let usec = usec + 1;
    let mut tm = clock.localtime(usec / USEC).ok_or(Failure::OutOfRange)?;
    let mut tm_usec = usec % USEC;
    if !find_next(spec, clock, &mut tm, &mut tm_usec)? {
        return Ok(None);
    }
    let t = clock.mktime(&mut tm).ok_or(Failure::OutOfRange)?;
    Ok(Some(t * USEC + tm_usec))
}

/// Outcome of matching one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    /// The current value is allowed.
    Same,
    /// Moved to a larger allowed value.
    Moved,
    /// No allowed value at or after the current one.
    None,
}

/// Zeroes the fields below `level` (0 = month and below, 1 = day, 2 = hour, 3 = minute,
/// 4 = second), as systemd does after moving a field.
fn reset_below(c: &mut Tm, usec: &mut i64, level: u8) {
    if level == 0 {
        c.mon = 0;
    }
    if level <= 1 {
        c.mday = 1;
    }
    if level <= 2 {
        c.hour = 0;
    }
    if level <= 3 {
        c.min = 0;
    }
    c.sec = 0;
    *usec = 0;
}

/// systemd's `find_next`: moves `tm`/`usec` to the first allowed time at or after them.
/// `Ok(false)` if there is none.
fn find_next(
    spec: &CalendarSpec,
    clock: &mut Clock<'_>,
    tm: &mut Tm,
    usec: &mut i64,
) -> Result<bool, Failure> {
    let mut c = *tm;
    let mut c_usec = *usec;
    for _ in 0..MAX_ITERATIONS {
        let _ = clock.mktime(&mut c);
        c.isdst = -1;

        let mut year = c.year;
        let r = find_matching(&spec.year, false, clock, &c, &mut year);
        c.year = year;
        match r {
            Match::None => return Ok(false),
            Match::Moved => reset_below(&mut c, &mut c_usec, 0),
            Match::Same => {}
        }
        if within_bounds(&mut c, clock) != Bounds::Within {
            return Ok(false);
        }

        let mut month = c.mon + 1;
        let r = find_matching(&spec.month, false, clock, &c, &mut month);
        c.mon = month - 1;
        if r == Match::Moved {
            reset_below(&mut c, &mut c_usec, 1);
        }
        match bump_or_retry(r, &mut c, clock) {
            Step::Bump => {
                c.year += 1;
                reset_below(&mut c, &mut c_usec, 0);
                continue;
            }
            Step::Retry => continue,
            Step::Next => {}
        }

        let mut mday = c.mday;
        let r = find_matching(&spec.day, spec.end_of_month, clock, &c, &mut mday);
        c.mday = mday;
        if r == Match::Moved {
            reset_below(&mut c, &mut c_usec, 2);
        }
        match bump_or_retry(r, &mut c, clock) {
            Step::Bump => {
                c.mon += 1;
                reset_below(&mut c, &mut c_usec, 1);
                continue;
            }
            Step::Retry => continue,
            Step::Next => {}
        }

        if !matches_weekday(spec.weekdays, &c, clock) {
            c.mday += 1;
            reset_below(&mut c, &mut c_usec, 2);
            continue;
        }

        if !match_time(spec, clock, &mut c, &mut c_usec) {
            continue;
        }
        *tm = c;
        *usec = c_usec;
        return Ok(true);
    }
    Err(Failure::Stuck)
}

/// The hour, minute and second steps of `find_next`; `false` if it must start over (with
/// `c` already bumped).
fn match_time(spec: &CalendarSpec, clock: &mut Clock<'_>, c: &mut Tm, c_usec: &mut i64) -> bool {
    let mut hour = c.hour;
    let r = find_matching(&spec.hour, false, clock, c, &mut hour);
    c.hour = hour;
    if r == Match::Moved {
        reset_below(c, c_usec, 3);
    }
    match bump_or_retry(r, c, clock) {
        Step::Bump => {
            c.mday += 1;
            reset_below(c, c_usec, 2);
            return false;
        }
        Step::Retry => return false,
        Step::Next => {}
    }

    let mut min = c.min;
    let r = find_matching(&spec.minute, false, clock, c, &mut min);
    c.min = min;
    if r == Match::Moved {
        reset_below(c, c_usec, 4);
    }
    match bump_or_retry(r, c, clock) {
        Step::Bump => {
            c.hour += 1;
            reset_below(c, c_usec, 3);
            return false;
        }
        Step::Retry => return false,
        Step::Next => {}
    }

    let mut sec = c.sec * USEC + *c_usec;
    let r = find_matching(&spec.second, false, clock, c, &mut sec);
    *c_usec = sec % USEC;
    c.sec = sec / USEC;
    match bump_or_retry(r, c, clock) {
        Step::Bump => {
            c.min += 1;
            reset_below(c, c_usec, 4);
            return false;
        }
        Step::Retry => return false,
        Step::Next => {}
    }
    true
}

/// systemd's `find_matching_component`: the smallest value allowed by `chain` that is at
/// least `*val`. For an end-of-month day chain, values count back from the month's end.
fn find_matching(
    chain: &Chain,
    end_of_month: bool,
    clock: &mut Clock<'_>,
    tm: &Tm,
    val: &mut i64,
) -> Match {
    if chain.is_empty() {
        return Match::Same;
    }
    let mut best: Option<i64> = None;
    for item in chain {
        let (mut start, mut stop) = (item.start, item.stop.unwrap_or(-1));
        if end_of_month {
            start = end_of_month_day(clock, tm, item.start);
            stop = end_of_month_day(clock, tm, stop);
            if stop > 0 {
                (start, stop) = (stop, start);
            }
        }
        let candidate = if start >= *val {
            Some(start)
        } else if item.repeat > 0 {
            let steps = (*val - start + item.repeat - 1).div_euclid(item.repeat);
            let k = start + steps * item.repeat;
            (stop < 0 || k <= stop).then_some(k)
        } else {
            None
        };
        if let Some(k) = candidate {
            best = Some(best.map_or(k, |b| b.min(k)));
        }
    }
    match best {
        None => Match::None,
        Some(d) if d == *val => Match::Same,
        Some(d) => {
            *val = d;
            Match::Moved
        }
    }
}

/// systemd's `find_end_of_month`: the day `back` days before the last of `tm`'s month
/// (`back` = 0 is the last day), or -1.
fn end_of_month_day(clock: &mut Clock<'_>, tm: &Tm, back: i64) -> i64 {
    let mut t = Tm {
        mon: tm.mon + 1,
        mday: 1 - back,
        ..*tm
    };
    if clock.mktime(&mut t).is_none() || t.mon != tm.mon {
        return -1;
    }
    t.mday
}

/// Result of checking that a broken-down time exists as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bounds {
    /// It exists unchanged.
    Within,
    /// It does not exist; it was moved forward to where normalising puts it.
    Moved,
    /// It is past the last supported year, cannot be converted, or normalises backwards.
    Outside,
}

/// What `find_next` does after matching a field.
enum Step {
    /// Bump the next larger field and start over.
    Bump,
    /// Start over from the normalised time.
    Retry,
    /// Go on with the next smaller field.
    Next,
}

fn bump_or_retry(r: Match, c: &mut Tm, clock: &mut Clock<'_>) -> Step {
    if r == Match::None {
        return Step::Bump;
    }
    match within_bounds(c, clock) {
        Bounds::Outside => Step::Bump,
        Bounds::Moved => Step::Retry,
        Bounds::Within => Step::Next,
    }
}

/// systemd's `tm_within_bounds`: whether `tm` exists as written. A time that normalises
/// forward (the 31st of April, 02:30 in a spring-forward gap) is replaced by the normalised
/// time with the field below the first changed one reset, so no earlier match is skipped.
fn within_bounds(tm: &mut Tm, clock: &mut Clock<'_>) -> Bounds {
    if tm.year > MAX_YEAR {
        return Bounds::Outside;
    }
    let mut t = *tm;
    if clock.mktime(&mut t).is_none() {
        return Bounds::Outside;
    }
    let order = if t.year != tm.year {
        t.mon = 0;
        t.year.cmp(&tm.year)
    } else if t.mon != tm.mon {
        t.mday = 1;
        t.mon.cmp(&tm.mon)
    } else if t.mday != tm.mday {
        t.hour = 0;
        t.mday.cmp(&tm.mday)
    } else if t.hour != tm.hour {
        t.min = 0;
        t.hour.cmp(&tm.hour)
    } else if t.min != tm.min {
        t.sec = 0;
        t.min.cmp(&tm.min)
    } else {
        t.sec.cmp(&tm.sec)
    };
    match order {
        std::cmp::Ordering::Less => Bounds::Outside,
        std::cmp::Ordering::Equal => Bounds::Within,
        std::cmp::Ordering::Greater => {
            *tm = t;
            Bounds::Moved
        }
    }
}

/// systemd's `matches_weekday`.
fn matches_weekday(bits: u8, tm: &Tm, clock: &mut Clock<'_>) -> bool {
    if bits == ALL_WEEKDAYS {
        return true;
    }
    let mut t = *tm;
    if clock.mktime(&mut t).is_none() {
        return false;
    }
    let monday_based = (t.wday + 6) % 7;
    bits & (1 << monday_based) != 0
}
