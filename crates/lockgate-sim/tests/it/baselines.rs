//! The anchors' admission models (`--compare pbs|bacula|velero-1.17|unlimited`) on small
//! workloads whose answers are worked out by hand.

use crate::common::*;
use lockgate_sim::baselines::{bacula, pbs, unlimited, velero117};
use lockgate_sim::{simulate, Summary};

fn job(at: u32, kind: &str, attrs: &str, extra: &str, run_s: u32) -> String {
    format!("{{\"at\": {at}, \"kind\": \"{kind}\", \"attrs\": {{{attrs}}}{extra}, \"run_s\": {run_s}}}\n")
}

#[test]
fn pbs_second_job_on_a_locked_group_fails_and_retries() {
    let g = "\"datastore\": \"ds1\", \"group\": \"vm/100\"";
    let jobs = job(0, "backup", g, "", 100) + &job(0, "backup", g, "", 100);
    let i = input(
        "[[conflict]]\nkeys = [\"datastore\", \"group\"]\n",
        "[]",
        &jobs,
    );
    let run = pbs::simulate(&i.policy, &i.nodes, &i.jobs, None);
    // The second fails at 0 and at 60 s (the group is locked until 100 s), gets the lock
    // at 120 s, ends at 220 s.
    assert_eq!(pbs::RETRY_MS, 60_000);
    assert_eq!(run.jobs[1].admitted_ms, Some(120_000));
    assert_eq!(run.jobs[1].finished_ms, Some(220_000));
    let s = Summary::from_run(&run);
    assert_eq!((s.makespan_s, s.wait_s.max), (220.0, 120.0));
    let failed = s
        .scopes
        .iter()
        .find(|p| p.scope == "pbs-failed-attempts")
        .unwrap();
    assert_eq!(failed.peak, 2);
    // lockgate queues it instead: it starts when the first ends.
    let l = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    assert_eq!((l.makespan_s, l.wait_s.max), (200.0, 100.0));
}

#[test]
fn bacula_head_of_line_blocking_delays_a_job_that_could_run() {
    let policy = "[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 1\n";
    let jobs = job(
        0,
        "backup",
        "\"datastore\": \"ds1\"",
        ", \"priority\": 10",
        100,
    ) + &job(
        1,
        "backup",
        "\"datastore\": \"ds1\"",
        ", \"priority\": 10",
        100,
    ) + &job(
        2,
        "backup",
        "\"datastore\": \"ds2\"",
        ", \"priority\": 0",
        100,
    );
    let i = input(policy, "[]", &jobs);
    let run = bacula::simulate(&i.policy, &i.nodes, &i.jobs, None);
    let admitted: Vec<_> = run.jobs.iter().map(|r| r.admitted_ms).collect();
    // A runs 0..100; B waits for ds1 and is started on the 30 s tick after A ends (120 s);
    // C (less urgent, on the free ds2) waits behind both, until the tick after B ends.
    assert_eq!(admitted, [Some(0), Some(120_000), Some(240_000)]);
    assert_eq!(Summary::from_run(&run).makespan_s, 340.0);
    // lockgate runs C at once and B when A ends.
    let l = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    let admitted: Vec<_> = l.jobs.iter().map(|r| r.admitted_ms).collect();
    assert_eq!(admitted, [Some(0), Some(100_000), Some(2_000)]);
}

#[test]
fn bacula_honours_maximum_concurrent_jobs_within_a_priority() {
    // Director limit 2: three equal jobs; the third starts on the tick after one ends.
    let jobs: String = (0..3).map(|_| job(0, "backup", "", "", 50)).collect();
    let i = input("[global]\nmax_running = 2\n", "[]", &jobs);
    let run = bacula::simulate(&i.policy, &i.nodes, &i.jobs, None);
    assert_eq!(run.jobs[2].admitted_ms, Some(60_000));
    let s = Summary::from_run(&run);
    let global = s.scopes.iter().find(|p| p.scope == "global").unwrap();
    assert_eq!((global.peak, global.limit), (2, Some(2)));
}

#[test]
fn velero_117_prepare_queue_counted_from_caches_overshoots() {
    // prepareQueueLength 1, two nodes of one slot, four two-stage uploads at 0.
    let jobs: String = (0..4)
        .map(|_| "{\"at\": 0, \"kind\": \"data-upload\", \"node_selector\": \"\", \"two_stage\": true, \"prepare_s\": 10, \"run_s\": 60}\n")
        .collect();
    let nodes = r#"[{"name": "n1"}, {"name": "n2"}]"#;
    let i = input(
        "[global]\nprepare_queue = 1\n[nodes]\nmax_running = 1\n",
        nodes,
        &jobs,
    );
    let run = velero117::simulate(&i.policy, &i.nodes, &i.jobs, None);
    // At 0 both node agents see an empty queue and accept one each; the other two are
    // requeued (5 s, 10 s: the cache still counts the two; the starts at 10 s are not seen
    // at 10 s) and accepted at 15 s, again one per node. Prepared at 25 s, they find their
    // node busy until 70 s and start on the requeue at 70 s.
    let at = |f: fn(&lockgate_sim::JobRecord) -> Option<u64>| -> Vec<Option<u64>> {
        run.jobs.iter().map(f).collect()
    };
    assert_eq!(
        at(|r| r.admitted_ms),
        [Some(0), Some(0), Some(15_000), Some(15_000)]
    );
    assert_eq!(
        at(|r| r.started_ms),
        [Some(10_000), Some(10_000), Some(70_000), Some(70_000)]
    );
    let s = Summary::from_run(&run);
    assert_eq!(s.makespan_s, 130.0);
    let q = s
        .scopes
        .iter()
        .find(|p| p.scope == "global-prepare")
        .unwrap();
    assert_eq!((q.peak, q.limit), (2, Some(1)));
    // lockgate never exceeds the cluster-wide prepare queue.
    let l = Summary::from_run(&simulate(&i.policy, &i.nodes, &i.jobs).unwrap());
    let q = l
        .scopes
        .iter()
        .find(|p| p.scope == "global-prepare")
        .unwrap();
    assert!(q.peak <= 1, "{q:?}");
}

#[test]
fn unlimited_starts_everything_at_submit() {
    let jobs = job(0, "backup", "", "", 100) + &job(5, "backup", "", "", 10);
    let i = input("[global]\nmax_running = 1\n", "[]", &jobs);
    let s = Summary::from_run(&unlimited::simulate(&i.policy, &i.nodes, &i.jobs, None));
    assert_eq!((s.makespan_s, s.wait_s.max), (100.0, 0.0));
}
