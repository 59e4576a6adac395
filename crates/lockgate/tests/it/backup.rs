//! `lockgate backup`: the dry run needs no server and prints only JSON; `create --wait`
//! against a real server process shows progress on stderr; `describe -o json` prints the
//! archive's metadata/result.json.

use crate::harness::*;
use serde_json::{json, Value};
use std::path::Path;

/// Two pods (one with a PVC bound to a PV, hooks-free), a Deployment and a ConfigMap.
fn manifests(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let items = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "web-0", "namespace": "app"},
         "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "data", "namespace": "app"}, "spec": {}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "app"},
         "spec": {}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": "app"}, "spec": {}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "app"},
         "data": {"k": "v"}}
    ]});
    std::fs::write(dir.join("cluster.json"), items.to_string()).unwrap();
}

#[test]
fn a_dry_run_prints_the_blocks_as_json_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    manifests(&input);
    let out = std::process::Command::new(BIN)
        .args(["--server", "http://127.0.0.1:9", "backup", "create", "x"])
        .arg("--from")
        .arg(&input)
        .args(["--ordered", "pods/app/web-1", "--dry-run"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let blocks: Value = serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(
        blocks,
        json!([
            {"index": 0, "items": ["pods/app/web-1"]},
            {"index": 1, "items": ["configmaps/app/cfg"]},
            {"index": 2, "items": ["deployments.apps/app/web"]},
            {"index": 3, "items": ["pods/app/web-0", "persistentvolumeclaims/app/data"]},
        ])
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A bad file: the blocks of the rest, and an exit status that says the server would
    // refuse it.
    std::fs::write(input.join("broken.json"), "{\"kind\": ").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["backup", "create", "x", "--dry-run", "--from"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let blocks: Value = serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(blocks.as_array().unwrap().len(), 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.json"), "{err}");
}

#[test]
fn create_wait_shows_progress_and_describe_prints_the_result() {
    let s = Srv::start("");
    manifests(&s.path("in"));
    // A relative --from: the CLI sends it as an absolute path.
    let out = s
        .cli(&["backup", "create", "nightly", "--from", "in", "--wait"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("blocks 4/4  items 5/5  Completed"),
        "{stderr}"
    );
    assert!(stdout.contains("Completed"), "{stdout}");

    let out = s
        .cli(&["-o", "json", "backup", "describe", "nightly"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(doc["phase"], "Completed");
    assert_eq!(doc["item_status"].as_array().unwrap().len(), 5);
    assert_eq!(doc["item_status"][0]["status"], "Completed");
    // The same document the archive holds.
    let archive = s.path("data/backups/nightly.tar.gz");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(&archive).unwrap(),
    ));
    let stored: Value = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.path().unwrap().to_str() == Some("metadata/result.json"))
        .map(|e| serde_json::from_reader(e).unwrap())
        .unwrap();
    assert_eq!(doc, stored);

    let out = s.cli(&["backup", "describe", "nightly"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("persistentvolumeclaims/app/data"), "{text}");
    assert!(text.contains("not bound: no volume data"), "{text}");

    let list = s.cli(&["-o", "json", "backup", "ls"]).output().unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list["backups"][0]["name"], "nightly");
    let out = s.cli(&["backup", "cancel", "nightly"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already ended"));
}

/// Pod `app/db-0` (with `annotations`) mounting claim `data`, bound to volume `pv-7`.
pub fn db_with_claim(annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "db-0", "namespace": "app", "annotations": annotations},
         "spec": {"containers": [{"name": "db"}],
                  "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "data", "namespace": "app"}, "spec": {"volumeName": "pv-7"}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-7"},
         "spec": {"claimRef": {"namespace": "app", "name": "data"}}}
    ]})
}

#[test]
fn a_real_agent_moves_the_data_and_the_post_hook_waits_for_its_prepare_step() {
    let s = Srv::start("[blocks]\nexec_template = [\"env\", \"{command}\"]\n");
    let log = s.path("order.log").display().to_string();
    let config = format!(
        r#"[handlers.data-upload]
prepare = ["sh", "-c", "echo prepare-start {{attr.pvc}} >> {log}; sleep 0.3; echo prepare-end {{attr.pvc}} >> {log}"]
run = ["sh", "-c", "echo run {{attr.pvc}} >> {log}"]
"#
    );
    let _agent = crate::agent::start_agent(&s, "n1", &[], &config);
    let hook = |phase: &str| {
        serde_json::to_string(&["sh", "-c", &format!("echo {phase} >> {log}")]).unwrap()
    };
    let annotations = json!({"pre.hook.backup.lockgate.io/command": hook("pre"),
                             "post.hook.backup.lockgate.io/command": hook("post")});
    std::fs::write(s.path("db.json"), db_with_claim(annotations).to_string()).unwrap();
    let out = s
        .cli(&["backup", "create", "db", "--from", "db.json", "--wait"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(s.path("agent-n1.log")).unwrap_or_default()
    );
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let at = |l: &str| {
        lines
            .iter()
            .position(|x| x == l)
            .unwrap_or_else(|| panic!("{l} missing: {lines:?}"))
    };
    assert!(at("pre") < at("prepare-start data"), "{lines:?}");
    assert!(at("prepare-end data") < at("post"), "{lines:?}");
    assert!(at("prepare-end data") < at("run data"), "{lines:?}");
    let q = lockgate_api::JobQuery {
        kind: Some("data-upload".into()),
        ..Default::default()
    };
    let jobs = s.admin().jobs(&q).unwrap().jobs;
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (
            jobs[0].state,
            jobs[0].node.as_deref(),
            jobs[0].owner.as_str()
        ),
        (lockgate_core::JobState::Succeeded, Some("n1"), "backup:db")
    );
}
