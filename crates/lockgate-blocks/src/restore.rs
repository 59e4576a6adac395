//! Restores: an item-block archive turned back into manifests a person can apply.
//!
//! [`RestorePlan::new`] reads the archive of a finished backup ([`read`]), takes the items
//! the [`RestoreOptions`] select, cleans each one of what the cluster assigned when it was
//! made and maps its namespace (`clean.rs`), leaves out what already exists in the target
//! under [`ExistingPolicy::None`], and sorts the rest into phases, one per resource, in
//! restore priority order (`order.rs`, [`Priorities`]). [`RestorePlan::write`] writes one file per phase
//! into the restore's directory, each a JSON `List` that `kubectl apply -f` takes as it is,
//! and `metadata/result.json` with every item's status (`write.rs`).
//!
//! # Invariants
//! - The same archive and options give the same files, byte for byte: items are sorted by
//!   phase and then by their target name, and nothing in the manifests depends on time.
//! - A restore's directory exists only once it is complete: it is written into a hidden
//!   directory of the writer's own beside it and renamed; a failed write removes that.
//! - An archive is read only when it is whole: it ends with `metadata/result.json`, its
//!   format is one this build reads, and its backup did not fail; every entry and the whole
//!   archive are read through the caps of [`crate::InputLimits`], so a hostile archive
//!   (a gzip bomb, an entry that claims gigabytes) is refused, never held in memory.
//! - A namespace mapping names a valid namespace on both sides
//!   ([`lockgate_core::selector::is_namespace_name`], the policy's rule for
//!   `backup_namespaces`), and maps a namespace once.

mod clean;
mod order;
pub mod read;
mod volumes;
mod write;

pub use order::{Priorities, DEFAULT_PRIORITIES};
pub use read::{ArchiveError, ArchiveItem, BackupArchive};
pub use volumes::{PodVolumeRestore, VolumeRestore, WAIT_CONTAINER, WAIT_SECRET};
pub use write::{
    read_result, remove_partials, RestoreCounts, RestoreItemResult, RestoreItemStatus,
    RestoreResult, WriteError, RESULT_FILE,
};

use crate::confine::{NamespaceScope, RefusalReason, RefusedItem};
use crate::filter::Filters;
use crate::hooks::{pod_hook, Hook, HookPhase, OnError};
use crate::names::{group_of, KindTable};
use crate::plan::{labels_of, Plan, PlanOptions};
use lockgate_core::selector::is_namespace_name;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The archive format this build writes and reads (`format` in `metadata/result.json`;
/// an archive without it is format 1).
pub const ARCHIVE_FORMAT: u64 = 1;

/// What to do with an item that already exists in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExistingPolicy {
    /// Leave it as it is: the item is not written (Velero's default).
    #[default]
    None,
    /// Write the backup's version, so applying the files updates it.
    Update,
}

impl std::str::FromStr for ExistingPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ExistingPolicy::None),
            "update" => Ok(ExistingPolicy::Update),
            _ => Err(format!("expected none or update, got {s:?}")),
        }
    }
}

/// How one restore is made. The default restores every item of the archive into the
/// namespaces it came from, without status, in Velero's order.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Which items of the archive to restore (namespaces as the backup names them).
    pub filters: Filters,
    /// Source namespace -> target namespace (`--namespace-mappings a:b,c:d`).
    pub namespace_mappings: BTreeMap<String, String>,
    /// What to do with an item the target already has ([`RestoreOptions::existing`]).
    pub existing_policy: ExistingPolicy,
    /// Keep each item's `status` (default: removed, as the cluster sets it again).
    pub restore_status: bool,
    /// Keep a Service's node ports (default: removed, so the cluster assigns free ones).
    pub preserve_node_ports: bool,
    /// The order of the phases (default [`DEFAULT_PRIORITIES`]).
    pub priorities: Priorities,
    /// What the target already has: manifests as `kubectl get -A -o json` prints them
    /// (default: nothing, every item is new).
    pub existing: Vec<Value>,
}

/// Why a restore cannot be planned; nothing is written. (An archive that cannot be read is
/// [`ArchiveError`], from [`read::read`].)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// A namespace mapping is not valid.
    #[error("--namespace-mappings: {0}")]
    Mapping(String),
}

/// One item as it will be restored.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreItem {
    /// Its name in the archive (`pods/app/web-0`).
    pub from: String,
    /// Its name in the target (`pods/app-copy/web-0`).
    pub name: String,
    /// The cleaned, mapped manifest.
    pub manifest: Value,
    /// Whether the target already had it (written under [`ExistingPolicy::Update`]).
    pub existed: bool,
}

/// One phase: the items of one resource, applied together.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// The resource (`namespaces`, `deployments.apps`).
    pub resource: String,
    /// Its items, by target name.
    pub items: Vec<RestoreItem>,
}

/// A restore, planned: its phases in order and the items it leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct RestorePlan {
    /// The backup restored from.
    pub backup: String,
    /// The phases, in the order to apply them.
    pub phases: Vec<Phase>,
    /// Items not restored, with why (`Skipped`: exists; `Failed`: a bad manifest).
    pub left_out: Vec<RestoreItemResult>,
    /// The restored claims whose data the backup moved: each a data download.
    pub volumes: Vec<VolumeRestore>,
    /// The restored pods whose volumes a pod-volume backup copied: pod-volume restores
    /// once each pod's node is known.
    pub pod_volumes: Vec<PodVolumeRestore>,
    /// The restored pods' post-restore hooks, run once the data is back.
    pub hooks: Vec<RestoreHook>,
}

/// A restored pod's post-restore hook (`post.hook.restore.lockgate.io/*`), in the target.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreHook {
    /// The pod's name in the target (`pods/app-copy/web-0`).
    pub item: String,
    /// Its namespace in the target.
    pub namespace: String,
    /// `metadata.name`.
    pub pod: String,
    /// The hook, or why its annotations are malformed (and what that failure does).
    pub hook: Result<Hook, (String, OnError)>,
}

/// The post-restore hooks of the restored pods in `phases`.
fn restore_hooks(phases: &[Phase]) -> Vec<RestoreHook> {
    phases
        .iter()
        .filter(|p| p.resource == "pods")
        .flat_map(|p| &p.items)
        .filter_map(|i| {
            let hook = pod_hook(&i.manifest, HookPhase::Restore).transpose()?;
            let meta = &i.manifest["metadata"];
            Some(RestoreHook {
                item: i.name.clone(),
                namespace: meta["namespace"].as_str()?.to_string(),
                pod: meta["name"].as_str()?.to_string(),
                hook,
            })
        })
        .collect()
}

impl RestorePlan {
    /// Plans the restore of `archive` under `options`.
    ///
    /// # Errors
    /// [`RestoreError::Mapping`] for a mapping to or from an invalid namespace name, or
    /// one that maps a namespace twice.
    pub fn new(archive: &BackupArchive, options: &RestoreOptions) -> Result<Self, RestoreError> {
        validate_mappings(&options.namespace_mappings).map_err(RestoreError::Mapping)?;
        let mut kinds = KindTable::default();
        for item in &archive.items {
            if item.manifest["kind"] == "CustomResourceDefinition" {
                kinds.add_crd(&item.manifest);
            }
        }
        let taken = select(archive, options, &kinds);
        let existing = existing_index(&options.existing, &kinds, options);
        let mut by_resource: BTreeMap<String, Vec<RestoreItem>> = BTreeMap::new();
        let mut left_out = Vec::new();
        let map = &options.namespace_mappings;
        for item in taken {
            let manifest = clean::clean(&item.manifest, &item.resource, options, map);
            let name = clean::target_name(item, map);
            let there = existing.get(&name);
            if let (Some(there), ExistingPolicy::None) = (there, options.existing_policy) {
                let same = *there == manifest;
                left_out.push(RestoreItemResult::skipped(&item.name, &name, same));
                continue;
            }
            by_resource
                .entry(item.resource.clone())
                .or_default()
                .push(RestoreItem {
                    from: item.name.clone(),
                    name,
                    manifest,
                    existed: there.is_some(),
                });
        }
        for bad in &archive.bad {
            left_out.push(RestoreItemResult::failed(&bad.0, &bad.1));
        }
        let phases = options
            .priorities
            .sort(by_resource.keys().cloned().collect())
            .into_iter()
            .map(|resource| {
                let mut items = by_resource.remove(&resource).unwrap_or_default();
                items.sort_by(|a, b| a.name.cmp(&b.name));
                Phase { resource, items }
            })
            .collect::<Vec<Phase>>();
        Ok(RestorePlan {
            backup: archive.backup.clone(),
            volumes: volumes::volumes(archive, &phases),
            pod_volumes: volumes::pod_volumes(archive, &phases),
            hooks: restore_hooks(&phases),
            phases,
            left_out,
        })
    }

    /// How many items the restore writes.
    pub fn item_count(&self) -> usize {
        self.phases.iter().map(|p| p.items.len()).sum()
    }

    /// The namespaces the restore writes into (after the mapping), sorted.
    pub fn target_namespaces(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<&str> = self
            .phases
            .iter()
            .flat_map(|p| &p.items)
            .filter_map(|i| i.manifest["metadata"]["namespace"].as_str())
            .collect();
        set.into_iter().map(str::to_string).collect()
    }

    /// The persistent volumes the restore writes (cluster-scoped names, kept under a
    /// namespace mapping), sorted.
    pub fn target_volumes(&self) -> Vec<String> {
        self.phases
            .iter()
            .filter(|p| p.resource == "persistentvolumes")
            .flat_map(|p| &p.items)
            .filter_map(|i| i.manifest["metadata"]["name"].as_str())
            .map(str::to_string)
            .collect()
    }

    /// Confines a non-admin's restore to `scope`: an item whose target namespace it does
    /// not allow, or a cluster-scoped item when it is not every namespace, is taken out of
    /// the plan (and out of its result) and returned; phases left empty are dropped. An
    /// admin's scope ([`NamespaceScope::All`]) takes nothing out.
    pub fn confine(&mut self, scope: &NamespaceScope) -> Vec<RefusedItem> {
        if *scope == NamespaceScope::All {
            return Vec::new();
        }
        let mut refused = Vec::new();
        for phase in &mut self.phases {
            phase.items.retain(|i| {
                let meta = &i.manifest["metadata"];
                let namespace = meta["namespace"].as_str().map(str::to_string);
                let reason = match &namespace {
                    Some(ns) if scope.allows(ns) => return true,
                    Some(_) => RefusalReason::NamespaceNotAllowed,
                    None => RefusalReason::ClusterScopedNotAllowed,
                };
                refused.push(RefusedItem {
                    item: i.name.clone(),
                    kind: i.manifest["kind"].as_str().unwrap_or_default().to_string(),
                    namespace,
                    name: meta["name"].as_str().unwrap_or_default().to_string(),
                    reason,
                });
                false
            });
        }
        self.phases.retain(|p| !p.items.is_empty());
        let kept = |item: &String| !refused.iter().any(|r| &r.item == item);
        self.volumes.retain(|v| kept(&v.item));
        self.pod_volumes.retain(|p| kept(&p.item));
        self.hooks.retain(|h| kept(&h.item));
        refused
    }

    /// Puts the wait container ([`volumes::WAIT_CONTAINER`], image `image`) first among the
    /// init containers of every restored pod with pod volumes: once the cluster schedules
    /// the pod, it tells restore `restore` the pod's node (`lockgate restore bind ...
    /// --wait`) and waits until its volumes are copied back.
    pub fn wait_for_pod_volumes(&mut self, restore: &str, image: &str) {
        let waiting: BTreeMap<&str, &PodVolumeRestore> = self
            .pod_volumes
            .iter()
            .map(|p| (p.item.as_str(), p))
            .collect();
        for item in self.phases.iter_mut().flat_map(|p| &mut p.items) {
            let Some(pod) = waiting.get(item.name.as_str()) else {
                continue;
            };
            let spec = &mut item.manifest["spec"];
            let mut init = match spec["initContainers"].take() {
                Value::Array(list) => list,
                _ => Vec::new(),
            };
            init.retain(|c| c["name"] != volumes::WAIT_CONTAINER);
            init.insert(0, volumes::wait_container(restore, image, pod));
            spec["initContainers"] = Value::Array(init);
        }
    }
}

/// The manifests of an `existing` input: a `kubectl get -A -o json` List file or a
/// directory of manifests, read as a backup's input is (under `options`' confinement and
/// caps); of an earlier restore's directory, its phase files.
///
/// # Errors
/// What could not be read, naming the file (and the item).
pub fn read_existing(path: &Path, options: &PlanOptions) -> Result<Vec<Value>, String> {
    let inputs = match read_result(path) {
        Ok(r) if path.is_dir() => r.files.iter().map(|f| path.join(f)).collect(),
        _ => vec![path.to_path_buf()],
    };
    let mut out = Vec::new();
    for input in inputs {
        let plan = Plan::load(&input, options).map_err(|e| e.to_string())?;
        if let Some(e) = plan.input_errors().first() {
            return Err(e.to_string());
        }
        for i in 0..plan.item_count() {
            out.push(plan.load_item(i)?);
        }
    }
    Ok(out)
}

/// The items `options` select: namespaced ones by namespace, resource and labels;
/// cluster-scoped ones directly (no namespace filter, or `include_cluster_resources`) or
/// when a selected item relates to them (its Namespace, its PV, its StorageClass, its CRD).
fn select<'a>(
    archive: &'a BackupArchive,
    options: &RestoreOptions,
    kinds: &KindTable,
) -> Vec<&'a ArchiveItem> {
    let f = &options.filters;
    let resource_ok =
        |i: &ArchiveItem| f.resource_ok(&kinds.resolve(group_of(i.api_version()), i.kind()));
    let ok = |i: &ArchiveItem| resource_ok(i) && f.labels_ok(&labels_of(&i.manifest));
    let namespaced: Vec<&ArchiveItem> = archive
        .items
        .iter()
        .filter(|i| i.namespace.as_deref().is_some_and(|ns| f.namespace_ok(ns)) && ok(i))
        .collect();
    let related = clean::related_cluster_items(&namespaced);
    let mut taken = namespaced;
    for i in archive.items.iter().filter(|i| i.namespace.is_none()) {
        let direct = f.cluster_direct() && ok(i);
        let wanted = f.cluster_related() && related.contains(&i.name) && resource_ok(i);
        if direct || wanted {
            taken.push(i);
        }
    }
    taken
}

/// The target's items by name, cleaned as a restored item is, so that an item restored
/// before compares equal to the same item restored again.
fn existing_index(
    existing: &[Value],
    kinds: &KindTable,
    options: &RestoreOptions,
) -> HashMap<String, Value> {
    existing
        .iter()
        .filter_map(|m| {
            let item = ArchiveItem::from_manifest(m.clone(), kinds)?;
            let no_mapping = BTreeMap::new();
            let cleaned = clean::clean(&item.manifest, &item.resource, options, &no_mapping);
            Some((item.name, cleaned))
        })
        .collect()
}

/// Parses `a:b,c:d` into a mapping, validated.
///
/// # Errors
/// A pair that is not `SOURCE:TARGET`, a namespace name that is not valid, or a source
/// mapped twice.
pub fn parse_mappings(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((from, to)) = pair.split_once(':') else {
            return Err(format!("{pair:?}: expected SOURCE:TARGET"));
        };
        if out
            .insert(from.trim().to_string(), to.trim().to_string())
            .is_some()
        {
            return Err(format!("namespace {from:?} is mapped twice"));
        }
    }
    validate_mappings(&out)?;
    Ok(out)
}

fn validate_mappings(map: &BTreeMap<String, String>) -> Result<(), String> {
    match map
        .iter()
        .flat_map(|(a, b)| [a, b])
        .find(|ns| !is_namespace_name(ns))
    {
        Some(ns) => Err(format!(
            "{ns:?} is not a valid namespace name (lowercase letters, digits and '-', \
             at most 63, starting and ending with a letter or digit)"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
