//! The contention model and the sweep, on examples/contention where the answer is known:
//! per datastore, 150 MB/s with one job, 300 with two, 333.3 with three (the peak), 307.7
//! with four; 12 jobs of 9000 MB each per datastore.

use crate::common::*;
use lockgate_sim::{
    baseline, parse_contention, simulate, simulate_with, sweep, Baseline, Contention, Summary,
    SweepSpec,
};

fn contention_example() -> (Input, Contention) {
    let i = example("contention");
    let path = example_dir("contention").join("contention.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    (i, parse_contention(&text, "contention.toml").unwrap())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.01
}

#[test]
fn sweep_names_the_limit_where_throughput_peaks() {
    let (i, c) = contention_example();
    let spec = SweepSpec::parse("limit:per-datastore=1..8").unwrap();
    let r = sweep(&i.policy, &i.nodes, &i.jobs, &spec, Some(&c)).unwrap();
    assert_eq!(r.best, 3);
    let at = |v: u32| r.points.iter().find(|p| p.value == v).unwrap();
    // 12 x 9000 MB over the peak throughput of 400/1.2 MB/s: 324 s, the analytic optimum.
    assert!(close(at(3).makespan_s, 324.0), "{}", at(3).makespan_s);
    // One at a time: 12 x 60 s; two: 6 waves of 18000 MB at 300 MB/s.
    assert!(close(at(1).makespan_s, 720.0), "{}", at(1).makespan_s);
    assert!(close(at(2).makespan_s, 360.0), "{}", at(2).makespan_s);
    // Three share 333.3 MB/s: 111.1 each against 150 alone.
    assert!(close(at(3).slowdown.p50, 1.35), "{:?}", at(3).slowdown);
    assert_eq!(at(1).slowdown.p95, 1.0);
    assert_eq!(r.points.len(), 8);
    assert!(r
        .to_table()
        .contains("best: limit:per-datastore = 3 (makespan 5m24s)"));
}

#[test]
fn unlimited_under_contention_is_slower_than_the_best_limit() {
    let (i, c) = contention_example();
    let u = Summary::from_run(&baseline(
        Baseline::Unlimited,
        &i.policy,
        &i.nodes,
        &i.jobs,
        Some(&c),
    ));
    // 12 at once: 400 / 2.1 MB/s for 108000 MB = 567 s.
    assert!(close(u.makespan_s, 567.0), "{}", u.makespan_s);
    let l = Summary::from_run(&simulate_with(&i.policy, &i.nodes, &i.jobs, Some(&c)).unwrap());
    assert!(close(l.makespan_s, 324.0), "{}", l.makespan_s);
    assert!(u.makespan_s > l.makespan_s * 1.7);
    assert!(u.slowdown.unwrap().p50 > 9.0);
}

#[test]
fn without_contention_the_run_is_unchanged() {
    let i = example("pbs-like");
    let none = parse_contention(
        "[[resource]]\nname = \"x\"\ncapacity_mb_s = 1\nmatch = \"datastore=nowhere\"\n",
        "c.toml",
    )
    .unwrap();
    let plain = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    assert_eq!(
        simulate_with(&i.policy, &i.nodes, &i.jobs, Some(&none)).unwrap(),
        plain
    );
    assert_eq!(Summary::from_run(&plain).slowdown, None);
}

#[test]
fn a_preempted_job_leaves_the_flows() {
    // One datastore of 100 MB/s: a 6000 MB backup runs alone at 100 MB/s; an urgent
    // restore preempts it at 10 s (limit 1), and then runs alone too.
    let i = input(
        "[[limit]]\nname = \"ds\"\nmatch = \"datastore=d\"\nmax = 1\n[kinds.restore]\npriority = 10\npreempt = true\n",
        "[]",
        "{\"at\": 0, \"kind\": \"backup\", \"attrs\": {\"datastore\": \"d\"}, \"size_mb\": 6000, \"run_s\": 1}\n\
         {\"at\": 10, \"kind\": \"restore\", \"attrs\": {\"datastore\": \"d\"}, \"size_mb\": 1000, \"run_s\": 1}\n",
    );
    let c = parse_contention(
        "[[resource]]\nname = \"d\"\ncapacity_mb_s = 100\nmatch = \"datastore=d\"\n",
        "c.toml",
    )
    .unwrap();
    let run = simulate_with(&i.policy, &i.nodes, &i.jobs, Some(&c)).unwrap();
    let s = Summary::from_run(&run);
    assert_eq!(s.unfinished, 0);
    // The backup is stopped 1 s after the request (11 s), the restore runs 11..21 s
    // alone, the backup runs again from the start: 21 + 60 = 81 s.
    assert_eq!(run.jobs[1].started_ms, Some(11_000));
    assert_eq!(run.jobs[1].finished_ms, Some(21_000));
    assert_eq!(run.jobs[0].finished_ms, Some(81_000));
}
