//! Every example runs, stays within its limits, and lockgate stays close to the lower
//! bound (work conservation); on the Velero-like example lockgate beats the Velero model.

use crate::common::*;
use lockgate_sim::{lower_bound, simulate, Baseline, Run, Summary};

/// Highest number of jobs running at once on a node, from the records alone.
fn node_peak(run: &Run, node: &str) -> u64 {
    let mut edges: Vec<(u64, i64)> = Vec::new();
    for r in run.jobs.iter().filter(|r| r.node.as_deref() == Some(node)) {
        if let (Some(s), Some(f)) = (r.started_ms, r.finished_ms) {
            edges.push((s, 1));
            edges.push((f, -1));
        }
    }
    edges.sort(); // an end at t sorts before a start at t
    let (mut cur, mut peak) = (0i64, 0i64);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak as u64
}

#[test]
fn every_example_finishes_and_never_exceeds_a_limit() {
    for name in EXAMPLES {
        let i = example(name);
        let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
        let s = Summary::from_run(&run);
        assert_eq!(s.unfinished, 0, "{name}: unfinished jobs");
        assert_eq!(s.jobs, i.jobs.len());
        assert!(!s.scopes.is_empty(), "{name}: no scopes reported");
        for p in &s.scopes {
            if let Some(limit) = p.limit {
                assert!(
                    p.peak <= limit,
                    "{name}: {} peaked at {} over its limit {limit}",
                    p.scope,
                    p.peak
                );
            }
        }
        // The same for run slots, counted independently of the engine from the timeline.
        for n in &run.nodes {
            if let Some(slots) = n.slots {
                let peak = node_peak(&run, &n.name);
                assert!(
                    peak <= u64::from(slots),
                    "{name}: node {} ran {peak} jobs at once, slots {slots}",
                    n.name
                );
            }
        }
        for r in &run.jobs {
            let (a, st, f) = (
                r.admitted_ms.unwrap(),
                r.started_ms.unwrap(),
                r.finished_ms.unwrap(),
            );
            assert!(
                r.submitted_ms <= a && a <= st && st <= f,
                "{name}: times out of order {r:?}"
            );
        }
    }
}

#[test]
fn work_conservation_makespan_within_15_percent_of_the_lower_bound() {
    for name in EXAMPLES {
        let i = example(name);
        let report = lockgate_sim::run(&i.policy, &i.nodes, &i.jobs, &[]).unwrap();
        let ratio = report.bound_ratio();
        // The bound must be a bound: nothing may beat it.
        assert!(
            ratio >= 1.0,
            "{name}: makespan {} below the lower bound {}",
            report.lockgate.makespan_s,
            report.lower_bound_s
        );
        assert!(
            ratio <= 1.15,
            "{name}: makespan {} is {ratio:.3}x the lower bound {} ({})",
            report.lockgate.makespan_s,
            report.lower_bound_s,
            report.lower_bound_by
        );
    }
}

#[test]
fn lockgate_beats_the_velero_model_on_the_velero_like_example() {
    let i = example("velero-like");
    let report = lockgate_sim::run(&i.policy, &i.nodes, &i.jobs, &[Baseline::Velero]).unwrap();
    let velero = &report.compare["velero"];
    assert_eq!(velero.unfinished, 0);
    assert!(
        report.lockgate.makespan_s < velero.makespan_s,
        "lockgate {} vs velero {}",
        report.lockgate.makespan_s,
        velero.makespan_s
    );
    // Velero spreads pods by count, so the big node idles while small ones queue.
    let busy = |s: &Summary, n: &str| s.nodes.iter().find(|x| x.node == n).unwrap().busy;
    assert!(busy(&report.lockgate, "node-3") > busy(velero, "node-3"));
}

/// The bound mirrors the engine's needs; its scope names and limits must be the engine's.
#[test]
fn bound_terms_name_the_engines_scopes() {
    let mut checked = 0;
    for name in EXAMPLES {
        let i = example(name);
        let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
        let bound = lower_bound(&i.policy, &i.nodes, &i.jobs);
        for (term, _) in &bound.terms {
            let engine_scope = ["global", "limit:", "pool:", "conflict:"]
                .iter()
                .any(|p| term.starts_with(p));
            if !engine_scope || term.ends_with("(overlap clique)") {
                continue;
            }
            assert!(
                run.scopes.iter().any(|s| &s.scope == term),
                "{name}: bound term {term} is no engine scope"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} terms checked");
}
