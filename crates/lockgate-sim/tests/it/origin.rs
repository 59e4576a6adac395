//! `simulate_at`: the workload's time 0 at a wall-clock time, so a maintenance window
//! holds jobs at the hours it names (a replay of a server's history starts at its first
//! arrival, not at 1970-01-01T00:00Z as `simulate` does). The records stay relative.

use crate::common::*;
use lockgate_core::Timestamp;
use lockgate_sim::{simulate, simulate_at};

const HOUR: u64 = 3_600_000;

#[test]
fn a_maintenance_window_holds_jobs_at_the_hours_it_names() {
    // A long job keeps the run going; the second arrives an hour later.
    let i = input(
        "[[maintenance]]\nname = \"fsck\"\nwhen = \"02:00-04:00\"\n",
        "[]",
        "{\"at\": 0, \"kind\": \"backup\", \"run_s\": 14400}\n\
         {\"at\": 3600, \"kind\": \"backup\", \"run_s\": 60}\n",
    );
    // Time 0 at 00:00: the second job arrives at 01:00, outside the window.
    let at_midnight = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    assert_eq!(at_midnight.jobs[1].admitted_ms, Some(HOUR));
    // Time 0 at 01:30 the next day: it arrives at 02:30 and waits for 04:00.
    let origin = Timestamp(24 * HOUR + HOUR + HOUR / 2);
    let shifted = simulate_at(&i.policy, &i.nodes, &i.jobs, origin).unwrap();
    let r = &shifted.jobs[1];
    assert_eq!(
        (r.submitted_ms, r.admitted_ms),
        (HOUR, Some(2 * HOUR + HOUR / 2))
    );
    assert_eq!(r.finished_ms, Some(2 * HOUR + HOUR / 2 + 60_000));
}
