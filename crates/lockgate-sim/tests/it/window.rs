//! `[queue] order = "window"` against FIFO and the lower bound: on the three examples and
//! on generated PBS-shaped nights ([`lockgate_sim::pbs_shape`]). The target (issue 14):
//! the makespan is at most the lower bound / 0.95, on every example and every night (a
//! property of the schedule, in virtual time), and never above FIFO's.
//!
//! `cargo test -p lockgate-sim --test it window_table -- --nocapture` prints docs/benchmarks.md's
//! table.

use crate::common::*;
use lockgate_core::policy::QueueOrder;
use lockgate_core::Policy;
use lockgate_sim::{lower_bound, pbs_shape, simulate, NodeSpec, Summary, WorkloadJob};

/// The generated nights the target is asserted on.
const SEEDS: [u64; 10] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

/// Makespan in ms under `order`, with every limit checked.
fn makespan(policy: &Policy, order: QueueOrder, nodes: &[NodeSpec], jobs: &[WorkloadJob]) -> u64 {
    let mut policy = policy.clone();
    policy.queue.order = order;
    let run = simulate(&policy, nodes, jobs).unwrap();
    let s = Summary::from_run(&run);
    assert_eq!(s.unfinished, 0, "{order:?}: unfinished jobs");
    for p in &s.scopes {
        if let Some(limit) = p.limit {
            assert!(p.peak <= limit, "{order:?}: {} over its limit", p.scope);
        }
    }
    run.jobs.iter().filter_map(|r| r.finished_ms).max().unwrap()
}

/// (name, FIFO makespan, window makespan, bound), all in ms.
fn row(name: String, policy: &Policy, nodes: &[NodeSpec], jobs: &[WorkloadJob]) -> Row {
    Row {
        name,
        fifo: makespan(policy, QueueOrder::Fifo, nodes, jobs),
        window: makespan(policy, QueueOrder::Window, nodes, jobs),
        bound: lower_bound(policy, nodes, jobs).ms,
    }
}

struct Row {
    name: String,
    fifo: u64,
    window: u64,
    bound: u64,
}

fn generated(seed: u64) -> Row {
    let g = pbs_shape::generate(seed);
    let policy = Policy::from_toml(&g.policy_toml, None).unwrap();
    row(format!("pbs-shape seed {seed}"), &policy, &g.nodes, &g.jobs)
}

/// The target: at least 0.95 of the bound.
const TARGET: f64 = 0.95;

/// Asserts the target on one row, and that window is no worse than FIFO.
fn assert_target(r: &Row) {
    let ratio = r.bound as f64 / r.window as f64;
    assert!(
        ratio >= TARGET,
        "{}: window makespan {} ms, bound {} ms: {ratio:.3} of the bound",
        r.name,
        r.window,
        r.bound
    );
    assert!(
        r.window <= r.fifo,
        "{}: window {} ms > FIFO {} ms",
        r.name,
        r.window,
        r.fifo
    );
}

#[test]
fn window_packs_generated_pbs_nights_close_to_the_bound() {
    // Every night within 0.95 of the bound; FIFO is near 0.55 on these.
    for seed in SEEDS {
        let r = generated(seed);
        assert!(r.window < r.fifo, "seed {seed}: window no better than FIFO");
        assert_target(&r);
    }
}

#[test]
fn window_holds_the_target_on_nights_the_table_does_not_list() {
    // Seeds 11 to 30: the order is not tuned to the table's ten.
    for seed in 11..=30 {
        assert_target(&generated(seed));
    }
}

#[test]
fn window_is_no_worse_than_fifo_on_the_examples() {
    for name in EXAMPLES {
        let i = example(name);
        let r = row(name.to_string(), &i.policy, &i.nodes, &i.jobs);
        assert!(
            r.window <= r.fifo,
            "{name}: window {} > fifo {}",
            r.window,
            r.fifo
        );
        assert!(
            r.bound as f64 / r.window as f64 >= 0.95,
            "{name}: {}",
            r.window
        );
    }
}

#[test]
fn window_table() {
    let mut rows: Vec<Row> = EXAMPLES
        .iter()
        .map(|name| {
            let i = example(name);
            row(name.to_string(), &i.policy, &i.nodes, &i.jobs)
        })
        .collect();
    rows.extend(SEEDS.iter().map(|&s| generated(s)));
    let secs = |ms: u64| format!("{:.0} s", ms as f64 / 1000.0);
    println!("| workload | FIFO makespan | window makespan | lower bound | bound / FIFO | bound / window |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.3} |",
            r.name,
            secs(r.fifo),
            secs(r.window),
            secs(r.bound),
            r.bound as f64 / r.fifo as f64,
            r.bound as f64 / r.window as f64
        );
        assert!(r.window > 0 && r.bound <= r.window && r.bound <= r.fifo);
    }
    // Asserted after printing, so that a failing row is in the output.
    rows.iter().for_each(assert_target);
}

/// The wait bound without aging: a job's planned start is at most `horizon` after its
/// arrival, it reserves what blocks it `reserve_after` later, and from then on only the
/// jobs already ranked ahead of it can go first, so it waits at most `horizon +
/// reserve_after +` the run time of every other job (each could run before it, one after
/// another, in the worst case).
const STREAM_POLICY: &str = r#"
[global]
max_running = 3
[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 1
values = { ds0 = 2 }
[[limit]]
name = "per-kind"
per = ["kind"]
values = { verify = 1 }
[[conflict]]
keys = ["datastore", "group"]
[queue]
order = "window"
window_horizon = "2m"
reserve_after = "30s"
"#;

fn stream_job((kind, ds, group, run, gap): (u8, u8, u8, u16, u16), at: &mut f64) -> WorkloadJob {
    *at += f64::from(gap);
    let mut attrs = std::collections::BTreeMap::new();
    attrs.insert("datastore".to_string(), format!("ds{ds}"));
    if kind == 0 {
        attrs.insert("group".to_string(), format!("vm/{group}"));
    }
    WorkloadJob {
        at: *at,
        kind: if kind == 0 { "backup" } else { "verify" }.to_string(),
        attrs,
        owner: None,
        priority: None,
        node: None,
        node_selector: None,
        two_stage: None,
        prepare_s: None,
        run_s: f64::from(run),
        cost: None,
        size_mb: None,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    #[test]
    fn window_order_never_exceeds_a_limit_and_bounds_every_wait(
        spec in proptest::collection::vec((0u8..2, 0u8..3, 0u8..4, 1u16..600, 0u16..40), 1..60)
    ) {
        let policy = Policy::from_toml(STREAM_POLICY, None).unwrap();
        let mut at = 0.0;
        let jobs: Vec<WorkloadJob> = spec.iter().map(|&s| stream_job(s, &mut at)).collect();
        // `makespan` asserts every job finished and no scope peaked over its limit.
        makespan(&policy, QueueOrder::Window, &[], &jobs);
        let run = simulate(&policy, &[], &jobs).unwrap();
        let total: u64 = jobs.iter().map(|j| j.run_ms()).sum();
        let (h, r) = (policy.queue.window_horizon, policy.queue.reserve_after);
        for (j, rec) in jobs.iter().zip(&run.jobs) {
            let wait = rec.admitted_ms.unwrap() - rec.submitted_ms;
            let bound = (h + r).as_millis() as u64 + total - j.run_ms();
            proptest::prop_assert!(wait <= bound, "wait {wait} ms over {bound} ms");
        }
    }
}
