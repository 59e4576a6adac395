//! Bad input: every error names the file and the item, and never stops the other items.

use crate::fixtures::*;
use lockgate_blocks::{BackupConfig, LoadError, NoopMover, Phase, Plan, PlanOptions};
use std::sync::Arc;

#[test]
fn a_malformed_item_in_a_list_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.json");
    let text = r#"{"apiVersion": "v1", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "app"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": b, "namespace": "app"}},
        {"apiVersion": "v1", "metadata": {"name": "no-kind", "namespace": "app"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "app"}},
        "just a string",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "app"}}
    ], "kind": "List"}"#;
    std::fs::write(&path, text).unwrap();
    let plan = Plan::load(&path, &PlanOptions::default()).unwrap();
    assert_eq!(
        blocks(&plan).concat(),
        names(&["configmaps/app/a", "configmaps/app/c"])
    );
    let errors: Vec<String> = plan.input_errors().iter().map(|e| e.to_string()).collect();
    let file = path.display().to_string();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(
        errors[0].starts_with(&format!("{file}: items[1]: malformed JSON")),
        "{}",
        errors[0]
    );
    assert_eq!(
        errors[1],
        format!("{file}: items[2]: manifest has no kind (expected a string field \"kind\")")
    );
    assert_eq!(
        errors[2],
        format!("{file}: items[3]: Secret manifest has no metadata.name")
    );
    assert_eq!(
        errors[3],
        format!("{file}: items[4]: expected a manifest (a JSON/YAML object), found a string")
    );
}

#[test]
fn a_truncated_list_keeps_the_items_before_the_break() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = list(&[configmap("app", "a"), configmap("app", "b")]);
    text.truncate(text.find("\"b\"").unwrap());
    let path = dir.path().join("cut.json");
    std::fs::write(&path, text).unwrap();
    let plan = Plan::load(&path, &PlanOptions::default()).unwrap();
    assert_eq!(blocks(&plan).concat(), names(&["configmaps/app/a"]));
    let err = plan.input_errors()[0].to_string();
    assert!(
        err.contains("cut.json") && err.contains("never closed"),
        "{err}"
    );
}

#[test]
fn a_bad_yaml_document_names_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: app}\n---\nkind: [unclosed\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    std::fs::write(dir.path().join("m.yaml"), yaml).unwrap();
    std::fs::write(dir.path().join("broken.json"), "{\"kind\": ").unwrap();
    let plan = Plan::load(dir.path(), &PlanOptions::default()).unwrap();
    assert_eq!(
        blocks(&plan).concat(),
        names(&["configmaps/app/a", "configmaps/default/c"])
    );
    let errors: Vec<String> = plan.input_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].contains("broken.json") && errors[0].contains("malformed JSON"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("m.yaml: document 2 (line 4): malformed YAML"),
        "{}",
        errors[1]
    );
}

#[test]
fn a_missing_input_is_a_load_error_naming_the_path() {
    let err = Plan::load("/no/such/cluster.json".as_ref(), &PlanOptions::default()).unwrap_err();
    assert!(matches!(&err, LoadError::Unreadable { path, .. } if path.ends_with("cluster.json")));
    assert!(
        err.to_string()
            .starts_with("cannot read input /no/such/cluster.json: "),
        "{err}"
    );
}

#[test]
fn a_bad_group_by_is_an_option_error() {
    let rule = lockgate_core::policy::BlockRule {
        matcher: lockgate_core::selector::Selector::parse_jobs("kind=Pod").unwrap(),
        group_by: vec!["annotation:x".into()],
    };
    let opts = PlanOptions {
        rules: vec![rule],
        ..PlanOptions::default()
    };
    let err = Plan::load("/tmp".as_ref(), &opts).unwrap_err();
    assert!(
        err.to_string()
            .contains("\"annotation:x\": expected \"label:<name>\" or \"field:<dotted.path>\""),
        "{err}"
    );
}

#[test]
fn duplicates_and_unknown_ordered_items_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let items = [configmap("app", "a"), configmap("app", "a")];
    let opts = PlanOptions {
        ordered: names(&["pods/app/ghost"]),
        ..PlanOptions::default()
    };
    let plan = load(dir.path(), &items, &opts);
    assert_eq!(plan.item_count(), 1);
    assert!(plan.input_errors()[0]
        .to_string()
        .contains("duplicate item"));
    assert_eq!(
        plan.warnings(),
        names(&["ordered item pods/app/ghost is not in the input or is filtered out"])
    );
}

#[test]
fn input_errors_make_the_backup_partially_failed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.json");
    std::fs::write(&path, r#"{"items": [{"kind": "ConfigMap", "metadata": {"name": "a"}}, {"kind": "Pod"}], "kind": "List"}"#).unwrap();
    let plan = Plan::load(&path, &PlanOptions::default()).unwrap();
    let out = dir.path().join("b.tar.gz");
    let result = lockgate_blocks::run_to_completion(
        plan,
        BackupConfig::new("b", &out, Arc::new(NoopMover)),
        2,
    )
    .unwrap();
    assert_eq!(result.phase, Phase::PartiallyFailed);
    assert_eq!(result.item_counts.completed, 1);
    assert!(
        result.input_errors[0].contains("items[1]: Pod manifest has no metadata.name"),
        "{:?}",
        result.input_errors
    );
    assert!(result
        .reasons
        .iter()
        .any(|r| r.contains("bad items or files in the input")));
}

#[test]
fn a_yaml_list_is_read_back_item_by_item_and_its_spill_file_removed() {
    let dir = tempfile::tempdir().unwrap();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        pod("app", "web-0", &["data"]), pvc("app", "data", Some("pv-1")), pv("pv-1", "app", "data"), configmap("other", "c")]});
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, yaml_serde::to_string(&list).unwrap()).unwrap();
    let spills = || {
        let prefix = format!("lockgate-blocks-{}-", std::process::id());
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .count()
    };
    let plan = Plan::load(&path, &PlanOptions::default()).unwrap();
    assert_eq!(plan.namespaces(), ["app", "other"]);
    assert_eq!(
        plan.load_item(plan.item_count() - 1).unwrap(),
        list["items"][3]
    );
    assert_eq!(
        blocks(&plan)[1],
        names(&[
            "pods/app/web-0",
            "persistentvolumeclaims/app/data",
            "persistentvolumes/pv-1"
        ])
    );
    let before = spills();
    assert!(before >= 1, "the YAML list items are spilled");
    drop(Plan::load(&path, &PlanOptions::default()).unwrap());
    assert_eq!(spills(), before, "a dropped plan removes its spill file");
    let out = dir.path().join("y.tar.gz");
    let result = lockgate_blocks::run_to_completion(
        plan,
        BackupConfig::new("y", &out, Arc::new(NoopMover)),
        2,
    )
    .unwrap();
    assert_eq!(result.phase, Phase::Completed, "{:?}", result.reasons);
    assert_eq!(
        archive_json(
            &read_archive(&out),
            "resources/pods/namespaces/app/web-0.json"
        ),
        list["items"][0]
    );
}

#[test]
fn empty_lists_hold_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.json"),
        r#"{"apiVersion": "v1", "items": null, "kind": "List"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.json"),
        r#"{"apiVersion": "v1", "kind": "PodList", "items": []}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "apiVersion: v1\nkind: List\nitems: []\n---\nkind: List\n",
    )
    .unwrap();
    let plan = Plan::load(dir.path(), &PlanOptions::default()).unwrap();
    assert_eq!(
        (plan.item_count(), plan.input_errors().len()),
        (0, 0),
        "{:?}",
        plan.input_errors()
    );
}
