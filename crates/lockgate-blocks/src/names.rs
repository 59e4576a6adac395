//! Item names: `<resource>/<namespace>/<name>` or `<resource>/<name>`.
//!
//! `<resource>` is the lowercase plural of the kind, qualified with the API group for every
//! group but the core one (`pods`, `deployments.apps`, `widgets.example.com`), as Velero's
//! archives and `kubectl` write it.
//!
//! Invariants:
//! - the plural and the scope of a kind come from a CustomResourceDefinition in the input
//!   when there is one ([`KindTable::add_crd`]), else from English rules ([`plural_of`]) and
//!   the list of well-known cluster-scoped kinds ([`is_well_known_cluster_kind`]);
//! - a namespaced item without `metadata.namespace` belongs to [`DEFAULT_NAMESPACE`];
//!   a cluster-scoped item has no namespace, whatever its manifest says.

use std::collections::HashMap;

/// The namespace of a namespaced item whose manifest names none, as `kubectl apply` does.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Kinds of the core and built-in API groups that are cluster-scoped.
const CLUSTER_KINDS: &[&str] = &[
    "APIService",
    "CertificateSigningRequest",
    "ClusterRole",
    "ClusterRoleBinding",
    "ComponentStatus",
    "CSIDriver",
    "CSINode",
    "CustomResourceDefinition",
    "FlowSchema",
    "IngressClass",
    "IPAddress",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "PersistentVolume",
    "PodSecurityPolicy",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "RuntimeClass",
    "ServiceCIDR",
    "StorageClass",
    "StorageVersionMigration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "VolumeAttachment",
    "VolumeGroupSnapshotClass",
    "VolumeGroupSnapshotContent",
    "VolumeSnapshotClass",
    "VolumeSnapshotContent",
];

/// Whether `kind` is one of the well-known cluster-scoped kinds (case-sensitive, as in
/// manifests).
pub fn is_well_known_cluster_kind(kind: &str) -> bool {
    CLUSTER_KINDS.contains(&kind)
}

/// The API group of an `apiVersion`: `apps/v1` -> `apps`, `v1` -> `` (core).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The lowercase plural of a kind by English rules: `-s`, `-es` after s/x/z/ch/sh, `-ies`
/// after a consonant and y. `Endpoints` is already plural.
pub fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower == "endpoints" {
        return lower;
    }
    let ends = |s: &str| lower.ends_with(s);
    if ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh") {
        return lower + "es";
    }
    let bytes = lower.as_bytes();
    if bytes.len() >= 2
        && bytes[bytes.len() - 1] == b'y'
        && !b"aeiou".contains(&bytes[bytes.len() - 2])
    {
        return format!("{}ies", &lower[..lower.len() - 1]);
    }
    lower + "s"
}

/// The resource name of a plural in a group: `deployments` in `apps` -> `deployments.apps`.
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The path of an item's manifest in a backup archive:
/// `resources/<resource>/namespaces/<ns>/<name>.json`, or `resources/<resource>/cluster/<name>.json`
/// for a cluster-scoped item.
pub fn archive_path(resource: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("resources/{resource}/namespaces/{ns}/{name}.json"),
        None => format!("resources/{resource}/cluster/{name}.json"),
    }
}

/// The parts of an [`archive_path`] (resource, namespace, name); `None` for any other path.
pub fn parse_archive_path(path: &str) -> Option<(&str, Option<&str>, &str)> {
    let parts: Vec<&str> = path.split('/').collect();
    let (resource, namespace, file) = match parts[..] {
        ["resources", r, "namespaces", ns, f] => (r, Some(ns), f),
        ["resources", r, "cluster", f] => (r, None, f),
        _ => return None,
    };
    Some((resource, namespace, file.strip_suffix(".json")?))
}

/// Whether `s` is written as a resource name: lowercase letters, digits, `.` and `-`
/// (`pods`, `deployments.apps`), not empty.
pub fn is_resource_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

/// An item's name from its parts.
pub fn item_name(resource: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{resource}/{ns}/{name}"),
        None => format!("{resource}/{name}"),
    }
}

/// What the input says about a custom kind: its plural and its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CrdNames {
    plural: String,
    cluster: bool,
}

/// The resolved naming of one `(group, kind)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// `kind` as manifests write it (`Deployment`).
    pub kind: String,
    /// API group, empty for core.
    pub group: String,
    /// Qualified resource name (`deployments.apps`).
    pub resource: String,
    /// Whether items of this kind are cluster-scoped.
    pub cluster: bool,
}

/// Naming rules for the kinds of one input: English rules, overridden by the input's CRDs.
#[derive(Debug, Default)]
pub struct KindTable {
    crds: HashMap<(String, String), CrdNames>,
}

impl KindTable {
    /// Records a CustomResourceDefinition manifest; returns false when it lacks
    /// `spec.group`, `spec.names.kind` or `spec.names.plural`.
    pub fn add_crd(&mut self, crd: &serde_json::Value) -> bool {
        let spec = &crd["spec"];
        let (Some(group), Some(kind), Some(plural)) = (
            spec["group"].as_str(),
            spec["names"]["kind"].as_str(),
            spec["names"]["plural"].as_str(),
        ) else {
            return false;
        };
        let cluster = spec["scope"].as_str() == Some("Cluster");
        let names = CrdNames {
            plural: plural.to_ascii_lowercase(),
            cluster,
        };
        self.crds
            .insert((group.to_string(), kind.to_string()), names);
        true
    }

    /// How items of `kind` in `group` are named.
    pub fn resolve(&self, group: &str, kind: &str) -> KindInfo {
        let (plural, cluster) = match self.crds.get(&(group.to_string(), kind.to_string())) {
            Some(crd) => (crd.plural.clone(), crd.cluster),
            None => (plural_of(kind), is_well_known_cluster_kind(kind)),
        };
        KindInfo {
            kind: kind.to_string(),
            group: group.to_string(),
            resource: qualified(&plural, group),
            cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("Pod", "pods")]
    #[case("PersistentVolumeClaim", "persistentvolumeclaims")]
    #[case("Ingress", "ingresses")]
    #[case("Box", "boxes")]
    #[case("Quiz", "quizes")]
    #[case("Batch", "batches")]
    #[case("Mesh", "meshes")]
    #[case("NetworkPolicy", "networkpolicies")]
    #[case("Gateway", "gateways")]
    #[case("Endpoints", "endpoints")]
    #[case("StorageClass", "storageclasses")]
    fn plurals_follow_english_rules(#[case] kind: &str, #[case] plural: &str) {
        assert_eq!(plural_of(kind), plural);
    }

    #[rstest]
    #[case("v1", "Pod", "pods", false)]
    #[case("v1", "PersistentVolume", "persistentvolumes", true)]
    #[case("apps/v1", "Deployment", "deployments.apps", false)]
    #[case(
        "storage.k8s.io/v1",
        "StorageClass",
        "storageclasses.storage.k8s.io",
        true
    )]
    #[case("example.com/v1", "Widget", "widgets.example.com", false)]
    fn kinds_resolve_without_crds(
        #[case] api: &str,
        #[case] kind: &str,
        #[case] res: &str,
        #[case] cluster: bool,
    ) {
        let info = KindTable::default().resolve(group_of(api), kind);
        assert_eq!((info.resource.as_str(), info.cluster), (res, cluster));
    }

    #[test]
    fn crd_overrides_plural_and_scope() {
        let mut t = KindTable::default();
        let crd = serde_json::json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Octopus", "plural": "octopi"}}});
        assert!(t.add_crd(&crd));
        let info = t.resolve("example.com", "Octopus");
        assert_eq!(info.resource, "octopi.example.com");
        assert!(info.cluster);
        assert!(!t.add_crd(&serde_json::json!({"spec": {}})));
    }

    #[test]
    fn names_have_namespace_only_when_namespaced() {
        assert_eq!(item_name("pods", Some("app"), "web-0"), "pods/app/web-0");
        assert_eq!(
            item_name("persistentvolumes", None, "pv-1"),
            "persistentvolumes/pv-1"
        );
    }
}
