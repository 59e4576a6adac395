//! Restores: a backup of real-shaped applications restored into mapped namespaces, again
//! over what the first restore made, and refused archives.

use crate::apps;
use crate::fixtures::*;
use lockgate_blocks::restore::{
    self, read_result, ArchiveError, BackupArchive, ExistingPolicy, RestoreError,
    RestoreItemStatus, RestoreOptions, RestorePlan,
};
use lockgate_blocks::{
    BackupConfig, InputLimits, NoopMover, Phase, PlanOptions, PoolConfig, WorkerPool,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAPPING: &[(&str, &str)] = &[
    ("nginx-example", "nginx-copy"),
    ("cassandra", "cassandra-copy"),
    ("nfs", "nfs-copy"),
    ("wordpress", "wordpress-copy"),
];

fn backup(dir: &Path, items: &[Value]) -> PathBuf {
    let plan = load(dir, items, &PlanOptions::default());
    let out = dir.join("backups/apps.tar.gz");
    let pool = WorkerPool::new(PoolConfig::default());
    let result = pool
        .start(plan, BackupConfig::new("apps", &out, Arc::new(NoopMover)))
        .unwrap()
        .wait();
    assert_eq!(result.phase, Phase::Completed, "{:?}", result.reasons);
    out
}

fn options() -> RestoreOptions {
    RestoreOptions {
        namespace_mappings: MAPPING
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        ..RestoreOptions::default()
    }
}

fn read(path: &Path) -> BackupArchive {
    restore::read::read(path, &InputLimits::default()).unwrap()
}

fn remove(v: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    if let Some(Value::Object(m)) = v.pointer_mut(parent) {
        m.remove(&key.replace("~1", "/").replace("~0", "~"));
    }
}

fn map(ns: &str) -> String {
    MAPPING
        .iter()
        .find(|(a, _)| *a == ns)
        .map_or(ns.to_string(), |(_, b)| b.to_string())
}

/// The original item as the docs say it is restored, written out rule by rule.
fn expected(original: &Value) -> Value {
    let mut v = original.clone();
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "ownerReferences",
        "generateName",
    ] {
        remove(&mut v, &format!("/metadata/{f}"));
    }
    remove(&mut v, "/status");
    if let Some(ns) = v["metadata"]["namespace"].as_str() {
        v["metadata"]["namespace"] = json!(map(ns));
    }
    match v["kind"].as_str().unwrap() {
        "Namespace" => {
            let name = map(v["metadata"]["name"].as_str().unwrap());
            v["metadata"]["name"] = json!(name);
            v["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        "Service" => {
            if v["spec"]["clusterIP"] != "None" {
                remove(&mut v, "/spec/clusterIP");
                remove(&mut v, "/spec/clusterIPs");
            }
            remove(&mut v, "/spec/healthCheckNodePort");
            remove(&mut v, "/spec/ports/0/nodePort");
        }
        "PersistentVolume" => {
            remove(&mut v, "/spec/claimRef/uid");
            remove(&mut v, "/spec/claimRef/resourceVersion");
            let ns = map(v["spec"]["claimRef"]["namespace"].as_str().unwrap());
            v["spec"]["claimRef"]["namespace"] = json!(ns);
        }
        "PersistentVolumeClaim" => {
            remove(
                &mut v,
                "/metadata/annotations/pv.kubernetes.io~1bind-completed",
            );
            remove(
                &mut v,
                "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
            );
        }
        "Pod" => {
            remove(&mut v, "/spec/nodeName");
            remove(&mut v, "/spec/priority");
        }
        "RoleBinding" => {
            let ns = map(v["subjects"][0]["namespace"].as_str().unwrap());
            v["subjects"][0]["namespace"] = json!(ns);
        }
        _ => {}
    }
    v
}

/// The restore's files: name -> items, in file-name order.
fn files(dir: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name == "metadata" {
            continue;
        }
        let list: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(
            (list["apiVersion"].as_str(), list["kind"].as_str()),
            (Some("v1"), Some("List"))
        );
        out.insert(name, list["items"].as_array().unwrap().clone());
    }
    out
}

fn key(v: &Value) -> (String, String, String) {
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

#[test]
fn a_backup_restores_into_mapped_namespaces_in_order_and_again_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let originals = apps::all();
    let archive = backup(dir.path(), &originals);
    let target = dir.path().join("restores/r1");
    let plan = RestorePlan::new(&read(&archive), &options()).unwrap();
    let result = plan.write("r1", &target).unwrap();
    assert_eq!(result.phase, Phase::Completed);
    assert_eq!(result.counts.restored, originals.len());

    // The documented order: Velero's priorities, then the rest by name.
    let written = files(&target);
    let names: Vec<&str> = written.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "000-customresourcedefinitions.apiextensions.k8s.io.json",
            "001-namespaces.json",
            "002-storageclasses.storage.k8s.io.json",
            "003-persistentvolumes.json",
            "004-persistentvolumeclaims.json",
            "005-serviceaccounts.json",
            "006-rolebindings.rbac.authorization.k8s.io.json",
            "007-secrets.json",
            "008-pods.json",
            "009-services.json",
            "010-backupschedules.ops.example.com.json",
            "011-deployments.apps.json",
            "012-statefulsets.apps.json",
        ]
    );
    assert_eq!(result.files, names);

    // Every item: the original, less what the cluster assigned, under the mapping.
    let restored: BTreeMap<_, _> = written
        .values()
        .flatten()
        .map(|v| (key(v), v.clone()))
        .collect();
    assert_eq!(restored.len(), originals.len());
    for o in &originals {
        let want = expected(o);
        let got = restored
            .get(&key(&want))
            .unwrap_or_else(|| panic!("{:?} not restored", key(&want)));
        assert_eq!(*got, want, "{:?}", key(o));
    }
    assert!(restored
        .keys()
        .all(|(_, ns, _)| ns.is_empty() || ns.ends_with("-copy")));

    // The same restore again over what the first one made (as the cluster serves it back):
    // with `none`, nothing is written and every item says it exists unchanged.
    let applied: Vec<Value> = written
        .values()
        .flatten()
        .enumerate()
        .map(|(i, v)| apps::served(v.clone(), 500 + i as u64))
        .collect();
    let mut again = options();
    again.existing = applied.clone();
    let plan = RestorePlan::new(&read(&archive), &again).unwrap();
    let second = plan.write("r2", &dir.path().join("restores/r2")).unwrap();
    assert!(second.files.is_empty(), "{:?}", second.files);
    assert_eq!(second.counts.skipped, originals.len());
    assert!(second
        .items
        .iter()
        .all(|i| i.status == RestoreItemStatus::Skipped
            && i.note.as_deref().unwrap().contains("the same")));
    assert_eq!(files(&dir.path().join("restores/r2")).len(), 0);

    // With `update`, everything is written again and says it existed.
    again.existing_policy = ExistingPolicy::Update;
    let plan = RestorePlan::new(&read(&archive), &again).unwrap();
    let third = plan.write("r3", &dir.path().join("restores/r3")).unwrap();
    assert_eq!(third.counts.restored, originals.len());
    assert_eq!(files(&dir.path().join("restores/r3")), written);
    assert_eq!(read_result(&dir.path().join("restores/r3")).unwrap(), third);
}

#[test]
fn the_same_archive_and_options_give_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let archive = backup(dir.path(), &apps::all());
    let a = dir.path().join("restores/a");
    let b = dir.path().join("restores/b");
    RestorePlan::new(&read(&archive), &options())
        .unwrap()
        .write("x", &a)
        .unwrap();
    RestorePlan::new(&read(&archive), &options())
        .unwrap()
        .write("x", &b)
        .unwrap();
    let mut names: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "metadata")
        .collect();
    names.push("metadata/result.json".into());
    assert_eq!(names.len(), 14);
    for name in names {
        assert_eq!(
            std::fs::read(a.join(&name)).unwrap(),
            std::fs::read(b.join(&name)).unwrap()
        );
    }
}

/// Rewrites an archive's entries with `edit` (which may change or drop them).
fn rewrite(from: &Path, to: &Path, edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) {
    rewrite_with(from, to, edit, &[]);
}

/// [`rewrite`], and `raw` entries added with their names written into the header as they
/// are (the tar writer refuses a `..` path; a hostile archive has one anyway).
fn rewrite_with(
    from: &Path,
    to: &Path,
    edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
    raw: &[(&str, Vec<u8>)],
) {
    let out = std::fs::File::create(to).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        out,
        flate2::Compression::fast(),
    ));
    for (name, data) in read_archive(from) {
        if let Some(data) = edit(&name, data) {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            tar.append_data(&mut h, &name, data.as_slice()).unwrap();
        }
    }
    for (name, data) in raw {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        tar.append(&h, data.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

fn refused(path: &Path) -> ArchiveError {
    restore::read::read(path, &InputLimits::default()).unwrap_err()
}

#[test]
fn damaged_truncated_newer_failed_and_running_archives_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let archive = backup(dir.path(), &apps::nginx());
    let bytes = std::fs::read(&archive).unwrap();

    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = refused(&cut);
    assert!(matches!(e, ArchiveError::Damaged { .. }), "{e}");
    assert!(e.to_string().contains("damaged or truncated"), "{e}");

    let garbled = dir.path().join("garbled.tar.gz");
    let mut g = bytes.clone();
    for b in g.iter_mut().skip(40).take(64) {
        *b ^= 0x5a;
    }
    std::fs::write(&garbled, &g).unwrap();
    assert!(matches!(refused(&garbled), ArchiveError::Damaged { .. }));

    let headless = dir.path().join("headless.tar.gz");
    rewrite(&archive, &headless, |n, d| {
        (n != "metadata/result.json").then_some(d)
    });
    let e = refused(&headless);
    assert!(e.to_string().contains("no metadata/result.json"), "{e}");

    let newer = dir.path().join("newer.tar.gz");
    rewrite(&archive, &newer, |n, d| {
        if n != "metadata/result.json" {
            return Some(d);
        }
        let mut v: Value = serde_json::from_slice(&d).unwrap();
        assert_eq!(v["format"], 1, "a backup writes its archive's format");
        v["format"] = json!(2);
        Some(serde_json::to_vec(&v).unwrap())
    });
    assert_eq!(
        refused(&newer),
        ArchiveError::Newer {
            path: newer.clone(),
            format: 2
        }
    );

    let failed = dir.path().join("failed.tar.gz");
    rewrite(&archive, &failed, |n, d| {
        if n != "metadata/result.json" {
            return Some(d);
        }
        let mut v: Value = serde_json::from_slice(&d).unwrap();
        v["phase"] = json!("Failed");
        v["reasons"] = json!(["canceled"]);
        Some(serde_json::to_vec(&v).unwrap())
    });
    assert!(refused(&failed)
        .to_string()
        .contains("the backup failed (canceled)"));

    let running = dir.path().join("backups/tonight.tar.gz");
    std::fs::write(dir.path().join("backups/tonight.tar.gz.partial"), b"").unwrap();
    assert!(matches!(
        refused(&running),
        ArchiveError::StillRunning { .. }
    ));
    assert!(matches!(
        refused(&dir.path().join("none.tar.gz")),
        ArchiveError::Missing { .. }
    ));

    let small = InputLimits {
        max_file_bytes: 64,
        ..InputLimits::default()
    };
    let e = restore::read::read(&archive, &small).unwrap_err();
    assert!(matches!(e, ArchiveError::Limit { cap: 64, .. }), "{e}");
}

#[test]
fn hostile_entries_are_failed_items_never_files() {
    let dir = tempfile::tempdir().unwrap();
    let archive = backup(dir.path(), &apps::nginx());
    let hostile = dir.path().join("hostile.tar.gz");
    let cm = |name: &str, ns: &str| {
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}}))
        .unwrap()
    };
    let dotdot = "resources/../namespaces/nginx-example/escape.json";
    let edit = |n: &str, d: Vec<u8>| {
        if n == "resources/services/namespaces/nginx-example/my-nginx.json" {
            // A manifest that says another namespace than its path.
            return Some(cm("my-nginx", "kube-system"));
        }
        if n == "resources/pods/namespaces/nginx-example/nginx-deployment-7c5ddbdf54-x2x9k.json" {
            return Some(b"{not json".to_vec());
        }
        Some(d)
    };
    rewrite_with(
        &archive,
        &hostile,
        edit,
        &[(dotdot, cm("escape", "nginx-example"))],
    );
    let a = read(&hostile);
    let plan = RestorePlan::new(&a, &options()).unwrap();
    let target = dir.path().join("restores/h");
    let result = plan.write("h", &target).unwrap();
    assert_eq!(result.phase, Phase::PartiallyFailed);
    assert_eq!(result.counts.failed, 3);
    let failed: Vec<&str> = result
        .items
        .iter()
        .filter(|i| i.status == RestoreItemStatus::Failed)
        .map(|i| i.error.as_deref().unwrap())
        .collect();
    assert!(
        failed.iter().any(|e| e.contains("does not match the path")),
        "{failed:?}"
    );
    assert!(failed.iter().any(|e| e.contains("not JSON")), "{failed:?}");
    assert!(
        failed.iter().any(|e| e.contains("'..' path segment")),
        "{failed:?}"
    );
    let all: Vec<String> = files(&target).keys().cloned().collect();
    assert!(all.iter().all(|f| !f.contains("..")), "{all:?}");
}

#[test]
fn a_bad_mapping_or_an_existing_name_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let archive = backup(dir.path(), &apps::nginx());
    let mut o = options();
    o.namespace_mappings
        .insert("nginx-example".into(), "Not_A_Namespace".into());
    let e = RestorePlan::new(&read(&archive), &o).unwrap_err();
    assert!(matches!(e, RestoreError::Mapping(_)), "{e}");
    assert!(
        e.to_string()
            .contains("\"Not_A_Namespace\" is not a valid namespace name"),
        "{e}"
    );

    let target = dir.path().join("restores/r");
    let plan = RestorePlan::new(&read(&archive), &options()).unwrap();
    plan.write("r", &target).unwrap();
    let before = files(&target);
    let e = plan.write("r", &target).unwrap_err();
    assert!(
        e.to_string()
            .contains("a restore of this name exists already"),
        "{e}"
    );
    assert_eq!(files(&target), before);

    // A partial directory of another writer (or of one that died) is left alone.
    let again = dir.path().join("restores/again");
    let other = dir.path().join("restores/.again.1.partial/999-stale.json");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "{}").unwrap();
    plan.write("again", &again).unwrap();
    assert_eq!(files(&again), before);
    assert!(other.exists());

    // Two writers of one name at once: one restore, the other told the name exists, and
    // the directory is the complete one.
    let both = dir.path().join("restores/both");
    let results: Vec<_> = std::thread::scope(|s| {
        let a = s.spawn(|| plan.write("both", &both));
        let b = s.spawn(|| plan.write("both", &both));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert_eq!(files(&both), before);
    assert_eq!(read_result(&both).unwrap().files.len(), before.len());

    // A write that cannot be made leaves nothing behind.
    std::fs::write(dir.path().join("restores/file"), "").unwrap();
    let e = plan
        .write("x", &dir.path().join("restores/file/x"))
        .unwrap_err();
    assert!(matches!(e, restore::WriteError::Io { .. }), "{e}");
    assert!(!dir.path().join("restores/file/.x.partial").exists());
}
