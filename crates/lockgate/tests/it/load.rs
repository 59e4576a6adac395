//! Exactness under load: 200 concurrent `lockgate run` processes.

use crate::harness::*;
use std::collections::BTreeMap;
use std::process::Stdio;

#[test]
fn two_hundred_concurrent_runs_never_exceed_a_limit() {
    let s = Srv::start(
        "[global]\nmax_running = 8\n\n[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 2\n",
    );
    let record = s.path("record");
    let mut children = Vec::new();
    for i in 0..200 {
        let ds = format!("ds{}", i % 10);
        let script = format!(
            "echo \"start $(date +%s%N) {ds}\" >> {r}; sleep 0.05; echo \"end $(date +%s%N) {ds}\" >> {r}",
            r = record.display()
        );
        let child = s
            .run(&[
                "--kind",
                "backup",
                "--attr",
                &format!("datastore={ds}"),
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        children.push(child);
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    // The commands' own record: no instant with more than 2 per datastore or 8 in all.
    let text = std::fs::read_to_string(&record).unwrap();
    let mut marks: Vec<(u128, bool, String)> = text
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p[1].parse().unwrap(), p[0] == "start", p[2].to_string())
        })
        .collect();
    assert_eq!(marks.len(), 400, "every job ran exactly once");
    marks.sort_by_key(|(t, start, _)| (*t, *start));
    let (mut total, mut peak) = (0i32, 0i32);
    let mut per: BTreeMap<String, i32> = BTreeMap::new();
    let mut per_peak = 0;
    for (_, start, ds) in &marks {
        let d = if *start { 1 } else { -1 };
        total += d;
        let n = per.entry(ds.clone()).or_default();
        *n += d;
        assert!(
            total <= 8 && *n <= 2,
            "over a limit: {total} in all, {n} on {ds}"
        );
        peak = peak.max(total);
        per_peak = per_peak.max(*n);
    }
    assert_eq!((peak, per_peak), (8, 2), "the limits were reached");
    let page = s.admin().jobs(&lockgate_api::JobQuery {
        state: Some("succeeded".into()),
        limit: Some(1000),
        ..Default::default()
    });
    assert_eq!(page.unwrap().jobs.len(), 200);
}
