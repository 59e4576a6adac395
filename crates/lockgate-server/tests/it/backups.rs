//! Item-block backups through the real server (`/v1/backups`): a manifest directory backed
//! up with its data upload going through the scheduler (the test acts as the node agent),
//! hooks around the snapshot, overlapping backups queued behind each other, cancellation,
//! bad input, and a restart.

use crate::harness::*;
use lockgate_api::{
    AssignmentList, BackupList, BackupRequest, BackupState, BackupView, JobQuery, NodeRegister,
    Role,
};
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Hooks run as plain local commands; overlapping backups conflict (Velero's rule).
const POLICY: &str = r#"
[blocks]
exec_template = ["env", "{command}"]

[[conflict]]
match = "kind=resource-backup"
overlap = "namespaces"
"#;

pub(crate) fn pod(ns: &str, name: &str, claims: &[&str], hooks: Option<&Path>) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": format!("vol-{c}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    let mut annotations = json!({});
    if let Some(log) = hooks {
        for phase in ["pre", "post"] {
            let cmd = format!("echo {phase} {name} >> {}", log.display());
            annotations[format!("{phase}.hook.backup.lockgate.io/command")] =
                json!(serde_json::to_string(&["sh", "-c", &cmd]).unwrap());
        }
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"},
                     "annotations": annotations},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "main", "image": "nginx:1.27"}],
                 "volumes": volumes}
    })
}

fn pvc(ns: &str, name: &str, pv: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-rbd",
                 "volumeName": pv, "resources": {"requests": {"storage": "1Gi"}}}
    })
}

fn pv(name: &str, ns: &str, claim: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "claimRef": {"namespace": ns, "name": claim}}
    })
}

pub(crate) fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})
}

fn list(items: &[Value]) -> String {
    serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .unwrap()
}

/// `app`: a pod with a PVC bound to a PV (hooks logged to `hooks`), a Deployment and two
/// ConfigMaps, spread over a JSON `List`, a YAML file and single manifests.
pub(crate) fn app_dir(root: &Path, hooks: Option<&Path>) -> PathBuf {
    let dir = root.join("manifests");
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("pods.json"),
        list(&[pod("app", "web-0", &["data-web-0"], hooks)]),
    )
    .unwrap();
    let yaml: Vec<String> = [
        pvc("app", "data-web-0", "pv-1"),
        pv("pv-1", "app", "data-web-0"),
    ]
    .iter()
    .map(|v| serde_json::to_string(v).unwrap())
    .collect();
    std::fs::write(dir.join("storage.yaml"), yaml.join("\n---\n")).unwrap();
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "web", "namespace": "app"},
                        "spec": {"replicas": 1}});
    std::fs::write(dir.join("deploy.json"), deploy.to_string()).unwrap();
    for cm in ["cfg-1", "cfg-2"] {
        std::fs::write(
            dir.join("config").join(format!("{cm}.json")),
            configmap("app", cm).to_string(),
        )
        .unwrap();
    }
    dir
}

pub(crate) fn request(name: &str, from: &Path) -> BackupRequest {
    BackupRequest {
        name: name.into(),
        from: from.display().to_string(),
        ..BackupRequest::default()
    }
}

/// Polls the backup until `done` holds.
pub(crate) fn until(
    c: &Client,
    name: &str,
    what: &str,
    done: impl Fn(&BackupView) -> bool,
) -> BackupView {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = c.backup(name).unwrap();
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "backup {name}: {what}: {v:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn finished(c: &Client, name: &str) -> BackupView {
    until(c, name, "not finished", BackupView::is_finished)
}

/// The test is the node agent of `node`: it registers the node for `data-upload` jobs.
pub(crate) fn agent_node(c: &Client, node: &str) {
    let reg = NodeRegister {
        kinds: ["data-upload".to_string()].into(),
        ..NodeRegister::default()
    };
    c.register_node(node, &reg).unwrap();
}

/// Long-polls the node's assignments and acknowledges the first: `(stage, token, job)`.
pub(crate) fn take(c: &Client, node: &str) -> (String, u64, lockgate_api::JobView) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list: AssignmentList = c
            .call(
                "GET",
                &format!("/v1/nodes/{node}/assignments?timeout_s=5"),
                None::<&()>,
            )
            .unwrap();
        if let Some(a) = list.assignments.into_iter().next() {
            let _: Value = c
                .call(
                    "POST",
                    &format!("/v1/nodes/{node}/assignments/{}/ack", a.job.id),
                    None::<&()>,
                )
                .unwrap();
            return (a.stage, a.token, a.job);
        }
        assert!(Instant::now() < deadline, "no assignment on {node}");
    }
}

/// Plays a data-upload job through prepare and run.
pub(crate) fn upload(c: &Client, node: &str) -> lockgate_api::JobView {
    play(c, node, "data-upload", Outcome::Succeeded)
}

/// Plays the next job assigned to `node`, of `kind`, through prepare and run, ending it
/// `outcome`.
pub(crate) fn play(c: &Client, node: &str, kind: &str, outcome: Outcome) -> lockgate_api::JobView {
    let (stage, token, job) = take(c, node);
    assert_eq!((stage.as_str(), job.kind.as_str()), ("prepare", kind));
    c.prepared(job.id, token).unwrap();
    let (stage, token, job) = take(c, node);
    assert_eq!(stage, "run");
    let message = (outcome != Outcome::Succeeded).then(|| format!("{kind} failed"));
    c.finish_job(job.id, token, outcome, message).unwrap()
}

fn entries(archive: &Path) -> BTreeSet<String> {
    let f = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    tar.entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect()
}

fn read_log(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        f.read_to_string(&mut s).unwrap();
    }
    s
}

#[test]
fn a_manifest_directory_is_backed_up_with_its_upload_scheduled_and_hooks_around_the_snapshot() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let hooks = dir.path().join("hooks.log");
    let input = app_dir(dir.path(), Some(&hooks));
    agent_node(&admin, "n1");

    let created = admin.create_backup(&request("b1", &input)).unwrap();
    assert_eq!(created.namespaces, ["app"]);
    assert_eq!(created.progress.items_total, 6);
    let job = admin.job(created.job.unwrap()).unwrap();
    assert_eq!(
        (job.kind.as_str(), job.owner.as_str()),
        ("resource-backup", "backup:b1")
    );
    assert_eq!(job.attrs["namespaces"], "app");

    // The PVC's upload is a two-stage agent job placed on the node by the scheduler.
    let (stage, token, up) = take(&admin, "n1");
    assert_eq!(
        (stage.as_str(), up.kind.as_str(), up.owner.as_str()),
        ("prepare", "data-upload", "backup:b1")
    );
    assert_eq!(up.attrs["pvc"], "data-web-0");
    assert_eq!(up.attrs["pv"], "pv-1");
    assert_eq!(up.node.as_deref(), Some("n1"));
    // While it prepares, the pre-hook has run and the post-hook must not (Velero 8159).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read_log(&hooks), "pre web-0\n");
    assert_eq!(admin.backup("b1").unwrap().state, BackupState::Running);
    admin.prepared(up.id, token).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !read_log(&hooks).contains("post web-0") {
        assert!(Instant::now() < deadline, "the post-hook never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The archive is closed only once the data is moved.
    let (stage, token, _) = take(&admin, "n1");
    assert_eq!(stage, "run");
    assert!(!admin.backup("b1").unwrap().is_finished());
    admin
        .finish_job(up.id, token, Outcome::Succeeded, None)
        .unwrap();

    let done = finished(&admin, "b1");
    assert_eq!(done.phase.as_deref(), Some("Completed"), "{done:#?}");
    assert_eq!(done.items.unwrap().completed, 6);
    assert_eq!(done.progress.blocks_done, done.progress.blocks_total);
    assert_eq!(
        admin.job(job.id).unwrap().state,
        JobState::Succeeded,
        "the server finished its own job"
    );
    let archive = PathBuf::from(&done.archive);
    assert_eq!(archive, dir.path().join("data/backups/b1.tar.gz"));
    let names = entries(&archive);
    for e in [
        "resources/pods/namespaces/app/web-0.json",
        "resources/persistentvolumeclaims/namespaces/app/data-web-0.json",
        "resources/persistentvolumes/cluster/pv-1.json",
        "resources/deployments.apps/namespaces/app/web.json",
        "resources/configmaps/namespaces/app/cfg-1.json",
        "resources/configmaps/namespaces/app/cfg-2.json",
        "metadata/blocks.json",
        "metadata/result.json",
    ] {
        assert!(names.contains(e), "{e} missing from {names:#?}");
    }

    // describe: per-item status, hooks and the upload, from metadata/result.json.
    let result: Value = admin.backup_result("b1").unwrap();
    assert_eq!(result["phase"], "Completed");
    let status: Vec<(String, String)> = result["item_status"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["item"].as_str().unwrap().to_string(),
                i["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(status.len(), 6);
    assert!(status.iter().all(|(_, st)| st == "Completed"), "{status:?}");
    assert!(status.contains(&("persistentvolumes/pv-1".into(), "Completed".into())));
    let hooks: Vec<(&str, i64)> = result["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["phase"].as_str().unwrap(),
                h["exit_code"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(hooks, [("pre", 0), ("post", 0)]);
    assert_eq!(result["uploads"][0]["kind"], "data-upload");
    assert!(result["uploads"][0]["error"].is_null());

    let all: BackupList = admin.backups().unwrap();
    assert_eq!(all.backups.len(), 1);
    // A viewer reads; an agent may not.
    let viewer = s.token("v", Role::Viewer, None);
    assert_eq!(
        viewer.backup("b1").unwrap().phase.as_deref(),
        Some("Completed")
    );
    assert!(
        viewer
            .create_backup(&request("b2", &input))
            .unwrap_err()
            .status()
            == Some(403)
    );
    let agent = s.token("a", Role::Agent, Some("n1"));
    assert_eq!(agent.backups().unwrap_err().status(), Some(403));
}

#[test]
fn overlapping_backups_run_one_after_the_other_and_disjoint_ones_together() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    std::fs::write(
        input.join("other.json"),
        configmap("other", "x").to_string(),
    )
    .unwrap();
    agent_node(&admin, "n1");
    let only = |name: &str, ns: &str, resources: &[&str]| BackupRequest {
        include_namespaces: vec![ns.into()],
        include_resources: resources.iter().map(|r| r.to_string()).collect(),
        ..request(name, &input)
    };

    // A holds namespace `app` until its upload is done.
    let a = admin.create_backup(&only("a", "app", &[])).unwrap();
    until(&admin, "a", "running", |v| v.state == BackupState::Running);
    // B overlaps A: it queues behind A's job.
    let b = admin
        .create_backup(&only("b", "app", &["configmaps"]))
        .unwrap();
    assert_eq!(b.namespaces, ["app"]);
    // C does not overlap: it runs to the end while A runs and B waits.
    let c = admin.create_backup(&only("c", "other", &[])).unwrap();
    let c = finished(&admin, &c.name);
    assert_eq!(c.phase.as_deref(), Some("Completed"), "{c:#?}");
    let b_now = admin.backup("b").unwrap();
    assert_eq!(b_now.state, BackupState::Queued);
    assert_eq!(b_now.progress.items_done, 0);
    let b_job = b_now.job.unwrap();
    assert_eq!(admin.job(b_job).unwrap().state, JobState::Queued);
    let why = admin.explain(b_job).unwrap();
    assert!(
        why.text.contains(&format!("job {}", a.job.unwrap())),
        "{}",
        why.text
    );
    assert_eq!(admin.backup("a").unwrap().state, BackupState::Running);
    // A backup cancelled while queued ends at once, without an archive.
    let d = admin
        .create_backup(&only("d", "app", &["deployments"]))
        .unwrap();
    let cancelled = admin.cancel_backup("d").unwrap();
    assert!(cancelled.cancel_requested);
    let d = finished(&admin, &d.name);
    assert_eq!(d.phase.as_deref(), Some("Failed"));
    assert!(d.reasons[0].contains("cancelled"), "{:?}", d.reasons);
    assert!(d.started_at.is_none());
    assert_eq!(
        admin.job(d.job.unwrap()).unwrap().state,
        JobState::Cancelled
    );
    let err = admin.backup_result::<Value>("d").unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");

    upload(&admin, "n1");
    let a = finished(&admin, "a");
    assert_eq!(a.phase.as_deref(), Some("Completed"), "{a:#?}");
    let b = finished(&admin, "b");
    assert_eq!(b.phase.as_deref(), Some("Completed"), "{b:#?}");
    let t = |s: &Option<String>| lockgate_api::time::parse(s.as_deref().unwrap()).unwrap();
    assert!(
        t(&b.started_at) >= t(&a.finished_at),
        "B started before A ended"
    );
    assert!(t(&c.finished_at) <= t(&a.finished_at));
    let names: Vec<String> = admin
        .backups()
        .unwrap()
        .backups
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
}

#[test]
fn cancel_stops_new_blocks_at_once() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let log = dir.path().join("started.log");
    let input = dir.path().join("pods.json");
    // 30 ordered blocks: they run one at a time, whatever the number of workers.
    let pods: Vec<Value> = (0..30)
        .map(|i| {
            let cmd = format!("echo {i} >> {}; sleep 0.05", log.display());
            let mut p = pod("app", &format!("p{i:02}"), &[], None);
            p["metadata"]["annotations"]["pre.hook.backup.lockgate.io/command"] =
                json!(serde_json::to_string(&["sh", "-c", &cmd]).unwrap());
            p
        })
        .collect();
    std::fs::write(&input, list(&pods)).unwrap();
    let req = BackupRequest {
        ordered: (0..30).map(|i| format!("pods/app/p{i:02}")).collect(),
        ..request("slow", &input)
    };
    let created = admin.create_backup(&req).unwrap();
    until(&admin, "slow", "two blocks done", |v| {
        v.progress.blocks_done >= 2
    });
    let v = admin.cancel_backup("slow").unwrap();
    assert!(v.cancel_requested);
    let started_at_cancel = read_log(&log).lines().count();
    let done = finished(&admin, "slow");
    let started = read_log(&log).lines().count();
    assert!(
        started <= started_at_cancel + 1,
        "{started} blocks started, {started_at_cancel} when the cancel returned"
    );
    assert_eq!(done.phase.as_deref(), Some("Failed"));
    assert!(
        done.reasons.iter().any(|r| r.contains("canceled")),
        "{:?}",
        done.reasons
    );
    let blocks = done.blocks.unwrap();
    assert!(blocks.skipped >= 30 - started, "{blocks:?}");
    assert_eq!(
        admin.job(created.job.unwrap()).unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(
        admin.cancel_backup("slow").unwrap_err().code(),
        Some("already_ended")
    );
}

#[test]
fn bad_input_is_refused_naming_the_file_and_nothing_starts() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let refuse = |req: &BackupRequest| {
        let e = admin.create_backup(req).unwrap_err();
        match e {
            lockgate_client::ClientError::Api { status, detail } => (status, detail),
            other => panic!("{other}"),
        }
    };
    let missing = dir.path().join("nope.json");
    let (status, e) = refuse(&request("m", &missing));
    assert_eq!((status, e.code.as_str()), (422, "invalid_input"));
    assert_eq!(e.field.as_deref(), Some("from"));
    assert!(
        e.message.contains(&missing.display().to_string()),
        "{}",
        e.message
    );

    let (status, e) = refuse(&BackupRequest {
        from: "relative/dir".into(),
        ..request("m", &missing)
    });
    assert_eq!((status, e.field.as_deref()), (422, Some("from")));
    assert!(
        e.message.contains("absolute path on the server"),
        "{}",
        e.message
    );

    let bad_dir = dir.path().join("bad");
    std::fs::create_dir_all(&bad_dir).unwrap();
    std::fs::write(
        bad_dir.join("good.json"),
        configmap("app", "ok").to_string(),
    )
    .unwrap();
    std::fs::write(bad_dir.join("broken.json"), "{\"kind\": \"ConfigMap\", ").unwrap();
    let (status, e) = refuse(&request("m", &bad_dir));
    assert_eq!((status, e.code.as_str()), (422, "invalid_input"));
    assert!(e.message.contains("broken.json"), "{}", e.message);
    assert!(e.message.contains("nothing was started"), "{}", e.message);

    let nameless = dir.path().join("nameless.json");
    std::fs::write(
        &nameless,
        list(&[
            configmap("app", "a"),
            json!({"apiVersion": "v1", "kind": "Secret",
                                             "metadata": {"namespace": "app"}}),
        ]),
    )
    .unwrap();
    let (_, e) = refuse(&request("m", &nameless));
    assert!(
        e.message.contains(&format!(
            "{}: items[1]: Secret manifest has no metadata.name",
            nameless.display()
        )),
        "{}",
        e.message
    );

    let good = bad_dir.join("good.json");
    let (status, e) = refuse(&BackupRequest {
        selector: Some("app in (web".into()),
        ..request("m", &good)
    });
    assert_eq!((status, e.field.as_deref()), (422, Some("selector")));
    let (status, e) = refuse(&request("Bad/Name", &good));
    assert_eq!((status, e.field.as_deref()), (422, Some("name")));

    let (status, body) = s.raw(
        "POST",
        "/v1/backups",
        Some(&s.admin),
        Some(("application/json", "{\"name\": \"m\", ")),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("malformed_json"), "{body}");
    let (status, body) = s.raw(
        "POST",
        "/v1/backups",
        Some(&s.admin),
        Some((
            "application/json",
            r#"{"name": "m", "from": "/x", "colour": 1}"#,
        )),
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("colour"), "{body}");

    // Nothing was recorded or submitted.
    assert!(admin.backups().unwrap().backups.is_empty());
    let q = JobQuery {
        kind: Some("resource-backup".into()),
        ..JobQuery::default()
    };
    assert!(admin.jobs(&q).unwrap().jobs.is_empty());

    // Names are unique.
    finished(
        &admin,
        &admin.create_backup(&request("m", &good)).unwrap().name,
    );
    let (status, e) = refuse(&request("m", &good));
    assert_eq!((status, e.code.as_str()), (409, "already_exists"));
}

#[test]
fn a_restart_fails_the_running_backup_and_keeps_the_finished_ones() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let input = app_dir(dir.path(), None);
    let (running_job, upload_job) = {
        let s = TestServer::start(&data, POLICY);
        let admin = s.admin();
        agent_node(&admin, "n1");
        let cms = BackupRequest {
            include_resources: vec!["configmaps".into()],
            ..request("done", &input)
        };
        admin.create_backup(&cms).unwrap();
        assert_eq!(finished(&admin, "done").phase.as_deref(), Some("Completed"));
        // This one waits for its upload when the server stops.
        let v = admin.create_backup(&request("cut", &input)).unwrap();
        let (_, _, up) = take(&admin, "n1");
        s.stop();
        (v.job.unwrap(), up.id)
    };
    let s = TestServer::start(&data, "");
    let admin = s.admin();
    let done = admin.backup("done").unwrap();
    assert_eq!(done.phase.as_deref(), Some("Completed"));
    let result: Value = admin.backup_result("done").unwrap();
    assert_eq!(result["item_counts"]["completed"], 2);
    let cut = admin.backup("cut").unwrap();
    assert_eq!(
        (cut.state, cut.phase.as_deref()),
        (BackupState::Finished, Some("Failed"))
    );
    assert!(
        cut.reasons[0].contains("server stopped"),
        "{:?}",
        cut.reasons
    );
    for id in [running_job, upload_job] {
        assert_eq!(
            admin.job(id).unwrap().state,
            JobState::Cancelled,
            "job {id}"
        );
    }
    assert_eq!(admin.backups().unwrap().backups.len(), 2);
}

#[test]
fn a_pod_volume_backup_is_pinned_to_the_pods_node_and_the_post_hook_waits_for_its_end() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let hooks = dir.path().join("hooks.log");
    let mut p = pod("app", "db-0", &[], Some(&hooks));
    p["spec"]["nodeName"] = json!("n2");
    p["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    p["metadata"]["annotations"]["backup.lockgate.io/backup-volumes"] = json!("scratch");
    let input = dir.path().join("pod.json");
    std::fs::write(&input, p.to_string()).unwrap();
    let reg = NodeRegister {
        kinds: ["pod-volume-backup".to_string()].into(),
        ..NodeRegister::default()
    };
    admin.register_node("n2", &reg).unwrap();

    admin.create_backup(&request("fs", &input)).unwrap();
    let (stage, token, job) = take(&admin, "n2");
    assert_eq!(
        (stage.as_str(), job.kind.as_str(), job.pinned, job.two_stage),
        ("run", "pod-volume-backup", true, false)
    );
    assert_eq!(
        (job.attrs["pod"].as_str(), job.attrs["volume"].as_str()),
        ("db-0", "scratch")
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        read_log(&hooks),
        "pre db-0\n",
        "post-hook before the data moved"
    );
    admin
        .finish_job(job.id, token, Outcome::Succeeded, None)
        .unwrap();
    let done = finished(&admin, "fs");
    assert_eq!(done.phase.as_deref(), Some("Completed"), "{done:#?}");
    assert_eq!(read_log(&hooks), "pre db-0\npost db-0\n");
    let result: Value = admin.backup_result("fs").unwrap();
    assert_eq!(result["uploads"][0]["kind"], "pod-volume-backup");
    assert_eq!(result["uploads"][0]["volume"], "scratch");
}

#[test]
fn the_server_renews_the_backup_lease_and_a_job_cancel_cancels_the_backup() {
    let dir = tempdir();
    // A lease this short is lost within a second unless the server renews it.
    let policy = format!("{POLICY}\n[leases]\nttl = \"600ms\"\n");
    let s = TestServer::start(&dir.path().join("data"), &policy);
    let admin = s.admin();
    let slow = |name: &str, n: usize| {
        let pods: Vec<Value> = (0..n)
            .map(|i| {
                let mut p = pod(name, &format!("p{i:02}"), &[], None);
                p["metadata"]["annotations"]["pre.hook.backup.lockgate.io/command"] =
                    json!(r#"["sleep", "0.2"]"#);
                p
            })
            .collect();
        let input = dir.path().join(format!("{name}.json"));
        std::fs::write(&input, list(&pods)).unwrap();
        BackupRequest {
            ordered: (0..n).map(|i| format!("pods/{name}/p{i:02}")).collect(),
            ..request(name, &input)
        }
    };
    let long = admin.create_backup(&slow("long", 8)).unwrap();
    let stop = admin.create_backup(&slow("stop", 30)).unwrap();
    until(&admin, "stop", "a block done", |v| {
        v.progress.blocks_done >= 1
    });
    // `lockgate job cancel` on the backup's own job: the next renewal sees it.
    let job = admin.cancel(stop.job.unwrap(), false).unwrap();
    assert!(job.cancel_requested);
    let stopped = finished(&admin, "stop");
    assert_eq!(stopped.phase.as_deref(), Some("Failed"));
    assert!(stopped.blocks.unwrap().skipped > 0, "{stopped:#?}");
    assert_eq!(
        admin.job(stop.job.unwrap()).unwrap().state,
        JobState::Cancelled
    );

    let done = finished(&admin, "long");
    assert_eq!(done.phase.as_deref(), Some("Completed"), "{done:#?}");
    let t = |s: &Option<String>| lockgate_api::time::parse(s.as_deref().unwrap()).unwrap();
    assert!(
        t(&done.finished_at).since(t(&done.started_at)) > 1_200,
        "{done:#?}"
    );
    assert_eq!(
        admin.job(long.job.unwrap()).unwrap().state,
        JobState::Succeeded,
        "the lease was renewed for the whole run"
    );
}
