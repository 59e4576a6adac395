//! Broken-down time and the C library's `mktime`, as systemd's calendar code relies on them.
//!
//! systemd computes the next elapse with `struct tm` arithmetic: it pushes a field past its
//! range (minute 60, day 32) and lets `mktime` normalise it, and it recognises a local time
//! that does not exist (the spring-forward gap) by `mktime` changing the fields. To produce
//! the times `systemd-analyze calendar` prints, [`Clock`] behaves like glibc's `mktime`:
//!
//! - An out-of-range field carries into the next one (`01:60` is `02:00`).
//! - A local time in a gap resolves to an instant the gap's size away from it, preferring the
//!   daylight-saving side when the caller did not ask for one (`02:30` on the spring-forward
//!   day in Berlin is `03:30 CEST`); the returned fields then differ from the requested ones.
//! - A local time that occurs twice (fall back) resolves through the offset of the previous
//!   call, which `Clock` keeps in `guess` just as glibc keeps it in a static variable. An
//!   explicit `isdst` (as `localtime` returns it) picks the matching occurrence.
//!
//! Invariants: all arithmetic is on `i64` seconds from the Unix epoch, so field values within
//! a few thousand years cannot overflow; `Clock` reads nothing but the time zone it was given.

use jiff::tz::TimeZone;

/// Seconds in a day.
const DAY: i64 = 86_400;

/// Broken-down time as `struct tm` holds it: `mon` counts from 0, `year` is the full year.
/// Fields may be out of range until [`Clock::mktime`] normalises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tm {
    pub year: i64,
    pub mon: i64,
    pub mday: i64,
    pub hour: i64,
    pub min: i64,
    pub sec: i64,
    /// 1 in daylight-saving time, 0 outside it, -1 "let `mktime` decide".
    pub isdst: i8,
    /// Day of the week, 0 = Sunday; only meaningful after normalisation.
    pub wday: i64,
}

impl Tm {
    /// Seconds since the epoch of these fields read as UTC, carrying out-of-range values.
    fn as_utc_seconds(&self) -> i64 {
        let year = self.year + self.mon.div_euclid(12);
        let days = days_from_civil(year, self.mon.rem_euclid(12) + 1, 1) + self.mday - 1;
        days * DAY + self.hour * 3600 + self.min * 60 + self.sec
    }

    /// The normalised fields of `secs` seconds since the epoch read as UTC.
    fn from_utc_seconds(secs: i64, isdst: bool) -> Tm {
        let days = secs.div_euclid(DAY);
        let rem = secs.rem_euclid(DAY);
        let (year, month, mday) = civil_from_days(days);
        Tm {
            year,
            mon: month - 1,
            mday,
            hour: rem / 3600,
            min: rem / 60 % 60,
            sec: rem % 60,
            isdst: i8::from(isdst),
            wday: (days + 4).rem_euclid(7),
        }
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (`month` 1..=12).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date (`year`, `month` 1..=12, `day`) of a day count from 1970.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Converts between instants and broken-down time in one zone, remembering the offset of
/// the last conversion the way glibc's `mktime` does.
pub(crate) struct Clock<'a> {
    /// `None`: UTC arithmetic (`timegm`/`gmtime`), no daylight-saving time.
    zone: Option<&'a TimeZone>,
    /// glibc's guess for the next call: the last result minus its local seconds.
    guess: i64,
}

/// Distance between probes when looking for a time with the requested `isdst` (glibc's value).
const ISDST_STRIDE: i64 = 601_200;
/// How far to look in each direction for such a time (glibc's value).
const ISDST_BOUND: i64 = 536_454_000 / 2 + ISDST_STRIDE;

impl<'a> Clock<'a> {
    /// A clock in `zone`, or in plain UTC arithmetic for `None`, with a fresh guess.
    pub fn new(zone: Option<&'a TimeZone>) -> Clock<'a> {
        Clock { zone, guess: 0 }
    }

    /// UTC offset in seconds and daylight-saving flag at `t` seconds since the epoch.
    fn offset(&self, t: i64) -> Option<(i64, bool)> {
        let Some(zone) = self.zone else {
            return Some((0, false));
        };
        let ts = jiff::Timestamp::from_second(t).ok()?;
        let info = zone.to_offset_info(ts);
        Some((i64::from(info.offset().seconds()), info.dst().is_dst()))
    }

    /// `localtime_r` (or `gmtime_r` for UTC): the broken-down time of `t`.
    pub fn localtime(&self, t: i64) -> Option<Tm> {
        let (off, dst) = self.offset(t)?;
        Some(Tm::from_utc_seconds(t + off, dst))
    }

    /// `mktime` (or `timegm` for UTC): the instant of `tm`, normalising `tm` in place to the
    /// fields of that instant. `None` (and `tm` untouched) where glibc returns -1.
    pub fn mktime(&mut self, tm: &mut Tm) -> Option<i64> {
        if self.zone.is_none() {
            let t = tm.as_utc_seconds();
            *tm = Tm::from_utc_seconds(t, false);
            return Some(t);
        }
        // Like glibc, probe with the seconds clamped to 0..=59 and add the rest at the end.
        let sec_clamped = tm.sec.clamp(0, 59);
        let local = Tm {
            sec: sec_clamped,
            ..*tm
        }
        .as_utc_seconds();
        let t = self.probe(local, tm.isdst)?;
        self.guess = t - local;
        let t = t + (tm.sec - sec_clamped);
        *tm = self.localtime(t)?;
        Some(t)
    }

    /// glibc's search for the instant whose local time is `local` (as UTC seconds).
    fn probe(&self, local: i64, isdst: i8) -> Option<i64> {
        let mut t = local + self.guess;
        let (mut t1, mut t2) = (t, t);
        let mut prev_dst = false;
        let mut remaining = 6;
        loop {
            let (off, dst) = self.offset(t)?;
            let dt = local - (t + off);
            if dt == 0 {
                return self.match_isdst(t, local, isdst, dst);
            }
            // Oscillating between two instants: `local` is in a gap. Stop at the instant whose
            // `isdst` differs from the one asked for, or (none asked for) a DST one.
            let settle = if isdst < 0 {
                !prev_dst || dst
            } else {
                (isdst != 0) != dst
            };
            if t == t1 && t != t2 && settle {
                return Some(t);
            }
            remaining -= 1;
            if remaining == 0 {
                return None;
            }
            (t1, t2, t, prev_dst) = (t2, t, t + dt, dst);
        }
    }

    /// `t` matches `local`; if its `isdst` is not the one asked for, use the offset of a
    /// nearby instant that has it (this picks the other occurrence of a repeated hour).
    fn match_isdst(&self, t: i64, local: i64, isdst: i8, dst: bool) -> Option<i64> {
        if isdst < 0 || (isdst != 0) == dst {
            return Some(t);
        }
        let mut delta = ISDST_STRIDE;
        while delta < ISDST_BOUND {
            for other in [t - delta, t + delta] {
                let (off, other_dst) = self.offset(other)?;
                if other_dst == (isdst != 0) {
                    return Some(local - off);
                }
            }
            delta += ISDST_STRIDE;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tm(year: i64, mon1: i64, mday: i64, hour: i64, min: i64, isdst: i8) -> Tm {
        Tm {
            year,
            mon: mon1 - 1,
            mday,
            hour,
            min,
            sec: 0,
            isdst,
            wday: 0,
        }
    }

    #[test]
    fn civil_round_trip() {
        for days in [-800_000, -1, 0, 1, 11_016, 19_783, 84_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn utc_carries_overflowing_fields() {
        let mut c = Clock::new(None);
        let mut t = tm(2024, 12, 31, 23, 60, -1);
        assert_eq!(c.mktime(&mut t), Some(1_735_689_600));
        assert_eq!(
            (t.year, t.mon, t.mday, t.hour, t.min, t.wday),
            (2025, 0, 1, 0, 0, 3)
        );
    }

    #[test]
    fn berlin_gap_resolves_to_dst_side_like_glibc() {
        let zone = crate::calendar::zone_db().get("Europe/Berlin").unwrap();
        let mut c = Clock::new(Some(&zone));
        let mut t = tm(2024, 3, 31, 2, 30, -1);
        assert_eq!(c.mktime(&mut t), Some(1_711_848_600));
        assert_eq!((t.hour, t.isdst), (3, 1));
        let mut t = tm(2024, 3, 31, 2, 30, 1);
        assert_eq!(c.mktime(&mut t), Some(1_711_845_000));
        assert_eq!((t.hour, t.isdst), (1, 0));
    }

    #[test]
    fn berlin_fold_follows_previous_offset_or_isdst() {
        let zone = crate::calendar::zone_db().get("Europe/Berlin").unwrap();
        let mut c = Clock::new(Some(&zone));
        assert_eq!(
            c.mktime(&mut tm(2024, 10, 27, 2, 30, -1)),
            Some(1_729_992_600)
        );
        c.mktime(&mut tm(2024, 7, 1, 0, 0, -1));
        assert_eq!(
            c.mktime(&mut tm(2024, 10, 27, 2, 30, -1)),
            Some(1_729_989_000)
        );
        assert_eq!(
            c.mktime(&mut tm(2024, 10, 27, 2, 30, 0)),
            Some(1_729_992_600)
        );
        assert_eq!(
            c.mktime(&mut tm(2024, 10, 27, 2, 30, 1)),
            Some(1_729_989_000)
        );
    }

    #[test]
    fn moscow_gap_without_dst_flag_change_follows_guess() {
        let zone = crate::calendar::zone_db().get("Europe/Moscow").unwrap();
        let mut c = Clock::new(Some(&zone));
        assert_eq!(
            c.mktime(&mut tm(2011, 3, 27, 2, 30, -1)),
            Some(1_301_178_600)
        );
        assert_eq!(c.mktime(&mut tm(2011, 3, 27, 2, 30, 0)), None);
    }
}
