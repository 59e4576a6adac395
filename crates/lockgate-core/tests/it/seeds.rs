//! Table tests that reproduce the seeds' own examples.

use crate::common::*;
use lockgate_core::job::{JobSpec, JobState, Outcome};
use lockgate_core::Timestamp;
use rstest::rstest;

/// Velero design: "Global Number is 3 ... a per-node number for node-2, say 5, then the
/// concurrent number for each node are node-1: 3, node-2: 5, node-3: 3".
#[test]
fn velero_global_three_node2_rule_five() {
    let mut e = engine(
        r#"
        [nodes]
        max_running = 3
        [[nodes.rule]]
        selector = "kubernetes.io/hostname=node-2"
        max_running = 5
        "#,
    );
    for n in ["node-1", "node-2", "node-3"] {
        node(
            &mut e,
            n,
            &[("kubernetes.io/hostname", n)],
            &["data-upload"],
            0,
        );
        for _ in 0..10 {
            let s = JobSpec {
                node: Some(n.into()),
                ..spec("data-upload", &[])
            };
            submit(&mut e, s, 0);
        }
    }
    let running = |n: &str| {
        e.jobs()
            .filter(|j| j.state == JobState::Running && j.node() == Some(n))
            .count()
    };
    assert_eq!(
        (running("node-1"), running("node-2"), running("node-3")),
        (3, 5, 3)
    );
    assert_eq!(e.node("node-2").unwrap().number, Some(5));
    assert_eq!(e.node("node-1").unwrap().number, Some(3));
}

/// Several matching rules: the smallest number wins; no rule: the global number.
#[rstest]
#[case(&[("type", "big"), ("zone", "eu")], Some(2))]
#[case(&[("type", "big")], Some(5))]
#[case(&[("zone", "eu")], Some(2))]
#[case(&[("role", "database")], Some(0))]
#[case(&[("role", "database"), ("type", "big")], Some(0))]
#[case(&[("other", "x")], Some(3))]
fn smallest_matching_rule_wins(#[case] labels: &[(&str, &str)], #[case] expected: Option<u32>) {
    let mut e = engine(
        r#"
        [nodes]
        max_running = 3
        [[nodes.rule]]
        selector = "type=big"
        max_running = 5
        [[nodes.rule]]
        selector = "zone in (eu, us), type notin (tiny)"
        max_running = 2
        [[nodes.rule]]
        selector = "role=database"
        max_running = 0
        "#,
    );
    node(&mut e, "n", labels, &[], 0);
    assert_eq!(e.node("n").unwrap().number, expected);
}

/// A rule with 0: pinned jobs wait and say why; movable jobs go elsewhere.
#[test]
fn zero_rule_runs_nothing_and_says_why() {
    let mut e = engine(
        r#"
        [nodes]
        max_running = 2
        [[nodes.rule]]
        selector = "role=database"
        max_running = 0
        "#,
    );
    node(&mut e, "db-1", &[("role", "database")], &["data-upload"], 0);
    node(&mut e, "w-1", &[("role", "worker")], &["data-upload"], 0);
    let pinned = submit(
        &mut e,
        JobSpec {
            node: Some("db-1".into()),
            ..spec("data-upload", &[])
        },
        0,
    );
    let movable = submit(
        &mut e,
        JobSpec {
            node_selector: Some(String::new()),
            ..spec("data-upload", &[])
        },
        0,
    );
    assert_eq!(state(&e, pinned), Some(JobState::Queued));
    assert_eq!(e.job(movable).unwrap().node(), Some("w-1"));
    let why = e.explain(pinned, Timestamp(0)).unwrap();
    assert_eq!(why.reasons[0].kind, "zero");
    assert_eq!(
        why.reasons[0].text,
        "node:db-1 is 0 (rule \"role=database\")"
    );
}

/// Velero issue 8344: 100 data-mover tasks, loadConcurrency 2, prepare queue 1: never more
/// than 3 exposed (preparing, prepared or running) on the node, and the run slots stay busy.
#[test]
fn hundred_pvcs_never_expose_more_than_the_prepare_bound() {
    let mut e = engine(
        r#"
        [nodes]
        max_running = 2
        prepare_queue = 1
        [kinds.data-upload]
        two_stage = true
        "#,
    );
    node(&mut e, "node-1", &[], &["data-upload"], 0);
    let ids: Vec<u64> = (0..100)
        .map(|_| {
            submit(
                &mut e,
                JobSpec {
                    node_selector: Some(String::new()),
                    ..spec("data-upload", &[])
                },
                0,
            )
        })
        .collect();
    let mut now = 0;
    let mut done = 0;
    while done < 100 {
        now += 1;
        let n = e.node("node-1").unwrap();
        assert!(
            n.running + n.preparing + n.prepared <= 3,
            "exposed {}",
            n.occupied()
        );
        assert!(n.running <= 2);
        let live: Vec<_> = ids.iter().filter_map(|&id| e.job(id).cloned()).collect();
        let queued = live.iter().filter(|j| j.state == JobState::Queued).count();
        if queued > 0 {
            assert_eq!(
                n.running + n.preparing + n.prepared,
                3,
                "the pipeline stays full while work waits"
            );
        }
        // Each step: every preparing job finishes its prepare step, then one running job finishes.
        for j in live.iter().filter(|j| j.state == JobState::Preparing) {
            e.prepared(j.id, token(&e, j.id), Timestamp(now)).unwrap();
        }
        if let Some(j) = ids
            .iter()
            .filter_map(|&id| e.job(id))
            .find(|j| j.state == JobState::Running)
            .cloned()
        {
            e.finish(
                j.id,
                token(&e, j.id),
                Outcome::Succeeded,
                None,
                Timestamp(now),
            )
            .unwrap();
            done += 1;
        }
    }
}

/// PBS RFC: a second backup of the same group on the same datastore waits instead of failing.
#[test]
fn same_group_same_datastore_waits_instead_of_failing() {
    let mut e = engine(
        r#"
        [[conflict]]
        keys = ["datastore", "group"]
        "#,
    );
    let first = submit(
        &mut e,
        spec("backup", &[("datastore", "ds1"), ("group", "vm/100")]),
        0,
    );
    let second = submit(
        &mut e,
        spec("backup", &[("datastore", "ds1"), ("group", "vm/100")]),
        1,
    );
    let other = submit(
        &mut e,
        spec("backup", &[("datastore", "ds1"), ("group", "vm/101")]),
        2,
    );
    assert_eq!(state(&e, first), Some(JobState::Running));
    assert_eq!(state(&e, second), Some(JobState::Queued));
    assert_eq!(state(&e, other), Some(JobState::Running));
    let why = e.explain(second, Timestamp(3)).unwrap();
    assert_eq!(why.reasons.len(), 1);
    assert_eq!(
        why.reasons[0].text,
        format!("conflict: job {first} holds datastore=ds1, group=vm/100")
    );
    e.finish(
        first,
        token(&e, first),
        Outcome::Succeeded,
        None,
        Timestamp(4),
    )
    .unwrap();
    assert_eq!(state(&e, second), Some(JobState::Running));
}

/// PBS RFC: "available threads 10, tape jobs take 4": two at once, the third waits.
#[test]
fn threads_ten_tape_costs_four_two_at_once() {
    let mut e = engine(
        r#"
        [resources]
        threads = 10
        [kinds.tape-backup]
        cost = { threads = 4 }
        [kinds.backup]
        cost = { threads = 1 }
        "#,
    );
    let tapes: Vec<u64> = (0..3)
        .map(|i| submit(&mut e, spec("tape-backup", &[]), i))
        .collect();
    let states: Vec<_> = tapes.iter().map(|&id| state(&e, id).unwrap()).collect();
    assert_eq!(
        states,
        [JobState::Running, JobState::Running, JobState::Queued]
    );
    assert_eq!(
        e.explain(tapes[2], Timestamp(5)).unwrap().reasons[0].text,
        "pool:threads: needs 4, 2 free"
    );
    // Best effort: two small backups still fit in the 2 free threads.
    let small: Vec<u64> = (0..3)
        .map(|i| submit(&mut e, spec("backup", &[]), 10 + i))
        .collect();
    let states: Vec<_> = small.iter().map(|&id| state(&e, id).unwrap()).collect();
    assert_eq!(
        states,
        [JobState::Running, JobState::Running, JobState::Queued]
    );
}

/// policy.md's explain texts for limits, with the holders.
#[test]
fn per_datastore_limit_explains_with_holders() {
    let mut e = engine(
        r#"
        [[limit]]
        name = "per-datastore"
        per = ["datastore"]
        max = 2
        values = { ds-fast = 4 }
        "#,
    );
    let a = submit(&mut e, spec("backup", &[("datastore", "ds1")]), 0);
    let b = submit(&mut e, spec("backup", &[("datastore", "ds1")]), 1);
    let c = submit(&mut e, spec("backup", &[("datastore", "ds1")]), 2);
    let fast: Vec<u64> = (0..5)
        .map(|i| submit(&mut e, spec("backup", &[("datastore", "ds-fast")]), 3 + i))
        .collect();
    assert_eq!(count(&e, JobState::Running), 6);
    assert_eq!(state(&e, fast[4]), Some(JobState::Queued));
    let why = e.explain(c, Timestamp(10)).unwrap();
    assert_eq!(
        why.reasons[0].text,
        format!("limit:per-datastore[datastore=ds1]: 2/2 (jobs {a}, {b})")
    );
    assert_eq!(
        why.reasons[0].scope.as_deref(),
        Some("limit:per-datastore[datastore=ds1]")
    );
    assert_eq!(
        (why.reasons[0].count, why.reasons[0].limit),
        (Some(2), Some(2))
    );
    assert_eq!(why.position, 1);
}
