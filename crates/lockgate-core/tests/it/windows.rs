//! Engine behaviour of per-value pools, time-windowed limits and maintenance windows, in
//! virtual time: numbers change at the boundary (by the engine's own timer), across
//! midnight, where windows overlap, and on a policy change inside a window.

use crate::common::*;
use lockgate_core::job::{JobSpec, JobState, Outcome};
use lockgate_core::{Engine, Timestamp};

const MIN: u64 = 60_000;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;
/// 2024-03-04T00:00:00Z, a Monday.
const MONDAY: u64 = 1_709_510_400_000;
/// Long leases and no reservation timers: these tests span hours without heartbeats, and
/// their only timers are the windows'.
const LEASES: &str = "[leases]\nttl = \"7d\"\n[queue]\nreserve_after = \"7d\"\n";

fn running(e: &Engine) -> usize {
    count(e, JobState::Running)
}

fn finish(e: &mut Engine, id: u64, now: u64) {
    let t = token(e, id);
    e.finish(id, t, Outcome::Succeeded, None, Timestamp(now))
        .unwrap();
}

fn why(e: &mut Engine, id: u64, now: u64) -> String {
    e.explain(id, Timestamp(now)).unwrap().text
}

#[test]
fn a_window_lowers_a_limit_at_its_start_and_restores_it_at_its_end() {
    let mut e = engine(&format!(
        "{LEASES}[[limit]]\nname = \"day\"\nmax = 3\nwindows = [{{ when = \"mon..fri 08:00-18:00\", max = 1 }}]\n"
    ));
    let t0 = MONDAY + 7 * HOUR;
    let ids: Vec<u64> = (0..4)
        .map(|_| submit(&mut e, spec("backup", &[]), t0))
        .collect();
    assert_eq!(running(&e), 3, "before 08:00 the limit's own 3 holds");
    assert_eq!(
        e.next_deadline(),
        Some(Timestamp(MONDAY + 8 * HOUR)),
        "the boundary is a timer"
    );
    e.handle_timeout(Timestamp(MONDAY + 8 * HOUR));
    assert_eq!(running(&e), 3, "running jobs are never stopped");
    finish(&mut e, ids[0], MONDAY + 9 * HOUR);
    assert_eq!(
        state(&e, ids[3]),
        Some(JobState::Queued),
        "2 running > 1: drains"
    );
    let text = why(&mut e, ids[3], MONDAY + 9 * HOUR);
    assert!(
        text.contains("window:day: 2/1 in window \"mon..fri 08:00-18:00\" until 2024-03-04T18:00:00Z; admits nothing until it drains"),
        "{text}"
    );
    let r = e.explain(ids[3], Timestamp(MONDAY + 9 * HOUR)).unwrap();
    assert_eq!(r.reasons[0].scope.as_deref(), Some("window:day"));
    assert_eq!(r.reasons[0].kind, "window");
    assert_eq!(e.next_deadline(), Some(Timestamp(MONDAY + 18 * HOUR)));
    e.handle_timeout(Timestamp(MONDAY + 18 * HOUR - 1));
    assert_eq!(state(&e, ids[3]), Some(JobState::Queued));
    e.handle_timeout(Timestamp(MONDAY + 18 * HOUR));
    assert_eq!(
        state(&e, ids[3]),
        Some(JobState::Running),
        "at 18:00 the 3 holds again"
    );
    e.check_invariants().unwrap();
}

#[test]
fn a_window_across_midnight_belongs_to_its_start_day_and_may_raise_the_number() {
    let mut e = engine(&format!(
        "{LEASES}[global]\nmax_running = 1\nwindows = [{{ when = \"fri 22:00-06:00\", max = 3 }}]\n"
    ));
    let fri = MONDAY + 4 * DAY;
    let ids: Vec<u64> = (0..4)
        .map(|_| submit(&mut e, spec("backup", &[]), fri + 21 * HOUR))
        .collect();
    assert_eq!(running(&e), 1);
    e.handle_timeout(Timestamp(fri + 22 * HOUR));
    assert_eq!(running(&e), 3, "the night allows 3");
    assert_eq!(
        e.next_deadline(),
        Some(Timestamp(fri + 30 * HOUR)),
        "Saturday 06:00"
    );
    for &id in &ids[..3] {
        finish(&mut e, id, fri + 29 * HOUR);
    }
    assert_eq!(
        state(&e, ids[3]),
        Some(JobState::Running),
        "Saturday 05:00 is inside"
    );
    let more: Vec<u64> = (0..3)
        .map(|_| submit(&mut e, spec("backup", &[]), fri + 30 * HOUR))
        .collect();
    assert_eq!(
        running(&e),
        1,
        "at Saturday 06:00 the 1 holds: 1 running, 3 queued"
    );
    let text = why(&mut e, more[0], fri + 30 * HOUR);
    assert!(text.contains("global: 1/1"), "outside every window: {text}");
    // Saturday night: no window (only Friday's starts), so still 1.
    e.handle_timeout(Timestamp(fri + DAY + 23 * HOUR));
    assert_eq!(running(&e), 1);
}

#[test]
fn where_windows_overlap_the_smallest_number_holds() {
    let mut e = engine(&format!(
        "{LEASES}[[limit]]\nname = \"l\"\nmax = 5\nwindows = [{{ when = \"08:00-18:00\", max = 3 }}, {{ when = \"12:00-13:00\", max = 1 }}]\n"
    ));
    let ids: Vec<u64> = (0..5)
        .map(|_| submit(&mut e, spec("backup", &[]), MONDAY + 12 * HOUR + 30 * MIN))
        .collect();
    assert_eq!(running(&e), 1);
    let text = why(&mut e, ids[1], MONDAY + 12 * HOUR + 30 * MIN);
    assert!(
        text.contains("window \"12:00-13:00\" until 2024-03-04T13:00:00Z"),
        "{text}"
    );
    e.handle_timeout(Timestamp(MONDAY + 13 * HOUR));
    assert_eq!(running(&e), 3, "13:00: only 08:00-18:00 is active");
    e.handle_timeout(Timestamp(MONDAY + 18 * HOUR));
    assert_eq!(running(&e), 5, "18:00: the limit's own 5");
    e.check_invariants().unwrap();
}

#[test]
fn a_maintenance_window_admits_nothing_it_matches_and_stops_nothing() {
    let mut e = engine(&format!(
        "{LEASES}[kinds.verify]\ntwo_stage = true\n[[maintenance]]\nname = \"ds1-fsck\"\nwhen = \"sun 02:00-04:00\"\nmatch = \"datastore=ds1\"\n"
    ));
    let sun = MONDAY + 6 * DAY;
    let a = submit(&mut e, spec("backup", &[("datastore", "ds1")]), sun + HOUR);
    assert_eq!(state(&e, a), Some(JobState::Running));
    e.handle_timeout(Timestamp(sun + 2 * HOUR));
    assert_eq!(state(&e, a), Some(JobState::Running), "running jobs go on");
    let b = submit(
        &mut e,
        spec("backup", &[("datastore", "ds1")]),
        sun + 2 * HOUR,
    );
    let prep = submit(
        &mut e,
        spec("verify", &[("datastore", "ds1")]),
        sun + 2 * HOUR,
    );
    let c = submit(
        &mut e,
        spec("backup", &[("datastore", "ds2")]),
        sun + 2 * HOUR,
    );
    assert_eq!(state(&e, b), Some(JobState::Queued));
    assert_eq!(
        state(&e, prep),
        Some(JobState::Queued),
        "prepare is held too"
    );
    assert_eq!(state(&e, c), Some(JobState::Running), "ds2 is not matched");
    let r = e.explain(b, Timestamp(sun + 2 * HOUR)).unwrap();
    assert_eq!(r.reasons[0].kind, "maintenance");
    assert_eq!(r.reasons[0].scope.as_deref(), Some("maintenance:ds1-fsck"));
    assert!(
        r.text.contains("maintenance:ds1-fsck: window \"sun 02:00-04:00\" admits nothing it matches until 2024-03-10T04:00:00Z (1 matching still running)"),
        "{}",
        r.text
    );
    finish(&mut e, a, sun + 3 * HOUR);
    assert_eq!(
        state(&e, b),
        Some(JobState::Queued),
        "freed room changes nothing"
    );
    assert_eq!(e.next_deadline(), Some(Timestamp(sun + 4 * HOUR)));
    e.handle_timeout(Timestamp(sun + 4 * HOUR));
    assert_eq!(state(&e, b), Some(JobState::Running));
    assert_eq!(state(&e, prep), Some(JobState::Preparing));
    e.check_invariants().unwrap();
}

#[test]
fn windows_are_read_in_the_engines_time_zone() {
    let mut e = engine(&format!(
        "{LEASES}[global]\nmax_running = 2\nwindows = [{{ when = \"08:00-18:00\", max = 0 }}]\n"
    ));
    assert!(e.set_time_zone("Mars/Olympus").is_err());
    e.set_time_zone("Europe/Berlin").unwrap();
    // 07:30Z is 08:30 CET: inside.
    let a = submit(&mut e, spec("backup", &[]), MONDAY + 7 * HOUR + 30 * MIN);
    assert_eq!(state(&e, a), Some(JobState::Queued));
    assert!(why(&mut e, a, MONDAY + 8 * HOUR).contains("allows 0 until 2024-03-04T17:00:00Z"));
    e.handle_timeout(Timestamp(MONDAY + 17 * HOUR));
    assert_eq!(state(&e, a), Some(JobState::Running));
}

#[test]
fn a_policy_change_inside_a_window_drains_like_a_lowered_limit() {
    let doc = |max: u32| {
        format!("{LEASES}[[limit]]\nname = \"l\"\nmax = 9\nwindows = [{{ when = \"08:00-18:00\", max = {max} }}]\n")
    };
    let mut e = engine(&doc(3));
    let now = MONDAY + 9 * HOUR;
    let ids: Vec<u64> = (0..4)
        .map(|_| submit(&mut e, spec("backup", &[]), now))
        .collect();
    assert_eq!(running(&e), 3);
    let report = e.apply_policy(policy(&doc(1)), Timestamp(now));
    assert_eq!(report.over_limit, vec!["limit:l".to_string()]);
    assert_eq!(running(&e), 3, "nothing stopped");
    finish(&mut e, ids[0], now + MIN);
    assert_eq!(state(&e, ids[3]), Some(JobState::Queued));
    let report = e.apply_policy(policy(&doc(4)), Timestamp(now + 2 * MIN));
    assert_eq!(report.admitted_now, vec![ids[3]]);
}

#[test]
fn a_per_value_pool_gives_each_value_its_capacity() {
    let mut e = engine(
        "[resources]\nthreads = 10\n[resources.repo-io]\nper = [\"repo\"]\ncapacity = 4\n[kinds.backup]\ncost = { repo-io = 1, threads = 1 }\n[kinds.prune]\ncost = { repo-io = 4 }\n",
    );
    let backups: Vec<u64> = (0..4)
        .map(|_| submit(&mut e, spec("backup", &[("repo", "main")]), 0))
        .collect();
    assert_eq!(running(&e), 4);
    let prune = submit(&mut e, spec("prune", &[("repo", "main")]), 1);
    assert_eq!(state(&e, prune), Some(JobState::Queued));
    let text = why(&mut e, prune, 1);
    assert!(
        text.contains("pool:repo-io[repo=main]: needs 4, 0 free"),
        "{text}"
    );
    let other = submit(&mut e, spec("prune", &[("repo", "other")]), 2);
    assert_eq!(
        state(&e, other),
        Some(JobState::Running),
        "another repository's pool"
    );
    let bare = submit(&mut e, spec("prune", &[]), 3);
    assert_eq!(
        state(&e, bare),
        Some(JobState::Running),
        "no repo attribute: takes nothing"
    );
    let usage = e.scope_usage();
    let main = usage
        .iter()
        .find(|u| u.scope == "pool:repo-io[repo=main]")
        .unwrap();
    assert_eq!(
        (main.used, main.limit, main.rule.as_str()),
        (4, Some(4), "pool:repo-io")
    );
    let threads = usage.iter().find(|u| u.scope == "pool:threads").unwrap();
    assert_eq!(threads.used, 4, "the plain pool keeps its meaning");
    for (i, &b) in backups.iter().enumerate() {
        finish(&mut e, b, 10 + i as u64);
    }
    assert_eq!(state(&e, prune), Some(JobState::Running));
    let refused = e.submit(
        JobSpec {
            cost: Some([("repo-i0".to_string(), 1)].into()),
            ..spec("backup", &[])
        },
        Timestamp(20),
    );
    assert!(refused.is_err(), "an undeclared pool is refused");
    e.check_invariants().unwrap();
}
