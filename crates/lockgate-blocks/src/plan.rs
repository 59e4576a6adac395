//! A backup plan: the items a backup takes, grouped into blocks, in start order.
//!
//! [`Plan::load`] reads the input once (`index`), keeps only names, kinds, namespaces and
//! file locations, applies the [`Filters`], relates items and forms blocks (`order`).
//! Item contents are read again when a block runs ([`Plan::load_item`]).
//!
//! Invariants of a [`Plan`]:
//! - every taken item is in exactly one block; item names are unique (a duplicate is an
//!   [`InputError`] and only its first occurrence is taken);
//! - built-in relations: a pod and every PVC its volumes name; a PVC and its bound PV; PVCs
//!   with equal volume-group label values in one namespace; configured rules: matching
//!   items with equal `group_by` values in one namespace. Blocks are the connected groups;
//! - the first [`Plan::ordered_block_count`] blocks hold the ordered items, in listed order;
//! - the same input and options give the same blocks in the same order;
//! - under a [`Confinement`]: no taken item lies in a namespace the
//!   [`NamespaceScope`] does not allow, a namespace-confined plan takes a cluster-scoped item
//!   only when a taken item relates to it, and every item the filters would have taken but
//!   the confinement refused (and every taken pod whose hooks will not run) is in
//!   [`Plan::refused`]; item manifests read back ([`Plan::load_item`]) must still have the
//!   kind, name and namespace they were planned with.

mod index;
mod order;

use crate::confine::{Confinement, HookPolicy, NamespaceScope, RefusalReason, RefusedItem};
use crate::filter::Filters;
use crate::limits::{Cancel, InputLimits};
use crate::names::{group_of, item_name, KindInfo, DEFAULT_NAMESPACE};
use crate::source::{InputError, LoadError, Sources};
pub(crate) use index::{has_hook, labels_of};
use index::{Entry, Index, NO_NS};
use lockgate_core::policy::{BlockRule, BlocksPolicy};
use order::{ItemKey, UnionFind};
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The default volume-group label: PVCs with equal values form one block.
pub const DEFAULT_VOLUME_GROUP_LABEL: &str = "lockgate.io/volume-group";

/// How to take items and form blocks.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Which items to take (default: all).
    pub filters: Filters,
    /// Configured grouping rules (`[[blocks.rule]]`, default none). `matcher` is matched
    /// against the item's labels plus a `kind` key; `group_by` entries are
    /// `label:<name>` or `field:<dotted.path>`.
    pub rules: Vec<BlockRule>,
    /// PVCs with equal values of this label (in one namespace) form one block; default
    /// [`DEFAULT_VOLUME_GROUP_LABEL`].
    pub volume_group_label: String,
    /// Item names whose blocks run first, one at a time, in this order (default none).
    pub ordered: Vec<String>,
    /// Who the backup is for: which input paths, namespaces and hooks it may use. Default
    /// [`Confinement::admin`] (unconfined); a server sets [`Confinement::submitter`] for
    /// every caller that is not an admin.
    pub confinement: Confinement,
    /// Caps on reading the input (default [`InputLimits::default`]).
    pub limits: InputLimits,
    /// Cancels the load when set (default: a token nobody else holds).
    pub cancel: Cancel,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            filters: Filters::default(),
            rules: Vec::new(),
            volume_group_label: DEFAULT_VOLUME_GROUP_LABEL.to_string(),
            ordered: Vec::new(),
            confinement: Confinement::admin(),
            limits: InputLimits::default(),
            cancel: Cancel::new(),
        }
    }
}

impl PlanOptions {
    /// The rules, volume-group label and input caps (`max_file_bytes`, `max_total_bytes`,
    /// `max_items`, `max_entries`) of a validated `[blocks]` policy; no filters, no ordered
    /// items, unconfined.
    pub fn from_policy(policy: &BlocksPolicy) -> PlanOptions {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        PlanOptions {
            rules: policy.rules.clone(),
            volume_group_label: policy.volume_group_label.clone(),
            limits: InputLimits {
                max_file_bytes: policy.max_file_bytes,
                max_total_bytes: policy.max_total_bytes,
                max_items: count(policy.max_items),
                max_entries: count(policy.max_entries),
            },
            ..PlanOptions::default()
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        for rule in &self.rules {
            for g in &rule.group_by {
                if !(g.starts_with("label:") || g.starts_with("field:")) || g.ends_with(':') {
                    return Err(LoadError::Option {
                        option: "blocks.rule.group_by",
                        message: format!(
                            "{g:?}: expected \"label:<name>\" or \"field:<dotted.path>\""
                        ),
                    });
                }
            }
        }
        if self.volume_group_label.is_empty() {
            return Err(LoadError::Option {
                option: "volume_group_label",
                message: "must not be empty".into(),
            });
        }
        Ok(())
    }
}

/// One item of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemRef<'a> {
    /// Position in the plan (`0..item_count`).
    pub index: usize,
    /// `<resource>/<ns>/<name>` or `<resource>/<name>`.
    pub name: &'a str,
    /// `metadata.name`.
    pub short_name: &'a str,
    /// Qualified resource (`pods`, `deployments.apps`).
    pub resource: &'a str,
    /// Kind (`Pod`).
    pub kind: &'a str,
    /// API group, empty for core.
    pub group: &'a str,
    /// Namespace, `None` for cluster-scoped items.
    pub namespace: Option<&'a str>,
}

impl ItemRef<'_> {
    /// Path of the item's manifest in the archive.
    pub fn archive_path(&self) -> String {
        crate::names::archive_path(self.resource, self.namespace, self.short_name)
    }

    /// Whether the item is a core `kind`.
    pub fn is_core(&self, kind: &str) -> bool {
        self.group.is_empty() && self.kind == kind
    }
}

/// The blocks of one backup. Build with [`Plan::load`].
#[derive(Debug)]
pub struct Plan {
    sources: Sources,
    kinds: Vec<KindInfo>,
    namespaces: Vec<Box<str>>,
    entries: Vec<Entry>,
    block_starts: Vec<u32>,
    block_items: Vec<u32>,
    ordered_blocks: usize,
    input_errors: Vec<InputError>,
    warnings: Vec<String>,
    refused: Vec<RefusedItem>,
    hooks: HookPolicy,
}

/// One block of a dry run.
#[derive(Debug, Serialize)]
pub struct DryBlock<'a> {
    /// Index in start order.
    pub index: usize,
    /// Item names, in backup order.
    pub items: Vec<&'a str>,
}

/// A dry run: the blocks, the items the confinement refused, and the notes.
#[derive(Debug, Serialize)]
pub struct DryRunReport<'a> {
    /// The blocks, as [`Plan::blocks_json`] lists them.
    pub blocks: Vec<DryBlock<'a>>,
    /// [`Plan::refused`].
    pub refused: &'a [RefusedItem],
    /// [`Plan::warnings`].
    pub warnings: &'a [String],
}

impl Plan {
    /// Reads `input` (a `List` file, a manifest file or a directory) and forms the blocks.
    ///
    /// # Errors
    /// [`LoadError`] when the input path cannot be read or an option is malformed. Problems
    /// with single files or items do not fail the load: see [`Plan::input_errors`].
    pub fn load(input: &Path, options: &PlanOptions) -> Result<Plan, LoadError> {
        options.validate()?;
        let (mut index, sources) = Index::build(input, options)?;
        let kinds: Vec<KindInfo> = index
            .kinds
            .iter()
            .map(|(g, k)| index.table.resolve(g, k))
            .collect();
        let default_ns = index.ns_id(DEFAULT_NAMESPACE);
        for e in &mut index.entries {
            if kinds[e.kind as usize].cluster {
                e.ns = NO_NS;
            } else if e.ns == NO_NS {
                e.ns = default_ns;
            }
        }
        let lookup = Lookup::new(&index, &kinds);
        let scope = &options.confinement.namespaces;
        let (mut keep, refused_raw) = select(&index, &kinds, &lookup, &options.filters, scope);
        let mut refused = refused_items(&index, &kinds, refused_raw);
        let mut uf = relate(&index, &lookup, &keep);
        drop(lookup);
        name_items(&mut index, &kinds, &keep);
        let mut errors = std::mem::take(&mut index.errors);
        drop_duplicates(&index, &sources, &mut keep, &mut errors);
        if options.confinement.hooks == HookPolicy::Refuse {
            refused.extend(hooks_refused(&index, &kinds, &keep));
        }
        let (ordered, mut warnings) = ordered_positions(&index, &keep, &options.ordered);
        warnings.extend(sources.notes.iter().cloned());
        let mut members = Vec::new();
        let mut new_index = vec![u32::MAX; keep.len()];
        let mut n = 0u32;
        for (i, &k) in keep.iter().enumerate() {
            if k {
                new_index[i] = n;
                members.push((uf.find(i as u32), n));
                n += 1;
            }
        }
        drop(uf);
        let mut entries = std::mem::take(&mut index.entries);
        let mut it = keep.iter();
        entries.retain(|_| *it.next().expect("one flag per entry"));
        entries.shrink_to_fit();
        let ordered: HashMap<u32, u32> = ordered
            .into_iter()
            .map(|(raw, pos)| (new_index[raw as usize], pos))
            .collect();
        drop(new_index);
        let ranks: Vec<u8> = kinds.iter().map(rank).collect();
        let blocks = order::blocks(members, |i| {
            let e = &entries[i as usize];
            ItemKey {
                ordered: ordered.get(&i).copied().unwrap_or(u32::MAX),
                rank: ranks[e.kind as usize],
                name: &e.name,
            }
        });
        Ok(Plan {
            sources,
            kinds,
            namespaces: index.namespaces,
            entries,
            block_starts: blocks.starts,
            block_items: blocks.items,
            ordered_blocks: blocks.ordered,
            input_errors: errors,
            warnings,
            refused,
            hooks: options.confinement.hooks,
        })
    }

    /// Items of the input the [`Confinement`] refused (not taken: a namespace or
    /// cluster-scoped item the backup may not include), and taken pods whose hooks will not
    /// run; in input order, the hook refusals last.
    pub fn refused(&self) -> &[RefusedItem] {
        &self.refused
    }

    /// Whether this plan's backup runs manifest hooks.
    pub fn hook_policy(&self) -> HookPolicy {
        self.hooks
    }

    /// The dry run: blocks, refused items, warnings.
    pub fn dry_run_report(&self) -> DryRunReport<'_> {
        DryRunReport {
            blocks: self.dry_blocks(),
            refused: &self.refused,
            warnings: &self.warnings,
        }
    }

    fn dry_blocks(&self) -> Vec<DryBlock<'_>> {
        (0..self.block_count())
            .map(|b| DryBlock {
                index: b,
                items: self.block(b).map(|i| i.name).collect(),
            })
            .collect()
    }

    /// Number of items taken.
    pub fn item_count(&self) -> usize {
        self.entries.len()
    }

    /// Number of blocks.
    pub fn block_count(&self) -> usize {
        self.block_starts.len() - 1
    }

    /// Number of leading blocks that hold ordered items (they run one at a time).
    pub fn ordered_block_count(&self) -> usize {
        self.ordered_blocks
    }

    /// The items of block `b`, in the order they are backed up.
    ///
    /// # Panics
    /// If `b >= block_count()`.
    pub fn block(&self, b: usize) -> impl ExactSizeIterator<Item = ItemRef<'_>> + '_ {
        let (s, e) = (
            self.block_starts[b] as usize,
            self.block_starts[b + 1] as usize,
        );
        self.block_items[s..e]
            .iter()
            .map(|&i| self.item(i as usize))
    }

    /// Item `i`.
    ///
    /// # Panics
    /// If `i >= item_count()`.
    pub fn item(&self, i: usize) -> ItemRef<'_> {
        let e = &self.entries[i];
        let k = &self.kinds[e.kind as usize];
        let namespace = (e.ns != NO_NS).then(|| &*self.namespaces[e.ns as usize]);
        let short_name = e.name.rsplit('/').next().unwrap_or(&e.name);
        ItemRef {
            index: i,
            name: &e.name,
            short_name,
            resource: &k.resource,
            kind: &k.kind,
            group: &k.group,
            namespace,
        }
    }

    /// Reads item `i`'s manifest again from the input.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or no longer parses, or when the
    /// manifest read no longer has the item's kind, name and namespace (the file was
    /// rewritten since it was planned).
    pub fn load_item(&self, i: usize) -> Result<Value, String> {
        let v = self.sources.load(&self.entries[i].loc)?;
        let item = self.item(i);
        let ns = v["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_NAMESPACE);
        let same = v["kind"].as_str() == Some(item.kind)
            && group_of(v["apiVersion"].as_str().unwrap_or("v1")) == item.group
            && v["metadata"]["name"].as_str() == Some(item.short_name)
            && item.namespace.is_none_or(|planned| planned == ns);
        if !same {
            return Err(format!(
                "{} changed since it was planned: it no longer holds {}; not backed up",
                self.item_file(i).display(),
                item.name
            ));
        }
        Ok(v)
    }

    /// The namespaces of the taken items, sorted: the `namespaces` attribute of the
    /// backup's `resource-backup` job (for `overlap = "namespaces"` conflicts).
    pub fn namespaces(&self) -> Vec<&str> {
        let mut used = vec![false; self.namespaces.len()];
        for e in self.entries.iter().filter(|e| e.ns != NO_NS) {
            used[e.ns as usize] = true;
        }
        let mut out: Vec<&str> = used
            .iter()
            .enumerate()
            .filter(|(_, u)| **u)
            .map(|(i, _)| &*self.namespaces[i])
            .collect();
        out.sort_unstable();
        out
    }

    /// Problems with single files or items of the input (those items are not taken).
    pub fn input_errors(&self) -> &[InputError] {
        &self.input_errors
    }

    /// Notes that do not stop a backup (an ordered item not in the input, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The blocks as `metadata/blocks.json` writes them, without times:
    /// `[{"index": 0, "items": ["pods/app/web-0", ...]}, ...]`, in start order.
    pub fn blocks_json(&self) -> String {
        serde_json::to_string_pretty(&self.dry_blocks()).expect("plain data serializes")
    }

    /// The input file of item `i`, for messages.
    pub fn item_file(&self, i: usize) -> &Path {
        self.sources.path(&self.entries[i].loc)
    }
}

/// Sort rank of a kind inside a block: pods, PVCs, PVs, the rest.
fn rank(k: &KindInfo) -> u8 {
    match (k.group.as_str(), k.kind.as_str()) {
        ("", "Pod") => 0,
        ("", "PersistentVolumeClaim") => 1,
        ("", "PersistentVolume") => 2,
        _ => 3,
    }
}

/// Lookups by name for the relations.
struct Lookup<'a> {
    pvcs: HashMap<(u32, &'a str), u32>,
    pvs: HashMap<&'a str, u32>,
    namespaces: HashMap<&'a str, u32>,
}

impl<'a> Lookup<'a> {
    fn new(index: &'a Index, kinds: &[KindInfo]) -> Lookup<'a> {
        let mut l = Lookup {
            pvcs: HashMap::new(),
            pvs: HashMap::new(),
            namespaces: HashMap::new(),
        };
        for (i, e) in index.entries.iter().enumerate() {
            match rank_kind(&kinds[e.kind as usize]) {
                Some("PersistentVolumeClaim") => l.pvcs.entry((e.ns, &*e.name)).or_insert(i as u32),
                Some("PersistentVolume") => l.pvs.entry(&*e.name).or_insert(i as u32),
                Some("Namespace") => l.namespaces.entry(&*e.name).or_insert(i as u32),
                _ => continue,
            };
        }
        l
    }
}

fn rank_kind(k: &KindInfo) -> Option<&str> {
    k.group.is_empty().then_some(k.kind.as_str())
}

/// Which entries are taken: those passing the filters and the namespace scope, plus the
/// cluster-scoped ones a taken item relates to; and the entries the filters would have
/// taken but the scope refuses, with the reason, in input order.
fn select(
    index: &Index,
    kinds: &[KindInfo],
    lookup: &Lookup<'_>,
    f: &Filters,
    scope: &NamespaceScope,
) -> (Vec<bool>, Vec<(u32, RefusalReason)>) {
    let resource_ok: Vec<bool> = kinds.iter().map(|k| f.resource_ok(k)).collect();
    let ns_ok: Vec<bool> = index.namespaces.iter().map(|n| f.namespace_ok(n)).collect();
    let ns_allowed: Vec<bool> = index.namespaces.iter().map(|n| scope.allows(n)).collect();
    let confined = *scope != NamespaceScope::All;
    let n = index.entries.len();
    let (mut direct, mut candidate) = (vec![false; n], vec![false; n]);
    let mut refused = Vec::new();
    let mut cluster_wanted = Vec::new();
    for (i, e) in index.entries.iter().enumerate() {
        if !resource_ok[e.kind as usize] {
            continue;
        }
        if kinds[e.kind as usize].cluster {
            let wanted = index.selected[i] && f.cluster_direct();
            if confined {
                // Only as a related item, named as refused if nothing relates to it.
                candidate[i] = f.cluster_related();
                if wanted {
                    cluster_wanted.push(i as u32);
                }
            } else {
                direct[i] = wanted;
                candidate[i] = !wanted && f.cluster_related();
            }
        } else {
            let wanted = index.selected[i] && ns_ok[e.ns as usize];
            if wanted && !ns_allowed[e.ns as usize] {
                refused.push((i as u32, RefusalReason::NamespaceNotAllowed));
            } else {
                direct[i] = wanted;
            }
        }
    }
    let mut keep = direct.clone();
    let mut pull = |j: u32| keep[j as usize] |= candidate[j as usize];
    for (pvc, pv) in &index.volume_names {
        if let (true, Some(&j)) = (direct[*pvc as usize], lookup.pvs.get(&**pv)) {
            pull(j);
        }
    }
    let mut used_ns = HashSet::new();
    let mut used_kinds = HashSet::new();
    for (_, e) in index.entries.iter().enumerate().filter(|(i, _)| direct[*i]) {
        if e.ns != NO_NS {
            used_ns.insert(e.ns);
        }
        used_kinds.insert(e.kind);
    }
    for ns in used_ns {
        if let Some(&j) = lookup.namespaces.get(&*index.namespaces[ns as usize]) {
            pull(j);
        }
    }
    for k in used_kinds {
        if let Some(&j) = index.crds.get(&index.kinds[k as usize]) {
            pull(j);
        }
    }
    refused.extend(
        cluster_wanted
            .into_iter()
            .filter(|&i| !keep[i as usize])
            .map(|i| (i, RefusalReason::ClusterScopedNotAllowed)),
    );
    refused.sort_unstable_by_key(|&(i, _)| i);
    (keep, refused)
}

/// Refused entries (not taken, so still with their short names) as [`RefusedItem`]s.
fn refused_items(
    index: &Index,
    kinds: &[KindInfo],
    raw: Vec<(u32, RefusalReason)>,
) -> Vec<RefusedItem> {
    raw.into_iter()
        .map(|(i, reason)| {
            let e = &index.entries[i as usize];
            let k = &kinds[e.kind as usize];
            let ns = (e.ns != NO_NS).then(|| index.namespaces[e.ns as usize].to_string());
            RefusedItem {
                item: item_name(&k.resource, ns.as_deref(), &e.name),
                kind: k.kind.clone(),
                namespace: ns,
                name: e.name.to_string(),
                reason,
            }
        })
        .collect()
}

/// The taken pods that annotate a hook, refused because the backup may not run hooks.
fn hooks_refused(index: &Index, kinds: &[KindInfo], keep: &[bool]) -> Vec<RefusedItem> {
    index
        .hook_pods
        .iter()
        .filter(|&&i| keep[i as usize])
        .map(|&i| {
            let e = &index.entries[i as usize];
            RefusedItem {
                item: e.name.to_string(),
                kind: kinds[e.kind as usize].kind.clone(),
                namespace: (e.ns != NO_NS).then(|| index.namespaces[e.ns as usize].to_string()),
                name: e.name.rsplit('/').next().unwrap_or(&e.name).to_string(),
                reason: RefusalReason::HooksNotAllowed,
            }
        })
        .collect()
}

/// Union-find over all entries; only taken entries are joined.
fn relate(index: &Index, lookup: &Lookup<'_>, keep: &[bool]) -> UnionFind {
    let mut uf = UnionFind::new(index.entries.len());
    let kept = |i: u32| keep[i as usize];
    for (pod, claim) in &index.claims {
        let ns = index.entries[*pod as usize].ns;
        if let (true, Some(&pvc)) = (kept(*pod), lookup.pvcs.get(&(ns, &**claim))) {
            if kept(pvc) {
                uf.union(*pod, pvc);
            }
        }
    }
    for (pvc, pv) in &index.volume_names {
        if let (true, Some(&j)) = (kept(*pvc), lookup.pvs.get(&**pv)) {
            if kept(j) {
                uf.union(*pvc, j);
            }
        }
    }
    let mut first: HashMap<(u32, &str), u32> = HashMap::new();
    for (i, key) in index.groups.iter().filter(|(i, _)| kept(*i)) {
        let ns = index.entries[*i as usize].ns;
        match first.get(&(ns, &**key)) {
            Some(&j) => uf.union(j, *i),
            None => {
                first.insert((ns, key), *i);
            }
        }
    }
    uf
}

/// Replaces the short names of taken entries by full item names.
fn name_items(index: &mut Index, kinds: &[KindInfo], keep: &[bool]) {
    for (e, _) in index.entries.iter_mut().zip(keep).filter(|(_, k)| **k) {
        let ns = (e.ns != NO_NS).then(|| &*index.namespaces[e.ns as usize]);
        e.name = item_name(&kinds[e.kind as usize].resource, ns, &e.name).into();
    }
}

/// Leaves out every later occurrence of an item name, with an error naming both files.
fn drop_duplicates(
    index: &Index,
    sources: &Sources,
    keep: &mut [bool],
    errors: &mut Vec<InputError>,
) {
    // Sorting positions by name (4 bytes per item) instead of hashing the names keeps the
    // plan's peak memory low.
    let name = |i: u32| &*index.entries[i as usize].name;
    let mut order: Vec<u32> = (0..keep.len() as u32)
        .filter(|&i| keep[i as usize])
        .collect();
    order.sort_unstable_by(|&a, &b| name(a).cmp(name(b)).then(a.cmp(&b)));
    let mut dups = Vec::new();
    for w in order.windows(2) {
        if name(w[0]) == name(w[1]) {
            let first = order[order.partition_point(|&i| name(i) < name(w[1]))];
            dups.push((w[1], first));
        }
    }
    drop(order);
    dups.sort_unstable();
    for (dup, first) in dups {
        let e = &index.entries[dup as usize];
        keep[dup as usize] = false;
        errors.push(InputError {
            file: sources.path(&e.loc).to_path_buf(),
            item: e.name.to_string(),
            message: format!(
                "duplicate item (first in {}); only the first is backed up",
                sources.path(&index.entries[first as usize].loc).display()
            ),
        });
    }
}

/// `(entry, position)` of every ordered item found, and warnings for those not found.
fn ordered_positions(
    index: &Index,
    keep: &[bool],
    ordered: &[String],
) -> (Vec<(u32, u32)>, Vec<String>) {
    if ordered.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let wanted: HashMap<&str, u32> = ordered
        .iter()
        .enumerate()
        .rev()
        .map(|(p, n)| (n.as_str(), p as u32))
        .collect();
    let found: Vec<(u32, u32)> = (0..index.entries.len())
        .filter(|&i| keep[i])
        .filter_map(|i| wanted.get(&*index.entries[i].name).map(|&p| (i as u32, p)))
        .collect();
    let present: HashSet<u32> = found.iter().map(|&(_, p)| p).collect();
    let warnings = ordered
        .iter()
        .enumerate()
        .filter(|(p, n)| !present.contains(&(*p as u32)) && wanted[n.as_str()] == *p as u32)
        .map(|(_, n)| format!("ordered item {n} is not in the input or is filtered out"))
        .collect();
    (found, warnings)
}
