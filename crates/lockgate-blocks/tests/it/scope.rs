//! Namespace scope and hook policy: a confined backup takes only its owner's namespaces,
//! runs manifest hooks only when allowed, and names every item it refused.

use crate::fixtures::*;
use lockgate_blocks::{
    run_to_completion, BackupConfig, Confinement, Filters, HookPolicy, InputScope, NamespaceScope,
    NoopMover, Phase, Plan, PlanOptions, RefusalReason, RefusedItem,
};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

/// app (a pod with its PVC and PV, a configmap), kube-system (a pod with a hook, a PVC and
/// its PV), both Namespace objects and a ClusterRole.
fn cluster_input() -> Vec<Value> {
    vec![
        pod("app", "web-0", &["data-web-0"]),
        pvc("app", "data-web-0", Some("pv-app")),
        pv("pv-app", "app", "data-web-0"),
        configmap("app", "settings"),
        with_annotations(
            pod("kube-system", "etcd-0", &["etcd-data"]),
            &[(
                "pre.hook.backup.lockgate.io/command",
                "[\"/bin/sh\", \"-c\", \"cat /etc/kubernetes/admin.conf\"]",
            )],
        ),
        pvc("kube-system", "etcd-data", Some("pv-etcd")),
        pv("pv-etcd", "kube-system", "etcd-data"),
        cluster("v1", "Namespace", "app"),
        cluster("v1", "Namespace", "kube-system"),
        cluster("rbac.authorization.k8s.io/v1", "ClusterRole", "admin"),
    ]
}

fn scoped(namespaces: &[&str], hooks: HookPolicy) -> PlanOptions {
    PlanOptions {
        confinement: Confinement {
            input: InputScope::Unconfined,
            namespaces: NamespaceScope::only(namespaces.iter().copied()),
            hooks,
        },
        ..PlanOptions::default()
    }
}

fn refused(plan: &Plan) -> Vec<(String, RefusalReason)> {
    plan.refused()
        .iter()
        .map(|r| (r.item.clone(), r.reason))
        .collect()
}

#[test]
fn a_backup_takes_only_the_namespaces_it_may_back_up_and_names_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(
        dir.path(),
        &cluster_input(),
        &scoped(&["app"], HookPolicy::Run),
    );
    let mut taken = blocks(&plan).concat();
    taken.sort();
    assert_eq!(
        taken,
        names(&[
            "configmaps/app/settings",
            "namespaces/app",
            "persistentvolumeclaims/app/data-web-0",
            "persistentvolumes/pv-app",
            "pods/app/web-0",
        ])
    );
    use RefusalReason::*;
    assert_eq!(
        refused(&plan),
        vec![
            ("pods/kube-system/etcd-0".to_string(), NamespaceNotAllowed),
            (
                "persistentvolumeclaims/kube-system/etcd-data".to_string(),
                NamespaceNotAllowed
            ),
            (
                "persistentvolumes/pv-etcd".to_string(),
                ClusterScopedNotAllowed
            ),
            (
                "namespaces/kube-system".to_string(),
                ClusterScopedNotAllowed
            ),
            (
                "clusterroles.rbac.authorization.k8s.io/admin".to_string(),
                ClusterScopedNotAllowed
            ),
        ]
    );
    assert_eq!(
        plan.refused()[0],
        RefusedItem {
            item: "pods/kube-system/etcd-0".into(),
            kind: "Pod".into(),
            namespace: Some("kube-system".into()),
            name: "etcd-0".into(),
            reason: NamespaceNotAllowed,
        }
    );
    assert_eq!(plan.namespaces(), vec!["app"]);
    let report = serde_json::to_value(plan.dry_run_report()).unwrap();
    assert_eq!(
        report["refused"][0]["reason"],
        json!("namespace_not_allowed")
    );
    assert_eq!(report["refused"].as_array().unwrap().len(), 5);
    assert_eq!(
        report["blocks"].as_array().unwrap().len(),
        plan.block_count()
    );
}

#[test]
fn no_backup_namespaces_takes_nothing_and_names_everything() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(dir.path(), &cluster_input(), &scoped(&[], HookPolicy::Run));
    assert_eq!(plan.item_count(), 0);
    assert_eq!(plan.refused().len(), cluster_input().len());
}

#[test]
fn items_the_request_filters_out_are_not_listed_as_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = scoped(&["app"], HookPolicy::Run);
    opts.filters = Filters {
        include_namespaces: names(&["app"]),
        ..Filters::default()
    };
    let plan = load(dir.path(), &cluster_input(), &opts);
    assert_eq!(plan.item_count(), 5);
    assert_eq!(refused(&plan), vec![]);
}

#[test]
fn an_unconfined_backup_refuses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(dir.path(), &cluster_input(), &PlanOptions::default());
    assert_eq!(plan.item_count(), cluster_input().len());
    assert!(plan.refused().is_empty());
}

/// An exec template that records every hook in `dir/hooks.log` instead of running it.
fn config(dir: &Path) -> BackupConfig {
    let mut c = BackupConfig::new("b", dir.join("b.tar.gz"), Arc::new(NoopMover));
    let log = dir.join("hooks.log");
    c.exec_template = names(&[
        "/bin/sh",
        "-c",
        &format!("echo \"$0 $*\" >> {}", log.display()),
        "{namespace}/{pod}",
        "{command}",
    ]);
    c
}

fn hook_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("hooks.log")).unwrap_or_default()
}

#[test]
fn manifest_hooks_do_not_run_in_a_backup_that_may_not_run_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(
        dir.path(),
        &cluster_input(),
        &scoped(&["app", "kube-system"], HookPolicy::Refuse),
    );
    assert_eq!(
        refused(&plan),
        vec![
            (
                "clusterroles.rbac.authorization.k8s.io/admin".to_string(),
                RefusalReason::ClusterScopedNotAllowed
            ),
            (
                "pods/kube-system/etcd-0".to_string(),
                RefusalReason::HooksNotAllowed
            )
        ]
    );
    let result = run_to_completion(plan, config(dir.path()), 2).unwrap();
    assert_eq!(hook_log(dir.path()), "", "a hook ran");
    assert!(result.hooks.is_empty());
    assert_eq!(result.refused.len(), 2);
    assert_eq!(result.refused[1].reason, RefusalReason::HooksNotAllowed);
    assert_eq!(result.phase, Phase::PartiallyFailed);
    assert!(
        result
            .reasons
            .iter()
            .any(|r| r.contains("refused by the backup's confinement")),
        "{:?}",
        result.reasons
    );
    // The pod itself is backed up.
    assert_eq!(result.item_counts.completed, result.item_counts.total);
    let files = read_archive(&dir.path().join("b.tar.gz"));
    assert!(files.contains_key("resources/pods/namespaces/kube-system/etcd-0.json"));
    let stored = archive_json(&files, "metadata/result.json");
    assert_eq!(
        stored["refused"][1]["item"],
        json!("pods/kube-system/etcd-0")
    );
}

#[test]
fn manifest_hooks_run_when_the_backup_may_run_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(
        dir.path(),
        &cluster_input(),
        &scoped(&["kube-system"], HookPolicy::Run),
    );
    let result = run_to_completion(plan, config(dir.path()), 2).unwrap();
    assert!(
        hook_log(dir.path()).contains("kube-system/etcd-0"),
        "{}",
        hook_log(dir.path())
    );
    assert_eq!(result.hooks.len(), 1);
}

#[test]
fn a_hook_added_to_a_manifest_after_planning_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.json");
    // Planned with an annotation that is not a hook; rewritten (same length, same inode)
    // into a hook.
    let plain = with_annotations(
        pod("app", "web-0", &[]),
        &[("pre.hook.backup.lockgate.io/commanX", "id")],
    );
    let text = serde_json::to_string(&plain).unwrap();
    std::fs::write(&path, &text).unwrap();
    let plan = Plan::load(&path, &scoped(&["app"], HookPolicy::Refuse)).unwrap();
    assert!(plan.refused().is_empty());
    std::fs::write(&path, text.replace("/commanX", "/command")).unwrap();
    let result = run_to_completion(plan, config(dir.path()), 1).unwrap();
    assert_eq!(hook_log(dir.path()), "", "a hook ran");
    assert_eq!(
        result
            .refused
            .iter()
            .map(|r| (r.item.as_str(), r.reason))
            .collect::<Vec<_>>(),
        vec![("pods/app/web-0", RefusalReason::HooksNotAllowed)]
    );
}
