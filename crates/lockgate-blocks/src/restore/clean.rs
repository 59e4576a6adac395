//! What a restore removes from an item and what a namespace mapping rewrites in it.
//!
//! Each rule comes from what a cluster does when an object is created, and from Velero's
//! restore, which meets the same problem (docs/restores.md lists them with their origin):
//! - metadata the API server assigns (`uid`, `resourceVersion`, `creationTimestamp`,
//!   `generation`, `managedFields`, `selfLink`, deletion stamps, `generateName`) and
//!   `ownerReferences` (their uids name objects of the old cluster): Velero's
//!   `resetMetadata`, plus `managedFields`;
//! - `status`, unless asked for: Velero's `resetStatus`;
//! - a Service's `clusterIP`/`clusterIPs` (not a headless `None`), and its node ports and
//!   `healthCheckNodePort` unless asked to keep them: Velero's service action;
//! - a PersistentVolume's `claimRef.uid` and `claimRef.resourceVersion` (they name the old
//!   claim), and its `claimRef.namespace` mapped: Velero's PV restore;
//! - a claim's binding annotations (`pv.kubernetes.io/bind-completed`,
//!   `pv.kubernetes.io/bound-by-controller`): Velero's PVC action;
//! - a Pod's `nodeName` and `priority`, and the volumes of legacy service-account token
//!   secrets (`<account>-token-*`): Velero's pod action;
//! - a RoleBinding's or ClusterRoleBinding's subjects' namespaces mapped: Velero's
//!   role-binding actions;
//! - a mapped Namespace renamed, with its `kubernetes.io/metadata.name` label (the API
//!   server sets it to the name).
//!
//! # Invariants
//! - Cleaning is idempotent: cleaning a cleaned item changes nothing (so an item restored
//!   before compares equal to the same item restored again).
//! - Only the fields named above change; everything else is the backup's, byte for byte.

use super::{ArchiveItem, RestoreOptions};
use crate::names::item_name;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// Metadata the API server assigns, removed from every item.
const ASSIGNED_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "generateName",
];

/// A claim's annotations that record a binding made in the old cluster.
const BINDING_ANNOTATIONS: &[&str] = &[
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
];

/// The namespace label the API server sets to the namespace's name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn mapped<'a>(map: &'a BTreeMap<String, String>, ns: &'a str) -> &'a str {
    map.get(ns).map_or(ns, String::as_str)
}

/// Maps the namespace in `obj`'s string field `key`, when it has one.
fn map_field(obj: &mut Map<String, Value>, key: &str, map: &BTreeMap<String, String>) {
    if let Some(Value::String(ns)) = obj.get_mut(key) {
        *ns = mapped(map, ns).to_string();
    }
}

/// The item's name in the target.
pub(super) fn target_name(item: &ArchiveItem, map: &BTreeMap<String, String>) -> String {
    let short = if item.resource == "namespaces" {
        mapped(map, &item.short_name)
    } else {
        &item.short_name
    };
    let ns = item.namespace.as_deref().map(|ns| mapped(map, ns));
    item_name(&item.resource, ns, short)
}

/// The manifest of an item of `resource` as it is restored, its namespaces mapped by
/// `map` (the target's own items are cleaned with no mapping, to compare with).
pub(super) fn clean(
    manifest: &Value,
    resource: &str,
    o: &RestoreOptions,
    map: &BTreeMap<String, String>,
) -> Value {
    let mut m = manifest.clone();
    let Some(obj) = m.as_object_mut() else {
        return m;
    };
    if !o.restore_status {
        obj.remove("status");
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ASSIGNED_METADATA {
            meta.remove(*k);
        }
        map_field(meta, "namespace", map);
        if resource == "namespaces" {
            rename_namespace(meta, map);
        }
        if resource == "persistentvolumeclaims" {
            if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                for k in BINDING_ANNOTATIONS {
                    ann.remove(*k);
                }
            }
        }
    }
    let spec = obj.get_mut("spec").and_then(Value::as_object_mut);
    match (resource, spec) {
        ("services", Some(spec)) => service(spec, o.preserve_node_ports),
        ("persistentvolumes", Some(spec)) => volume(spec, map),
        ("pods", Some(spec)) => pod(spec),
        _ => {}
    }
    if resource.starts_with("rolebindings.") || resource.starts_with("clusterrolebindings.") {
        if let Some(Value::Array(subjects)) = obj.get_mut("subjects") {
            for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
                map_field(s, "namespace", map);
            }
        }
    }
    m
}

fn rename_namespace(meta: &mut Map<String, Value>, map: &BTreeMap<String, String>) {
    map_field(meta, "name", map);
    let Some(Value::String(name)) = meta.get("name").cloned() else {
        return;
    };
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        if let Some(Value::String(l)) = labels.get_mut(NAMESPACE_NAME_LABEL) {
            *l = name;
        }
    }
}

fn service(spec: &mut Map<String, Value>, keep_node_ports: bool) {
    if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if keep_node_ports {
        return;
    }
    spec.remove("healthCheckNodePort");
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
}

fn volume(spec: &mut Map<String, Value>, map: &BTreeMap<String, String>) {
    let Some(claim) = spec.get_mut("claimRef").and_then(Value::as_object_mut) else {
        return;
    };
    claim.remove("uid");
    claim.remove("resourceVersion");
    map_field(claim, "namespace", map);
}

fn pod(spec: &mut Map<String, Value>) {
    spec.remove("nodeName");
    spec.remove("priority");
    let account = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let token = format!("{account}-token-");
    let keep = |v: &Value| !v["name"].as_str().is_some_and(|n| n.starts_with(&token));
    if let Some(Value::Array(vols)) = spec.get_mut("volumes") {
        vols.retain(keep);
    }
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(cs)) = spec.get_mut(list) else {
            continue;
        };
        for c in cs {
            if let Some(Value::Array(mounts)) = c.get_mut("volumeMounts") {
                mounts.retain(keep);
            }
        }
    }
}

/// The cluster-scoped items the namespaced `items` relate to: their Namespaces, the
/// volumes and storage classes of their claims, the definitions of their custom kinds.
pub(super) fn related_cluster_items(items: &[&ArchiveItem]) -> HashSet<String> {
    let mut out = HashSet::new();
    for i in items {
        if let Some(ns) = &i.namespace {
            out.insert(format!("namespaces/{ns}"));
        }
        if i.resource.contains('.') {
            out.insert(format!(
                "customresourcedefinitions.apiextensions.k8s.io/{}",
                i.resource
            ));
        }
        if i.resource == "persistentvolumeclaims" {
            let spec = &i.manifest["spec"];
            if let Some(pv) = spec["volumeName"].as_str() {
                out.insert(format!("persistentvolumes/{pv}"));
            }
            if let Some(sc) = spec["storageClassName"].as_str() {
                out.insert(format!("storageclasses.storage.k8s.io/{sc}"));
            }
        }
    }
    out
}
