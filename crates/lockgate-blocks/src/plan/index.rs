//! The first pass over the input: one compact [`Entry`] per item plus the few facts that
//! relate items (pod claims, PVC volume names, group keys), nothing else.
//!
//! Invariants: entries are in input order; every side table refers to entries by their
//! position; manifests are dropped as soon as these facts are taken from them.

use super::PlanOptions;
use crate::hooks::HookPhase;
use crate::names::{group_of, KindTable};
use crate::source::{self, Found, InputError, LoadError, Location, ScanCtx, Sources};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// No namespace (cluster-scoped, or not given in the manifest).
pub(crate) const NO_NS: u32 = u32::MAX;

/// One item of the input.
#[derive(Debug)]
pub(crate) struct Entry {
    /// `metadata.name` while indexing; the full item name once the plan is built.
    pub name: Box<str>,
    /// Interned namespace or [`NO_NS`].
    pub ns: u32,
    /// Interned `(group, kind)`.
    pub kind: u32,
    /// Where to read it again.
    pub loc: Location,
}

/// Everything the first pass learned.
#[derive(Default)]
pub(crate) struct Index {
    pub entries: Vec<Entry>,
    /// Whether the entry passed the label selector.
    pub selected: Vec<bool>,
    pub kinds: Vec<(String, String)>,
    kind_ids: HashMap<(String, String), u32>,
    pub namespaces: Vec<Box<str>>,
    ns_ids: HashMap<Box<str>, u32>,
    /// (pod, claim name): the pod's volumes name this PVC.
    pub claims: Vec<(u32, Box<str>)>,
    /// (PVC, `spec.volumeName`).
    pub volume_names: Vec<(u32, Box<str>)>,
    /// (item, group key): items with equal keys in one namespace form one block.
    pub groups: Vec<(u32, Box<str>)>,
    /// Pods whose annotations name a pre or post hook.
    pub hook_pods: Vec<u32>,
    /// CRDs by the `(group, kind)` they define.
    pub crds: HashMap<(String, String), u32>,
    pub table: KindTable,
    pub errors: Vec<InputError>,
}

impl Index {
    /// Reads the input.
    pub fn build(input: &Path, opts: &PlanOptions) -> Result<(Index, Sources), LoadError> {
        let mut index = Index::default();
        let ctx = ScanCtx {
            confinement: &opts.confinement,
            limits: &opts.limits,
            cancel: &opts.cancel,
        };
        let sources = source::scan(input, &ctx, &mut |found| match found {
            Ok(found) => index.add(found, opts),
            Err(e) => index.errors.push(e),
        })?;
        Ok((index, sources))
    }

    /// The interned namespace `ns`, added if new.
    pub fn ns_id(&mut self, ns: &str) -> u32 {
        if let Some(&id) = self.ns_ids.get(ns) {
            return id;
        }
        let id = self.namespaces.len() as u32;
        self.namespaces.push(ns.into());
        self.ns_ids.insert(ns.into(), id);
        id
    }

    fn kind_id(&mut self, group: &str, kind: &str) -> u32 {
        let key = (group.to_string(), kind.to_string());
        if let Some(&id) = self.kind_ids.get(&key) {
            return id;
        }
        let id = self.kinds.len() as u32;
        self.kinds.push(key.clone());
        self.kind_ids.insert(key, id);
        id
    }

    fn add(&mut self, found: Found<'_>, opts: &PlanOptions) {
        let Found {
            loc,
            file,
            position,
            value,
        } = found;
        let mut fail = |message: String| {
            self.errors.push(InputError {
                file: file.to_path_buf(),
                item: position.clone(),
                message,
            })
        };
        if !value.is_object() {
            return fail(format!(
                "expected a manifest (a JSON/YAML object), found {}",
                type_name(&value)
            ));
        }
        let Some(kind) = value["kind"].as_str().filter(|k| !k.is_empty()) else {
            return fail("manifest has no kind (expected a string field \"kind\")".into());
        };
        let Some(name) = value["metadata"]["name"].as_str().filter(|n| !n.is_empty()) else {
            return fail(format!("{kind} manifest has no metadata.name"));
        };
        let group = group_of(value["apiVersion"].as_str().unwrap_or("v1"));
        let me = self.entries.len() as u32;
        let kind_id = self.kind_id(group, kind);
        let ns = match value["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(ns) => self.ns_id(ns),
            None => NO_NS,
        };
        let labels = labels_of(&value);
        self.relations(me, group, kind, &value, &labels, opts);
        self.rule_groups(me, kind, &value, &labels, opts);
        self.selected.push(opts.filters.labels_ok(&labels));
        self.entries.push(Entry {
            name: name.into(),
            ns,
            kind: kind_id,
            loc,
        });
    }

    fn relations(
        &mut self,
        me: u32,
        group: &str,
        kind: &str,
        v: &Value,
        labels: &Labels,
        opts: &PlanOptions,
    ) {
        match (group, kind) {
            ("", "Pod") => {
                if has_hook(v) {
                    self.hook_pods.push(me);
                }
                for vol in v["spec"]["volumes"].as_array().into_iter().flatten() {
                    if let Some(claim) = vol["persistentVolumeClaim"]["claimName"].as_str() {
                        self.claims.push((me, claim.into()));
                    } else if vol["ephemeral"].is_object() {
                        // A generic ephemeral volume's PVC is named `<pod>-<volume>`.
                        let pod = v["metadata"]["name"].as_str().unwrap_or_default();
                        let claim = format!("{pod}-{}", vol["name"].as_str().unwrap_or_default());
                        self.claims.push((me, claim.into()));
                    }
                }
            }
            ("", "PersistentVolumeClaim") => {
                if let Some(pv) = v["spec"]["volumeName"].as_str().filter(|s| !s.is_empty()) {
                    self.volume_names.push((me, pv.into()));
                }
                if let Some(g) = labels.get(&opts.volume_group_label) {
                    self.groups.push((me, format!("volume-group\0{g}").into()));
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") if self.table.add_crd(v) => {
                let spec = &v["spec"];
                let group = spec["group"].as_str().unwrap_or_default().to_string();
                let kind = spec["names"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.crds.insert((group, kind), me);
            }
            _ => {}
        }
    }

    fn rule_groups(&mut self, me: u32, kind: &str, v: &Value, labels: &Labels, opts: &PlanOptions) {
        let lookup = |k: &str| {
            if k == "kind" {
                Some(kind)
            } else {
                labels.get(k).map(String::as_str)
            }
        };
        for (r, rule) in opts.rules.iter().enumerate() {
            if !rule.matcher.matches(lookup) {
                continue;
            }
            let values: Option<Vec<String>> = rule
                .group_by
                .iter()
                .map(|g| group_value(g, v, labels))
                .collect();
            if let Some(values) = values {
                self.groups
                    .push((me, format!("rule {r}\0{}", values.join("\0")).into()));
            }
        }
    }
}

type Labels = BTreeMap<String, String>;

/// Whether a pod's annotations name a pre or a post hook.
pub(crate) fn has_hook(pod: &Value) -> bool {
    let ann = &pod["metadata"]["annotations"];
    [HookPhase::Pre, HookPhase::Post]
        .iter()
        .any(|p| !ann[format!("{}/command", p.annotation_prefix())].is_null())
}

/// `metadata.labels` as strings (non-string values rendered as JSON).
pub(crate) fn labels_of(v: &Value) -> Labels {
    let Some(map) = v["metadata"]["labels"].as_object() else {
        return Labels::new();
    };
    map.iter()
        .map(|(k, v)| (k.clone(), render(v).unwrap_or_default()))
        .collect()
}

/// The value of one `group_by` entry for an item, `None` when it has none.
fn group_value(entry: &str, v: &Value, labels: &Labels) -> Option<String> {
    if let Some(label) = entry.strip_prefix("label:") {
        return labels.get(label).cloned();
    }
    let path = entry.strip_prefix("field:")?;
    let mut at = v;
    for seg in path.split('.') {
        at = match at {
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => at.get(seg)?,
        };
    }
    render(at)
}

fn render(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn group_values_come_from_labels_and_fields() {
        let v = json!({"metadata": {"labels": {"app": "db", "n": 3}}, "spec": {"serviceName": "cass", "ports": [{"port": 80}]}});
        let labels = labels_of(&v);
        assert_eq!(group_value("label:app", &v, &labels).as_deref(), Some("db"));
        assert_eq!(group_value("label:n", &v, &labels).as_deref(), Some("3"));
        assert_eq!(
            group_value("field:spec.serviceName", &v, &labels).as_deref(),
            Some("cass")
        );
        assert_eq!(
            group_value("field:spec.ports.0.port", &v, &labels).as_deref(),
            Some("80")
        );
        assert_eq!(group_value("field:spec.missing", &v, &labels), None);
        assert_eq!(group_value("label:missing", &v, &labels), None);
    }
}
