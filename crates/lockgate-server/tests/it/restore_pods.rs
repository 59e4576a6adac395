//! Restored pods whose volumes a file-system backup copied: the restore writes the pod
//! with its wait container first, waits for the node the cluster schedules it to (`POST
//! /v1/restores/{name}/pods`, played here as the wait container would), then copies the
//! volumes back through `pod-volume-restore` jobs pinned to that node; a pod never bound
//! fails the restore after its timeout; bad binds are refused and change nothing.

use crate::backups::{finished, pod, request, take};
use crate::harness::*;
use crate::restores::{items_of, mapped, mover_node, restore_until, restored};
use lockgate_api::{BackupState, RestoreRequest, RestoreView};
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use serde_json::{json, Value};
use std::path::Path;

const POLICY: &str = r#"
[blocks]
exec_template = ["env", "{command}"]
restore_wait_image = "registry.example/lockgate:0.1"
"#;

/// The backup `fs` of pod `app/db-0` on node `n2`, its volumes `scratch` and `logs`
/// copied by pod-volume backups (the test is n2's agent).
fn fs_backup(admin: &Client, dir: &Path) {
    let mut p = pod("app", "db-0", &[], None);
    p["spec"]["nodeName"] = json!("n2");
    p["spec"]["volumes"] =
        json!([{"name": "scratch", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]);
    p["metadata"]["annotations"]["backup.lockgate.io/backup-volumes"] = json!("scratch,logs");
    let input = dir.join("pod.json");
    std::fs::write(&input, p.to_string()).unwrap();
    mover_node(admin, "n2", &["pod-volume-backup"]);
    admin.create_backup(&request("fs", &input)).unwrap();
    for _ in 0..2 {
        let (_, token, job) = take(admin, "n2");
        admin
            .finish_job(job.id, token, Outcome::Succeeded, None)
            .unwrap();
    }
    assert_eq!(finished(admin, "fs").phase.as_deref(), Some("Completed"));
}

/// Polls the restore until it waits for the node of a pod.
fn waiting_for_a_pod(c: &Client, name: &str) -> RestoreView {
    restore_until(c, name, "waits for no pod", |v| !v.pods_waiting.is_empty())
}

#[test]
fn a_restored_pods_volumes_come_back_on_the_node_it_was_scheduled_to() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    fs_backup(&admin, dir.path());
    mover_node(&admin, "n5", &["pod-volume-restore"]);

    admin
        .create_restore(&mapped("back", "fs", "app", "app-copy"))
        .unwrap();
    let v = waiting_for_a_pod(&admin, "back");
    assert_eq!(
        (v.state, v.pods_waiting.clone(), v.data_jobs.len()),
        (BackupState::Running, vec!["app-copy/db-0".to_string()], 0)
    );
    // The pod is written with the wait container first, which binds it from inside.
    let pods = Path::new(&v.directory).join(&v.files[v.files.len() - 1]);
    let written = &items_of(&pods)[0];
    let wait = &written["spec"]["initContainers"][0];
    assert_eq!(wait["name"], "lockgate-restore-wait", "{written}");
    assert_eq!(wait["image"], "registry.example/lockgate:0.1");
    assert_eq!(
        wait["command"],
        json!([
            "lockgate",
            "restore",
            "bind",
            "back",
            "--pod",
            "app-copy/db-0",
            "--node",
            "$(LOCKGATE_NODE)",
            "--wait"
        ])
    );

    // Bad binds change nothing: an unknown pod, an unexpanded node, an unknown restore.
    let refused = |restore: &str, pod: &str, node: &str| {
        let e = admin.bind_restore_pod(restore, pod, node).unwrap_err();
        (e.status(), e.code().map(str::to_string))
    };
    assert_eq!(
        refused("back", "app-copy/nope", "n5"),
        (Some(409), Some("wrong_state".into()))
    );
    assert_eq!(
        refused("back", "app-copy/db-0", "$(LOCKGATE_NODE)"),
        (Some(422), Some("invalid_field".into()))
    );
    assert_eq!(refused("gone", "app-copy/db-0", "n5").0, Some(404));
    assert_eq!(admin.restore("back").unwrap().pods_waiting.len(), 1);

    let bound = admin
        .bind_restore_pod("back", "app-copy/db-0", "n5")
        .unwrap();
    assert_eq!(bound.jobs.len(), 2, "{bound:?}");
    for (&id, volume) in bound.jobs.iter().zip(["logs", "scratch"]) {
        let job = admin.job(id).unwrap();
        assert_eq!(
            (
                job.kind.as_str(),
                job.owner.as_str(),
                job.priority,
                job.pinned,
                job.node.as_deref()
            ),
            ("pod-volume-restore", "restore:back", 100, true, Some("n5"))
        );
        assert_eq!(
            (
                job.attrs["namespace"].as_str(),
                job.attrs["pod"].as_str(),
                job.attrs["volume"].as_str()
            ),
            ("app-copy", "db-0", volume)
        );
    }
    // Once only.
    assert_eq!(
        refused("back", "app-copy/db-0", "n5"),
        (Some(409), Some("wrong_state".into()))
    );
    let v = admin.restore("back").unwrap();
    assert!(
        v.pods_waiting.is_empty() && v.data_jobs == bound.jobs,
        "{v:#?}"
    );
    assert_eq!(
        v.state,
        BackupState::Running,
        "ends only when the data is back"
    );
    for _ in 0..2 {
        let (stage, token, job) = take(&admin, "n5");
        assert_eq!(
            (stage.as_str(), job.kind.as_str()),
            ("run", "pod-volume-restore")
        );
        admin
            .finish_job(job.id, token, Outcome::Succeeded, None)
            .unwrap();
    }
    let v = restored(&admin, "back");
    assert_eq!(v.phase.as_deref(), Some("Completed"), "{v:#?}");
    let result: Value = admin.restore_result("back").unwrap();
    assert_eq!(
        result["pod_volumes"][0]["volumes"],
        json!(["logs", "scratch"]),
        "{result}"
    );
}

#[test]
fn a_pod_whose_node_is_never_told_fails_its_restore_after_the_timeout() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    fs_backup(&admin, dir.path());
    let req = RestoreRequest {
        pod_volume_timeout_s: Some(1),
        ..mapped("late", "fs", "app", "app-copy")
    };
    admin.create_restore(&req).unwrap();
    let v = restored(&admin, "late");
    assert_eq!(v.phase.as_deref(), Some("PartiallyFailed"), "{v:#?}");
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("app-copy/db-0") && r.contains("not told within 1 s")),
        "{:?}",
        v.reasons
    );
    assert!(
        v.pods_waiting.is_empty() && v.data_jobs.is_empty(),
        "{v:#?}"
    );
    assert_eq!(admin.job(v.job.unwrap()).unwrap().state, JobState::Failed);
    // Ended: a bind now is refused.
    let e = admin
        .bind_restore_pod("late", "app-copy/db-0", "n5")
        .unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
}
