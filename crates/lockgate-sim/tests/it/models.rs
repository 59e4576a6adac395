//! Small scenarios whose answers can be worked out by hand.

use crate::common::*;
use lockgate_sim::{lower_bound, simulate, velero, Summary};

const ONE_NODE: &str = r#"[{"name": "n1"}]"#;

#[test]
fn two_stage_job_times_and_wait() {
    let i = input(
        "[nodes]\nmax_running = 1\n[kinds.data-upload]\ntwo_stage = true\n",
        ONE_NODE,
        "{\"at\": 1, \"kind\": \"data-upload\", \"node_selector\": \"\", \"prepare_s\": 5, \"run_s\": 60}\n\
         {\"at\": 2, \"kind\": \"data-upload\", \"node_selector\": \"\", \"prepare_s\": 5, \"run_s\": 60}\n",
    );
    let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    let r = &run.jobs[0];
    assert_eq!(
        (r.admitted_ms, r.started_ms, r.finished_ms),
        (Some(1_000), Some(6_000), Some(66_000))
    );
    assert_eq!(r.node.as_deref(), Some("n1"));
    // The second is admitted to prepare only when the first ends (prepare_queue = 0).
    let r = &run.jobs[1];
    assert_eq!(
        (r.admitted_ms, r.started_ms, r.finished_ms),
        (Some(66_000), Some(71_000), Some(131_000))
    );
    let s = Summary::from_run(&run);
    assert_eq!(
        (s.makespan_s, s.wait_s.p50, s.wait_s.max),
        (131.0, 0.0, 64.0)
    );
    // Lower bound: the node's prepare bound (1 + 0) is held for prepare + run by each job,
    // from the first arrival: 1 + 2 * 65 = 131 s, which this schedule reaches.
    let b = lower_bound(&i.policy, &i.nodes, &i.jobs);
    assert_eq!((b.ms, b.by.as_str()), (131_000, "prepare bound of n1"));
}

#[test]
fn leases_are_renewed_so_long_jobs_are_never_lost() {
    let i = input(
        "[leases]\nttl = \"3s\"\n[nodes]\nttl = \"3s\"\n",
        ONE_NODE,
        "{\"at\": 0, \"kind\": \"backup\", \"node\": \"n1\", \"run_s\": 3600}\n",
    );
    let s = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    assert_eq!((s.unfinished, s.makespan_s), (0, 3600.0));
}

#[test]
fn jobs_that_can_never_run_are_unfinished_not_hung() {
    let i = input(
        "[[limit]]\nname = \"no-sync\"\nmatch = \"kind=sync\"\nmax = 0\n",
        ONE_NODE,
        "{\"at\": 0, \"kind\": \"sync\", \"run_s\": 10}\n{\"at\": 0, \"kind\": \"backup\", \"run_s\": 10}\n",
    );
    let s = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    assert_eq!((s.unfinished, s.makespan_s), (1, 10.0));
    // The impossible job is left out of the bound.
    assert_eq!(lower_bound(&i.policy, &i.nodes, &i.jobs).ms, 10_000);
}

#[test]
fn invalid_job_names_its_position() {
    let i = input(
        "",
        ONE_NODE,
        "{\"at\": 0, \"kind\": \"backup\", \"run_s\": 1, \"node_selector\": \"a b\"}\n",
    );
    let e = simulate(&i.policy, &i.nodes, &i.jobs).unwrap_err();
    assert!(
        e.to_string().starts_with("workload job 1: node_selector"),
        "{e}"
    );
}

/// Velero places by pod count, not free slots, and notices a freed slot only on its 5 s tick.
#[test]
fn velero_model_spreads_by_pod_count_and_polls() {
    let nodes = r#"[{"name": "big", "labels": {"size": "big"}}, {"name": "small"}]"#;
    let jobs: String = (0..4)
        .map(|_| "{\"at\": 0, \"kind\": \"data-upload\", \"node_selector\": \"\", \"run_s\": 12}\n")
        .collect();
    let policy =
        "[nodes]\nmax_running = 1\n[[nodes.rule]]\nselector = \"size=big\"\nmax_running = 2\n";
    let i = input(policy, nodes, &jobs);
    let v = velero::simulate(&i.policy, &i.nodes, &i.jobs);
    let on = |n: &str| {
        v.jobs
            .iter()
            .filter(|r| r.node.as_deref() == Some(n))
            .count()
    };
    assert_eq!((on("big"), on("small")), (2, 2));
    // "small" runs one at 0, the other at the first tick after 12 s: 15 s, ends at 27 s.
    let small: Vec<_> = v
        .jobs
        .iter()
        .filter(|r| r.node.as_deref() == Some("small"))
        .map(|r| r.started_ms)
        .collect();
    assert_eq!(small, [Some(0), Some(15_000)]);
    assert_eq!(Summary::from_run(&v).makespan_s, 27.0);
    // lockgate places by free room: three at once, the fourth when the first slot frees.
    let l = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    assert_eq!(l.makespan_s, 24.0);
}

#[test]
fn velero_model_exposes_everything_without_a_prepare_queue() {
    let jobs: String = (0..10)
        .map(|_| "{\"at\": 0, \"kind\": \"data-upload\", \"node_selector\": \"\", \"two_stage\": true, \"prepare_s\": 10, \"run_s\": 60}\n")
        .collect();
    let i = input("[nodes]\nmax_running = 1\n", ONE_NODE, &jobs);
    let v = Summary::from_run(&velero::simulate(&i.policy, &i.nodes, &i.jobs));
    let exposed = v
        .scopes
        .iter()
        .find(|s| s.scope == "node-prepare:n1")
        .unwrap();
    assert_eq!((exposed.peak, exposed.limit), (10, Some(1)));
    let l = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    let exposed = l
        .scopes
        .iter()
        .find(|s| s.scope == "node-prepare:n1")
        .unwrap();
    assert_eq!((exposed.peak, exposed.limit), (1, Some(1)));
}
