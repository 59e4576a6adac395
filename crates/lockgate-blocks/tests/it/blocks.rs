//! Block formation, item names and filters on real-looking manifests.

use crate::fixtures::*;
use lockgate_blocks::{Filters, Plan, PlanOptions};
use lockgate_core::policy::BlockRule;
use lockgate_core::selector::Selector;
use serde_json::json;

#[test]
fn pod_with_two_pvcs_and_their_pvs_is_one_block() {
    let dir = tempfile::tempdir().unwrap();
    let items = [
        pv("pv-b", "app", "data-b"),
        pod("app", "web-0", &["data-a", "data-b"]),
        pvc("app", "data-a", Some("pv-a")),
        configmap("app", "settings"),
        pvc("app", "data-b", Some("pv-b")),
        pv("pv-a", "app", "data-a"),
    ];
    let plan = load(dir.path(), &items, &PlanOptions::default());
    assert_eq!(
        blocks(&plan),
        vec![
            names(&["configmaps/app/settings"]),
            names(&[
                "pods/app/web-0",
                "persistentvolumeclaims/app/data-a",
                "persistentvolumeclaims/app/data-b",
                "persistentvolumes/pv-a",
                "persistentvolumes/pv-b",
            ]),
        ]
    );
}

#[test]
fn two_pods_sharing_an_rwx_pvc_are_one_block() {
    let dir = tempfile::tempdir().unwrap();
    let items = [
        pod("app", "writer", &["shared"]),
        pod("app", "reader", &["shared"]),
        pvc("app", "shared", Some("pv-shared")),
        pv("pv-shared", "app", "shared"),
        pod("app", "loner", &[]),
    ];
    let plan = load(dir.path(), &items, &PlanOptions::default());
    assert_eq!(
        blocks(&plan),
        vec![
            names(&[
                "pods/app/reader",
                "pods/app/writer",
                "persistentvolumeclaims/app/shared",
                "persistentvolumes/pv-shared"
            ]),
            names(&["pods/app/loner"]),
        ]
    );
}

#[test]
fn a_volume_group_is_one_block_per_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let vg = |v| with_labels(pvc("db", v, None), &[("lockgate.io/volume-group", "g1")]);
    let items = [
        vg("wal"),
        vg("data"),
        vg("index"),
        with_labels(
            pvc("db", "other", None),
            &[("lockgate.io/volume-group", "g2")],
        ),
        with_labels(
            pvc("db2", "data", None),
            &[("lockgate.io/volume-group", "g1")],
        ),
    ];
    let plan = load(dir.path(), &items, &PlanOptions::default());
    assert_eq!(
        blocks(&plan),
        vec![
            names(&[
                "persistentvolumeclaims/db/data",
                "persistentvolumeclaims/db/index",
                "persistentvolumeclaims/db/wal"
            ]),
            names(&["persistentvolumeclaims/db/other"]),
            names(&["persistentvolumeclaims/db2/data"]),
        ]
    );
}

#[test]
fn a_configured_rule_groups_three_statefulset_pods() {
    let dir = tempfile::tempdir().unwrap();
    let cass = |n: &str, cluster: &str| {
        with_labels(
            pod("cass", n, &[&format!("data-{n}")]),
            &[
                ("app.kubernetes.io/managed-by", "cass-operator"),
                ("cassandra.datastax.com/cluster", cluster),
            ],
        )
    };
    let mut items = vec![
        cass("dc1-r1-0", "c1"),
        cass("dc1-r2-0", "c1"),
        cass("dc1-r3-0", "c1"),
        cass("other-0", "c2"),
    ];
    for n in ["dc1-r1-0", "dc1-r2-0", "dc1-r3-0", "other-0"] {
        items.push(pvc("cass", &format!("data-{n}"), Some(&format!("pv-{n}"))));
        items.push(pv(&format!("pv-{n}"), "cass", &format!("data-{n}")));
    }
    items.push(with_labels(
        pod("cass", "unmanaged", &[]),
        &[("cassandra.datastax.com/cluster", "c1")],
    ));
    let rule = BlockRule {
        matcher: Selector::parse_jobs("kind=Pod, app.kubernetes.io/managed-by=cass-operator")
            .unwrap(),
        group_by: vec!["label:cassandra.datastax.com/cluster".into()],
    };
    let opts = PlanOptions {
        rules: vec![rule],
        ..PlanOptions::default()
    };
    let plan = load(dir.path(), &items, &opts);
    let b = blocks(&plan);
    assert_eq!(b.len(), 3, "{b:#?}");
    assert_eq!(
        &b[0][..3],
        &names(&[
            "pods/cass/dc1-r1-0",
            "pods/cass/dc1-r2-0",
            "pods/cass/dc1-r3-0"
        ])[..]
    );
    assert_eq!(b[0].len(), 9, "three pods, their PVCs and PVs");
    assert_eq!(b[1][0], "pods/cass/other-0");
    assert_eq!(b[2], names(&["pods/cass/unmanaged"]));
}

#[test]
fn a_field_rule_groups_by_a_manifest_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = configmap("app", "a");
    a["data"]["shard"] = json!("s1");
    let mut b = configmap("app", "b");
    b["data"]["shard"] = json!("s1");
    let rule = BlockRule {
        matcher: Selector::parse_jobs("kind=ConfigMap").unwrap(),
        group_by: vec!["field:data.shard".into()],
    };
    let opts = PlanOptions {
        rules: vec![rule],
        ..PlanOptions::default()
    };
    let plan = load(dir.path(), &[a, b, configmap("app", "c")], &opts);
    assert_eq!(
        blocks(&plan),
        vec![
            names(&["configmaps/app/a", "configmaps/app/b"]),
            names(&["configmaps/app/c"])
        ]
    );
}

#[test]
fn unrelated_items_are_separate_blocks_with_kubectl_names() {
    let dir = tempfile::tempdir().unwrap();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "octopi.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Octopus", "plural": "octopi"}}});
    let items = [
        namespaced("apps/v1", "Deployment", "app", "web"),
        namespaced("apps/v1", "StatefulSet", "app", "db"),
        namespaced("v1", "Service", "app", "web"),
        namespaced("v1", "Secret", "app", "tls"),
        namespaced("v1", "ServiceAccount", "app", "default"),
        namespaced("networking.k8s.io/v1", "Ingress", "app", "web"),
        namespaced("v1", "Endpoints", "app", "web"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "no-ns"}}),
        cluster("storage.k8s.io/v1", "StorageClass", "csi-rbd"),
        cluster("rbac.authorization.k8s.io/v1", "ClusterRole", "reader"),
        cluster("v1", "Namespace", "app"),
        crd,
        namespaced("example.com/v1", "Octopus", "app", "inky"),
        namespaced("example.com/v1", "Widget", "app", "w1"),
    ];
    let plan = load(dir.path(), &items, &PlanOptions::default());
    let all: Vec<String> = blocks(&plan)
        .into_iter()
        .map(|b| {
            assert_eq!(b.len(), 1, "{b:?}");
            b[0].clone()
        })
        .collect();
    assert_eq!(
        all,
        names(&[
            "clusterroles.rbac.authorization.k8s.io/reader",
            "configmaps/default/no-ns",
            "customresourcedefinitions.apiextensions.k8s.io/octopi.example.com",
            "deployments.apps/app/web",
            "endpoints/app/web",
            "ingresses.networking.k8s.io/app/web",
            "namespaces/app",
            "octopi.example.com/app/inky",
            "secrets/app/tls",
            "serviceaccounts/app/default",
            "services/app/web",
            "statefulsets.apps/app/db",
            "storageclasses.storage.k8s.io/csi-rbd",
            "widgets.example.com/app/w1",
        ])
    );
}

#[test]
fn same_input_gives_same_blocks_from_a_list_or_a_yaml_directory() {
    let dir = tempfile::tempdir().unwrap();
    let items = [
        pod("app", "web-0", &["data-web-0"]),
        pvc("app", "data-web-0", Some("pv-1")),
        pv("pv-1", "app", "data-web-0"),
        configmap("app", "a"),
        configmap("other", "b"),
    ];
    let first = load(dir.path(), &items, &PlanOptions::default()).blocks_json();
    let again = load(dir.path(), &items, &PlanOptions::default()).blocks_json();
    assert_eq!(first, again);
    let mut reversed = items.to_vec();
    reversed.reverse();
    assert_eq!(
        load(dir.path(), &reversed, &PlanOptions::default()).blocks_json(),
        first
    );
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(manifests.join("sub")).unwrap();
    let yaml: Vec<String> = items[..3]
        .iter()
        .map(|v| yaml_serde::to_string(v).unwrap())
        .collect();
    std::fs::write(
        manifests.join("app.yaml"),
        format!("# web\n---\n{}", yaml.join("---\n")),
    )
    .unwrap();
    std::fs::write(
        manifests.join("sub/a.json"),
        serde_json::to_string(&items[3]).unwrap(),
    )
    .unwrap();
    std::fs::write(
        manifests.join("sub/b.yml"),
        yaml_serde::to_string(&items[4]).unwrap(),
    )
    .unwrap();
    std::fs::write(manifests.join("README.md"), "not a manifest").unwrap();
    let from_dir = Plan::load(&manifests, &PlanOptions::default()).unwrap();
    assert!(
        from_dir.input_errors().is_empty(),
        "{:?}",
        from_dir.input_errors()
    );
    assert_eq!(from_dir.blocks_json(), first);
    let dry: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(dry[0], json!({"index": 0, "items": ["configmaps/app/a"]}));
}

fn cluster_items() -> Vec<serde_json::Value> {
    vec![
        pod("app", "web-0", &["data"]),
        pvc("app", "data", Some("pv-app")),
        pv("pv-app", "app", "data"),
        pvc("other", "data", Some("pv-other")),
        pv("pv-other", "other", "data"),
        cluster("v1", "Namespace", "app"),
        cluster("v1", "Namespace", "other"),
        cluster("storage.k8s.io/v1", "StorageClass", "csi-rbd"),
        with_labels(configmap("app", "labelled"), &[("tier", "gold")]),
    ]
}

fn all_names(plan: &Plan) -> Vec<String> {
    let mut v: Vec<String> = blocks(plan).concat();
    v.sort();
    v
}

#[test]
fn namespace_filter_keeps_only_related_cluster_items() {
    let dir = tempfile::tempdir().unwrap();
    let filters = Filters {
        include_namespaces: vec!["app".into()],
        ..Filters::default()
    };
    let plan = load(
        dir.path(),
        &cluster_items(),
        &PlanOptions {
            filters: filters.clone(),
            ..PlanOptions::default()
        },
    );
    assert_eq!(
        all_names(&plan),
        names(&[
            "configmaps/app/labelled",
            "namespaces/app",
            "persistentvolumeclaims/app/data",
            "persistentvolumes/pv-app",
            "pods/app/web-0"
        ])
    );
    let with_cluster = Filters {
        include_cluster_resources: Some(true),
        ..filters.clone()
    };
    let plan = load(
        dir.path(),
        &cluster_items(),
        &PlanOptions {
            filters: with_cluster,
            ..PlanOptions::default()
        },
    );
    assert!(all_names(&plan).contains(&"storageclasses.storage.k8s.io/csi-rbd".to_string()));
    assert!(all_names(&plan).contains(&"persistentvolumes/pv-other".to_string()));
    let no_cluster = Filters {
        include_cluster_resources: Some(false),
        ..filters
    };
    let plan = load(
        dir.path(),
        &cluster_items(),
        &PlanOptions {
            filters: no_cluster,
            ..PlanOptions::default()
        },
    );
    assert!(!all_names(&plan)
        .iter()
        .any(|n| n.starts_with("persistentvolumes/") || n.starts_with("namespaces/")));
}

#[test]
fn resource_and_label_filters() {
    let dir = tempfile::tempdir().unwrap();
    let filters = Filters {
        include_resources: vec!["Pod".into(), "persistentvolumeclaims".into()],
        ..Filters::default()
    };
    let plan = load(
        dir.path(),
        &cluster_items(),
        &PlanOptions {
            filters,
            ..PlanOptions::default()
        },
    );
    assert_eq!(
        all_names(&plan),
        names(&[
            "persistentvolumeclaims/app/data",
            "persistentvolumeclaims/other/data",
            "pods/app/web-0"
        ])
    );
    let filters = Filters {
        label_selector: Some(Selector::parse_labels("tier=gold").unwrap()),
        ..Filters::default()
    };
    let plan = load(
        dir.path(),
        &cluster_items(),
        &PlanOptions {
            filters,
            ..PlanOptions::default()
        },
    );
    assert_eq!(
        all_names(&plan),
        names(&["configmaps/app/labelled", "namespaces/app"])
    );
}
