//! Preemption in virtual time: the simulated holder obeys `cancel_requested` with reason
//! `preempted` after `STOP_MS`, the engine requeues the victim (attempt + 1), and no scope
//! passes its limit at any point of the run.

use crate::common::*;
use lockgate_core::job::JobState;
use lockgate_sim::{simulate, Run, Summary, STOP_MS};

const NODES: &str = r#"[{"name": "n1"}]"#;

/// Two backups of 100 s fill `backups-and-restores` (max 2) at 0 s; a restore arrives at
/// 10 s with a higher priority.
fn run(preempt: bool) -> Run {
    let policy = format!(
        "[[limit]]\nname = \"backups-and-restores\"\nmax = 2\n[kinds.restore]\npriority = 10\npreempt = {preempt}\n"
    );
    let i = input(
        &policy,
        NODES,
        "{\"at\": 0, \"kind\": \"backup\", \"run_s\": 100}\n\
         {\"at\": 0, \"kind\": \"backup\", \"run_s\": 100}\n\
         {\"at\": 10, \"kind\": \"restore\", \"run_s\": 10}\n",
    );
    let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    for s in &run.scopes {
        assert!(
            s.limit.is_none_or(|l| s.peak <= l),
            "{}: peak {} over {:?}",
            s.scope,
            s.peak,
            s.limit
        );
    }
    assert!(
        run.scopes
            .iter()
            .any(|s| s.scope == "limit:backups-and-restores" && s.peak == 2),
        "{:?}",
        run.scopes
    );
    run
}

#[test]
fn a_preempting_restore_starts_after_the_stop_time_and_the_victim_runs_again() {
    let run = run(true);
    let restore = &run.jobs[2];
    assert_eq!(
        restore.started_ms,
        Some(10_000 + STOP_MS),
        "waits only the stop"
    );
    assert_eq!(restore.outcome, Some(JobState::Succeeded));
    // One backup was stopped at 11 s and requeued; it runs again, from the start, when the
    // restore ends (21 s), so it ends at 121 s. The other was never touched.
    let mut ends: Vec<Option<u64>> = run.jobs[..2].iter().map(|r| r.finished_ms).collect();
    ends.sort();
    assert_eq!(ends, [Some(100_000), Some(121_000)]);
    assert!(run.jobs[..2]
        .iter()
        .all(|r| r.outcome == Some(JobState::Succeeded)));
    let s = Summary::from_run(&run);
    assert_eq!((s.unfinished, s.makespan_s), (0, 121.0));
}

#[test]
fn without_preempt_the_restore_waits_for_a_backup_to_end() {
    let run = run(false);
    assert_eq!(run.jobs[2].started_ms, Some(100_000));
    assert!(run.jobs[..2].iter().all(|r| r.finished_ms == Some(100_000)));
    assert_eq!(Summary::from_run(&run).makespan_s, 110.0);
}
