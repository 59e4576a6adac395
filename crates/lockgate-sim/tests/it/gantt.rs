//! `--gantt`: the picture of every example holds one bar per admitted job, one wait band
//! per job that waited, one row per node used (and the no-node row), one chart per limited
//! scope; it is well-formed (tags balance) and the same bytes every time. A generated
//! workload of 1500 jobs stays under a readable height.
//!
//! With `GANTT_OUT=DIR` the SVGs are also written there (scripts/checks/gantt renders them
//! with rsvg-convert and parses them as XML).

use crate::common::*;
use lockgate_sim::{gantt, simulate, Gantt};

/// Counts `<tag` openings minus closings (`</tag>` and `/>`): zero for a balanced document.
fn balance(svg: &str) -> i64 {
    let opens = svg.matches('<').count() as i64 - svg.matches("</").count() as i64;
    let closes = svg.matches("</").count() as i64 + svg.matches("/>").count() as i64;
    opens - closes
}

fn count(svg: &str, class: &str) -> usize {
    svg.matches(&format!("class=\"{class}\"")).count()
}

fn check(name: &str, g: &Gantt, i: &Input) {
    let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    let admitted = run
        .jobs
        .iter()
        .filter(|r| r.admitted_ms.is_some() && r.finished_ms.is_some())
        .count();
    let waited = run
        .jobs
        .iter()
        .filter(|r| r.admitted_ms.or(r.finished_ms).unwrap_or(r.submitted_ms) > r.submitted_ms)
        .count();
    assert_eq!(g.bars, admitted, "{name}: bars");
    assert_eq!(count(&g.svg, "bar"), admitted, "{name}: bar elements");
    assert_eq!(count(&g.svg, "wait"), waited, "{name}: wait elements");
    assert_eq!(count(&g.svg, "row"), g.rows, "{name}: rows");
    assert_eq!(count(&g.svg, "scope"), g.scopes, "{name}: scope charts");
    assert_eq!(count(&g.svg, "queue"), 1, "{name}: queue chart");
    let mut groups: Vec<Option<&str>> = run.jobs.iter().map(|r| r.node.as_deref()).collect();
    groups.sort();
    groups.dedup();
    assert_eq!(g.rows, groups.len(), "{name}: one row per node used");
    assert_eq!(balance(&g.svg), 0, "{name}: unbalanced tags");
    assert!(g
        .svg
        .starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    if let Ok(dir) = std::env::var("GANTT_OUT") {
        std::fs::write(format!("{dir}/{name}.svg"), &g.svg).unwrap();
    }
}

#[test]
fn every_example_draws_every_job_once() {
    for name in EXAMPLES {
        let i = example(name);
        let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
        let g = gantt(&i.policy, &i.jobs, &run, name);
        assert!(
            g.scopes > 0 || name == "velero-like",
            "{name}: no limited scope drawn"
        );
        check(name, &g, &i);
        assert_eq!(
            g,
            gantt(&i.policy, &i.jobs, &run, name),
            "{name}: not stable"
        );
    }
}

#[test]
fn fifteen_hundred_jobs_fit_in_a_readable_picture() {
    let jobs: String = (0..1500)
        .map(|k| {
            format!(
                "{{\"at\": {}, \"kind\": \"{}\", \"node\": \"n{}\", \"attrs\": {{\"datastore\": \"ds{}\"}}, \"run_s\": {}}}\n",
                k / 10,
                if k % 7 == 0 { "verify" } else { "backup" },
                k % 6,
                k % 4,
                20 + (k * 37) % 200
            )
        })
        .collect();
    let nodes: String = format!(
        "[{}]",
        (0..6)
            .map(|n| format!("{{\"name\": \"n{n}\"}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let policy = "[global]\nmax_running = 24\n[nodes]\nmax_running = 4\n\
                  [[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 5\n";
    let i = input(policy, &nodes, &jobs);
    let run = simulate(&i.policy, &i.nodes, &i.jobs).unwrap();
    let g = gantt(&i.policy, &i.jobs, &run, "1500 jobs");
    check("generated-1500", &g, &i);
    let height: f64 = g
        .svg
        .split("height=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(height < 1400.0, "picture {height}px high");
    assert_eq!(g.scopes, 5, "global and four datastores");
}
