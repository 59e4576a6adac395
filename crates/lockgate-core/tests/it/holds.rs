//! Pauses, dependencies and queued-job edits (issue 11).

use crate::common::*;
use lockgate_core::engine::{EditError, Mode, PauseError, PauseSpec};
use lockgate_core::event::Event;
use lockgate_core::job::{JobSpec, JobState, Outcome};
use lockgate_core::{Engine, Timestamp};

fn pause_spec(selector: Option<&str>, until: Option<u64>) -> PauseSpec {
    PauseSpec {
        selector: selector.map(str::to_string),
        reason: "repository maintenance".into(),
        by: "admin".into(),
        until: until.map(Timestamp),
    }
}

fn after(kind: &str, after: &[u64], after_ok: &[u64]) -> JobSpec {
    JobSpec {
        after: after.to_vec(),
        after_ok: after_ok.to_vec(),
        ..spec(kind, &[])
    }
}

#[test]
fn a_pause_admits_nothing_it_matches_and_stops_nothing_running() {
    let mut e = engine("");
    let running = submit(&mut e, spec("backup", &[("repo", "a")]), 0);
    let p = e
        .pause(pause_spec(Some("repo=a"), None), Timestamp(1))
        .unwrap();
    assert_eq!(state(&e, running), Some(JobState::Running));
    let held = submit(&mut e, spec("backup", &[("repo", "a")]), 2);
    let other = submit(&mut e, spec("backup", &[("repo", "b")]), 2);
    assert_eq!(state(&e, held), Some(JobState::Queued));
    assert_eq!(state(&e, other), Some(JobState::Running));
    let why = e.explain(held, Timestamp(3)).unwrap();
    assert_eq!(why.reasons[0].scope.as_deref(), Some("pause:1"));
    assert_eq!(
        why.reasons[0].text,
        "pause:1: paused by admin until resumed (repo=a): repository maintenance"
    );
    assert_eq!(e.resume(p.id, Timestamp(4)).unwrap().id, 1);
    assert_eq!(state(&e, held), Some(JobState::Running));
    assert_eq!(
        e.resume(p.id, Timestamp(5)),
        Err(PauseError::NotFound(1)),
        "a pause ends once"
    );
}

#[test]
fn a_pause_without_match_holds_queued_jobs_and_ends_at_until() {
    let mut e = engine("[global]\nmax_running = 1\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, spec("backup", &[]), 0);
    e.pause(pause_spec(None, Some(1_000)), Timestamp(10))
        .unwrap();
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(20))
        .unwrap();
    assert_eq!(
        state(&e, b),
        Some(JobState::Queued),
        "paused: the slot stays free"
    );
    assert_eq!(e.next_deadline(), Some(Timestamp(1_000)), "an engine timer");
    let why = e.explain(b, Timestamp(30)).unwrap();
    assert!(
        why.text.contains("until 1970-01-01T00:00:01Z"),
        "{}",
        why.text
    );
    e.handle_timeout(Timestamp(1_000));
    assert_eq!(state(&e, b), Some(JobState::Running));
    assert_eq!(e.pauses().count(), 0);
    let kinds: Vec<&str> = std::iter::from_fn(|| e.poll_event())
        .filter_map(|ev| match ev {
            Event::Paused { .. } => Some("paused"),
            Event::Resumed { .. } => Some("resumed"),
            _ => None,
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect();
    assert_eq!(kinds, ["paused", "resumed"]);
}

#[test]
fn pauses_refuse_bad_input() {
    let mut e = engine("");
    let bad = e.pause(pause_spec(Some("repo in ()"), None), Timestamp(5));
    assert!(
        matches!(bad, Err(PauseError::Invalid { field: "match", .. })),
        "{bad:?}"
    );
    let past = e.pause(pause_spec(None, Some(5)), Timestamp(5));
    assert!(matches!(
        past,
        Err(PauseError::Invalid { field: "until", .. })
    ));
    let mut empty = pause_spec(None, None);
    empty.reason = " ".into();
    assert!(matches!(
        e.pause(empty, Timestamp(5)),
        Err(PauseError::Invalid {
            field: "reason",
            ..
        })
    ));
}

#[test]
fn two_pauses_hold_a_job_until_both_are_resumed_and_survive_a_restore() {
    let mut e = engine("");
    let p1 = e
        .pause(pause_spec(Some("kind=prune"), None), Timestamp(0))
        .unwrap();
    let p2 = e.pause(pause_spec(None, None), Timestamp(0)).unwrap();
    let j = submit(&mut e, spec("prune", &[]), 1);
    let snap = e.export();
    assert_eq!(snap.pauses.len(), 2);
    let mut e = Engine::restore(e.policy().clone(), snap, Timestamp(2), Mode::Indexed);
    assert_eq!(state(&e, j), Some(JobState::Queued));
    e.resume(p1.id, Timestamp(3)).unwrap();
    assert_eq!(state(&e, j), Some(JobState::Queued), "p2 still holds it");
    assert_eq!(e.paused_by(j).map(|p| p.id), Some(p2.id));
    e.resume(p2.id, Timestamp(4)).unwrap();
    assert_eq!(state(&e, j), Some(JobState::Running));
    let next = e.pause(pause_spec(None, None), Timestamp(5)).unwrap();
    assert_eq!(next.id, 3, "pause ids never repeat");
}

#[test]
fn after_waits_for_any_end_and_after_ok_cancels_on_failure() {
    let mut e = engine("");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, after("verify", &[a], &[]), 0);
    let c = submit(&mut e, after("gc", &[], &[a]), 0);
    let d = submit(&mut e, after("report", &[], &[c]), 0);
    assert_eq!(state(&e, b), Some(JobState::Queued));
    let why = e.explain(c, Timestamp(1)).unwrap();
    assert_eq!(why.reasons[0].scope.as_deref(), Some("after:1"));
    assert_eq!(
        why.reasons[0].text,
        "after:1: waits for job 1 (running) to succeed"
    );
    e.finish(a, token(&e, a), Outcome::Failed, None, Timestamp(2))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Running), "after: any end");
    assert_eq!(state(&e, c), None, "after_ok: cancelled");
    assert_eq!(state(&e, d), None, "and its own after_ok dependent with it");
    let ended: Vec<(u64, JobState, Option<String>)> = std::iter::from_fn(|| e.poll_event())
        .filter_map(|ev| match ev {
            Event::Job { job, .. } if job.state == JobState::Cancelled => {
                Some((job.id, job.state, job.message.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        [
            (
                c,
                JobState::Cancelled,
                Some("dependency job 1 ended failed (after_ok)".into())
            ),
            (
                d,
                JobState::Cancelled,
                Some("dependency job 3 ended cancelled (after_ok)".into())
            ),
        ]
    );
}

#[test]
fn a_dependency_with_a_retry_left_has_not_ended() {
    let mut e = engine("[kinds.backup]\nretry = { times = 1, interval = \"1s\" }\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, after("verify", &[], &[a]), 0);
    e.finish(a, token(&e, a), Outcome::Failed, None, Timestamp(1))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Queued));
    e.handle_timeout(Timestamp(1_001));
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(1_002))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Running));
}

#[test]
fn dependencies_survive_a_restore_and_bad_ids_are_refused() {
    let mut e = engine("");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, after("verify", &[a], &[]), 0);
    let snap = e.export();
    let mut e = Engine::restore(e.policy().clone(), snap, Timestamp(1), Mode::Indexed);
    assert_eq!(state(&e, b), Some(JobState::Queued));
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(2))
        .unwrap();
    assert_eq!(state(&e, b), Some(JobState::Running));
    let unknown = e.submit(after("x", &[99], &[]), Timestamp(3));
    assert!(unknown
        .unwrap_err()
        .to_string()
        .contains("job 99 does not exist"));
    let ended = e.submit(after("x", &[], &[a]), Timestamp(3));
    assert!(ended
        .unwrap_err()
        .to_string()
        .starts_with("after_ok: job 1 already ended"));
    let ok = e.submit(after("x", &[a], &[]), Timestamp(3)).unwrap();
    assert_eq!(
        ok.job.state,
        JobState::Running,
        "an ended `after` job is met"
    );
}

#[test]
fn set_priority_reranks_a_queued_job_only() {
    let mut e = engine("[global]\nmax_running = 1\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, spec("backup", &[]), 1);
    let c = submit(&mut e, spec("backup", &[]), 2);
    assert_eq!(e.set_priority(c, 5, Timestamp(3)).unwrap().priority, 5);
    assert_eq!(
        e.set_priority(a, 5, Timestamp(3)),
        Err(EditError::NotQueued {
            id: a,
            state: JobState::Running
        })
    );
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(4))
        .unwrap();
    assert_eq!(state(&e, c), Some(JobState::Running), "c now ranks first");
    assert_eq!(state(&e, b), Some(JobState::Queued));
}

#[test]
fn retry_failed_requeues_an_ended_job_as_a_new_attempt() {
    let mut e = engine("");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let done = e
        .finish(
            a,
            token(&e, a),
            Outcome::Failed,
            Some("exit 1".into()),
            Timestamp(1),
        )
        .unwrap();
    assert_eq!(state(&e, a), None);
    let again = e.retry_failed(done.clone(), Timestamp(2)).unwrap();
    assert_eq!(
        (again.id, again.attempt, again.state),
        (a, 2, JobState::Running)
    );
    let ok = e
        .finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(3))
        .unwrap();
    assert_eq!(
        e.retry_failed(ok, Timestamp(4)),
        Err(EditError::NotFailed {
            id: a,
            state: JobState::Succeeded
        })
    );
}

/// Regression: a pause that takes out a reserving job and then the whole class its release
/// woke must pass the wake on, or the scope's next waiter is never told of the room.
#[test]
fn a_pause_that_empties_a_woken_class_wakes_the_next_waiter() {
    let mut e = engine(
        "[queue]\nreserve_after = \"0s\"\n[resources]\nthreads = 4\n[kinds.big]\ncost = { threads = 4 }\n[kinds.small]\ncost = { threads = 1 }\n[[conflict]]\nkeys = [\"repo\"]\n",
    );
    let a = submit(&mut e, spec("small", &[("repo", "z")]), 0);
    let r = submit(&mut e, spec("big", &[("repo", "x")]), 1);
    let w = submit(&mut e, spec("small", &[("repo", "x")]), 2);
    let x = submit(&mut e, spec("small", &[("repo", "y")]), 3);
    assert_eq!(state(&e, a), Some(JobState::Running));
    for id in [r, w, x] {
        assert_eq!(
            state(&e, id),
            Some(JobState::Queued),
            "job {id}: reserved for {r}"
        );
    }
    e.pause(pause_spec(Some("repo=x"), None), Timestamp(4))
        .unwrap();
    assert_eq!(
        state(&e, x),
        Some(JobState::Running),
        "the reservation went with the pause"
    );
    assert!(e.admissible_waiting(Timestamp(4)).is_empty());
}

/// Restores first: a download that needs the whole pool reserves it as soon as it waits,
/// so the single-unit uploads queued behind it do not take the units one release frees;
/// with its priority set by the policy it waits the usual `reserve_after` and is passed.
#[test]
fn a_restores_download_reserves_the_room_it_waits_for_at_once() {
    let run = |extra: &str| {
        let mut e = engine(&format!(
            "[resources]\nthreads = 2\n[kinds.data-upload]\ncost = {{ threads = 1 }}\n[kinds.data-download]\ncost = {{ threads = 2 }}\n{extra}"
        ));
        let running = [0, 1].map(|t| submit(&mut e, spec("data-upload", &[]), t));
        let download = submit(&mut e, spec("data-download", &[]), 2);
        let behind: Vec<_> = (3..8)
            .map(|t| submit(&mut e, spec("data-upload", &[]), t))
            .collect();
        e.finish(
            running[0],
            token(&e, running[0]),
            Outcome::Succeeded,
            None,
            Timestamp(10),
        )
        .unwrap();
        let passed = behind
            .iter()
            .filter(|&&id| state(&e, id) == Some(JobState::Running))
            .count();
        e.finish(
            running[1],
            token(&e, running[1]),
            Outcome::Succeeded,
            None,
            Timestamp(11),
        )
        .unwrap();
        (passed, state(&e, download))
    };
    assert_eq!(run(""), (0, Some(JobState::Running)));
    // Priority from the policy: an ordinary job, passed while it waits for 2 free units.
    let (passed, download) = run("priority = 100\n");
    assert_eq!((passed, download), (1, Some(JobState::Queued)));
}
