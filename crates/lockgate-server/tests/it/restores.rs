//! Restores through the real server (`/v1/restores`): a backup restored into a mapped
//! namespace once its `resource-restore` job is admitted, a restore queued behind the
//! backup that holds its namespace (explain names the holder), cancel, restoring again
//! over what exists, bad input refused with nothing recorded, a submitter confined to its
//! own backups and namespaces, and a restart.

use crate::backups::{agent_node, app_dir, finished, play, request, take, upload};
use crate::harness::*;
use lockgate_api::{BackupRequest, BackupState, RestoreRequest, RestoreView, Role, TokenCreate};
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Backups and restores of one namespace never run together (Velero's rule, extended to
/// restores).
const POLICY: &str = r#"
[blocks]
exec_template = ["env", "{command}"]

[[conflict]]
match = "kind in (resource-backup, resource-restore)"
overlap = "namespaces"
"#;

fn restore(name: &str, backup: &str) -> RestoreRequest {
    RestoreRequest {
        name: name.into(),
        backup: backup.into(),
        ..RestoreRequest::default()
    }
}

pub(crate) fn mapped(name: &str, backup: &str, from: &str, to: &str) -> RestoreRequest {
    RestoreRequest {
        namespace_mappings: [(from.to_string(), to.to_string())].into(),
        ..restore(name, backup)
    }
}

/// Polls the restore until `done` holds (`what` says what it waits for).
pub(crate) fn restore_until(
    c: &Client,
    name: &str,
    what: &str,
    done: impl Fn(&RestoreView) -> bool,
) -> RestoreView {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = c.restore(name).unwrap();
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "restore {name}: {what}: {v:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls the restore until it has finished.
pub(crate) fn restored(c: &Client, name: &str) -> RestoreView {
    restore_until(c, name, "not finished", RestoreView::is_finished)
}

/// The test is the agent of `node`, which runs `kinds`.
pub(crate) fn mover_node(c: &Client, node: &str, kinds: &[&str]) {
    let reg = lockgate_api::NodeRegister {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        ..lockgate_api::NodeRegister::default()
    };
    c.register_node(node, &reg).unwrap();
}

/// Creates the restore `req` as `c` and polls it until it has finished.
fn restore_now(c: &Client, req: &RestoreRequest) -> RestoreView {
    restored(c, &c.create_restore(req).unwrap().name)
}

/// Polls the restore until it has submitted its data jobs (its files are written).
fn moving(c: &Client, name: &str) -> RestoreView {
    restore_until(c, name, "no data job", |v| !v.data_jobs.is_empty())
}

/// The backup `cms` (app's two ConfigMaps), finished.
fn configmaps_backup(c: &Client, input: &Path) {
    let req = BackupRequest {
        include_resources: vec!["configmaps".into()],
        ..request("cms", input)
    };
    c.create_backup(&req).unwrap();
    assert_eq!(finished(c, "cms").phase.as_deref(), Some("Completed"));
}

pub(crate) fn items_of(file: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(v["kind"], "List", "{}", file.display());
    v["items"].as_array().unwrap().clone()
}

#[test]
fn a_restore_waits_for_the_backup_holding_its_namespace_and_a_disjoint_one_runs_at_once() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    agent_node(&admin, "n1");
    configmaps_backup(&admin, &input);
    // Backup `a` holds namespace `app` until its volume's upload is done.
    let a = admin.create_backup(&request("a", &input)).unwrap();
    crate::backups::until(&admin, "a", "running", |v| v.state == BackupState::Running);

    // r1 restores into `app`: it queues behind `a`, and explain names a's job.
    let r1 = admin.create_restore(&restore("r1", "cms")).unwrap();
    assert_eq!(
        (r1.state, r1.namespaces.clone()),
        (BackupState::Queued, vec!["app".to_string()])
    );
    assert_eq!(r1.items.restored, 2);
    let job = admin.job(r1.job.unwrap()).unwrap();
    assert_eq!(
        (job.kind.as_str(), job.owner.as_str(), job.priority),
        ("resource-restore", "restore:r1", 100)
    );
    assert_eq!(job.attrs.get("namespaces").map(String::as_str), Some("app"));
    let why = admin.explain(job.id).unwrap();
    assert!(
        why.text.contains(&format!("job {}", a.job.unwrap())),
        "{}",
        why.text
    );

    // r2 restores into `app-copy`: nothing holds it, it runs at once.
    let r2 = admin
        .create_restore(&mapped("r2", "cms", "app", "app-copy"))
        .unwrap();
    let r2 = restored(&admin, &r2.name);
    assert_eq!(r2.phase.as_deref(), Some("Completed"), "{r2:#?}");
    assert_eq!(r2.files, ["000-configmaps.json"]);
    let dir2 = Path::new(&r2.directory);
    let items = items_of(&dir2.join("000-configmaps.json"));
    assert_eq!(items.len(), 2);
    for item in &items {
        assert_eq!(item["metadata"]["namespace"], "app-copy");
        assert!(item["metadata"].get("uid").is_none(), "{item}");
    }
    assert_eq!(
        admin.job(r2.job.unwrap()).unwrap().state,
        JobState::Succeeded
    );
    let result: Value = admin.restore_result("r2").unwrap();
    assert_eq!(result["counts"]["restored"], 2, "{result}");
    assert_eq!(admin.restore("r1").unwrap().state, BackupState::Queued);

    // A restore cancelled while queued ends at once, with nothing written.
    let r3 = admin.create_restore(&restore("r3", "cms")).unwrap();
    assert!(admin.cancel_restore("r3").unwrap().cancel_requested);
    let r3 = restored(&admin, &r3.name);
    assert_eq!(r3.phase.as_deref(), Some("Failed"));
    assert!(r3.reasons[0].contains("cancelled"), "{:?}", r3.reasons);
    assert!(r3.started_at.is_none());
    assert!(!Path::new(&r3.directory).exists());
    assert_eq!(
        admin.job(r3.job.unwrap()).unwrap().state,
        JobState::Cancelled
    );
    let err = admin.restore_result::<Value>("r3").unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");

    // The backup ends: r1 is admitted after it, never before.
    upload(&admin, "n1");
    let a = finished(&admin, "a");
    let r1 = restored(&admin, "r1");
    assert_eq!(r1.phase.as_deref(), Some("Completed"), "{r1:#?}");
    let t = |s: &Option<String>| lockgate_api::time::parse(s.as_deref().unwrap()).unwrap();
    assert!(
        t(&r1.started_at) >= t(&a.finished_at),
        "r1 started before a ended"
    );

    // Restoring again over what r2 wrote, with `none`: every item exists, nothing to apply.
    let again = RestoreRequest {
        existing: Some(r2.directory.clone()),
        ..mapped("r4", "cms", "app", "app-copy")
    };
    let r4 = restore_now(&admin, &again);
    assert_eq!(r4.phase.as_deref(), Some("Completed"));
    assert!(r4.files.is_empty(), "{r4:#?}");
    assert_eq!((r4.items.restored, r4.items.skipped), (0, 2));

    let names: Vec<String> = admin
        .restores()
        .unwrap()
        .restores
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["r1", "r2", "r3", "r4"]);
}

#[test]
fn bad_restores_are_refused_naming_the_field_and_nothing_is_recorded() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    agent_node(&admin, "n1");
    configmaps_backup(&admin, &input);
    admin.create_backup(&request("busy", &input)).unwrap();
    let refused = |req: RestoreRequest, status: u16, code: &str, field: &str| match admin
        .create_restore(&req)
        .unwrap_err()
    {
        lockgate_client::ClientError::Api {
            status: got,
            detail,
        } => {
            assert_eq!((got, detail.code.as_str()), (status, code), "{detail:?}");
            assert_eq!(detail.field.as_deref(), Some(field), "{detail:?}");
            detail.message
        }
        other => panic!("{other}"),
    };
    refused(restore("Bad", "cms"), 422, "invalid_field", "name");
    refused(restore("r", "nope"), 404, "not_found", "backup");
    let msg = refused(restore("r", "busy"), 409, "not_finished", "backup");
    assert!(msg.contains("finished"), "{msg}");
    let msg = refused(
        mapped("r", "cms", "app", "Not_A_Namespace"),
        422,
        "invalid_field",
        "namespace_mappings",
    );
    assert!(msg.contains("Not_A_Namespace"), "{msg}");
    let bad_order = RestoreRequest {
        restore_resource_priorities: Some("pods,-,-".into()),
        ..restore("r", "cms")
    };
    refused(
        bad_order,
        422,
        "invalid_field",
        "restore_resource_priorities",
    );
    let relative = RestoreRequest {
        existing: Some("here.json".into()),
        ..restore("r", "cms")
    };
    refused(relative, 422, "invalid_field", "existing");
    // A damaged archive: its end cut off.
    let archive = admin.backup("cms").unwrap().archive;
    let bytes = std::fs::read(&archive).unwrap();
    std::fs::write(&archive, &bytes[..bytes.len() / 2]).unwrap();
    let msg = refused(restore("r", "cms"), 422, "invalid_input", "backup");
    assert!(msg.contains("cms"), "{msg}");
    assert!(admin.restores().unwrap().restores.is_empty());
    assert!(!dir.path().join("data/restores/r").exists());
    // A taken name.
    std::fs::write(&archive, &bytes).unwrap();
    admin.create_restore(&restore("r", "cms")).unwrap();
    refused(restore("r", "cms"), 409, "already_exists", "name");
    // `r` waits behind `busy`, holding no plan: it is planned again once admitted, so an
    // archive damaged meanwhile fails it then, saying why, with nothing written.
    assert_eq!(admin.restore("r").unwrap().state, BackupState::Queued);
    std::fs::write(&archive, &bytes[..bytes.len() / 2]).unwrap();
    upload(&admin, "n1");
    let r = restored(&admin, "r");
    assert_eq!(r.phase.as_deref(), Some("Failed"), "{r:#?}");
    assert!(
        r.reasons[0].contains("planned when its job was admitted")
            && r.reasons[0].contains("damaged"),
        "{:?}",
        r.reasons
    );
    assert!(!dir.path().join("data/restores/r").exists());
    assert_eq!(admin.job(r.job.unwrap()).unwrap().state, JobState::Failed);
}

#[test]
fn a_submitter_restores_only_its_own_backups_into_its_own_namespaces() {
    let dir = tempdir();
    let root = dir.path().join("input");
    std::fs::create_dir(&root).unwrap();
    let input = app_dir(&root, None);
    let s = TestServer::with_config(lockgate_server::Config {
        backup_input_roots: vec![root.clone()],
        ..TestServer::config(&dir.path().join("data"))
    });
    let admin = s.admin();
    admin
        .put_policy(
            "[owners.alice]\nbackup_namespaces = [\"app\", \"app-copy\"]\n",
            false,
            None,
        )
        .unwrap();
    configmaps_backup(&admin, &input);
    let token = admin
        .create_token(&TokenCreate {
            name: "alice".into(),
            role: Role::Submitter,
            node: None,
        })
        .unwrap()
        .token;
    let alice = s.client(Some(&token));
    let err = alice.create_restore(&restore("r", "cms")).unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");

    let own = BackupRequest {
        include_resources: vec!["configmaps".into()],
        ..request("mine", &input)
    };
    alice.create_backup(&own).unwrap();
    assert_eq!(finished(&alice, "mine").phase.as_deref(), Some("Completed"));
    // Into a namespace she may not back up: every item is left out and named.
    let out = restore_now(&alice, &mapped("out", "mine", "app", "kube-system"));
    assert_eq!(out.items.restored, 0, "{out:#?}");
    assert_eq!(out.refused.len(), 2);
    assert!(out
        .refused
        .iter()
        .all(|r| r.reason == "namespace_not_allowed"));
    // Into her own: restored.
    let ok = restore_now(&alice, &mapped("ok", "mine", "app", "app-copy"));
    assert_eq!(
        (ok.phase.as_deref(), ok.items.restored),
        (Some("Completed"), 2)
    );
    // `existing` outside the input roots: one answer, whatever the path.
    let outside = RestoreRequest {
        existing: Some("/etc".into()),
        ..mapped("peek", "mine", "app", "app-copy")
    };
    let err = alice.create_restore(&outside).unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    // Her owner may not run hooks: a hooked pod is restored, its hook refused, not run.
    let log = dir.path().join("hook.log");
    let echo = format!("echo ran >> {}", log.display());
    std::fs::write(
        input.join("hooked.json"),
        hooked_pod("app", "hooked", &["sh", "-c", &echo], None).to_string(),
    )
    .unwrap();
    let pods = BackupRequest {
        include_resources: vec!["pods".into()],
        include_namespaces: vec!["app".into()],
        ..request("pods", &input)
    };
    alice.create_backup(&pods).unwrap();
    assert_eq!(finished(&alice, "pods").phase.as_deref(), Some("Completed"));
    let hooked = restore_now(&alice, &mapped("hooked", "pods", "app", "app-copy"));
    assert_eq!(hooked.phase.as_deref(), Some("Completed"), "{hooked:#?}");
    assert!(hooked.hooks.is_empty() && !log.exists(), "{hooked:#?}");
    let refused: Vec<(&str, &str)> = hooked
        .refused
        .iter()
        .map(|r| (r.item.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(refused, [("pods/app-copy/hooked", "hooks_not_allowed")]);
    // She sees her restores only; the admin sees all.
    admin
        .create_restore(&mapped("admins", "cms", "app", "x"))
        .unwrap();
    assert_eq!(alice.restores().unwrap().restores.len(), 3);
    assert_eq!(alice.restore("admins").unwrap_err().status(), Some(403));
    assert_eq!(
        restored(&admin, "admins").phase.as_deref(),
        Some("Completed")
    );
    assert_eq!(admin.restores().unwrap().restores.len(), 4);
}

#[test]
fn a_restart_fails_the_queued_restore_and_keeps_the_finished_ones() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let input = app_dir(dir.path(), None);
    let queued_job = {
        let s = TestServer::start(&data, POLICY);
        let admin = s.admin();
        agent_node(&admin, "n1");
        configmaps_backup(&admin, &input);
        admin.create_backup(&request("holder", &input)).unwrap();
        let _upload = take(&admin, "n1");
        let done = admin
            .create_restore(&mapped("done", "cms", "app", "elsewhere"))
            .unwrap();
        assert_eq!(
            restored(&admin, &done.name).phase.as_deref(),
            Some("Completed")
        );
        let waiting = admin.create_restore(&restore("waiting", "cms")).unwrap();
        assert_eq!(waiting.state, BackupState::Queued);
        // A writer the server stopped in the middle left its hidden partial directory.
        std::fs::create_dir_all(data.join("restores/.waiting.4242-0.partial")).unwrap();
        std::fs::create_dir_all(data.join("restores/.waiting.x.4242-0.partial")).unwrap();
        s.stop();
        waiting.job.unwrap()
    };
    let s = TestServer::start(&data, "");
    let admin = s.admin();
    assert_eq!(
        admin.restore("done").unwrap().phase.as_deref(),
        Some("Completed")
    );
    let result: Value = admin.restore_result("done").unwrap();
    assert_eq!(result["counts"]["restored"], 2);
    let cut = admin.restore("waiting").unwrap();
    assert_eq!(
        (cut.state, cut.phase.as_deref()),
        (BackupState::Finished, Some("Failed"))
    );
    assert!(
        cut.reasons[0].contains("server stopped"),
        "{:?}",
        cut.reasons
    );
    assert_eq!(admin.job(queued_job).unwrap().state, JobState::Cancelled);
    assert!(!data.join("restores/.waiting.4242-0.partial").exists());
    // Another restore's (`waiting.x`) is not this one's to remove.
    assert!(data.join("restores/.waiting.x.4242-0.partial").exists());
}

#[test]
fn a_restored_claim_gets_its_data_back_through_a_download_on_the_pods_node() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    // The claim's class binds on first consumer: its volume lives where its pod runs.
    let class = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "csi-rbd"}, "provisioner": "rbd.csi.ceph.com",
        "volumeBindingMode": "WaitForFirstConsumer"});
    std::fs::write(input.join("class.json"), class.to_string()).unwrap();
    agent_node(&admin, "n1");
    mover_node(&admin, "node-1", &["data-download"]);
    admin.create_backup(&request("full", &input)).unwrap();
    upload(&admin, "n1");
    assert_eq!(finished(&admin, "full").phase.as_deref(), Some("Completed"));

    let back = admin
        .create_restore(&mapped("back", "full", "app", "app-copy"))
        .unwrap();
    let running = moving(&admin, &back.name);
    assert_eq!(running.state, BackupState::Running);
    // The files are there before the data: the claim can be applied while it moves.
    assert!(Path::new(&running.directory)
        .join("metadata/result.json")
        .exists());
    let job = admin.job(running.data_jobs[0]).unwrap();
    assert_eq!(
        (job.kind.as_str(), job.owner.as_str(), job.priority),
        ("data-download", "restore:back", 100)
    );
    assert_eq!((job.pinned, job.node.as_deref()), (true, Some("node-1")));
    assert_eq!(
        job.attrs.get("item").map(String::as_str),
        Some("persistentvolumeclaims/app-copy/data-web-0")
    );
    assert_eq!(job.attrs.get("pv").map(String::as_str), Some("pv-1"));
    play(&admin, "node-1", "data-download", Outcome::Succeeded);
    let back = restored(&admin, "back");
    assert_eq!(back.phase.as_deref(), Some("Completed"), "{back:#?}");
    let result: Value = admin.restore_result("back").unwrap();
    assert_eq!(result["volumes"][0]["node"], "node-1", "{result}");

    // A download that fails leaves the restore PartiallyFailed, naming the claim.
    admin
        .create_restore(&mapped("again", "full", "app", "app-2"))
        .unwrap();
    play(&admin, "node-1", "data-download", Outcome::Failed);
    let again = restored(&admin, "again");
    assert_eq!(
        again.phase.as_deref(),
        Some("PartiallyFailed"),
        "{again:#?}"
    );
    assert!(
        again
            .reasons
            .iter()
            .any(|r| r.contains("persistentvolumeclaims/app-2/data-web-0")
                && r.contains("data-download")),
        "{:?}",
        again.reasons
    );
    assert_eq!(
        admin.job(again.job.unwrap()).unwrap().state,
        JobState::Failed
    );
}

/// Restores of one namespace or one persistent volume never run at once, with no rule in
/// the policy: the second waits for the first (explain names the restore holding it)
/// while a restore of another namespace runs.
#[test]
fn two_restores_of_one_namespace_or_volume_run_one_after_the_other_without_a_rule() {
    let dir = tempdir();
    let s = TestServer::start(
        &dir.path().join("data"),
        "[blocks]\nexec_template = [\"env\", \"{command}\"]\n",
    );
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    mover_node(&admin, "n1", &["data-upload", "data-download"]);
    configmaps_backup(&admin, &input);
    admin.create_backup(&request("full", &input)).unwrap();
    upload(&admin, "n1");
    assert_eq!(finished(&admin, "full").phase.as_deref(), Some("Completed"));

    // `first` writes into app-copy and holds it until its volume's data is back.
    admin
        .create_restore(&mapped("first", "full", "app", "app-copy"))
        .unwrap();
    let first = moving(&admin, "first");
    let second = admin
        .create_restore(&mapped("second", "cms", "app", "app-copy"))
        .unwrap();
    let other = restore_now(&admin, &mapped("other", "cms", "app", "app-3"));
    assert_eq!(other.phase.as_deref(), Some("Completed"), "{other:#?}");
    let waiting = admin.restore("second").unwrap();
    assert_eq!(waiting.state, BackupState::Queued, "{waiting:#?}");
    let why = admin.explain(second.job.unwrap()).unwrap();
    let holder = format!("job {} (restore:first)", first.job.unwrap());
    assert!(
        why.text.contains(&holder) && why.text.contains("namespaces=app-copy"),
        "{}",
        why.text
    );

    // Into another namespace, but writing the same persistent volume: it waits too.
    let third = admin
        .create_restore(&mapped("third", "full", "app", "app-4"))
        .unwrap();
    assert_eq!(third.volumes, ["pv-1"]);
    let why = admin.explain(third.job.unwrap()).unwrap();
    assert!(
        why.text.contains(&holder) && why.text.contains("volumes=pv-1"),
        "{}",
        why.text
    );

    // The first one's data is back: it ends, and only then do the others start.
    play(&admin, "n1", "data-download", Outcome::Succeeded);
    let first = restored(&admin, "first");
    assert_eq!(first.phase.as_deref(), Some("Completed"), "{first:#?}");
    let second = restored(&admin, "second");
    assert_eq!(second.phase.as_deref(), Some("Completed"), "{second:#?}");
    moving(&admin, "third");
    play(&admin, "n1", "data-download", Outcome::Succeeded);
    let third = restored(&admin, "third");
    assert_eq!(third.phase.as_deref(), Some("Completed"), "{third:#?}");
    let t = |s: &Option<String>| lockgate_api::time::parse(s.as_deref().unwrap()).unwrap();
    for later in [&second, &third] {
        assert!(
            t(&later.started_at) >= t(&first.finished_at),
            "{} started before first ended",
            later.name
        );
    }
}

/// A node full of queued uploads (one slot), a restore asked for: the number of slot
/// releases (jobs ending) before the restore's download is assigned, with the policy
/// `extra` added.
fn releases_before_the_download(extra: &str) -> usize {
    const QUEUED: usize = 40;
    let dir = tempdir();
    let policy = format!("[nodes]\nmax_running = 1\n{extra}");
    let s = TestServer::start(&dir.path().join("data"), &policy);
    let admin = s.admin();
    let input = app_dir(dir.path(), None);
    mover_node(&admin, "n1", &["data-upload", "data-download"]);
    admin.create_backup(&request("full", &input)).unwrap();
    upload(&admin, "n1");
    assert_eq!(finished(&admin, "full").phase.as_deref(), Some("Completed"));
    // A night of uploads: every slot busy, the rest queued.
    for i in 0..QUEUED {
        let mut req = job("data-upload", &[("item", &format!("vm-{i}"))]);
        req.executor = Some(lockgate_core::policy::Executor::Agent);
        req.two_stage = Some(true);
        req.node_selector = Some(String::new());
        admin.submit(&req).unwrap();
    }
    let (stage, mut token, mut held) = take(&admin, "n1");
    assert_eq!(
        (stage.as_str(), held.kind.as_str()),
        ("prepare", "data-upload")
    );
    admin
        .create_restore(&mapped("urgent", "full", "app", "app-copy"))
        .unwrap();
    moving(&admin, "urgent");
    // With no prepare queue a job keeps its slot from prepare to run: a slot is released
    // when a job ends.
    let mut stage = stage;
    let mut releases = 0;
    for _ in 0..=2 * QUEUED + 2 {
        if stage == "prepare" {
            admin.prepared(held.id, token).unwrap();
        } else {
            admin
                .finish_job(held.id, token, Outcome::Succeeded, None)
                .unwrap();
            releases += 1;
        }
        let next = take(&admin, "n1");
        if next.2.kind == "data-download" {
            return releases;
        }
        (stage, token, held) = next;
    }
    panic!("the download was never assigned");
}

#[test]
fn a_restore_behind_a_full_node_gets_the_first_slot_that_frees() {
    assert_eq!(releases_before_the_download(""), 1);
    // Without restores first it waits behind the whole queue: the measure can tell.
    let late = releases_before_the_download("[kinds.data-download]\npriority = 0\n");
    eprintln!("restores first: 1 release; with priority 0: {late} releases");
    assert!(late > 30, "{late}");
}

/// A pod of `ns` whose post-restore hook runs `command` (`on-error` as given).
fn hooked_pod(ns: &str, name: &str, command: &[&str], on_error: Option<&str>) -> Value {
    let mut annotations = serde_json::json!({
        "post.hook.restore.lockgate.io/command": serde_json::to_string(command).unwrap()});
    if let Some(e) = on_error {
        annotations["post.hook.restore.lockgate.io/on-error"] = e.into();
    }
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}})
}

#[test]
fn post_restore_hooks_run_through_the_exec_template_once_the_restore_is_written() {
    let dir = tempdir();
    let s = TestServer::start(&dir.path().join("data"), POLICY);
    let admin = s.admin();
    let log = dir.path().join("hooks.log");
    let input = dir.path().join("pods");
    std::fs::create_dir(&input).unwrap();
    let echo = format!("echo restored >> {}", log.display());
    let pods = [
        hooked_pod("app", "web-0", &["sh", "-c", &echo], None),
        hooked_pod("app", "web-1", &["false"], Some("Continue")),
    ];
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        std::fs::write(input.join(format!("{name}.json")), p.to_string()).unwrap();
    }
    admin.create_backup(&request("pods", &input)).unwrap();
    assert_eq!(finished(&admin, "pods").phase.as_deref(), Some("Completed"));
    assert!(!log.exists(), "a backup does not run restore hooks");

    let v = admin
        .create_restore(&mapped("hooked", "pods", "app", "app-copy"))
        .unwrap();
    let v = restored(&admin, &v.name);
    assert_eq!(v.phase.as_deref(), Some("Completed"), "{v:#?}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "restored\n");
    let hooks: Vec<(&str, Option<i64>, bool)> = v
        .hooks
        .iter()
        .map(|h| (h.pod.as_str(), h.exit_code, h.error.is_some()))
        .collect();
    assert_eq!(
        hooks,
        [
            ("app-copy/web-0", Some(0), false),
            ("app-copy/web-1", Some(1), true)
        ]
    );

    // The failing hook's own on-error, Fail, marks the restore PartiallyFailed.
    std::fs::write(
        input.join("web-1.json"),
        hooked_pod("app", "web-1", &["false"], None).to_string(),
    )
    .unwrap();
    admin.create_backup(&request("strict", &input)).unwrap();
    assert_eq!(
        finished(&admin, "strict").phase.as_deref(),
        Some("Completed")
    );
    let v = admin
        .create_restore(&mapped("strict", "strict", "app", "app-2"))
        .unwrap();
    let v = restored(&admin, &v.name);
    assert_eq!(v.phase.as_deref(), Some("PartiallyFailed"), "{v:#?}");
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("post-restore hook of pod app-2/web-1")),
        "{:?}",
        v.reasons
    );
}
