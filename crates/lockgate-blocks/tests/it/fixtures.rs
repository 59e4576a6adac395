//! Real-looking Kubernetes manifests and helpers to write inputs and read archives.

use lockgate_blocks::{Plan, PlanOptions};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn pod(ns: &str, name: &str, claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": format!("vol-{c}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                     "labels": {"app": "web"}, "annotations": {}},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "main", "image": "nginx:1.27",
                                 "volumeMounts": claims.iter().map(|c| json!({"name": format!("vol-{c}"), "mountPath": format!("/data/{c}")})).collect::<Vec<_>>()}],
                 "volumes": volumes},
        "status": {"phase": "Running"}
    })
}

pub fn with_labels(mut v: Value, labels: &[(&str, &str)]) -> Value {
    for (k, val) in labels {
        v["metadata"]["labels"][*k] = json!(val);
    }
    v
}

pub fn with_annotations(mut v: Value, ann: &[(&str, &str)]) -> Value {
    for (k, val) in ann {
        v["metadata"]["annotations"][*k] = json!(val);
    }
    v
}

pub fn pvc(ns: &str, name: &str, volume: Option<&str>) -> Value {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "labels": {}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-rbd",
                 "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": if volume.is_some() { "Bound" } else { "Pending" }}
    });
    if let Some(pv) = volume {
        v["spec"]["volumeName"] = json!(pv);
    }
    v
}

pub fn pv(name: &str, claim_ns: &str, claim: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "claimRef": {"namespace": claim_ns, "name": claim},
                 "csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": format!("h-{name}")}}
    })
}

pub fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})
}

pub fn namespaced(api: &str, kind: &str, ns: &str, name: &str) -> Value {
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": {}})
}

pub fn cluster(api: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": name}})
}

pub fn list(items: &[Value]) -> String {
    serde_json::to_string_pretty(&json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}))
        .unwrap()
}

/// Writes a `List` file and returns its path.
pub fn write_list(dir: &Path, items: &[Value]) -> PathBuf {
    let path = dir.join("cluster.json");
    std::fs::write(&path, list(items)).unwrap();
    path
}

/// The plan's blocks as item-name lists.
pub fn blocks(plan: &Plan) -> Vec<Vec<String>> {
    (0..plan.block_count())
        .map(|b| plan.block(b).map(|i| i.name.to_string()).collect())
        .collect()
}

pub fn load(dir: &Path, items: &[Value], opts: &PlanOptions) -> Plan {
    Plan::load(&write_list(dir, items), opts).unwrap()
}

/// Files of a tar.gz archive.
pub fn read_archive(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap());
    let mut tar = tar::Archive::new(gz);
    let mut out = BTreeMap::new();
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        out.insert(name, data);
    }
    out
}

pub fn archive_json(files: &BTreeMap<String, Vec<u8>>, name: &str) -> Value {
    serde_json::from_slice(
        files
            .get(name)
            .unwrap_or_else(|| panic!("{name} not in archive")),
    )
    .unwrap()
}

pub fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
