//! Preemption (policy.md, Preemption): victim choice (fewest victims, the node that needs
//! the fewest, protected kinds, the priority rule), the hold on freed room, requeue of
//! victims with attempt + 1 not counted against retries, and explain.

use crate::common::*;
use lockgate_core::job::{CancelReason, JobId, JobSpec, JobState, Outcome};
use lockgate_core::{Engine, Timestamp};

const POLICY: &str = r#"
[resources]
threads = 6
[kinds.restore]
priority = 10
preempt = true
cost = { threads = 4 }
[kinds.backup]
cost = { threads = 1 }
retry = { times = 1, interval = "1s" }
[kinds.big]
cost = { threads = 3 }
[kinds.tape]
cost = { threads = 2 }
preemptible = false
"#;

fn with_prio(kind: &str, prio: i64) -> JobSpec {
    JobSpec {
        priority: Some(prio),
        ..spec(kind, &[])
    }
}

fn asked(e: &Engine) -> Vec<JobId> {
    let mut v: Vec<JobId> = e
        .jobs()
        .filter(|j| j.cancel_reason == Some(CancelReason::Preempted))
        .map(|j| j.id)
        .collect();
    v.sort_unstable();
    v
}

fn stop(e: &mut Engine, id: JobId, now: u64) {
    e.finish(id, token(e, id), Outcome::Cancelled, None, Timestamp(now))
        .expect("victim finishes");
}

#[test]
fn fewest_victims_are_asked_and_the_preemptor_waits_for_them() {
    let mut e = engine(POLICY);
    // 6 threads: one big (3) and three backups (1 each).
    let big = submit(&mut e, spec("big", &[]), 0);
    let b: Vec<JobId> = (0..3)
        .map(|i| submit(&mut e, spec("backup", &[]), i))
        .collect();
    let r = submit(&mut e, spec("restore", &[]), 10);
    assert_eq!(state(&e, r), Some(JobState::Queued));
    // 4 units needed, 0 free: the big job (3) and one backup (1) is 2 victims; backups alone
    // would be 3 and not enough.
    let v = asked(&e);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v.contains(&big));
    let why = e.explain(r, Timestamp(11)).unwrap();
    assert!(
        why.text.contains("preempting: waiting for jobs"),
        "{}",
        why.text
    );
    // Victims still hold: nothing is past its limit; the restore is not admitted yet.
    let used: u64 = e
        .scope_usage()
        .into_iter()
        .find(|u| u.scope == "pool:threads")
        .unwrap()
        .used;
    assert_eq!(used, 6);
    stop(&mut e, v[0], 20);
    assert_eq!(
        state(&e, r),
        Some(JobState::Queued),
        "one victim still holds"
    );
    // A queued backup ranked below the restore may not take the freed unit.
    let late = submit(&mut e, spec("backup", &[]), 21);
    assert_eq!(state(&e, late), Some(JobState::Queued));
    let why = e.explain(late, Timestamp(21)).unwrap();
    assert!(why.text.contains("held for job"), "{}", why.text);
    stop(&mut e, v[1], 30);
    assert_eq!(state(&e, r), Some(JobState::Running));
    // The victims went back to the queue: same id, attempt 2, reason in the message.
    for id in v {
        let j = e.job(id).expect("still live");
        assert_eq!(
            (j.state, j.attempt, j.preemptions),
            (JobState::Queued, 2, 1)
        );
        assert!(!j.cancel_requested);
        assert!(j
            .message
            .as_deref()
            .unwrap()
            .contains(&format!("preempted by job {r}")));
    }
    let _ = b;
}

#[test]
fn only_strictly_lower_priority_and_preemptible_jobs_are_victims() {
    let mut e = engine(POLICY);
    let tape = submit(&mut e, spec("tape", &[]), 0);
    let same = submit(&mut e, with_prio("big", 10), 1);
    let low = submit(&mut e, spec("backup", &[]), 2);
    let r = submit(&mut e, spec("restore", &[]), 3);
    // Free 0; needs 4: the tape (2) is protected, `same` has the restore's priority, the
    // backup (1) alone is not enough: no preemption at all.
    assert_eq!(asked(&e), Vec::<JobId>::new());
    assert_eq!(state(&e, r), Some(JobState::Queued));
    // The tape ends: 2 free, the backup makes it 3, still short; `same` ends: 3 + 2 free.
    stop(&mut e, tape, 10);
    assert_eq!(asked(&e), Vec::<JobId>::new());
    stop(&mut e, same, 11);
    assert_eq!(
        state(&e, r),
        Some(JobState::Running),
        "5 free, no victim needed"
    );
    assert_eq!(state(&e, low), Some(JobState::Running));
}

#[test]
fn a_victim_requeued_does_not_preempt_back_and_is_not_charged_a_retry() {
    let mut e = engine(
        "[global]\nmax_running = 1\n[kinds.restore]\npriority = 5\npreempt = true\n\
         [kinds.backup]\npreempt = true\nretry = { times = 1, interval = \"1s\" }\n",
    );
    let b = submit(&mut e, spec("backup", &[]), 0);
    let r = submit(&mut e, spec("restore", &[]), 1);
    assert_eq!(asked(&e), vec![b]);
    stop(&mut e, b, 2);
    assert_eq!(state(&e, r), Some(JobState::Running));
    let j = e.job(b).unwrap();
    assert_eq!((j.state, j.attempt), (JobState::Queued, 2));
    assert_eq!(
        asked(&e),
        Vec::<JobId>::new(),
        "the backup may not preempt the restore"
    );
    e.finish(r, token(&e, r), Outcome::Succeeded, None, Timestamp(3))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Running));
    // Attempt 2 fails: the one retry is still there (the preempted attempt did not count).
    e.finish(b, token(&e, b), Outcome::Failed, None, Timestamp(4))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Failed));
    assert!(e.job(b).unwrap().retry_at.is_some(), "retry kept");
    e.handle_timeout(Timestamp(1_004));
    let j = e.job(b).unwrap();
    assert_eq!((j.state, j.attempt), (JobState::Running, 3));
    e.finish(b, token(&e, b), Outcome::Failed, None, Timestamp(1_005))
        .unwrap();
    assert_eq!(state(&e, b), None, "now the retries are used up");
}

#[test]
fn a_movable_preemptor_picks_the_node_that_needs_the_fewest_victims() {
    let mut e = engine(
        "[nodes.resources]\nio = 4\n[kinds.restore]\npriority = 5\npreempt = true\ncost = { io = 4 }\n",
    );
    node(&mut e, "n1", &[], &["backup", "restore"], 0);
    node(&mut e, "n2", &[], &["backup", "restore"], 0);
    let on = |node: &str, io: u64| JobSpec {
        node: Some(node.into()),
        cost: Some([("io".to_string(), io)].into()),
        executor: Some(lockgate_core::policy::Executor::Agent),
        ..spec("backup", &[])
    };
    // n1: four backups of 1 unit (4 victims needed); n2: two of 2 units (2 victims).
    let n1: Vec<JobId> = (0..4).map(|i| submit(&mut e, on("n1", 1), i)).collect();
    let n2: Vec<JobId> = (0..2).map(|i| submit(&mut e, on("n2", 2), i)).collect();
    let r = submit(
        &mut e,
        JobSpec {
            node_selector: Some(String::new()),
            ..spec("restore", &[])
        },
        10,
    );
    assert_eq!(asked(&e), n2, "the node that needs the fewest victims");
    for (t, &v) in n2.iter().enumerate() {
        stop(&mut e, v, 20 + t as u64);
    }
    let j = e.job(r).unwrap();
    assert_eq!((j.state, j.node()), (JobState::Running, Some("n2")));
    assert!(n1.iter().all(|&b| state(&e, b) == Some(JobState::Running)));
}

#[test]
fn a_conflict_key_holder_is_preempted_and_a_lease_loss_requeues_it() {
    let mut e =
        engine("[[conflict]]\nkeys = [\"repo\"]\n[kinds.restore]\npriority = 5\npreempt = true\n");
    let b = submit(&mut e, spec("backup", &[("repo", "main")]), 0);
    let other = submit(&mut e, spec("backup", &[("repo", "other")]), 0);
    let r = submit(&mut e, spec("restore", &[("repo", "main")]), 1);
    assert_eq!(asked(&e), vec![b], "only the holder of repo=main");
    // A lease loss releases too: the victim is requeued, not lost.
    e.handle_timeout(Timestamp(60_000));
    assert_eq!(state(&e, r), Some(JobState::Running));
    let j = e.job(b).unwrap();
    assert_eq!((j.state, j.attempt), (JobState::Queued, 2));
    let _ = other;
}

#[test]
fn a_user_cancel_of_a_victim_ends_it() {
    let mut e = engine(POLICY);
    let big = submit(&mut e, with_prio("big", 0), 0);
    let big2 = submit(&mut e, with_prio("big", 1), 0);
    let r = submit(&mut e, spec("restore", &[]), 1);
    // Needs 4 of 6, 0 free: both bigs (3 each) are needed... one big frees 3, short by 1:
    // both are asked.
    assert_eq!(asked(&e), vec![big, big2]);
    e.cancel(big, false, Timestamp(2)).unwrap();
    assert_eq!(
        e.job(big).unwrap().cancel_reason,
        Some(CancelReason::Cancel)
    );
    stop(&mut e, big, 3);
    assert_eq!(state(&e, big), None, "cancelled for good");
    stop(&mut e, big2, 4);
    assert_eq!(state(&e, r), Some(JobState::Running));
    assert_eq!(state(&e, big2), Some(JobState::Queued));
}

/// Restores first, with preemption: `preempt = true` on a restore's kind, its priority left
/// to the built-in one, stops a running upload (priority 0) and takes its room at once.
#[test]
fn a_restores_download_with_preempt_stops_an_upload_for_its_room() {
    let mut e = engine(
        "[resources]\nthreads = 1\n[kinds.data-upload]\ncost = { threads = 1 }\n[kinds.data-download]\npreempt = true\ncost = { threads = 1 }\n",
    );
    let upload = submit(&mut e, spec("data-upload", &[]), 0);
    let queued = submit(&mut e, spec("data-upload", &[]), 1);
    let download = submit(&mut e, spec("data-download", &[]), 2);
    assert_eq!(e.job(download).unwrap().priority, 100);
    assert_eq!(asked(&e), [upload]);
    stop(&mut e, upload, 3);
    assert_eq!(state(&e, download), Some(JobState::Running));
    assert_eq!(state(&e, queued), Some(JobState::Queued));
}
