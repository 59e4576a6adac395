//! `lockgate restore`: a backup made by a real server restored from its data dir into a
//! mapped namespace, the same restore again over the first one's files, ls and describe.

use crate::harness::*;
use serde_json::{json, Value};
use std::time::Duration;

fn run(s: &Srv, args: &[&str]) -> (bool, String, String) {
    let out = s.cli(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `lockgate restore create NAME --from nightly --data-dir DATA --namespace-mappings
/// app:app-copy` and `extra`.
fn create(s: &Srv, name: &str, data: &str, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec![
        "restore",
        "create",
        name,
        "--from",
        "nightly",
        "--data-dir",
        data,
    ];
    args.extend(["--namespace-mappings", "app:app-copy"]);
    args.extend(extra);
    run(s, &args)
}

#[test]
fn a_backup_restores_into_a_mapped_namespace_and_again_writes_nothing() {
    let s = Srv::start("");
    std::fs::create_dir_all(s.path("in")).unwrap();
    let items = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app", "uid": "u0"}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "cfg", "namespace": "app", "uid": "u1", "resourceVersion": "9"},
         "data": {"k": "v"}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "app"},
         "spec": {"clusterIP": "10.96.0.9", "ports": [{"port": 80, "nodePort": 30080}]},
         "status": {"loadBalancer": {}}}
    ]});
    std::fs::write(s.path("in/cluster.json"), items.to_string()).unwrap();
    let (ok, out, err) = run(
        &s,
        &["backup", "create", "nightly", "--from", "in", "--wait"],
    );
    assert!(ok, "{out}\n{err}");
    let data = s.path("data").display().to_string();

    // A dry run prints the result and writes nothing.
    let (ok, out, err) = create(&s, "r1", &data, &["--dry-run"]);
    assert!(ok, "{err}");
    let dry: Value = serde_json::from_str(&out).expect("stdout is only JSON");
    assert_eq!(
        dry["files"],
        json!([
            "000-namespaces.json",
            "001-configmaps.json",
            "002-services.json"
        ])
    );
    assert!(!s.path("data/restores/r1").exists());

    let (ok, out, err) = create(&s, "r1", &data, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("Completed (3 restored, 0 skipped, 0 failed)"),
        "{out}"
    );
    let svc: Value = serde_json::from_str(
        &std::fs::read_to_string(s.path("data/restores/r1/002-services.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        svc["items"][0],
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "app-copy"},
               "spec": {"ports": [{"port": 80}]}})
    );

    // Again, over what the first one wrote: nothing to write, everything said to exist.
    let first = s.path("data/restores/r1").display().to_string();
    let (ok, out, err) = create(&s, "r2", &data, &["--existing", &first]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("Completed (0 restored, 3 skipped, 0 failed)"),
        "{out}"
    );

    let (ok, out, _) = run(&s, &["-o", "json", "restore", "ls", "--data-dir", &data]);
    assert!(ok);
    let list: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["restore"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["r1", "r2"]);
    let (ok, out, _) = run(
        &s,
        &[
            "-o",
            "json",
            "restore",
            "describe",
            "r1",
            "--data-dir",
            &data,
        ],
    );
    assert!(ok);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["items"][2]["item"], "services/app-copy/web");
    assert_eq!(doc["items"][2]["from"], "services/app/web");

    // The same name again, a bad mapping, an unknown backup: refused, nothing written.
    for (args, says) in [
        (
            vec!["--from", "nightly"],
            "a restore of this name exists already",
        ),
        (
            vec!["--from", "nightly", "--namespace-mappings", "app:App"],
            "not a valid namespace name",
        ),
        (vec!["--from", "weekly"], "no such backup archive"),
    ] {
        let mut all = vec!["restore", "create", "r1", "--data-dir", &data];
        all.extend(args);
        let (ok, _, err) = run(&s, &all);
        assert!(!ok && err.contains(says), "{all:?}: {err}");
    }
    assert_eq!(
        std::fs::read_dir(s.path("data/restores")).unwrap().count(),
        2,
        "only r1 and r2"
    );
}

#[test]
fn through_the_server_a_restore_queues_writes_and_is_listed() {
    let s = Srv::start("");
    std::fs::create_dir_all(s.path("in")).unwrap();
    let items = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "cfg", "namespace": "app", "uid": "u1"}, "data": {"k": "v"}}
    ]});
    std::fs::write(s.path("in/cluster.json"), items.to_string()).unwrap();
    let (ok, out, err) = run(
        &s,
        &["backup", "create", "nightly", "--from", "in", "--wait"],
    );
    assert!(ok, "{out}\n{err}");

    let (ok, out, err) = run(
        &s,
        &[
            "restore",
            "create",
            "rs",
            "--from",
            "nightly",
            "--namespace-mappings",
            "app:app-copy",
            "--wait",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let dir = s.path("data/restores/rs");
    assert!(
        out.contains("Completed (1 restored, 0 skipped, 0 failed)"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "apply in order: kubectl apply -f {}",
            dir.display()
        )),
        "{out}"
    );
    let cm: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("000-configmaps.json")).unwrap())
            .unwrap();
    assert_eq!(cm["items"][0]["metadata"]["namespace"], "app-copy");

    let (ok, out, _) = run(&s, &["restore", "ls"]);
    assert!(ok);
    let row = out
        .lines()
        .find(|l| l.starts_with("rs "))
        .unwrap_or_default();
    assert!(
        row.contains("nightly") && row.contains("finished") && row.contains("Completed"),
        "{out}"
    );
    let (ok, out, _) = run(&s, &["-o", "json", "restore", "describe", "rs"]);
    assert!(ok);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["items"][0]["item"], "configmaps/app-copy/cfg");

    // A finished restore cannot be cancelled; an archive path needs --data-dir.
    let (ok, _, err) = run(&s, &["restore", "cancel", "rs"]);
    assert!(!ok && err.contains("already ended"), "{err}");
    let (ok, _, err) = run(&s, &["restore", "create", "r2", "--from", "/tmp/x.tar.gz"]);
    assert!(!ok && err.contains("--data-dir"), "{err}");
}

/// Real `lockgate agent` processes on three nodes of one slot each, a backup of a claim
/// whose upload one of them runs, then a night of uploads queued (every slot busy) and a
/// restore of the claim asked for: how many slot releases (uploads ending) come after its
/// `data-download` is submitted and before it is admitted, and how long it waited, with
/// `extra` added to the policy, how many queued uploads it passed, and the most jobs a node
/// held at once (its limit is 1). Read from the server's records of the jobs.
fn behind_a_night_of_uploads(extra: &str) -> (usize, u64, usize, i32) {
    const QUEUED: usize = 150;
    let s = Srv::start(&format!(
        "[nodes]\nmax_running = 1\n[blocks]\nexec_template = [\"env\", \"{{command}}\"]\n{extra}"
    ));
    let config = r#"[handlers.data-upload]
prepare = ["true"]
run = ["sleep", "0.05"]
[handlers.data-download]
prepare = ["true"]
run = ["true"]
"#;
    let _agents: Vec<_> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| crate::agent::start_agent(&s, n, &[], config))
        .collect();
    let db = crate::backup::db_with_claim(json!({}));
    std::fs::write(s.path("db.json"), db.to_string()).unwrap();
    let (ok, out, err) = run(
        &s,
        &["backup", "create", "db", "--from", "db.json", "--wait"],
    );
    assert!(ok, "{out}\n{err}");
    let admin = s.admin();
    for i in 0..QUEUED {
        admin
            .submit(&lockgate_api::SubmitRequest {
                kind: "data-upload".into(),
                attrs: [("item".to_string(), format!("vm-{i}"))].into(),
                executor: Some(lockgate_core::policy::Executor::Agent),
                two_stage: Some(true),
                node_selector: Some(String::new()),
                ..Default::default()
            })
            .unwrap();
    }
    let (ok, out, err) = run(
        &s,
        &[
            "restore",
            "create",
            "urgent",
            "--from",
            "db",
            "--namespace-mappings",
            "app:app-copy",
            "--wait",
        ],
    );
    assert!(ok && out.contains("Completed"), "{out}\n{err}");
    let restore = admin.restore("urgent").unwrap();
    let download = admin.job(restore.data_jobs[0]).unwrap();
    assert_eq!(download.state, lockgate_core::JobState::Succeeded);
    let t = |s: &Option<String>| lockgate_api::time::parse(s.as_deref().unwrap()).unwrap().0;
    let submitted = t(&Some(download.submitted_at.clone()));
    let admitted = t(&download.prepare_started_at);
    let q = lockgate_api::JobQuery {
        kind: Some("data-upload".into()),
        limit: Some(1000),
        ..Default::default()
    };
    let uploads = admin.jobs(&q).unwrap().jobs;
    let ended = |j: &lockgate_api::JobView| j.finished_at.as_ref().map(|_| t(&j.finished_at));
    let releases = uploads
        .iter()
        .filter_map(ended)
        .filter(|&f| f > submitted && f <= admitted)
        .count();
    // Uploads queued before the download and admitted after it (or not yet): passed.
    let passed = uploads
        .iter()
        .filter(|j| t(&Some(j.submitted_at.clone())) < submitted)
        .filter(|j| j.prepare_started_at.is_none() || t(&j.prepare_started_at) > admitted)
        .count();
    // Once every upload has ended: the most jobs any node held at once, from the records.
    let all_ended = || {
        admin
            .jobs(&q)
            .unwrap()
            .jobs
            .iter()
            .all(|j| j.state.is_terminal())
    };
    assert!(
        eventually(Duration::from_secs(60), all_ended),
        "uploads left running"
    );
    let everything = lockgate_api::JobQuery {
        limit: Some(1000),
        ..Default::default()
    };
    let mut per_node: std::collections::BTreeMap<String, Vec<(u64, i32)>> = Default::default();
    for j in admin.jobs(&everything).unwrap().jobs {
        if let (Some(node), Some(_), Some(_)) = (&j.node, &j.prepare_started_at, &j.finished_at) {
            let steps = per_node.entry(node.clone()).or_default();
            // An end sorts before a start at the same millisecond: the slot was handed on.
            steps.push((t(&j.prepare_started_at), 1));
            steps.push((t(&j.finished_at), -1));
        }
    }
    let peak = per_node
        .values_mut()
        .map(|steps| {
            steps.sort();
            let mut held = 0;
            steps
                .iter()
                .map(|(_, d)| {
                    held += d;
                    held
                })
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    (releases, admitted.saturating_sub(submitted), passed, peak)
}

#[test]
fn with_real_agents_a_restore_behind_a_night_of_uploads_takes_the_first_slot_that_frees() {
    let (releases, waited, after, peak) = behind_a_night_of_uploads("");
    // Queued uploads were still waiting when it was admitted: it passed them, and no node
    // ever held more than its one slot.
    assert!(
        releases <= 1 && after > 100 && peak == 1,
        "{releases} releases, {after} uploads after it, {peak} at once on a node"
    );
    let (late, late_wait, late_after, late_peak) =
        behind_a_night_of_uploads("[kinds.data-download]\npriority = 0\n");
    assert_eq!(late_peak, 1);
    eprintln!(
        "restores first, 3 real agents, 150 uploads queued: admitted after {releases} slot \
         release(s), {waited} ms after its submit, {after} uploads admitted after it; with \
         priority 0: {late} releases, {late_wait} ms, {late_after} after it"
    );
    // The planted rule (no restores first) waits behind the queue: the measure can tell.
    assert!(late > 100, "{late}");
}

/// `text` split at spaces: a command line's arguments.
fn words(text: &str) -> Vec<&str> {
    text.split(' ').collect()
}

/// A pod whose volume a file-system backup copied, restored through the server with a
/// real agent: `lockgate restore bind --wait` (what the pod's wait container runs once
/// the cluster schedules it) returns once the agent has copied the volume back on that
/// node, and the restore is then Completed.
#[test]
fn restore_bind_waits_until_a_real_agent_copied_the_pods_volume_back() {
    let s = Srv::start(
        "[blocks]\nexec_template = [\"env\", \"{command}\"]\nrestore_wait_image = \"registry.example/lockgate:0.1\"\n",
    );
    let log = s.path("moves.log").display().to_string();
    let config = format!(
        r#"[handlers.pod-volume-backup]
run = ["sh", "-c", "echo backup {{attr.pod}} {{attr.volume}} >> {log}"]
[handlers.pod-volume-restore]
run = ["sh", "-c", "sleep 0.3; echo restore {{attr.namespace}}/{{attr.pod}} {{attr.volume}} >> {log}"]
"#
    );
    let _agent = crate::agent::start_agent(&s, "n2", &[], &config);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "app",
                     "annotations": {"backup.lockgate.io/backup-volumes": "scratch"}},
        "spec": {"nodeName": "n2", "containers": [{"name": "db"}],
                 "volumes": [{"name": "scratch", "emptyDir": {}}]}});
    std::fs::write(s.path("pod.json"), pod.to_string()).unwrap();
    let (ok, out, err) = run(&s, &words("backup create fs --from pod.json --wait"));
    assert!(ok, "{out}\n{err}");
    let (ok, out, err) = run(
        &s,
        &words("restore create back --from fs --namespace-mappings app:app-copy"),
    );
    assert!(ok, "{out}\n{err}");
    let admin = s.admin();
    assert!(
        eventually(Duration::from_secs(20), || !admin
            .restore("back")
            .unwrap()
            .pods_waiting
            .is_empty()),
        "the restore never waited for its pod"
    );
    let (_, out, _) = run(&s, &words("restore describe back"));
    assert!(
        out.contains("waiting for the node of pods (lockgate restore bind): app-copy/db-0"),
        "{out}"
    );
    // As the wait container runs it, with the node the cluster chose.
    let (ok, out, err) = run(
        &s,
        &words("restore bind back --pod app-copy/db-0 --node n2 --wait"),
    );
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("pod-volume-restore jobs"), "{err}");
    let moved = std::fs::read_to_string(&log).unwrap();
    assert!(
        moved.contains("restore app-copy/db-0 scratch"),
        "bind --wait returned before the volume was back: {moved}"
    );
    assert!(eventually(Duration::from_secs(20), || admin
        .restore("back")
        .unwrap()
        .phase
        .as_deref()
        == Some("Completed")));
    // Bound once, and the restore has ended: a bind again is refused.
    let (ok, _, err) = run(
        &s,
        &words("restore bind back --pod app-copy/db-0 --node n2"),
    );
    assert!(!ok && err.contains("not waiting"), "{err}");
}
