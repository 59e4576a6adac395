//! `/metrics` scraped from a real server and parsed as Prometheus text: series the policy
//! names report 0 from the start, per-value scopes show only while in use, a key held alone
//! has a limit of 1 and a shared conflict's holders none, durations are recorded by kind.

use crate::harness::*;
use lockgate_core::Outcome;
use std::collections::{BTreeMap, BTreeSet};

/// A parsed exposition: `name{k="v",...}` (labels sorted) to value, and the declared types.
struct Scrape {
    series: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

impl Scrape {
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.series.get(&key(name, labels)).copied()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or_else(|| {
            panic!(
                "{} missing; have:\n{:#?}",
                key(name, labels),
                self.series.keys()
            )
        })
    }
}

fn key(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

/// Parses the text format: every sample belongs to a family with one `# TYPE`, every
/// label value is quoted, every value is a number, no series appears twice.
fn parse(text: &str) -> Scrape {
    let mut series = BTreeMap::new();
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            assert!(
                types.insert(name.to_string(), ty.to_string()).is_none(),
                "{name} typed twice"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (head, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("closing brace")),
            None => (head, ""),
        };
        let mut pairs: Vec<String> = Vec::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").expect("k=\"v\"");
            let end = after.find('"').expect("closing quote");
            pairs.push(format!("{k}=\"{}\"", &after[..end]));
            rest = after[end + 1..].trim_start_matches(',');
        }
        pairs.sort();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "{name} has no # TYPE");
        let k = format!("{name}{{{}}}", pairs.join(","));
        assert!(series.insert(k.clone(), value).is_none(), "{k} twice");
    }
    Scrape { series, types }
}

const POLICY: &str = r#"
[global]
max_running = 4
[resources]
threads = 8
[kinds.backup]
cost = { threads = 1 }
[kinds.prune]
[[limit]]
name = "all-backups"
match = "kind=backup"
max = 3
[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 1
[[conflict]]
keys = ["repo"]
"#;

#[test]
fn named_series_report_zero_and_per_value_scopes_come_and_go() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let scrape = || {
        let (status, text) = s.raw("GET", "/metrics", None, None);
        assert_eq!(status, 200);
        parse(&text)
    };

    // Before any job: every series the policy names, at 0.
    let m = scrape();
    assert_eq!(
        m.value(
            "lockgate_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    for kind in ["backup", "prune", "other"] {
        assert_eq!(
            m.value("lockgate_jobs", &[("state", "queued"), ("kind", kind)]),
            0.0
        );
        assert_eq!(
            m.value("lockgate_jobs", &[("state", "running"), ("kind", kind)]),
            0.0
        );
        assert_eq!(
            m.value(
                "lockgate_jobs_finished_total",
                &[("state", "failed"), ("kind", kind)]
            ),
            0.0
        );
        assert_eq!(m.value("lockgate_admissions_total", &[("kind", kind)]), 0.0);
        assert_eq!(
            m.value("lockgate_oldest_queued_job_age_seconds", &[("kind", kind)]),
            0.0
        );
        assert_eq!(
            m.value("lockgate_job_duration_seconds_count", &[("kind", kind)]),
            0.0
        );
        assert_eq!(
            m.value(
                "lockgate_job_duration_seconds_bucket",
                &[("kind", kind), ("le", "86400")]
            ),
            0.0
        );
    }
    for (scope, limit) in [
        ("global", 4.0),
        ("limit:all-backups", 3.0),
        ("pool:threads", 8.0),
    ] {
        assert_eq!(
            m.value("lockgate_scope_running", &[("scope", scope)]),
            0.0,
            "{scope}"
        );
        assert_eq!(
            m.value("lockgate_scope_limit", &[("scope", scope)]),
            limit,
            "{scope}"
        );
    }
    assert_eq!(m.value("lockgate_nodes", &[("state", "ready")]), 0.0);
    assert_eq!(
        m.value("lockgate_backup_plans_total", &[("outcome", "made")]),
        0.0
    );
    assert_eq!(m.types["lockgate_job_duration_seconds"], "histogram");
    assert_eq!(
        m.value("lockgate_wait_seconds_bucket", &[("le", "86400")]),
        0.0
    );
    let per_value = |m: &Scrape| -> BTreeSet<String> {
        m.series
            .keys()
            .filter(|k| {
                k.starts_with("lockgate_scope_running{scope=\"limit:per-datastore")
                    || k.contains("conflict")
            })
            .cloned()
            .collect()
    };
    assert!(per_value(&m).is_empty(), "{:?}", per_value(&m));

    // A running job holds a datastore partition and a conflict key; a second job for the
    // same datastore waits.
    let admin = s.admin();
    let (a, _) = admin
        .submit(&job("backup", &[("datastore", "ds1"), ("repo", "r1")]))
        .unwrap();
    let (b, _) = admin
        .submit(&job("backup", &[("datastore", "ds1")]))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let m = scrape();
    let ds1 = [("scope", "limit:per-datastore[datastore=ds1]")];
    assert_eq!(m.value("lockgate_scope_running", &ds1), 1.0);
    assert_eq!(m.value("lockgate_scope_limit", &ds1), 1.0);
    let conflict = [("scope", "conflict:repo=r1")];
    assert_eq!(
        m.value("lockgate_scope_running", &conflict),
        1.0,
        "{:?}",
        per_value(&m)
    );
    assert_eq!(m.value("lockgate_scope_limit", &conflict), 1.0);
    assert_eq!(
        m.value("lockgate_scope_running", &[("scope", "pool:threads")]),
        1.0
    );
    assert_eq!(
        m.value("lockgate_jobs", &[("state", "queued"), ("kind", "backup")]),
        1.0
    );
    let age = m.value(
        "lockgate_oldest_queued_job_age_seconds",
        &[("kind", "backup")],
    );
    assert!((1.0..60.0).contains(&age), "oldest queued: {age}");
    assert_eq!(
        m.value(
            "lockgate_oldest_queued_job_age_seconds",
            &[("kind", "prune")]
        ),
        0.0
    );

    // When both are gone, the per-value scopes leave; the named ones stay at 0.
    admin.cancel(b.id, false).unwrap();
    let token = a.lease.as_ref().expect("admitted").token;
    admin
        .finish_job(a.id, token, Outcome::Succeeded, None)
        .unwrap();
    let m = scrape();
    assert!(per_value(&m).is_empty(), "{:?}", per_value(&m));
    assert_eq!(
        m.value("lockgate_scope_running", &[("scope", "global")]),
        0.0
    );
    assert_eq!(m.value("lockgate_scope_peak", &[("scope", "global")]), 1.0);
    assert_eq!(
        m.value(
            "lockgate_jobs_finished_total",
            &[("state", "succeeded"), ("kind", "backup")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "lockgate_jobs_finished_total",
            &[("state", "cancelled"), ("kind", "backup")]
        ),
        1.0
    );
    assert_eq!(
        m.value("lockgate_job_duration_seconds_count", &[("kind", "backup")]),
        1.0
    );
    let took = m.value("lockgate_job_duration_seconds_sum", &[("kind", "backup")]);
    assert!((1.0..60.0).contains(&took), "duration: {took}");
    assert_eq!(
        m.value(
            "lockgate_job_duration_seconds_bucket",
            &[("kind", "backup"), ("le", "1")]
        ),
        0.0
    );
    assert_eq!(
        m.value(
            "lockgate_job_duration_seconds_bucket",
            &[("kind", "backup"), ("le", "10")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "lockgate_oldest_queued_job_age_seconds",
            &[("kind", "backup")]
        ),
        0.0
    );
}

/// A restic-style policy: backups share a repository, prunes need it alone.
const SHARED: &str = r#"
[global]
max_running = 4
[[conflict]]
keys = ["repo"]
exclusive = "kind in (prune, check)"
"#;

#[test]
fn a_shared_conflict_shows_its_holders_and_how_it_is_held_and_over_only_past_a_limit() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), SHARED);
    let admin = s.admin();
    let scrape = || {
        let (status, text) = s.raw("GET", "/metrics", None, None);
        assert_eq!(status, 200);
        parse(&text)
    };
    let over = |m: &Scrape| -> Vec<String> {
        m.series
            .iter()
            .filter_map(|(k, used)| {
                let scope = k
                    .strip_prefix("lockgate_scope_running{scope=\"")?
                    .strip_suffix("\"}")?;
                let limit = m.get("lockgate_scope_limit", &[("scope", scope)])?;
                (*used > limit).then(|| scope.to_string())
            })
            .collect()
    };
    let backup = |n: &str| job("backup", &[("repo", "r1"), ("host", n)]);
    let (a, _) = admin.submit(&backup("a")).unwrap();
    let (b, _) = admin.submit(&backup("b")).unwrap();
    assert!(a.lease.is_some() && b.lease.is_some(), "both backups run");
    let (prune, _) = admin.submit(&job("prune", &[("repo", "r1")])).unwrap();
    assert!(prune.lease.is_none(), "the prune waits for the backups");
    let m = scrape();
    let holders = [("scope", "conflict:repo=r1")];
    assert_eq!(m.value("lockgate_scope_running", &holders), 2.0);
    assert_eq!(
        m.get("lockgate_scope_limit", &holders),
        None,
        "no limit of 1"
    );
    let mode = |m: &Scrape, mode: &str| {
        m.value(
            "lockgate_scope_held_as",
            &[("scope", "conflict:repo=r1"), ("mode", mode)],
        )
    };
    assert_eq!((mode(&m, "shared"), mode(&m, "exclusive")), (1.0, 0.0));
    assert!(over(&m).is_empty(), "{:?}", over(&m));

    // The backups end: the prune holds the repository alone.
    for j in [&a, &b] {
        let token = j.lease.as_ref().unwrap().token;
        admin
            .finish_job(j.id, token, Outcome::Succeeded, None)
            .unwrap();
    }
    assert_eq!(
        admin.job(prune.id).unwrap().state,
        lockgate_core::JobState::Running
    );
    let m = scrape();
    assert_eq!((mode(&m, "shared"), mode(&m, "exclusive")), (0.0, 1.0));
    let twin = [("scope", "conflict-exclusive:repo=r1")];
    assert_eq!(m.value("lockgate_scope_running", &twin), 1.0);
    assert_eq!(m.value("lockgate_scope_limit", &twin), 1.0);
    assert!(over(&m).is_empty(), "{:?}", over(&m));

    // A lowered limit that drains is over, and named so.
    admin.submit(&backup("c")).unwrap();
    admin.submit(&job("backup", &[("repo", "r2")])).unwrap();
    admin
        .put_policy(
            &SHARED.replace("max_running = 4", "max_running = 1"),
            false,
            None,
        )
        .unwrap();
    let m = scrape();
    assert_eq!(over(&m), ["global"], "{:?}", m.series);
}
