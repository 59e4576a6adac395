//! The shared pool: fairness between backups, cancellation, progress, the archive layout.

use crate::fixtures::*;
use lockgate_blocks::{
    BackupConfig, ItemRef, ItemStatus, NoopMover, Phase, PlanOptions, PoolConfig, Progress,
    WorkerPool,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn slow_config(dir: &std::path::Path, name: &str, ms: u64) -> BackupConfig {
    let mut c = BackupConfig::new(
        name,
        dir.join(format!("{name}.tar.gz")),
        Arc::new(NoopMover),
    );
    c.item_action = Some(Arc::new(move |_: &ItemRef<'_>, _: &mut Value| {
        std::thread::sleep(Duration::from_millis(ms));
        Ok(())
    }));
    c
}

fn configmaps(dir: &std::path::Path, sub: &str, n: usize) -> lockgate_blocks::Plan {
    let d = dir.join(sub);
    std::fs::create_dir_all(&d).unwrap();
    let items: Vec<Value> = (0..n)
        .map(|i| configmap(sub, &format!("cm-{i:04}")))
        .collect();
    load(&d, &items, &PlanOptions::default())
}

#[test]
fn a_small_backup_is_not_starved_by_a_large_one() {
    let dir = tempfile::tempdir().unwrap();
    let pool = WorkerPool::new(PoolConfig {
        workers: 2,
        channel_capacity: 2,
    });
    let big = pool
        .start(
            configmaps(dir.path(), "big", 100),
            slow_config(dir.path(), "big", 20),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    let small = pool
        .start(
            configmaps(dir.path(), "small", 4),
            slow_config(dir.path(), "small", 20),
        )
        .unwrap();
    let small_result = small.wait();
    let small_took = start.elapsed();
    assert_eq!(small_result.phase, Phase::Completed);
    assert!(
        big.try_result().is_none(),
        "the big backup is still running"
    );
    // Round-robin: the small backup gets every other block after at most a channel's worth.
    assert!(
        small_took < Duration::from_millis(400),
        "small backup took {small_took:?}"
    );
    let big_progress = big.progress();
    assert!(big_progress.blocks_done < 100, "{big_progress:?}");
    assert_eq!(big.wait().phase, Phase::Completed);
}

#[test]
fn cancel_stops_handing_out_blocks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pool = WorkerPool::new(PoolConfig {
        workers: 2,
        channel_capacity: 2,
    });
    let handle = pool
        .start(
            configmaps(dir.path(), "app", 200),
            slow_config(dir.path(), "big", 20),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    handle.cancel();
    let result = handle.wait();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(result.phase, Phase::Failed);
    assert_eq!(result.reasons[0], "backup canceled");
    assert!(result.blocks.skipped > 150, "{:?}", result.blocks);
    assert_eq!(
        result.blocks.completed + result.blocks.skipped,
        200,
        "{:?}",
        result.blocks
    );
    let files = read_archive(&dir.path().join("big.tar.gz"));
    assert_eq!(
        archive_json(&files, "metadata/result.json")["phase"],
        "Failed"
    );
}

#[test]
fn archive_layout_result_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let items = [
        pod("app", "web-0", &["data-web-0"]),
        pvc("app", "data-web-0", Some("pv-1")),
        pv("pv-1", "app", "data-web-0"),
        cluster("storage.k8s.io/v1", "StorageClass", "csi-rbd"),
        pvc("app", "unbound", None),
    ];
    let plan = load(dir.path(), &items, &PlanOptions::default());
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let out = dir.path().join("backups/nightly.tar.gz");
    let mut config = BackupConfig::new("nightly", &out, Arc::new(NoopMover));
    let sink = seen.clone();
    config.progress = Some(Arc::new(move |p| sink.lock().unwrap().push(p)));
    let pool = WorkerPool::new(PoolConfig::default());
    let result = pool.start(plan, config).unwrap().wait();
    assert_eq!(result.phase, Phase::Completed, "{:?}", result.reasons);
    let files = read_archive(&out);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "metadata/blocks.json",
            "metadata/result.json",
            "resources/persistentvolumeclaims/namespaces/app/data-web-0.json",
            "resources/persistentvolumeclaims/namespaces/app/unbound.json",
            "resources/persistentvolumes/cluster/pv-1.json",
            "resources/pods/namespaces/app/web-0.json",
            "resources/storageclasses.storage.k8s.io/cluster/csi-rbd.json",
        ]
    );
    assert_eq!(
        archive_json(&files, "resources/pods/namespaces/app/web-0.json"),
        items[0]
    );
    let res = archive_json(&files, "metadata/result.json");
    assert_eq!(res["phase"], "Completed");
    assert_eq!(res["item_status"].as_array().unwrap().len(), 5);
    let unbound = res["item_status"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["item"] == "persistentvolumeclaims/app/unbound")
        .unwrap();
    assert_eq!(unbound["note"], "not bound: no volume data to upload");
    let blocks = archive_json(&files, "metadata/blocks.json");
    let first = blocks
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["items"][0] == "pods/app/web-0")
        .unwrap();
    assert_eq!(
        first["items"],
        json!([
            "pods/app/web-0",
            "persistentvolumeclaims/app/data-web-0",
            "persistentvolumes/pv-1"
        ])
    );
    assert!(first["started_at"].as_str().unwrap().ends_with('Z'));
    let seen = seen.lock().unwrap();
    let last = seen.last().unwrap();
    assert!(
        last.finished && last.blocks_done == 3 && last.items_done == 5,
        "{last:?}"
    );
    assert!(!out.with_extension("gz.partial").exists());
}

#[test]
fn an_item_action_error_or_panic_fails_only_that_item() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(
        dir.path(),
        &[
            configmap("app", "ok"),
            configmap("app", "broken"),
            configmap("app", "panics"),
        ],
        &PlanOptions::default(),
    );
    let mut config = BackupConfig::new("b", dir.path().join("b.tar.gz"), Arc::new(NoopMover));
    config.item_action = Some(Arc::new(|item: &ItemRef<'_>, v: &mut Value| {
        v["metadata"]["annotations"] = json!({"seen": "yes"});
        if item.short_name == "panics" {
            panic!("action bug");
        }
        if item.short_name == "broken" {
            Err("refused by the action".to_string())
        } else {
            Ok(())
        }
    }));
    let result = lockgate_blocks::run_to_completion(plan, config, 2).unwrap();
    assert_eq!(result.phase, Phase::PartiallyFailed);
    let failed: Vec<(&str, ItemStatus, Option<&str>)> = result
        .items
        .iter()
        .map(|i| (i.item.as_str(), i.status, i.error.as_deref()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                "configmaps/app/broken",
                ItemStatus::Failed,
                Some("refused by the action")
            ),
            (
                "configmaps/app/panics",
                ItemStatus::Failed,
                Some("the item action panicked")
            ),
        ]
    );
    let files = read_archive(&dir.path().join("b.tar.gz"));
    assert_eq!(
        archive_json(&files, "resources/configmaps/namespaces/app/ok.json")["metadata"]
            ["annotations"]["seen"],
        "yes"
    );
    assert!(!files.contains_key("resources/configmaps/namespaces/app/broken.json"));
}

#[test]
fn an_empty_plan_completes_with_an_archive() {
    let dir = tempfile::tempdir().unwrap();
    let plan = load(dir.path(), &[], &PlanOptions::default());
    let out = dir.path().join("empty.tar.gz");
    let result = lockgate_blocks::run_to_completion(
        plan,
        BackupConfig::new("e", &out, Arc::new(NoopMover)),
        1,
    )
    .unwrap();
    assert_eq!(result.phase, Phase::Completed);
    assert_eq!(
        archive_json(&read_archive(&out), "metadata/blocks.json"),
        json!([])
    );
}
