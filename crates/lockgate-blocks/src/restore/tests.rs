use super::*;
use rstest::rstest;
use serde_json::json;

fn item(resource: &str, ns: Option<&str>, manifest: Value) -> ArchiveItem {
    let short = manifest["metadata"]["name"].as_str().unwrap().to_string();
    ArchiveItem {
        name: crate::names::item_name(resource, ns, &short),
        resource: resource.into(),
        namespace: ns.map(str::to_string),
        short_name: short,
        manifest,
    }
}

fn mapping(pairs: &[(&str, &str)]) -> RestoreOptions {
    RestoreOptions {
        namespace_mappings: pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        ..RestoreOptions::default()
    }
}

fn cleaned(resource: &str, m: Value, o: &RestoreOptions) -> Value {
    clean::clean(&m, resource, o, &o.namespace_mappings)
}

#[test]
fn assigned_metadata_and_status_go_labels_and_spec_stay() {
    let m = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "a", "uid": "u", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 2,
                     "managedFields": [{"manager": "kubectl"}], "ownerReferences": [{"uid": "x"}],
                     "labels": {"app": "web"}, "annotations": {"note": "kept"}},
        "data": {"k": "v"}, "status": {"x": 1}});
    let got = cleaned("configmaps", m, &mapping(&[("a", "b")]));
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "b", "labels": {"app": "web"},
                         "annotations": {"note": "kept"}},
            "data": {"k": "v"}})
    );
    let mut keep = mapping(&[]);
    keep.restore_status = true;
    let m = json!({"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}});
    assert_eq!(cleaned("pods", m, &keep)["status"]["phase"], "Running");
}

#[rstest]
#[case::cluster_ip_goes(json!({"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": [{"port": 80}]}), false,
    json!({"ports": [{"port": 80}]}))]
#[case::headless_stays(json!({"clusterIP": "None", "clusterIPs": ["None"]}), false,
    json!({"clusterIP": "None", "clusterIPs": ["None"]}))]
#[case::node_ports_go(json!({"type": "LoadBalancer", "healthCheckNodePort": 31000, "ports": [{"port": 80, "nodePort": 30080}]}), false,
    json!({"type": "LoadBalancer", "ports": [{"port": 80}]}))]
#[case::node_ports_kept_when_asked(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}), true,
    json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}))]
fn service_addresses(#[case] spec: Value, #[case] keep: bool, #[case] want: Value) {
    let mut o = mapping(&[]);
    o.preserve_node_ports = keep;
    let m = json!({"kind": "Service", "metadata": {"name": "s"}, "spec": spec});
    assert_eq!(cleaned("services", m, &o)["spec"], want);
}

#[test]
fn a_volume_forgets_its_old_claim_and_follows_the_mapping() {
    let m = json!({"kind": "PersistentVolume", "metadata": {"name": "pv-1"},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": "a", "name": "data",
                              "uid": "u-1", "resourceVersion": "9"}}});
    let got = cleaned("persistentvolumes", m, &mapping(&[("a", "b")]));
    assert_eq!(
        got["spec"]["claimRef"],
        json!({"kind": "PersistentVolumeClaim", "namespace": "b", "name": "data"})
    );
}

#[test]
fn a_pod_loses_its_node_priority_and_legacy_token_volume() {
    let m = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
        "spec": {"nodeName": "n1", "priority": 0, "serviceAccountName": "app",
                 "volumes": [{"name": "data"}, {"name": "app-token-x7k2q"}],
                 "containers": [{"name": "c", "volumeMounts": [{"name": "data"}, {"name": "app-token-x7k2q"}]}]}});
    let got = cleaned("pods", m, &mapping(&[]));
    assert_eq!(
        got["spec"],
        json!({"serviceAccountName": "app", "volumes": [{"name": "data"}],
               "containers": [{"name": "c", "volumeMounts": [{"name": "data"}]}]})
    );
}

#[test]
fn bindings_and_namespaces_follow_the_mapping() {
    let o = mapping(&[("a", "b")]);
    let rb = json!({"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "a"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "a"},
                     {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"},
                     {"kind": "User", "name": "ann"}]});
    let got = cleaned("rolebindings.rbac.authorization.k8s.io", rb, &o);
    assert_eq!(got["subjects"][0]["namespace"], "b");
    assert_eq!(got["subjects"][1]["namespace"], "tools");
    assert_eq!(got["subjects"][2], json!({"kind": "User", "name": "ann"}));
    let ns = json!({"kind": "Namespace", "metadata": {"name": "a",
        "labels": {"kubernetes.io/metadata.name": "a", "team": "x"}}});
    let i = item("namespaces", None, ns.clone());
    assert_eq!(
        clean::target_name(&i, &o.namespace_mappings),
        "namespaces/b"
    );
    let got = cleaned("namespaces", ns, &o);
    assert_eq!(
        got["metadata"],
        json!({"name": "b", "labels": {"kubernetes.io/metadata.name": "b", "team": "x"}})
    );
}

#[test]
fn cleaning_twice_changes_nothing() {
    let o = mapping(&[]);
    let m = json!({"kind": "Service", "metadata": {"name": "s", "namespace": "a", "uid": "u"},
        "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80, "nodePort": 30000}]},
        "status": {"loadBalancer": {}}});
    let once = cleaned("services", m, &o);
    assert_eq!(cleaned("services", once.clone(), &o), once);
}

#[rstest]
#[case("a:b,c:d", true)]
#[case(" a : b ", true)]
#[case("a", false)]
#[case("a:B", false)]
#[case("a:-b", false)]
#[case("a:b,a:c", false)]
#[case(
    "a:this-name-is-far-too-long-for-a-namespace-because-it-has-64-chars",
    false
)]
fn mappings(#[case] text: &str, #[case] ok: bool) {
    assert_eq!(
        parse_mappings(text).is_ok(),
        ok,
        "{text}: {:?}",
        parse_mappings(text)
    );
}

#[test]
fn a_namespace_filter_brings_the_cluster_items_it_relates_to() {
    let archive = BackupArchive {
        backup: "b".into(),
        items: vec![
            item(
                "namespaces",
                None,
                json!({"kind": "Namespace", "metadata": {"name": "a"}}),
            ),
            item(
                "namespaces",
                None,
                json!({"kind": "Namespace", "metadata": {"name": "z"}}),
            ),
            item(
                "persistentvolumeclaims",
                Some("a"),
                json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "d", "namespace": "a"},
                       "spec": {"volumeName": "pv-1", "storageClassName": "fast"}}),
            ),
            item(
                "persistentvolumes",
                None,
                json!({"kind": "PersistentVolume", "metadata": {"name": "pv-1"}}),
            ),
            item(
                "persistentvolumes",
                None,
                json!({"kind": "PersistentVolume", "metadata": {"name": "pv-9"}}),
            ),
            item(
                "storageclasses.storage.k8s.io",
                None,
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}}),
            ),
            item(
                "configmaps",
                Some("z"),
                json!({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "z"}}),
            ),
        ],
        bad: vec![],
        uploaded: Default::default(),
        pod_volumes: Default::default(),
    };
    let mut o = mapping(&[("a", "a2")]);
    o.filters.include_namespaces = vec!["a".into()];
    let plan = RestorePlan::new(&archive, &o).unwrap();
    let names: Vec<&str> = plan
        .phases
        .iter()
        .flat_map(|p| p.items.iter().map(|i| i.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            "namespaces/a2",
            "storageclasses.storage.k8s.io/fast",
            "persistentvolumes/pv-1",
            "persistentvolumeclaims/a2/d"
        ]
    );
}

/// Two claims of namespace `a`, both uploaded; `fast` binds at once, `local` on first
/// consumer, its pod on node `n7`; a third claim was never uploaded.
fn volume_archive() -> BackupArchive {
    let claim = |name: &str, class: &str| {
        item(
            "persistentvolumeclaims",
            Some("a"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": name, "namespace": "a"},
                   "spec": {"storageClassName": class, "volumeName": format!("pv-{name}")}}),
        )
    };
    let class = |name: &str, mode: &str| {
        item(
            "storageclasses.storage.k8s.io",
            None,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": name}, "volumeBindingMode": mode}),
        )
    };
    let pod = item(
        "pods",
        Some("a"),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
               "spec": {"nodeName": "n7",
                        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "local"}}]}}),
    );
    BackupArchive {
        backup: "b".into(),
        items: vec![
            claim("fast", "ssd"),
            claim("local", "topo"),
            claim("never", "ssd"),
            class("ssd", "Immediate"),
            class("topo", "WaitForFirstConsumer"),
            pod,
        ],
        bad: Vec::new(),
        uploaded: [
            "persistentvolumeclaims/a/fast",
            "persistentvolumeclaims/a/local",
        ]
        .map(String::from)
        .into(),
        pod_volumes: Default::default(),
    }
}

#[test]
fn an_uploaded_claim_is_a_download_pinned_to_its_pods_node_when_its_class_waits_for_one() {
    let plan = RestorePlan::new(&volume_archive(), &mapping(&[("a", "b")])).unwrap();
    let got: Vec<(&str, &str, Option<&str>, Option<&str>)> = plan
        .volumes
        .iter()
        .map(|v| {
            (
                v.item.as_str(),
                v.namespace.as_str(),
                v.volume_name.as_deref(),
                v.node.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("persistentvolumeclaims/b/fast", "b", Some("pv-fast"), None),
            (
                "persistentvolumeclaims/b/local",
                "b",
                Some("pv-local"),
                Some("n7")
            ),
        ]
    );
    // A claim the restore leaves out (here: it exists) moves no data.
    let existing = RestoreOptions {
        existing: vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "fast", "namespace": "b"},
            "spec": {"storageClassName": "ssd", "volumeName": "pv-fast"}})],
        ..mapping(&[("a", "b")])
    };
    let plan = RestorePlan::new(&volume_archive(), &existing).unwrap();
    assert_eq!(plan.volumes.len(), 1, "{:?}", plan.volumes);
    assert_eq!(plan.result("r").volumes, plan.volumes);
}

#[test]
fn a_pod_whose_volumes_a_file_system_backup_copied_gets_the_wait_container_first() {
    let pod = |name: &str| {
        item(
            "pods",
            Some("a"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "a"},
                   "spec": {"nodeName": "n7", "initContainers": [{"name": "migrate"}],
                            "containers": [{"name": "app"}]}}),
        )
    };
    let archive = BackupArchive {
        items: vec![pod("fs"), pod("plain")],
        pod_volumes: [(
            "pods/a/fs".to_string(),
            ["data", "logs"].map(String::from).into(),
        )]
        .into(),
        ..volume_archive()
    };
    let mut plan = RestorePlan::new(&archive, &mapping(&[("a", "b")])).unwrap();
    assert_eq!(
        plan.pod_volumes,
        [PodVolumeRestore {
            item: "pods/b/fs".into(),
            from: "pods/a/fs".into(),
            namespace: "b".into(),
            pod: "fs".into(),
            volumes: vec!["data".into(), "logs".into()],
        }]
    );
    assert_eq!(plan.result("r").pod_volumes, plan.pod_volumes);
    plan.wait_for_pod_volumes("r", "registry.example/lockgate:1");
    // Twice changes nothing: one wait container.
    plan.wait_for_pod_volumes("r", "registry.example/lockgate:1");
    let spec = |name: &str| {
        plan.phases[0]
            .items
            .iter()
            .find(|i| i.name == name)
            .unwrap()
            .manifest["spec"]
            .clone()
    };
    let fs = spec("pods/b/fs");
    let init = fs["initContainers"].as_array().unwrap();
    assert_eq!(init.len(), 2, "{fs}");
    assert_eq!(init[0]["name"], WAIT_CONTAINER);
    assert_eq!(init[1]["name"], "migrate");
    assert_eq!(
        init[0]["command"],
        json!([
            "lockgate",
            "restore",
            "bind",
            "r",
            "--pod",
            "b/fs",
            "--node",
            "$(LOCKGATE_NODE)",
            "--wait"
        ])
    );
    assert_eq!(
        init[0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    assert_eq!(
        init[0]["env"][2]["valueFrom"]["secretKeyRef"]["name"],
        WAIT_SECRET
    );
    // The restored pod has no node of its own; a pod without pod volumes is left alone.
    assert!(fs.get("nodeName").is_none(), "{fs}");
    assert_eq!(
        spec("pods/b/plain")["initContainers"],
        json!([{"name": "migrate"}])
    );
}
