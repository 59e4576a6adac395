//! Parser for systemd calendar events (systemd.time(7), as PBS uses them):
//! `[WEEKDAY] [[YEARS-]MONTHS-DAYS] [HOURS:MINUTES[:SECONDS]] [ZONE]`, or a keyword.
//!
//! Invariants: it accepts what systemd 252 accepts and nothing more (the table test compares
//! it with `systemd-analyze`), and every error names the text the user must change. The
//! grammar is systemd's, written anew here from its documentation and observed behaviour:
//! weekday names and ranges (`mon..fri`, `mon-fri`, `sat,sun`), then an optional date whose
//! two parts are month and day and three parts year, month and day (`~` instead of the last
//! `-` counts days back from the month's end), then an optional time; each date or time field
//! is `*` or a comma list of `N`, `N..M`, `N/R`, `N..M/R`.

use super::clock::Clock;
use super::spec::{
    finish_item, CalendarSpec, Chain, Field, Item, RawItem, ZoneSpec, ALL_WEEKDAYS, USEC,
};
use super::{find_zone, zone_db, CalendarError};

/// Weekday names as systemd matches them: the long name is tried before its prefix.
const WEEKDAYS: [(&str, u8); 14] = [
    ("monday", 0),
    ("mon", 0),
    ("tuesday", 1),
    ("tue", 1),
    ("wednesday", 2),
    ("wed", 2),
    ("thursday", 3),
    ("thu", 3),
    ("friday", 4),
    ("fri", 4),
    ("saturday", 5),
    ("sat", 5),
    ("sunday", 6),
    ("sun", 6),
];

const FORM: &str = "the form is [WEEKDAY] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]] [ZONE], e.g. \"mon..fri *-*-* 02:00\"";

/// Parses a calendar event, with its optional trailing zone.
///
/// # Errors
/// The offending part of `text` and what was expected there.
pub(crate) fn parse(text: &str) -> Result<CalendarSpec, CalendarError> {
    let (body, zone) = split_zone(text);
    match parse_body(body) {
        Ok(mut spec) => {
            if spec.zone == ZoneSpec::Local {
                spec.zone = zone;
            }
            Ok(spec)
        }
        Err(e) if zone == ZoneSpec::Local => Err(zone_error(text).unwrap_or(e)),
        Err(e) => Err(e),
    }
}

/// Strips a trailing ` UTC` (any case) or ` ZONE` naming a zone of the bundled database.
fn split_zone(text: &str) -> (&str, ZoneSpec) {
    let bytes = text.as_bytes();
    if bytes.len() >= 4 && bytes[bytes.len() - 4..].eq_ignore_ascii_case(b" UTC") {
        return (&text[..text.len() - 4], ZoneSpec::Utc);
    }
    match text.rfind(' ') {
        Some(i) if find_zone(&text[i + 1..]).is_some() => {
            (&text[..i], ZoneSpec::Named(text[i + 1..].to_owned()))
        }
        _ => (text, ZoneSpec::Local),
    }
}

/// If `text` failed because its last word is meant as a zone but is not one, that error.
fn zone_error(text: &str) -> Option<CalendarError> {
    let (head, word) = text.rsplit_once(' ')?;
    let zone_like = word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_+-".contains(c))
        && !word.contains("..")
        && CalendarSpec::keyword(word).is_none()
        && weekday_prefix(word).is_none();
    if !zone_like || (!word.contains('/') && parse_body(head).is_err()) {
        return None;
    }
    let hint = match zone_db()
        .get(word)
        .ok()
        .and_then(|z| z.iana_name().map(str::to_owned))
    {
        Some(name) => format!("; zone names are case-sensitive: did you mean {name}?"),
        None => ", or UTC".to_owned(),
    };
    Some(CalendarError::new(
        word,
        format!("unknown time zone; expected an IANA zone name such as Europe/Vienna{hint}"),
    ))
}

/// The weekday name at the start of `s` (case-insensitive) and its length.
fn weekday_prefix(s: &str) -> Option<(usize, u8)> {
    WEEKDAYS.iter().find_map(|&(name, nr)| {
        let head = s.get(..name.len())?;
        head.eq_ignore_ascii_case(name).then_some((name.len(), nr))
    })
}

fn parse_body(body: &str) -> Result<CalendarSpec, CalendarError> {
    if body.is_empty() {
        return Err(CalendarError::new(
            body,
            format!("empty calendar event; {FORM}"),
        ));
    }
    if let Some(spec) = CalendarSpec::keyword(body) {
        return Ok(spec);
    }
    // As systemd reads it: blanks may end the weekdays or the date (`Wed `, `2003-03-05 `
    // mean midnight), never lead the text or follow a time or a keyword.
    if body.starts_with(' ') {
        return Err(CalendarError::new(body, "remove the leading space"));
    }
    let mut p = Parser { text: body, pos: 0 };
    let mut spec = CalendarSpec {
        weekdays: p.weekdays()?,
        ..CalendarSpec::any()
    };
    if !p.date(&mut spec)? {
        p.time(&mut spec)?;
    }
    if p.pos < body.len() {
        return Err(CalendarError::new(
            &body[p.pos..],
            format!("unexpected text; {FORM}"),
        ));
    }
    Ok(spec)
}

/// A field's list before validation: `*` or items with their text.
enum RawChain {
    Star,
    Items(Vec<RawItem>),
}

/// Cursor over the body of a calendar event (zone already removed).
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// The word starting at `at`, up to the next separator (at least one character).
    fn word(&self, at: usize) -> &'a str {
        let rest = &self.text[at..];
        let end = rest
            .find([' ', ',', '.', '-', ':', '~', '/'])
            .unwrap_or(rest.len());
        let end = if end == 0 {
            rest.chars().next().map_or(0, char::len_utf8)
        } else {
            end
        };
        &rest[..end]
    }

    /// The error for text left after the time's `what`: blanks there are refused as systemd
    /// refuses them (they may end the weekdays or the date only).
    fn after_time(&self, what: &str) -> CalendarError {
        if self.rest().bytes().all(|b| b == b' ') {
            let msg =
                "remove the trailing space (systemd allows one only after a weekday or a date)";
            return CalendarError::new(self.text, msg);
        }
        CalendarError::new(self.rest(), format!("unexpected text after the {what}"))
    }

    fn fail<T>(&self, at: usize, message: &str) -> Result<T, CalendarError> {
        Err(CalendarError::new(self.word(at), message))
    }

    /// `[WEEKDAY]`: names, `,` lists and `..`/`-` ranges; all days if there are none.
    fn weekdays(&mut self) -> Result<u8, CalendarError> {
        const EXPECTED: &str = "expected a weekday name: mon..sun or monday..sunday";
        let mut bits = 0u8;
        let mut range_from: Option<(u8, usize)> = None;
        let mut first = true;
        loop {
            let at = self.pos;
            let Some((len, nr)) = weekday_prefix(self.rest()) else {
                return if first {
                    Ok(ALL_WEEKDAYS)
                } else {
                    self.fail(at, EXPECTED)
                };
            };
            if !matches!(
                self.text.as_bytes().get(at + len),
                None | Some(b'-' | b'.' | b',' | b' ')
            ) {
                return self.fail(at, EXPECTED);
            }
            bits |= 1 << nr;
            if let Some((from, from_at)) = range_from {
                if from > nr {
                    let part = &self.text[from_at..at + len];
                    let msg = "a weekday range runs from Monday towards Sunday (mon..fri, fri..sun); list wrapping days instead (sat,sun,mon)";
                    return Err(CalendarError::new(part, msg));
                }
                (from + 1..nr).for_each(|d| bits |= 1 << d);
            }
            self.pos += len;
            match self.peek() {
                None => return Ok(bits),
                Some(b' ') => {
                    self.skip_spaces();
                    return Ok(bits);
                }
                Some(sep @ (b'.' | b'-')) => {
                    let two = sep == b'.';
                    if range_from.is_some() || (two && !self.rest().starts_with("..")) {
                        return self
                            .fail(self.pos, "expected \"..\" between two weekdays, or \",\"");
                    }
                    range_from = Some((nr, at));
                    self.pos += if two { 2 } else { 1 };
                }
                _ => {
                    range_from = None;
                    self.pos += 1;
                }
            }
            if matches!(self.peek(), None | Some(b' ')) {
                if range_from.is_some() {
                    return self.fail(at, "weekday range has no end; write e.g. mon..fri");
                }
                self.skip_spaces();
                return Ok(bits);
            }
            first = false;
        }
    }

    /// `[[YEARS-]MONTHS-DAYS]` or `@SECONDS`. Returns `true` for a timestamp (no time follows).
    fn date(&mut self, spec: &mut CalendarSpec) -> Result<bool, CalendarError> {
        match self.peek() {
            None => return Ok(false),
            Some(b'@') => return self.timestamp(spec).map(|()| true),
            _ => {}
        }
        if weekday_prefix(self.rest()).is_some() {
            return self.fail(
                self.pos,
                "separate weekdays with \",\" (mon,wed), not a space",
            );
        }
        if self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            let msg = "expected a weekday (mon..sun), a date (*-*-01), a time (03:30) or a keyword (daily, weekly, ...)";
            return self.fail(self.pos, msg);
        }
        let start = self.pos;
        let first = self.chain(false)?;
        let mut eom = false;
        match self.peek() {
            None | Some(b':') => {
                self.pos = start;
                return Ok(false);
            }
            Some(b'~') => eom = true,
            Some(b'-') => {}
            _ => {
                return self.fail(
                    self.pos,
                    "expected \"-\" between date fields or \":\" after the hour",
                )
            }
        }
        self.pos += 1;
        let second = self.chain(false)?;
        if matches!(self.peek(), None | Some(b' ')) {
            self.skip_spaces();
            spec.month = finish(first, Field::Month, false)?;
            (spec.day, spec.end_of_month) = (finish(second, Field::Day, eom)?, eom);
            return Ok(false);
        }
        match self.peek() {
            _ if eom => return self.fail(self.pos, "only the day may follow \"~\" (e.g. *-02~1)"),
            Some(b'~') => eom = true,
            Some(b'-') => {}
            _ => return self.fail(self.pos, "expected \"-\" between date fields"),
        }
        self.pos += 1;
        let third = self.chain(false)?;
        if !matches!(self.peek(), None | Some(b' ')) {
            return self.fail(self.pos, "expected a space after the date");
        }
        self.skip_spaces();
        spec.year = finish(first, Field::Year, false)?;
        spec.month = finish(second, Field::Month, false)?;
        (spec.day, spec.end_of_month) = (finish(third, Field::Day, eom)?, eom);
        Ok(false)
    }

    /// `@SECONDS`: one instant, in UTC whatever zone follows (as in systemd).
    fn timestamp(&mut self, spec: &mut CalendarSpec) -> Result<(), CalendarError> {
        let digits = &self.rest()[1..];
        let secs: i64 = match digits.parse() {
            Ok(s) if digits.bytes().all(|b| b.is_ascii_digit()) => s,
            _ => {
                return Err(CalendarError::new(
                    self.rest(),
                    "expected whole seconds since 1970 after \"@\"",
                ))
            }
        };
        let text = self.rest();
        let date = Clock::new(None)
            .localtime(secs)
            .filter(|d| d.year <= Field::Year.bounds().1);
        let Some(date) = date else {
            return Err(CalendarError::new(text, "timestamp is after 2199"));
        };
        spec.year = vec![Item::single(date.year)];
        spec.month = vec![Item::single(date.mon + 1)];
        spec.day = vec![Item::single(date.mday)];
        spec.hour = vec![Item::single(date.hour)];
        spec.minute = vec![Item::single(date.min)];
        spec.second = vec![Item::single(date.sec * USEC)];
        spec.zone = ZoneSpec::Utc;
        self.pos = self.text.len();
        Ok(())
    }

    /// `[HOURS:MINUTES[:SECONDS]]`; midnight if absent, second 0 if not given.
    fn time(&mut self, spec: &mut CalendarSpec) -> Result<(), CalendarError> {
        let zero = || vec![Item::single(0)];
        if self.peek().is_none() {
            (spec.hour, spec.minute, spec.second) = (zero(), zero(), zero());
            return Ok(());
        }
        let hour_at = self.pos;
        let hour = self.chain(false)?;
        if self.peek() != Some(b':') {
            let at = if self.peek().is_none() {
                hour_at
            } else {
                self.pos
            };
            return self.fail(
                at,
                "expected \":\" and the minutes after the hour (e.g. 03:30)",
            );
        }
        self.pos += 1;
        let minute = self.chain(false)?;
        let second = match self.peek() {
            None => None,
            Some(b':') => {
                self.pos += 1;
                let s = self.chain(true)?;
                if self.peek().is_some() {
                    return Err(self.after_time("seconds"));
                }
                Some(s)
            }
            Some(_) => return Err(self.after_time("minutes")),
        };
        spec.hour = finish(hour, Field::Hour, false)?;
        spec.minute = finish(minute, Field::Minute, false)?;
        spec.second = match second {
            Some(s) => finish(s, Field::Second, false)?,
            None => zero(),
        };
        Ok(())
    }

    /// `*` or a comma list of items.
    fn chain(&mut self, usec: bool) -> Result<RawChain, CalendarError> {
        if self.peek() == Some(b'*') {
            self.pos += 1;
            if self.peek() == Some(b'/') {
                let msg = "\"*\" takes no repetition; give a start value instead (0/15 for minutes, 1/2 for days)";
                return Err(CalendarError::new(self.word_after_star(), msg));
            }
            return Ok(RawChain::Star);
        }
        let mut items = vec![self.item(usec)?];
        while self.peek() == Some(b',') {
            self.pos += 1;
            items.push(self.item(usec)?);
        }
        Ok(RawChain::Items(items))
    }

    /// `*/N` as one part for the message about it.
    fn word_after_star(&self) -> &'a str {
        let rest = &self.text[self.pos - 1..];
        let end = rest.find([' ', ',', ':', '-', '~']).unwrap_or(rest.len());
        &rest[..end]
    }

    /// `N`, `N..M`, `N/R` or `N..M/R`.
    fn item(&mut self, usec: bool) -> Result<RawItem, CalendarError> {
        let at = self.pos;
        let start = self.decimal(usec)?;
        let mut stop = None;
        let mut repeat = 0;
        if self.rest().starts_with("..") {
            self.pos += 2;
            stop = Some(self.decimal(usec)?);
            repeat = if usec { USEC } else { 1 };
        }
        if self.peek() == Some(b'/') {
            self.pos += 1;
            repeat = self.decimal(usec)?;
            if repeat == 0 {
                let text = &self.text[at..self.pos];
                return Err(CalendarError::new(
                    text,
                    "repetition 0: a repetition must be at least 1",
                ));
            }
        } else if usec && stop.is_some_and(|s| start + repeat > s) {
            let text = &self.text[at..self.pos];
            return Err(CalendarError::new(
                text,
                "a range of seconds must span at least one second",
            ));
        }
        if !matches!(self.peek(), None | Some(b' ' | b',' | b'-' | b'~' | b':')) {
            return self.fail(
                self.pos,
                "expected \",\" \"..\" \"/\" or the next field after a number",
            );
        }
        let text = self.text[at..self.pos].to_owned();
        Ok(RawItem {
            item: Item {
                start,
                stop,
                repeat,
            },
            text,
        })
    }

    /// A whole number; for seconds (`usec`) also a fraction, in microseconds.
    fn decimal(&mut self, usec: bool) -> Result<i64, CalendarError> {
        let at = self.pos;
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return self.fail(
                at,
                "expected a number, a range such as 8..17, a repetition such as 0/15, or *",
            );
        }
        self.pos += digits;
        let mut value = self.text[at..self.pos].parse::<i64>().unwrap_or(i64::MAX);
        if usec {
            value = value.saturating_mul(USEC);
            if self.peek() == Some(b'.') && !self.rest().starts_with("..") {
                self.pos += 1;
                value = value.saturating_add(self.fraction(at)?);
            }
        }
        if value > i64::from(i32::MAX) {
            return Err(CalendarError::new(
                &self.text[at..self.pos],
                "number is too large",
            ));
        }
        Ok(value)
    }

    /// Digits after a decimal point as microseconds, rounded at the seventh digit.
    fn fraction(&mut self, at: usize) -> Result<i64, CalendarError> {
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return self.fail(at, "expected digits after the decimal point");
        }
        let frac = &self.rest()[..digits];
        let mut value = 0i64;
        for b in frac.bytes().chain(std::iter::repeat(b'0')).take(6) {
            value = value * 10 + i64::from(b - b'0');
        }
        if frac.as_bytes().get(6).is_some_and(|&b| b >= b'5') {
            value += 1;
        }
        self.pos += digits;
        Ok(value)
    }
}

/// Validates a parsed list for `field`; `*` becomes the empty (any) chain, or every whole
/// second for the seconds field.
fn finish(raw: RawChain, field: Field, eom: bool) -> Result<Chain, CalendarError> {
    match raw {
        RawChain::Star if field == Field::Second => Ok(vec![Item {
            start: 0,
            stop: None,
            repeat: USEC,
        }]),
        RawChain::Star => Ok(Chain::new()),
        RawChain::Items(items) => items
            .iter()
            .map(|raw| finish_item(raw, field, eom))
            .collect(),
    }
}
