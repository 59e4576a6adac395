//! Shared and exclusive conflicts, writer starvation, and reservations per scope: one test
//! per rule of docs/policy.md ("Conflicts", "Reservations"), each with the bound it states.

use crate::common::*;
use lockgate_core::engine::{Engine, Mode};
use lockgate_core::job::{JobId, JobSpec, JobState, Outcome};
use lockgate_core::Timestamp;

const RESTIC: &str = r#"
[[conflict]]
keys = ["repo"]
exclusive = "kind in (prune, check)"
"#;

fn both(toml: &str) -> [Engine; 2] {
    [
        Engine::new(policy(toml), Mode::Indexed),
        Engine::new(policy(toml), Mode::Rescan),
    ]
}

fn finish(e: &mut Engine, id: JobId, now: u64) {
    e.finish(id, token(e, id), Outcome::Succeeded, None, Timestamp(now))
        .expect("holder finishes");
}

fn running(e: &Engine, ids: &[JobId]) -> Vec<JobId> {
    ids.iter()
        .copied()
        .filter(|&id| state(e, id) == Some(JobState::Running))
        .collect()
}

fn repo(kind: &str, r: &str) -> JobSpec {
    spec(kind, &[("repo", r)])
}

#[test]
fn backups_share_a_repository_and_prune_needs_it_alone() {
    for mut e in both(RESTIC) {
        let b: Vec<JobId> = (0..3)
            .map(|i| submit(&mut e, repo("backup", "main"), i))
            .collect();
        assert_eq!(running(&e, &b), b, "shared jobs share the key");
        let p = submit(&mut e, repo("prune", "main"), 5);
        assert_eq!(state(&e, p), Some(JobState::Queued));
        let why = e.explain(p, Timestamp(5)).unwrap();
        assert_eq!(why.reasons[0].scope.as_deref(), Some("conflict:repo=main"));
        assert_eq!(
            why.reasons[0].text,
            format!("conflict:repo=main: shared by jobs 1, 2, 3; job {p} (prune) needs it alone")
        );
        // Another repository is unrelated.
        let other = submit(&mut e, repo("prune", "other"), 6);
        assert_eq!(state(&e, other), Some(JobState::Running));
        for (i, &id) in b.iter().enumerate() {
            finish(&mut e, id, 10 + i as u64);
        }
        assert_eq!(
            state(&e, p),
            Some(JobState::Running),
            "alone once the backups end"
        );
        let late = submit(&mut e, repo("backup", "main"), 20);
        let why = e.explain(late, Timestamp(20)).unwrap();
        assert_eq!(
            why.reasons[0].text,
            format!(
                "conflict:repo=main: job {p} (prune) holds it alone; job {late} (backup) shares it"
            )
        );
        finish(&mut e, p, 30);
        assert_eq!(state(&e, late), Some(JobState::Running));
    }
}

#[test]
fn without_exclusive_every_job_needs_the_key_alone() {
    let mut e = engine("[[conflict]]\nkeys = [\"repo\"]\n");
    let a = submit(&mut e, repo("backup", "main"), 0);
    let b = submit(&mut e, repo("backup", "main"), 0);
    assert_eq!(state(&e, a), Some(JobState::Running));
    assert_eq!(state(&e, b), Some(JobState::Queued));
    let why = e.explain(b, Timestamp(0)).unwrap();
    assert_eq!(
        why.reasons[0].text,
        format!("conflict: job {a} holds repo=main")
    );
}

/// The bound of docs/policy.md: an exclusive job waits at most for the holders admitted
/// before it began waiting (plus `exclusive_delay`, 0 here). A stream of backups
/// submitted behind it does not delay it.
#[test]
fn a_prune_behind_a_stream_of_backups_starts_when_the_holders_before_it_end() {
    for mut e in both(RESTIC) {
        let first: Vec<JobId> = (0..4)
            .map(|_| submit(&mut e, repo("backup", "main"), 0))
            .collect();
        let p = submit(&mut e, repo("prune", "main"), 1_000);
        let mut stream = Vec::new();
        for t in (1_100..3_000).step_by(100) {
            stream.push(submit(&mut e, repo("backup", "main"), t));
        }
        assert!(
            running(&e, &stream).is_empty(),
            "backups after the prune wait for it"
        );
        let why = e.explain(stream[0], Timestamp(3_000)).unwrap();
        assert_eq!(why.reasons[0].kind, "exclusive_waiting");
        assert_eq!(
            why.reasons[0].text,
            format!("conflict:repo=main: job {p} (prune) waits to hold it alone; job {} (backup) shares it and is ranked below", stream[0])
        );
        for (i, &id) in first.iter().enumerate() {
            assert_eq!(state(&e, p), Some(JobState::Queued));
            finish(&mut e, id, 3_000 + i as u64);
        }
        assert_eq!(
            state(&e, p),
            Some(JobState::Running),
            "at 3.003 s: the last holder before it ended"
        );
        finish(&mut e, p, 4_000);
        assert_eq!(running(&e, &stream), stream, "then the stream runs, shared");
    }
}

#[test]
fn a_shared_job_ranked_above_the_waiting_exclusive_job_passes_it() {
    let mut e = engine(RESTIC);
    let a = submit(&mut e, repo("backup", "main"), 0);
    let p = submit(&mut e, repo("prune", "main"), 10);
    let urgent = submit(
        &mut e,
        JobSpec {
            priority: Some(5),
            ..repo("backup", "main")
        },
        20,
    );
    assert_eq!(state(&e, urgent), Some(JobState::Running));
    assert_eq!(state(&e, p), Some(JobState::Queued));
    finish(&mut e, a, 30);
    finish(&mut e, urgent, 40);
    assert_eq!(state(&e, p), Some(JobState::Running));
}

#[test]
fn exclusive_delay_lets_shared_jobs_pass_for_that_long() {
    let toml = format!("[leases]\nttl = \"1h\"\n{RESTIC}exclusive_delay = \"30s\"\n");
    for mut e in both(&toml) {
        let a = submit(&mut e, repo("backup", "main"), 0);
        let p = submit(&mut e, repo("prune", "main"), 1_000);
        let early = submit(&mut e, repo("backup", "main"), 20_000);
        assert_eq!(
            state(&e, early),
            Some(JobState::Running),
            "within 30 s of the prune"
        );
        e.handle_timeout(Timestamp(31_000));
        let late = submit(&mut e, repo("backup", "main"), 31_000);
        assert_eq!(
            state(&e, late),
            Some(JobState::Queued),
            "30 s after the prune"
        );
        finish(&mut e, a, 32_000);
        finish(&mut e, early, 33_000);
        assert_eq!(state(&e, p), Some(JobState::Running));
        assert_eq!(state(&e, late), Some(JobState::Queued));
        finish(&mut e, p, 34_000);
        assert_eq!(state(&e, late), Some(JobState::Running));
    }
}

#[test]
fn a_cancelled_prune_lets_the_held_back_backups_run() {
    for mut e in both(RESTIC) {
        let a = submit(&mut e, repo("backup", "main"), 0);
        let p = submit(&mut e, repo("prune", "main"), 1);
        let c = submit(&mut e, repo("check", "main"), 2);
        let b = submit(&mut e, repo("backup", "main"), 3);
        assert_eq!(state(&e, b), Some(JobState::Queued));
        e.cancel(p, false, Timestamp(4)).unwrap();
        assert_eq!(
            state(&e, b),
            Some(JobState::Queued),
            "the check still waits ahead of it"
        );
        e.cancel(c, false, Timestamp(5)).unwrap();
        assert_eq!(state(&e, b), Some(JobState::Running));
        assert_eq!(state(&e, a), Some(JobState::Running));
    }
}

#[test]
fn overlap_with_exclusive_excludes_every_overlapping_holder() {
    let toml = "[[conflict]]\noverlap = \"namespaces\"\nexclusive = \"kind=restore\"\n";
    for mut e in both(toml) {
        let ns = |kind: &str, v: &str| spec(kind, &[("namespaces", v)]);
        let a = submit(&mut e, ns("backup", "app,db"), 0);
        let b = submit(&mut e, ns("backup", "db"), 0);
        let star = submit(&mut e, ns("backup", "*"), 0);
        assert_eq!(
            running(&e, &[a, b, star]),
            vec![a, b, star],
            "shared sets overlap freely"
        );
        let r = submit(&mut e, ns("restore", "web"), 1);
        assert_eq!(
            state(&e, r),
            Some(JobState::Queued),
            "the star holder overlaps web"
        );
        finish(&mut e, star, 2);
        assert_eq!(
            state(&e, r),
            Some(JobState::Running),
            "web overlaps no other holder"
        );
        let r2 = submit(&mut e, ns("restore", "db"), 3);
        assert_eq!(state(&e, r2), Some(JobState::Queued));
        let web = submit(&mut e, ns("backup", "web"), 4);
        assert_eq!(state(&e, web), Some(JobState::Queued), "web is held alone");
        let other = submit(&mut e, ns("backup", "mail"), 4);
        assert_eq!(
            state(&e, other),
            Some(JobState::Running),
            "mail overlaps no exclusive job"
        );
        let db = submit(&mut e, ns("backup", "db"), 5);
        assert_eq!(
            state(&e, db),
            Some(JobState::Queued),
            "the restore of db waits ahead of it"
        );
        finish(&mut e, a, 6);
        finish(&mut e, b, 7);
        assert_eq!(state(&e, r2), Some(JobState::Running));
        assert_eq!(state(&e, db), Some(JobState::Queued));
        finish(&mut e, r2, 8);
        assert_eq!(state(&e, db), Some(JobState::Running));
    }
}

/// Limit reservations: a restore on repo a, held by `restores` (a restore on repo b runs)
/// and by `repo-io[repo=a]` (a stream of backups churns it), reserves `repo-io[repo=a]`
/// once it has waited that limit's own `reserve_after` (1 s; the global one is 10 h). From
/// then on it waits only for the holders admitted before (docs/policy.md,
/// "Reservations"): it starts the instant the other restore ends. Without the limit's
/// `reserve_after` a backup holds the partition at that instant and the restore waits on.
#[test]
fn a_limit_reserves_after_its_own_reserve_after() {
    let toml = |after: &str| {
        format!(
            "[leases]\nttl = \"1h\"\n[queue]\nreserve_after = \"10h\"\n[[limit]]\nname = \"repo-io\"\nper = [\"repo\"]\nmax = 1\n{after}[[limit]]\nname = \"restores\"\nmatch = \"kind=restore\"\nmax = 1\n"
        )
    };
    for (after, starts) in [("reserve_after = \"1s\"\n", true), ("", false)] {
        for mut e in both(&toml(after)) {
            let r1 = submit(&mut e, repo("restore", "b"), 0);
            let mut cur = Some(submit(&mut e, repo("backup", "a"), 0));
            let r2 = submit(&mut e, repo("restore", "a"), 100);
            for t in (300..3_000).step_by(300) {
                e.handle_timeout(Timestamp(t - 50));
                let next = submit(&mut e, repo("backup", "a"), t - 50);
                if let Some(c) = cur.take() {
                    finish(&mut e, c, t);
                }
                cur = (state(&e, next) == Some(JobState::Running)).then_some(next);
            }
            assert_eq!(
                cur.is_none(),
                starts,
                "the stream stalls once the partition is reserved"
            );
            finish(&mut e, r1, 3_000);
            assert_eq!(
                state(&e, r2) == Some(JobState::Running),
                starts,
                "{after:?}"
            );
        }
    }
}

/// Conflict reservations: a restore on repo a, held by a backup on that key and by the
/// `restores` limit, reserves the key after the conflict's `reserve_after`, so the backups
/// queued behind it on that key no longer pass it; those on repo b do.
#[test]
fn a_conflict_reserves_its_key_after_its_own_reserve_after() {
    let toml = "[leases]\nttl = \"1h\"\n[queue]\nreserve_after = \"10h\"\n[[conflict]]\nkeys = [\"repo\"]\nreserve_after = \"1s\"\n[[limit]]\nname = \"restores\"\nmatch = \"kind=restore\"\nmax = 1\n";
    for mut e in both(toml) {
        let other = submit(&mut e, repo("restore", "b"), 0);
        let h = submit(&mut e, repo("backup", "a"), 0);
        let r = submit(&mut e, repo("restore", "a"), 100);
        e.handle_timeout(Timestamp(1_200));
        let b = submit(&mut e, repo("backup", "a"), 1_200);
        let unrelated = submit(&mut e, repo("backup", "c"), 1_200);
        finish(&mut e, h, 1_300);
        assert_eq!(
            state(&e, b),
            Some(JobState::Queued),
            "the key is reserved for the restore"
        );
        assert_eq!(state(&e, unrelated), Some(JobState::Running));
        let why = e.explain(b, Timestamp(1_300)).unwrap();
        assert_eq!(
            why.reasons[0].text,
            format!("conflict:repo=a: reserved for job {r}")
        );
        finish(&mut e, other, 1_400);
        assert_eq!(state(&e, r), Some(JobState::Running));
    }
}

/// The issue's complaint about global strict order: a prune waiting on repo a held a
/// backup on repo b. A strict conflict holds back only jobs on its own key.
#[test]
fn a_strict_conflict_holds_back_only_its_own_key() {
    let rule = "[[conflict]]\nkeys = [\"repo\"]\nmatch = \"kind in (backup, prune)\"\n";
    let strict_conflict = format!("[leases]\nttl = \"1h\"\n{rule}strict = true\n");
    let strict_queue = format!("[leases]\nttl = \"1h\"\n[queue]\nstrict = true\n{rule}");
    for (toml, holds_b) in [(strict_conflict, false), (strict_queue, true)] {
        for mut e in both(&toml) {
            let h = submit(&mut e, repo("backup", "a"), 0);
            // The prune is pinned to a node that is not registered: it cannot run anyway,
            // so without `strict` it would reserve nothing.
            let p = submit(
                &mut e,
                JobSpec {
                    node: Some("gone".into()),
                    ..repo("prune", "a")
                },
                10,
            );
            finish(&mut e, h, 20);
            assert_eq!(state(&e, p), Some(JobState::Queued));
            let b = submit(&mut e, repo("backup", "b"), 30);
            let a = submit(&mut e, repo("backup", "a"), 30);
            assert_eq!(
                state(&e, a),
                Some(JobState::Queued),
                "strict: repo a waits for the prune"
            );
            assert_eq!(state(&e, b) == Some(JobState::Queued), holds_b, "{toml}");
        }
    }
}

/// Pool reservations: a prune costing the whole pool (4 of 4) behind a stream of backups
/// costing 1 each, two always running, never finds the pool free. With the pool's own
/// `reserve_after` (1 s; the global one is 10 h) it reserves the pool at 1.1 s; from then
/// on no backup takes from it, and it waits only for the holders admitted before
/// (docs/policy.md, "Reservations"): the two running backups end one step (0.3 s) apart,
/// so it starts by 1.1 s + 2 steps. The same holds for a per-value pool and for a plain
/// pool written as a table; without `reserve_after` it is still waiting at 3 s.
#[test]
fn a_pool_reserves_after_its_own_reserve_after() {
    let toml = |per: &str, after: &str| {
        format!(
            "[leases]\nttl = \"1h\"\n[queue]\nreserve_after = \"10h\"\n[resources.repo-io]\n{per}capacity = 4\n{after}[kinds.backup]\ncost = {{ repo-io = 1 }}\n[kinds.prune]\ncost = {{ repo-io = 4 }}\n"
        )
    };
    let per_value = "per = [\"repo\"]\n";
    for (per, after, bound) in [
        (per_value, "reserve_after = \"1s\"\n", Some(1_700)),
        ("", "reserve_after = \"1s\"\n", Some(1_700)),
        (per_value, "", None),
        ("", "", None),
    ] {
        for mut e in both(&toml(per, after)) {
            let mut live: std::collections::VecDeque<JobId> = (0..2)
                .map(|_| submit(&mut e, repo("backup", "a"), 0))
                .collect();
            let prune = submit(&mut e, repo("prune", "a"), 100);
            let mut started = None;
            for t in (300..3_000).step_by(300) {
                e.handle_timeout(Timestamp(t - 50));
                let next = submit(&mut e, repo("backup", "a"), t - 50);
                if state(&e, next) == Some(JobState::Running) {
                    live.push_back(next);
                }
                if let Some(oldest) = live.pop_front() {
                    finish(&mut e, oldest, t);
                }
                if started.is_none() && state(&e, prune) == Some(JobState::Running) {
                    started = Some(t);
                }
            }
            match bound {
                Some(b) => assert!(
                    started.is_some_and(|t| t <= b),
                    "{per:?}: started at {started:?}, bound {b}"
                ),
                None => assert_eq!(started, None, "{per:?}: the stream starves the prune"),
            }
        }
    }
}

#[test]
fn the_new_keys_round_trip_and_diff() {
    let text = "[[limit]]\nname = \"restores\"\nmatch = \"kind=restore\"\nmax = 2\nreserve_after = \"30s\"\nstrict = true\n\n[[conflict]]\nkeys = [\"repo\"]\nexclusive = \"kind in (prune, check)\"\nexclusive_delay = \"30s\"\nreserve_after = \"1m\"\nstrict = true\n";
    let p = policy(text);
    let c = &p.conflicts[0];
    assert_eq!(c.exclusive_delay, std::time::Duration::from_secs(30));
    assert_eq!(c.reserve.after, Some(std::time::Duration::from_secs(60)));
    assert!(c.reserve.strict && p.limits[0].reserve.strict);
    let written = p.to_toml_string();
    assert_eq!(policy(&written), p, "{written}");
    let relaxed = policy(&text.replace("exclusive_delay = \"30s\"", "exclusive_delay = \"1m\""));
    assert_eq!(
        p.diff(&relaxed),
        vec!["conflict[0]: exclusive_delay \"30s\" -> \"1m\"".to_string()]
    );
}

/// restic with a recovery step: a lost holder leaves restic's lock behind.
const RECOVER: &str = r#"
[leases]
ttl = "10s"
[[conflict]]
keys = ["repo"]
match = "tool=restic"
exclusive = "kind in (prune, check, restic-unlock)"
recover = "restic-unlock"
"#;

fn restic(kind: &str, r: &str) -> JobSpec {
    spec(kind, &[("repo", r), ("tool", "restic")])
}

#[test]
fn a_lost_holder_gets_its_key_recovered_alone_before_the_next_job() {
    for mut e in both(RECOVER) {
        node(&mut e, "n1", &[], &["restic-unlock"], 0);
        let lost = submit(&mut e, restic("backup", "main"), 0);
        let live = submit(&mut e, restic("backup", "main"), 1);
        assert_eq!(running(&e, &[lost, live]), [lost, live]);
        // `lost` stops renewing; `live` renews. A prune waits for both.
        let prune = submit(&mut e, restic("prune", "main"), 2);
        for t in [3_000, 6_000, 9_000, 12_000] {
            e.heartbeat(live, token(&e, live), Timestamp(t)).unwrap();
        }
        e.handle_timeout(Timestamp(12_001));
        assert_eq!(state(&e, lost), None, "ended: lost");
        let rec: Vec<_> = e
            .jobs()
            .filter(|j| j.owner == lockgate_core::engine::RECOVER_OWNER)
            .cloned()
            .collect();
        assert_eq!(rec.len(), 1, "one recovery for repo=main");
        let r = &rec[0];
        assert_eq!(r.kind, "restic-unlock");
        assert_eq!(r.attrs.get("repo"), Some("main"));
        assert_eq!(r.attrs.get("tool"), Some("restic"));
        assert!(
            r.message
                .as_deref()
                .unwrap()
                .contains(&format!("after job {lost} lost its holder")),
            "{r:?}"
        );
        // Never beside a live holder of the repository; the prune waits behind it.
        assert_eq!(state(&e, r.id), Some(JobState::Queued));
        let why = e.explain(r.id, Timestamp(12_002)).unwrap();
        assert!(why.text.contains("1st in line"), "{}", why.text);
        assert!(
            why.text.contains(&format!("shared by job {live}")),
            "{}",
            why.text
        );
        let why = e.explain(prune, Timestamp(12_002)).unwrap();
        assert!(why.text.contains("2nd in line"), "{}", why.text);
        let late = submit(&mut e, restic("backup", "main"), 12_003);
        assert_eq!(
            state(&e, late),
            Some(JobState::Queued),
            "no new holder passes it"
        );
        finish(&mut e, live, 12_004);
        assert_eq!(state(&e, r.id), Some(JobState::Running), "alone, first");
        assert_eq!(
            e.job(r.id).unwrap().node(),
            Some("n1"),
            "on a node with the handler"
        );
        assert_eq!(state(&e, prune), Some(JobState::Queued));
        // A second loss while it waits or runs adds nothing; a lost recovery starts none.
        e.handle_timeout(Timestamp(30_000));
        let again = e
            .jobs()
            .filter(|j| j.owner == lockgate_core::engine::RECOVER_OWNER)
            .count();
        assert_eq!(
            again, 0,
            "the recovery was lost itself and started no other"
        );
        assert_eq!(state(&e, prune), Some(JobState::Running));
    }
}

#[test]
fn a_recovery_kind_that_would_not_run_alone_is_refused() {
    let bad = RECOVER.replace(
        "kind in (prune, check, restic-unlock)",
        "kind in (prune, check)",
    );
    let err = lockgate_core::Policy::from_toml(&bad, Some("p.toml")).unwrap_err();
    assert!(
        err.to_string().contains("must run alone on the key"),
        "{err}"
    );
    assert!(err.to_string().contains("p.toml:8"), "{err}");
}
