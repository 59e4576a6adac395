//! Pauses, dependencies and queued-job edits (issue 11) over real HTTP with a real store.

use crate::harness::*;
use lockgate_api::{PauseRequest, Role, SubmitRequest};
use lockgate_core::{JobState, Outcome};

fn pause_all(reason: &str) -> PauseRequest {
    PauseRequest {
        selector: None,
        until: None,
        reason: reason.into(),
    }
}

#[test]
fn a_pause_survives_a_restart_and_only_an_admin_pauses() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    for role in [Role::Viewer, Role::Submitter] {
        let c = s.token(&format!("t-{role}"), role, None);
        let e = c.pause(&pause_all("no")).unwrap_err();
        assert_eq!(e.status(), Some(403), "{e}");
        assert!(e.to_string().contains("may not pause the queue"), "{e}");
    }
    let admin = s.admin();
    let p = admin
        .pause(&PauseRequest {
            selector: Some("repo=main".into()),
            until: None,
            reason: "borg check".into(),
        })
        .unwrap();
    let (held, _) = admin.submit(&job("backup", &[("repo", "main")])).unwrap();
    let (free, _) = admin.submit(&job("backup", &[("repo", "other")])).unwrap();
    assert_eq!(held.state, JobState::Queued);
    assert_eq!(free.state, JobState::Running);
    s.stop();

    let s = TestServer::open(dir.path(), None);
    let admin = s.admin();
    let list = admin.pauses().unwrap();
    assert_eq!(
        list.pauses,
        vec![p.clone()],
        "the pause came back with the store"
    );
    let why = admin.explain(held.id).unwrap();
    assert_eq!(
        why.reasons[0].scope.as_deref(),
        Some(format!("pause:{}", p.id).as_str())
    );
    assert!(
        why.text
            .contains("paused by admin until resumed (repo=main): borg check"),
        "{}",
        why.text
    );
    let viewer = s.token("v2", Role::Viewer, None);
    assert_eq!(viewer.resume(p.id).unwrap_err().status(), Some(403));
    admin.resume(p.id).unwrap();
    assert_eq!(admin.job(held.id).unwrap().state, JobState::Running);
    assert_eq!(admin.resume(p.id).unwrap_err().status(), Some(404));
    s.stop();
    let s = TestServer::open(dir.path(), None);
    assert!(
        s.admin().pauses().unwrap().pauses.is_empty(),
        "resumed for good"
    );
    let next = s.admin().pause(&pause_all("again")).unwrap();
    assert!(next.id > p.id, "pause ids never repeat");
}

#[test]
fn after_ok_cancels_the_dependent_and_invisible_ids_are_refused_like_unknown_ones() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let alice = s.token("alice", Role::Submitter, None);
    let bob = s.token("bob", Role::Submitter, None);
    let (a, _) = alice.submit(&job("backup", &[])).unwrap();
    let dependent = |after_ok: Vec<u64>| SubmitRequest {
        after_ok,
        ..job("verify", &[])
    };
    let (b, _) = alice.submit(&dependent(vec![a.id])).unwrap();
    assert_eq!(
        (b.state, b.after_ok.clone()),
        (JobState::Queued, vec![a.id])
    );
    assert!(alice
        .explain(b.id)
        .unwrap()
        .text
        .contains(&format!("after:{}", a.id)));
    let hidden = bob.submit(&dependent(vec![a.id])).unwrap_err();
    let unknown = bob.submit(&dependent(vec![9_999])).unwrap_err();
    assert_eq!(
        (hidden.status(), hidden.code()),
        (Some(422), Some("invalid_field"))
    );
    assert_eq!(
        hidden.to_string().replace(&a.id.to_string(), "N"),
        unknown.to_string().replace("9999", "N"),
        "the same answer, so ids do not leak"
    );
    let token = a.lease.unwrap().token;
    alice
        .finish_job(a.id, token, Outcome::Failed, Some("exit 1".into()))
        .unwrap();
    let b = alice.job(b.id).unwrap();
    assert_eq!(b.state, JobState::Cancelled);
    assert_eq!(
        b.message.as_deref(),
        Some(format!("dependency job {} ended failed (after_ok)", a.id).as_str())
    );
    let late = alice.submit(&dependent(vec![a.id])).unwrap_err();
    assert_eq!(late.status(), Some(409), "{late}");
    assert!(late.to_string().contains("already ended failed"), "{late}");
}

#[test]
fn job_set_priority_stays_within_max_priority_and_retry_takes_only_failed_agent_jobs() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        "[global]\nmax_running = 0\n[owners.alice]\nmax_priority = 5\n",
    );
    let alice = s.token("alice", Role::Submitter, None);
    let (j, _) = alice.submit(&job("backup", &[])).unwrap();
    assert_eq!(alice.set_job(j.id, 5).unwrap().priority, 5);
    let e = alice.set_job(j.id, 6).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    assert!(e.to_string().contains("max_priority 5"), "{e}");
    assert_eq!(s.admin().set_job(j.id, 50).unwrap().priority, 50);
    let viewer = s.token("v", Role::Viewer, None);
    assert_eq!(viewer.set_job(j.id, 1).unwrap_err().status(), Some(403));
    let e = alice.retry_job(j.id).unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    assert!(e.to_string().contains("client job"), "{e}");
    alice.cancel(j.id, false).unwrap();
    let e = alice.set_job(j.id, 1).unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    assert!(
        e.to_string().contains("only a queued job can be changed"),
        "{e}"
    );
}
