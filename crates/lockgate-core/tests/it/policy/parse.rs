//! What a valid document means: the design examples, defaults, round trips, node numbers.

use super::{DESIGN_EXAMPLES, OTHER_KEYS};
use lockgate_core::policy::raw::RawPolicy;
use lockgate_core::policy::*;
use rstest::rstest;
use std::collections::BTreeMap;
use std::time::Duration;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_design_example_parses() {
    let p =
        Policy::from_toml(DESIGN_EXAMPLES, Some("design.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.global.max_running, Some(8));
    let names: Vec<&str> = p.limits.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["per-datastore", "per-kind", "per-owner", "restores"]
    );
    let ds = &p.limits[0];
    assert_eq!(ds.per, [PerKey::Attr("datastore".into())]);
    assert_eq!(ds.limit_for(&["ds-fast".into()]), Some(4));
    assert_eq!(ds.limit_for(&["ds1".into()]), Some(2));
    assert_eq!(p.limits[1].limit_for(&["sync".into()]), Some(1));
    assert_eq!(p.limits[1].limit_for(&["restore".into()]), None);
    assert_eq!(p.limits[2].per, [PerKey::Owner]);
    assert!(p.limits[3]
        .matcher
        .as_ref()
        .unwrap()
        .names_value("kind", "data-download"));
    assert_eq!((p.nodes.max_running, p.nodes.prepare_queue), (Some(2), 1));
    assert_eq!(p.nodes.rules.len(), 3);
    assert_eq!(
        p.kind_cost("tape-backup"),
        BTreeMap::from([("memory_gib".into(), 8), ("threads".into(), 4)])
    );
    assert_eq!(
        p.conflicts[0].keys,
        [
            PerKey::Attr("datastore".into()),
            PerKey::Attr("group".into())
        ]
    );
    assert_eq!(p.conflicts[1].overlap.as_deref(), Some("namespaces"));
    assert_eq!(
        p.retry("data-upload"),
        Retry {
            times: 3,
            interval: Duration::from_secs(30)
        }
    );
    let s = &p.schedules[0];
    assert_eq!((s.when.as_str(), s.job.priority), ("sat 03:00", Some(-1)));
    assert_eq!(s.max_start_delay, Some(Duration::from_secs(7200)));
    assert_eq!(
        p.blocks.rules[0].group_by,
        ["label:cassandra.datastax.com/cluster"]
    );
    assert_eq!(p.blocks.volume_group_label, "lockgate.io/volume-group");
}

#[test]
fn every_other_key_parses() {
    let p = Policy::from_toml(OTHER_KEYS, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.global.prepare_queue, Some(4));
    assert_eq!(p.nodes.resources, BTreeMap::from([("gpus".into(), 1)]));
    assert_eq!(
        p.queue,
        QueuePolicy {
            aging: Some(Duration::from_secs(600)),
            strict: true,
            reserve_after: Duration::from_secs(120),
            fair_share: true,
            order: lockgate_core::policy::QueueOrder::Fifo,
            window_horizon: lockgate_core::policy::DEFAULT_WINDOW_HORIZON,
        }
    );
    assert_eq!(p.owner_weight("alice"), 2);
    assert_eq!(p.owners["alice"].max_priority, Some(5));
    assert!(p.is_coordinator("resource-backup"));
    assert_eq!(
        p.prepare_timeout("resource-backup"),
        Duration::from_secs(600)
    );
    assert_eq!(p.retention.days, 30);
    assert_eq!(
        p.quotas,
        QuotasPolicy {
            max_attrs: 8,
            max_attr_value_bytes: 256,
            max_message_bytes: 4096,
            max_queued_per_owner: 100
        }
    );
    let job = &p.schedules[0].job;
    assert_eq!(job.executor, Some(Executor::Agent));
    assert_eq!(job.node_selector.as_deref(), Some("zone=eu-1"));
    assert_eq!(job.max_run, Some(Duration::from_secs(6 * 3600)));
    assert_eq!(p.schedules[0].duplicates, Duplicates::CancelQueued);
    assert_eq!(p.schedules[0].misfire, Misfire::Skip);
    assert_eq!(p.blocks.exec_template.len(), 5);
    assert_eq!(p.blocks.data_upload_selector, "zone=eu-1");
    assert_eq!(
        p.blocks.restore_wait_image.as_deref(),
        Some("registry.example/lockgate:0.1")
    );
}

#[test]
fn the_empty_document_is_unlimited() {
    let p = Policy::from_toml("", None).unwrap();
    assert_eq!(p, Policy::from_json("{}").unwrap());
    assert_eq!(p, Policy::from_raw(RawPolicy::default()).unwrap());
    assert!(p.limits.is_empty() && p.nodes.rules.is_empty());
    assert_eq!(p.global, GlobalPolicy::default());
    assert_eq!(p.nodes, NodesPolicy::default());
    assert_eq!(p.leases.ttl, DEFAULT_LEASE_TTL);
    assert_eq!(p.queue, QueuePolicy::default());
    assert_eq!(p.retention.days, DEFAULT_RETENTION_DAYS);
    assert_eq!(p.blocks, BlocksPolicy::default());
    assert_eq!(p.quotas, QuotasPolicy::default());
    assert_eq!(p.quotas.max_queued_per_owner, DEFAULT_MAX_QUEUED_PER_OWNER);
    assert!(p.is_coordinator(RESOURCE_BACKUP_KIND) && !p.is_coordinator("backup"));
    assert_eq!(p.node_number(&labels(&[("a", "b")])), (None, None));
    assert_eq!(p.to_toml_string(), "");
    assert_eq!(p.to_json_value(), serde_json::json!({}));
}

#[rstest]
#[case(DESIGN_EXAMPLES)]
#[case(OTHER_KEYS)]
fn round_trips_through_toml_and_json(#[case] text: &str) {
    let p = Policy::from_toml(text, None).unwrap();
    let toml = p.to_toml_string();
    assert_eq!(
        Policy::from_toml(&toml, None).unwrap_or_else(|e| panic!("{e}\n{toml}")),
        p,
        "{toml}"
    );
    let json = p.to_json_value().to_string();
    assert_eq!(
        Policy::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}")),
        p
    );
    assert!(p.diff(&p.clone()).is_empty());
}

#[test]
fn pbs_rfc_threads_10_tape_costs_4() {
    let p = Policy::from_toml(
        "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost = { threads = 4 }\n[kinds.backup]\ncost = { threads = 1 }\n",
        None,
    )
    .unwrap();
    assert_eq!(p.resources["threads"], 10);
    assert_eq!(p.kind_cost("tape-backup")["threads"], 4);
    assert_eq!(p.kind_cost("backup")["threads"], 1);
    assert!(p.kind_cost("verify").is_empty());
}

#[rstest]
#[case(&[("kubernetes.io/hostname", "node-1")], (Some(3), None))]
#[case(&[("kubernetes.io/hostname", "node-2")], (Some(5), Some(0)))]
#[case(&[("kubernetes.io/hostname", "node-3")], (Some(3), None))]
fn velero_global_3_node_2_gets_5(
    #[case] node: &[(&str, &str)],
    #[case] want: (Option<u32>, Option<usize>),
) {
    let p = Policy::from_toml(
        "[nodes]\nmax_running = 3\n[[nodes.rule]]\nselector = \"kubernetes.io/hostname=node-2\"\nmax_running = 5\n",
        None,
    )
    .unwrap();
    assert_eq!(p.node_number(&labels(node)), want);
}

#[rstest]
#[case(&[("zone", "eu"), ("size", "big")], (Some(4), Some(1)))]
#[case(&[("size", "big")], (Some(6), Some(0)))]
#[case(&[("zone", "eu"), ("size", "big"), ("role", "database")], (Some(0), Some(2)))]
#[case(&[("role", "database")], (Some(0), Some(2)))]
#[case(&[("zone", "us")], (Some(2), None))]
fn smallest_matching_rule_wins(
    #[case] node: &[(&str, &str)],
    #[case] want: (Option<u32>, Option<usize>),
) {
    let p = Policy::from_toml(
        r#"
[nodes]
max_running = 2
[[nodes.rule]]
selector = "size=big"
max_running = 6
[[nodes.rule]]
selector = "zone in (eu, ap)"
max_running = 4
[[nodes.rule]]
selector = "role=database"
max_running = 0
"#,
        None,
    )
    .unwrap();
    assert_eq!(p.node_number(&labels(node)), want);
}

#[test]
fn restore_kinds_rank_ahead_of_backups_unless_the_policy_says_otherwise() {
    let p = Policy::from_toml("", None).unwrap();
    assert_eq!(p.kind_priority("data-download"), 100);
    assert_eq!(p.kind_priority("pod-volume-restore"), 100);
    assert_eq!(p.kind_priority("data-upload"), 0);
    assert_eq!(
        p.kind_priority("restore"),
        0,
        "a restore of another tool says its own"
    );
    let p = Policy::from_toml("[kinds.data-download]\npriority = -5\n", None).unwrap();
    assert_eq!(p.kind_priority("data-download"), -5);
    assert_eq!(p.kind_priority("pod-volume-restore"), 100);
}

#[test]
fn restores_of_one_namespace_or_volume_conflict_unless_a_rule_of_the_policy_already_says_so() {
    // (conflicts, built-in ones, whether the policy limits anything)
    let built_in = |text: &str| {
        let p = Policy::from_toml(text, None).unwrap();
        let n = p.conflicts.iter().filter(|c| c.built_in).count();
        (p.conflicts.len(), n, p.limits_anything())
    };
    // An empty policy limits nothing, yet keeps restores of a namespace or a volume apart.
    assert_eq!(built_in(""), (2, 2, false));
    assert_eq!(
        Policy::from_toml("", None).unwrap().conflicts,
        [
            Conflict::restores("namespaces"),
            Conflict::restores("volumes")
        ]
    );
    // A rule that already does one (restores with backups, or every job) replaces it.
    let both = "[[conflict]]\nmatch = \"kind in (resource-backup, resource-restore)\"\noverlap = \"namespaces\"\n";
    assert_eq!(built_in(both), (2, 1, true));
    assert_eq!(
        built_in("[[conflict]]\noverlap = \"volumes\"\n"),
        (2, 1, true)
    );
    // Rules that do not: another kind, another attribute, keys beside the overlap, or
    // restores sharing under `exclusive`.
    for other in [
        "[[conflict]]\nmatch = \"kind=resource-backup\"\noverlap = \"namespaces\"\n",
        "[[conflict]]\nmatch = \"kind=resource-restore\"\noverlap = \"pvcs\"\n",
        "[[conflict]]\nkeys = [\"owner\"]\noverlap = \"namespaces\"\n",
        "[[conflict]]\noverlap = \"namespaces\"\nexclusive = \"kind=prune\"\n",
    ] {
        assert_eq!(built_in(other), (3, 2, true), "{other}");
    }
}
