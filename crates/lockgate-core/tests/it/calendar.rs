//! Schedules: calendar events against a table `systemd-analyze calendar` generated
//! (`tests/data/gen_calendar_table.sh`), cron lines against a hand-checked table, and the
//! parts that errors name.

use lockgate_core::calendar::{validate_expression, Schedule};
use rstest::rstest;

/// Generated once by `gen_calendar_table.sh`; compiled in, so the test needs no systemd.
const CALENDAR_TABLE: &str = include_str!("../data/calendar_table.tsv");
/// Worked out by hand (cron has no systemd equivalent).
const CRON_TABLE: &str = include_str!("../data/cron_table.tsv");

fn millis(rfc3339: &str) -> u64 {
    let ts: jiff::Timestamp = rfc3339.parse().unwrap_or_else(|e| panic!("{rfc3339}: {e}"));
    u64::try_from(ts.as_millisecond()).expect("table times are after 1970")
}

fn rfc3339(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap())
        .unwrap()
        .to_string()
}

/// The next `n` times after `base`, each searched from the one before, as the table writes
/// them ("never" ends the list early).
fn next_times(schedule: &Schedule, base: &str, zone: &str, n: usize) -> Vec<String> {
    let mut after = millis(base);
    let mut out = Vec::new();
    while out.len() < n {
        match schedule.next_after(after, zone) {
            Ok(Some(t)) => {
                assert!(t > after, "{}: {t} is not after {after}", schedule.text());
                out.push(rfc3339(t));
                after = t;
            }
            Ok(None) => {
                out.push("never".to_owned());
                break;
            }
            Err(e) => panic!("{}: {e}", schedule.text()),
        }
    }
    out
}

/// Checks every row of a `zone<TAB>base<TAB>expression<TAB>times` table; returns the rows.
fn check_table(table: &str) -> usize {
    let mut rows = 0;
    let mut diffs = Vec::new();
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let [zone, base, expr, times] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("malformed table row: {line:?}");
        };
        let want: Vec<&str> = times.split(' ').collect();
        let schedule = Schedule::parse(expr).unwrap_or_else(|e| panic!("{expr:?}: {e}"));
        let got = next_times(&schedule, base, zone, want.len());
        if got != want {
            diffs.push(format!(
                "{zone} {base} {expr:?}\n  want {}\n  got  {}",
                want.join(" "),
                got.join(" ")
            ));
        }
        rows += 1;
    }
    assert!(
        diffs.is_empty(),
        "{} of {rows} rows differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    rows
}

#[test]
fn calendar_events_match_systemd_analyze() {
    let rows = check_table(CALENDAR_TABLE);
    assert!(rows >= 60, "only {rows} rows");
}

#[test]
fn cron_lines_match_hand_checked_table() {
    let rows = check_table(CRON_TABLE);
    assert!(rows >= 20, "only {rows} rows");
}

#[rstest]
#[case::unknown_weekday("mon..xyz", "xyz", "weekday")]
#[case::hour_out_of_range("25:00", "25", "hour 25")]
#[case::zero_repetition("*:0/0", "0/0", "repetition 0")]
#[case::unknown_zone("03:30 Mars/Olympus", "Mars/Olympus", "time zone")]
#[case::zone_case("daily europe/vienna", "europe/vienna", "Europe/Vienna")]
#[case::cron_minute("61 * * * *", "61", "minute 61")]
#[case::cron_step_zero("*/0 * * * *", "*/0", "step")]
#[case::cron_backwards("0 0 * * 5-1", "5-1", "backwards")]
#[case::cron_six_fields("0 0 * * * *", "0 0 * * * *", "five fields")]
#[case::cron_reboot("@reboot", "@reboot", "shorthand")]
#[case::star_step("*/2:00", "*/2", "start value")]
#[case::weekday_wrap("fri..mon", "fri..mon", "Monday towards Sunday")]
#[case::second_60("*:*:60", "60", "second 60")]
#[case::repetition_never_fires("*:5/55", "5/55", "never repeats")]
#[case::year_after_2199("2200-01-01", "2200", "1970..2199")]
#[case::backwards_range("10..5:00", "10..5", "backwards")]
#[case::day_32("*-*-32", "32", "day 32")]
#[case::weekdays_space("mon wed", "wed", "\",\"")]
#[case::missing_minutes("8", "8", "minutes")]
#[case::trailing_space("12:00 ", "12:00 ", "space")]
#[case::space_after_keyword("daily ", "daily", "keyword")]
#[case::leading_space(" Mon", " Mon", "leading space")]
#[case::space_after_time("Mon 02:00 ", "Mon 02:00 ", "only after a weekday or a date")]
#[case::cron_weekday_backwards("0 0 * * 5-1", "5-1", "backwards")]
#[case::cron_huge_step("*/9999999999 * * * *", "*/9999999999", "step")]
#[case::empty("", "", "empty")]
fn bad_expressions_name_the_part(#[case] expr: &str, #[case] part: &str, #[case] says: &str) {
    let err = Schedule::parse(expr).expect_err(expr);
    assert_eq!(err.part, part, "{err}");
    assert!(err.message.contains(says), "{err}");
    assert_eq!(validate_expression(expr), Err(err));
}

#[test]
fn unknown_local_zone_is_named_when_needed() {
    let local = Schedule::parse("daily").unwrap();
    let err = local.next_after(0, "Mars/Olympus").unwrap_err();
    assert_eq!(err.part, "Mars/Olympus");
    let own_zone = Schedule::parse("daily UTC").unwrap();
    assert_eq!(own_zone.next_after(0, "Mars/Olympus"), Ok(Some(86_400_000)));
}

#[rstest]
#[case::event("mon..fri 02:00")]
#[case::event_zone("sat *-1..7 03:30 Europe/Vienna")]
#[case::keyword("daily")]
#[case::cron("30 2 * * 1-5")]
#[case::cron_shorthand("@weekly")]
fn text_is_the_expression_as_given(#[case] expr: &str) {
    let schedule = Schedule::parse(expr).unwrap();
    assert_eq!(schedule.text(), expr);
    assert_eq!(Schedule::parse(expr), Ok(schedule));
    assert_eq!(validate_expression(expr), Ok(()));
}

#[test]
fn next_is_strictly_after_and_millisecond_exact() {
    let every_minute = Schedule::parse("minutely").unwrap();
    let noon = millis("2024-03-30T12:00:00Z");
    assert_eq!(every_minute.next_after(noon - 1, "UTC"), Ok(Some(noon)));
    assert_eq!(
        every_minute.next_after(noon, "UTC"),
        Ok(Some(noon + 60_000))
    );
    let half_second = Schedule::parse("*:*:0.5").unwrap();
    assert_eq!(half_second.next_after(noon, "UTC"), Ok(Some(noon + 500)));
}

#[test]
fn past_dates_never_elapse() {
    let past = Schedule::parse("2015-10-21").unwrap();
    assert_eq!(
        past.next_after(millis("2024-01-01T00:00:00Z"), "UTC"),
        Ok(None)
    );
}
