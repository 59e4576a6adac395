//! Engine behaviour: leases, retries, timers, reconfiguration, cancel, coordinator kinds.

use crate::common::*;
use lockgate_core::engine::{LeaseError, Mode, NodeRegistration};
use lockgate_core::job::{JobSpec, JobState, Outcome};
use lockgate_core::{Engine, Timestamp};

#[test]
fn expired_lease_frees_the_slot_and_the_job_is_lost() {
    let mut e = engine("[global]\nmax_running = 1\n[leases]\nttl = \"100ms\"\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, spec("backup", &[]), 0);
    assert_eq!(state(&e, b), Some(JobState::Queued));
    let t = token(&e, a);
    e.heartbeat(a, t, Timestamp(60)).unwrap();
    assert_eq!(e.next_deadline(), Some(Timestamp(100)));
    e.handle_timeout(Timestamp(100));
    assert_eq!(
        state(&e, a),
        Some(JobState::Running),
        "renewed at 60, so alive until 160"
    );
    e.handle_timeout(Timestamp(160));
    assert_eq!(
        state(&e, a),
        None,
        "lost jobs without retries leave the engine"
    );
    assert_eq!(state(&e, b), Some(JobState::Running));
    assert_eq!(
        e.heartbeat(a, t, Timestamp(161)),
        Err(LeaseError::NotFound(a))
    );
    let tb = token(&e, b);
    assert!(tb > t, "fencing tokens grow");
    assert_eq!(
        e.heartbeat(b, t, Timestamp(161)),
        Err(LeaseError::LeaseLost(b))
    );
}

/// A forward step of the server's wall clock moves leases and node TTLs with it: the holder
/// still has the time it was given, and the slot is not handed on.
#[test]
fn a_clock_step_moves_leases_and_node_ttls_forward() {
    let mut e =
        engine("[global]\nmax_running = 1\n[leases]\nttl = \"100ms\"\n[nodes]\nttl = \"1s\"\n");
    node(&mut e, "a", &[], &["verify"], 0);
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, spec("backup", &[]), 0);
    let t = token(&e, a);
    e.heartbeat(a, t, Timestamp(60)).unwrap();
    // The wall clock jumps an hour at 70 ms.
    let hour = std::time::Duration::from_secs(3600);
    e.clock_stepped(hour);
    e.handle_timeout(Timestamp(3_600_070));
    assert_eq!(
        state(&e, a),
        Some(JobState::Running),
        "60 ms of its 100 ms left"
    );
    assert_eq!(state(&e, b), Some(JobState::Queued));
    assert_eq!(e.node("a").unwrap().state_name(), "ready");
    e.handle_timeout(Timestamp(3_600_160));
    assert_eq!(state(&e, a), None, "lost once its own 100 ms ran out");
    assert_eq!(state(&e, b), Some(JobState::Running));
    e.handle_timeout(Timestamp(3_601_000));
    assert_eq!(
        e.node("a").unwrap().state_name(),
        "lost",
        "the node's 1 s ran out"
    );
}

#[test]
fn failed_job_is_retried_with_the_same_id() {
    let mut e = engine("[kinds.data-upload]\nretry = { times = 1, interval = \"30s\" }\n");
    let a = submit(&mut e, spec("data-upload", &[]), 0);
    e.finish(
        a,
        token(&e, a),
        Outcome::Failed,
        Some("disk full".into()),
        Timestamp(10),
    )
    .unwrap();
    assert_eq!(state(&e, a), Some(JobState::Failed));
    e.handle_timeout(Timestamp(30_010));
    let j = e.job(a).unwrap();
    assert_eq!((j.state, j.attempt), (JobState::Running, 2));
    e.finish(a, token(&e, a), Outcome::Failed, None, Timestamp(30_020))
        .unwrap();
    assert_eq!(state(&e, a), None, "no retries left");
}

#[test]
fn cancelled_job_is_never_retried() {
    let mut e = engine("[kinds.data-upload]\nretry = { times = 3, interval = \"1s\" }\n");
    let a = submit(&mut e, spec("data-upload", &[]), 0);
    let j = e.cancel(a, false, Timestamp(1)).unwrap();
    assert!(j.cancel_requested);
    e.finish(a, token(&e, a), Outcome::Cancelled, None, Timestamp(2))
        .unwrap();
    e.handle_timeout(Timestamp(10_000));
    assert_eq!(state(&e, a), None);
}

#[test]
fn force_cancel_revokes_the_lease() {
    let mut e = engine("[global]\nmax_running = 1\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(&mut e, spec("backup", &[]), 0);
    let t = token(&e, a);
    let j = e.cancel(a, true, Timestamp(1)).unwrap();
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(state(&e, b), Some(JobState::Running));
    assert!(e.heartbeat(a, t, Timestamp(2)).is_err());
}

#[test]
fn max_wait_expires_and_not_before_waits() {
    let mut e = engine("[global]\nmax_running = 1\n");
    let _a = submit(&mut e, spec("backup", &[]), 0);
    let b = submit(
        &mut e,
        JobSpec {
            max_wait_ms: Some(500),
            ..spec("backup", &[])
        },
        0,
    );
    e.handle_timeout(Timestamp(500));
    assert_eq!(state(&e, b), None);
    let mut e = engine("");
    let c = submit(
        &mut e,
        JobSpec {
            not_before: Some(Timestamp(1_000)),
            ..spec("backup", &[])
        },
        0,
    );
    assert_eq!(state(&e, c), Some(JobState::Queued));
    assert_eq!(
        e.explain(c, Timestamp(1)).unwrap().reasons[0].kind,
        "not_before"
    );
    assert_eq!(e.next_deadline(), Some(Timestamp(1_000)));
    e.handle_timeout(Timestamp(1_000));
    assert_eq!(state(&e, c), Some(JobState::Running));
}

#[test]
fn max_run_requests_cancel_then_revokes_after_a_ttl() {
    let mut e = engine("[leases]\nttl = \"1s\"\n");
    let a = submit(
        &mut e,
        JobSpec {
            max_run_ms: Some(5_000),
            ..spec("backup", &[])
        },
        0,
    );
    let t = token(&e, a);
    for now in (500..5_000).step_by(500) {
        e.heartbeat(a, t, Timestamp(now)).unwrap();
    }
    e.handle_timeout(Timestamp(5_000));
    assert!(e.job(a).unwrap().cancel_requested);
    assert!(
        e.heartbeat(a, t, Timestamp(5_400))
            .unwrap()
            .cancel_requested
    );
    e.handle_timeout(Timestamp(6_000));
    assert_eq!(state(&e, a), None);
}

#[test]
fn lowered_limit_drains_and_raised_limit_admits_at_once() {
    let mut e = engine("[global]\nmax_running = 3\n");
    let ids: Vec<u64> = (0..5)
        .map(|i| submit(&mut e, spec("backup", &[]), i))
        .collect();
    assert_eq!(count(&e, JobState::Running), 3);
    let report = e.apply_policy(policy("[global]\nmax_running = 1\n"), Timestamp(10));
    assert_eq!(report.over_limit, vec!["global".to_string()]);
    assert_eq!(
        count(&e, JobState::Running),
        3,
        "running jobs are never stopped"
    );
    let why = e.explain(ids[3], Timestamp(10)).unwrap();
    assert_eq!(why.reasons[0].kind, "over_limit");
    e.finish(
        ids[0],
        token(&e, ids[0]),
        Outcome::Succeeded,
        None,
        Timestamp(11),
    )
    .unwrap();
    assert_eq!(
        count(&e, JobState::Running),
        2,
        "still over: nothing admitted"
    );
    let dry = e.dry_run_policy(policy("[global]\nmax_running = 4\n"), Timestamp(12));
    assert_eq!(dry.admitted_now, vec![ids[3], ids[4]]);
    assert_eq!(count(&e, JobState::Running), 2, "a dry run changes nothing");
    let report = e.apply_policy(policy("[global]\nmax_running = 4\n"), Timestamp(12));
    assert_eq!(report.admitted_now, vec![ids[3], ids[4]]);
}

#[test]
fn coordinator_kinds_never_fill_the_global_limit() {
    let mut e = engine("[global]\nmax_running = 2\n");
    for i in 0..8 {
        submit(&mut e, spec("resource-backup", &[("namespaces", "a")]), i);
    }
    let up = submit(&mut e, spec("data-upload", &[]), 9);
    assert_eq!(state(&e, up), Some(JobState::Running));
    assert_eq!(count(&e, JobState::Running), 9);
}

#[test]
fn overlapping_namespaces_conflict() {
    let mut e =
        engine("[[conflict]]\nmatch = \"kind=resource-backup\"\noverlap = \"namespaces\"\n");
    let a = submit(&mut e, spec("resource-backup", &[("namespaces", "a,b")]), 0);
    let b = submit(&mut e, spec("resource-backup", &[("namespaces", "c")]), 1);
    let c = submit(&mut e, spec("resource-backup", &[("namespaces", "b,d")]), 2);
    let d = submit(&mut e, spec("resource-backup", &[("namespaces", "*")]), 3);
    let states: Vec<_> = [a, b, c, d]
        .iter()
        .map(|&i| state(&e, i).unwrap())
        .collect();
    assert_eq!(
        states,
        [
            JobState::Running,
            JobState::Running,
            JobState::Queued,
            JobState::Queued
        ]
    );
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(5))
        .unwrap();
    assert_eq!(state(&e, c), Some(JobState::Running));
    assert_eq!(state(&e, d), Some(JobState::Queued));
}

#[test]
fn export_and_restore_keep_everything_with_fresh_leases() {
    let mut e = engine("[global]\nmax_running = 2\n[leases]\nttl = \"10s\"\n");
    let ids: Vec<u64> = (0..4)
        .map(|i| submit(&mut e, spec("backup", &[]), i))
        .collect();
    let snap = e.export();
    let mut r = Engine::restore(e.policy().clone(), snap, Timestamp(60_000), Mode::Indexed);
    assert_eq!(
        r.job(ids[0]).unwrap().lease.unwrap().expires_at,
        Timestamp(70_000)
    );
    assert_eq!(count(&r, JobState::Running), 2);
    assert_eq!(count(&r, JobState::Queued), 2);
    let t = token(&r, ids[0]);
    r.finish(ids[0], t, Outcome::Succeeded, None, Timestamp(60_001))
        .unwrap();
    assert_eq!(state(&r, ids[2]), Some(JobState::Running));
    let fresh = submit(&mut r, spec("backup", &[]), 60_002);
    assert!(fresh > ids[3], "ids keep growing after a restore");
    r.check_invariants().unwrap();
}

#[test]
fn idempotency_key_returns_the_existing_job() {
    let mut e = engine("");
    let s = JobSpec {
        idempotency_key: Some("k1".into()),
        ..spec("backup", &[])
    };
    let first = e.submit(s.clone(), Timestamp(0)).unwrap();
    let again = e.submit(s.clone(), Timestamp(1)).unwrap();
    assert!(again.existing);
    assert_eq!(first.job.id, again.job.id);
    let other_owner = e
        .submit(
            JobSpec {
                owner: "bob".into(),
                ..s
            },
            Timestamp(2),
        )
        .unwrap();
    assert_ne!(other_owner.job.id, first.job.id);
}

#[test]
fn movable_jobs_spread_to_the_node_with_most_room() {
    let mut e = engine("[nodes]\nmax_running = 2\n");
    for n in ["a", "b", "c"] {
        node(&mut e, n, &[], &["data-upload"], 0);
    }
    let ids: Vec<u64> = (0..6)
        .map(|i| {
            submit(
                &mut e,
                JobSpec {
                    node_selector: Some(String::new()),
                    ..spec("data-upload", &[])
                },
                i,
            )
        })
        .collect();
    let nodes: Vec<String> = ids
        .iter()
        .map(|&i| e.job(i).unwrap().node().unwrap().to_string())
        .collect();
    assert_eq!(nodes, ["a", "b", "c", "a", "b", "c"]);
    let extra = submit(
        &mut e,
        JobSpec {
            node_selector: Some(String::new()),
            ..spec("data-upload", &[])
        },
        9,
    );
    assert_eq!(
        e.explain(extra, Timestamp(9)).unwrap().reasons[0].kind,
        "no_room"
    );
    let none = submit(
        &mut e,
        JobSpec {
            node_selector: Some("zone=eu-1".into()),
            ..spec("data-upload", &[])
        },
        9,
    );
    assert_eq!(
        e.explain(none, Timestamp(9)).unwrap().reasons[0].text,
        "no eligible node: selector \"zone=eu-1\" matches 0 ready nodes with an agent for kind data-upload"
    );
}

#[test]
fn cordon_stops_admission_and_lost_node_loses_its_jobs() {
    let mut e = engine("[nodes]\nmax_running = 1\nttl = \"1s\"\n");
    node(&mut e, "a", &[], &["verify"], 0);
    e.set_cordon("a", true, Timestamp(0));
    let j = submit(
        &mut e,
        JobSpec {
            node: Some("a".into()),
            executor: Some(lockgate_core::policy::Executor::Agent),
            ..spec("verify", &[])
        },
        0,
    );
    assert_eq!(
        e.explain(j, Timestamp(0)).unwrap().reasons[0].text,
        "node:a is cordoned"
    );
    e.set_cordon("a", false, Timestamp(1));
    assert_eq!(state(&e, j), Some(JobState::Running));
    e.handle_timeout(Timestamp(1_000));
    assert_eq!(state(&e, j), None, "the node went silent: its job is lost");
    assert_eq!(e.node("a").unwrap().state_name(), "lost");
}

/// A registration from another agent process loses what the node held at once; the same
/// process registering again (after a server restart, a partition) loses nothing, and so
/// does a registration that names no process.
#[test]
fn a_new_agent_process_on_a_node_loses_the_old_ones_jobs() {
    let mut e = engine("[nodes]\nmax_running = 2\n");
    let register = |e: &mut Engine, instance: Option<&str>, now: u64| {
        e.register_node(
            NodeRegistration {
                name: "a".into(),
                kinds: ["verify".to_string()].into(),
                instance: instance.map(str::to_string),
                ..NodeRegistration::default()
            },
            Timestamp(now),
        );
    };
    register(&mut e, Some("p1"), 0);
    let pinned = JobSpec {
        node: Some("a".into()),
        executor: Some(lockgate_core::policy::Executor::Agent),
        ..spec("verify", &[])
    };
    let j = submit(&mut e, pinned.clone(), 0);
    assert_eq!(state(&e, j), Some(JobState::Running));
    register(&mut e, Some("p1"), 1);
    register(&mut e, None, 2);
    assert_eq!(
        state(&e, j),
        Some(JobState::Running),
        "the same process, or none named"
    );
    register(&mut e, Some("p2"), 3);
    assert_eq!(
        state(&e, j),
        None,
        "a new process: the old one's job is lost"
    );
    let k = submit(&mut e, pinned, 4);
    assert_eq!(
        state(&e, k),
        Some(JobState::Running),
        "the new process takes new work"
    );
    e.check_invariants().unwrap();
}

/// Regression: a two-stage job waiting for an unregistered node was parked on the node's
/// run slots; when the node came back with its run slots full but prepare room left, the
/// job was never woken.
#[test]
fn two_stage_job_waiting_for_a_missing_node_wakes_on_prepare_room() {
    let mut e = engine("[nodes]\nmax_running = 1\nprepare_queue = 1\n");
    let pinned = |kind: &str| JobSpec {
        node: Some("n1".into()),
        ..spec(kind, &[])
    };
    let single = submit(&mut e, pinned("backup"), 0);
    let staged = submit(
        &mut e,
        JobSpec {
            two_stage: Some(true),
            ..pinned("data-upload")
        },
        1,
    );
    node(&mut e, "n1", &[], &[], 2);
    assert_eq!(state(&e, single), Some(JobState::Running));
    assert_eq!(state(&e, staged), Some(JobState::Preparing));
}

#[test]
fn job_level_retry_overrides_the_kind() {
    let mut e = engine("");
    let s = JobSpec {
        retry: Some(lockgate_core::job::RetrySpec {
            times: 1,
            interval_ms: 1_000,
        }),
        ..spec("verify", &[])
    };
    let a = submit(&mut e, s, 0);
    e.finish(a, token(&e, a), Outcome::Failed, None, Timestamp(5))
        .unwrap();
    assert_eq!(e.job(a).unwrap().retry_at, Some(Timestamp(1_005)));
    e.handle_timeout(Timestamp(1_005));
    assert_eq!(
        e.job(a).map(|j| (j.state, j.attempt)),
        Some((JobState::Running, 2))
    );
}

/// Starvation bound. Two slots, jobs of 10 s, and a steady stream of priority-5 jobs (two
/// new ones every 10 s, so the backlog of 10 never drains). With `aging = "1m"` a
/// priority-0 job submitted at t = 0 outranks every priority-5 job submitted after
/// t = 5 × 60 s = 300 s. Ahead of it are then at most the 10 jobs queued at t = 0 plus the
/// 2 × 30 submitted up to 300 s: 70 jobs, served 2 per 10 s, so it starts by t = 350 s.
/// Without aging it never starts.
#[test]
fn aging_bounds_the_wait_of_a_low_priority_job_under_steady_load() {
    let run = |aging: &str| -> Option<u64> {
        let mut e = engine(&format!(
            "[global]\nmax_running = 2\n[leases]\nttl = \"1h\"\n{aging}"
        ));
        let high = || JobSpec {
            priority: Some(5),
            ..spec("backup", &[])
        };
        for _ in 0..12 {
            submit(&mut e, high(), 0);
        }
        let low = submit(
            &mut e,
            JobSpec {
                priority: Some(0),
                ..spec("backup", &[])
            },
            0,
        );
        for step in 1..=200u64 {
            let now = step * 10_000;
            let running: Vec<u64> = e
                .jobs()
                .filter(|j| j.state == JobState::Running)
                .map(|j| j.id)
                .collect();
            if running.contains(&low) {
                return Some(now - 10_000);
            }
            for id in running {
                e.finish(id, token(&e, id), Outcome::Succeeded, None, Timestamp(now))
                    .unwrap();
            }
            submit(&mut e, high(), now);
            submit(&mut e, high(), now);
        }
        None
    };
    let started = run("[queue]\naging = \"1m\"\n").expect("aging admits the low-priority job");
    assert!(started <= 350_000, "started at {started} ms, bound 350 s");
    assert!(
        started >= 300_000,
        "it cannot outrank the backlog before 300 s (started {started} ms)"
    );
    assert_eq!(run(""), None, "without aging the stream starves it");
}

/// Regression: a prepare timeout firing for a job that had already ended panicked.
#[test]
fn prepare_timeout_of_an_ended_job_is_ignored() {
    let mut e = engine("[kinds.data-upload]\ntwo_stage = true\n");
    let id = submit(&mut e, spec("data-upload", &[]), 0);
    e.prepared(id, token(&e, id), Timestamp(1_000)).unwrap();
    e.finish(
        id,
        token(&e, id),
        Outcome::Succeeded,
        None,
        Timestamp(2_000),
    )
    .unwrap();
    e.handle_timeout(Timestamp(1_800_000));
    assert_eq!(state(&e, id), None);
}

#[test]
fn prepare_timeout_fails_a_job_that_never_reports_prepared() {
    let mut e = engine("[leases]\nttl = \"1h\"\n[kinds.data-upload]\ntwo_stage = true\nprepare_timeout = \"10s\"\n");
    let id = submit(&mut e, spec("data-upload", &[]), 0);
    e.handle_timeout(Timestamp(10_000));
    assert_eq!(state(&e, id), None, "failed and gone (no retries)");
}

#[test]
fn live_jobs_are_counted_per_owner_until_they_end() {
    let mut e = engine("[global]\nmax_running = 1\n");
    let owned = |owner: &str| JobSpec {
        owner: owner.to_string(),
        ..spec("backup", &[])
    };
    let a = submit(&mut e, owned("alice"), 0);
    submit(&mut e, owned("alice"), 0);
    submit(&mut e, owned("bob"), 0);
    assert_eq!((e.live_jobs_of("alice"), e.live_jobs_of("bob")), (2, 1));
    e.finish(a, token(&e, a), Outcome::Succeeded, None, Timestamp(1))
        .unwrap();
    assert_eq!(e.live_jobs_of("alice"), 1);
    assert_eq!(e.live_jobs_of("carol"), 0);
    e.check_invariants().unwrap();
}

#[test]
fn a_huge_finish_message_is_cut_to_the_message_quota() {
    let mut e = engine("[quotas]\nmax_message_bytes = 100\n");
    let a = submit(&mut e, spec("backup", &[]), 0);
    let j = e
        .finish(
            a,
            token(&e, a),
            Outcome::Failed,
            Some("x".repeat(10_000)),
            Timestamp(1),
        )
        .unwrap();
    let m = j.message.unwrap();
    assert!(m.starts_with(&"x".repeat(100)), "{m}");
    assert!(
        m.ends_with("[truncated: 9900 more bytes, [quotas].max_message_bytes = 100]"),
        "{m}"
    );
}

#[test]
fn explain_says_where_a_fair_share_priority_comes_from() {
    let mut e = engine(
        "[global]\nmax_running = 14\n[queue]\nfair_share = \"owner\"\naging = \"10m\"\n[owners.bob]\nweight = 2\n",
    );
    for _ in 0..14 {
        submit(&mut e, spec("backup", &[]), 0);
    }
    let waits = submit(&mut e, spec("backup", &[]), 0);
    let why = e.explain(waits, Timestamp(120_000)).unwrap();
    assert_eq!(why.effective_priority, -13.8);
    assert_eq!(
        why.text,
        "queued, 1st in line, effective priority -13.80 (priority 0, +0.20 for 2m waiting at \
         aging 10m, -14.00 fair share: owner \"alice\" has 14 running at weight 1, each worth \
         10m of waiting); global: 14/14 (jobs 1, 2, 3, 4, 5, 6, 7, 8, +6 more)"
    );
    // Without aging or running jobs, no terms: the priority is the job's own.
    let mut plain = engine("[global]\nmax_running = 0\n");
    let j = submit(&mut plain, spec("backup", &[]), 0);
    let text = plain.explain(j, Timestamp(5)).unwrap().text;
    assert!(
        text.starts_with("queued, 1st in line, effective priority 0.00; "),
        "{text}"
    );
}

/// `Engine::share` copies no job: its records are the engine's own (the same allocation),
/// a change copies the record first (the shared one keeps its state), and an engine
/// rebuilt from it is the one a restore from an export at the same instant gives.
#[test]
fn share_hands_out_the_job_records_and_rebuilds_as_a_restore() {
    let mut e = engine("[global]\nmax_running = 2\n[leases]\nttl = \"10s\"\n");
    let ids: Vec<u64> = (0..5)
        .map(|i| submit(&mut e, spec("backup", &[]), i))
        .collect();
    while e.poll_event().is_some() {}
    let shared = e.share();
    assert_eq!(shared.len(), 5);
    for job in shared.jobs() {
        let own = e.job(job.id).expect("live");
        assert!(
            std::ptr::eq(&**job, own),
            "job {} was copied, not shared",
            job.id
        );
    }
    let restored = Engine::restore(
        e.policy().clone(),
        e.export(),
        Timestamp(60_000),
        Mode::Indexed,
    );
    let rebuilt = Engine::from_shared(shared.clone(), Timestamp(60_000));
    assert_eq!(rebuilt.export(), restored.export());
    rebuilt.check_invariants().unwrap();

    // Copy on write: the running job changes in the engine, not in what was shared.
    let t = token(&e, ids[0]);
    e.finish(ids[0], t, Outcome::Succeeded, None, Timestamp(10))
        .unwrap();
    let kept = shared.jobs().find(|j| j.id == ids[0]).unwrap();
    assert_eq!(kept.state, JobState::Running);
    let promoted = shared.jobs().find(|j| j.id == ids[2]).unwrap();
    assert_eq!(promoted.state, JobState::Queued);
    assert_eq!(state(&e, ids[2]), Some(JobState::Running));
    assert!(!std::ptr::eq(&**promoted, e.job(ids[2]).unwrap()));
    // An unchanged queued job is still the same record.
    let waiting = shared.jobs().find(|j| j.id == ids[4]).unwrap();
    assert!(std::ptr::eq(&**waiting, e.job(ids[4]).unwrap()));

    // The next share brings the changed jobs in (the ended one out) and shares the rest.
    let again = e.share();
    assert_eq!(again.len(), 4);
    assert!(again
        .jobs()
        .all(|j| std::ptr::eq(&**j, e.job(j.id).unwrap())));
    assert_eq!(
        Engine::from_shared(again, Timestamp(60_000)).export(),
        Engine::restore(
            e.policy().clone(),
            e.export(),
            Timestamp(60_000),
            Mode::Indexed
        )
        .export()
    );
}
