//! Which items a backup takes: namespaces, resources, a label selector, cluster resources.
//!
//! Invariants (Velero's semantics):
//! - an empty include list means "all", `*` in it means "all" too; an exclude wins over an
//!   include;
//! - a resource is named by its qualified resource name (`deployments.apps`), its plural
//!   (`deployments`), its kind (`Deployment`, any case) or kind and group
//!   (`deployment.apps`), all compared case-insensitively;
//! - under a namespace filter a cluster-scoped item is taken only when a taken item relates
//!   to it (the PV of a taken PVC, the Namespace of a taken item, the CRD of a taken custom
//!   resource), unless [`Filters::include_cluster_resources`] says otherwise.

use crate::names::KindInfo;
use lockgate_core::selector::Selector;
use std::collections::BTreeMap;

/// The filters of one backup. The default takes everything.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// Namespaces to take; empty (the default) or `*` takes all.
    pub include_namespaces: Vec<String>,
    /// Namespaces to leave out; wins over `include_namespaces`. Default none.
    pub exclude_namespaces: Vec<String>,
    /// Resources to take (`pods`, `deployments.apps`, `Deployment`); empty (the default) or
    /// `*` takes all.
    pub include_resources: Vec<String>,
    /// Resources to leave out; wins over `include_resources`. Default none.
    pub exclude_resources: Vec<String>,
    /// Only items whose labels match (default: no selector, every item). A cluster-scoped
    /// item that does not match is still taken when a taken item relates to it.
    pub label_selector: Option<Selector>,
    /// Cluster-scoped items: `None` (the default) takes all of them when there is no
    /// namespace filter and only the related ones under a namespace filter; `Some(true)`
    /// takes all of them; `Some(false)` takes none, not even related ones.
    pub include_cluster_resources: Option<bool>,
}

impl Filters {
    /// Whether a namespace filter is in force.
    pub fn namespace_filtered(&self) -> bool {
        !is_all(&self.include_namespaces) || !self.exclude_namespaces.is_empty()
    }

    /// Whether items of namespace `ns` are taken.
    pub fn namespace_ok(&self, ns: &str) -> bool {
        let included =
            is_all(&self.include_namespaces) || self.include_namespaces.iter().any(|n| n == ns);
        included && !self.exclude_namespaces.iter().any(|n| n == ns)
    }

    /// Whether items of this kind are taken.
    pub fn resource_ok(&self, info: &KindInfo) -> bool {
        let included = is_all(&self.include_resources)
            || self.include_resources.iter().any(|p| names_kind(p, info));
        included && !self.exclude_resources.iter().any(|p| names_kind(p, info))
    }

    /// Whether labels pass the label selector.
    pub fn labels_ok(&self, labels: &BTreeMap<String, String>) -> bool {
        self.label_selector
            .as_ref()
            .is_none_or(|s| s.matches_map(labels))
    }

    /// Whether a cluster-scoped item is taken on its own (not only as a related item).
    pub fn cluster_direct(&self) -> bool {
        self.include_cluster_resources
            .unwrap_or(!self.namespace_filtered())
    }

    /// Whether a cluster-scoped item may be taken because a taken item relates to it.
    pub fn cluster_related(&self) -> bool {
        self.include_cluster_resources != Some(false)
    }
}

fn is_all(list: &[String]) -> bool {
    list.is_empty() || list.iter().any(|n| n == "*")
}

/// Whether a user's resource name `pattern` names the kind `info`.
fn names_kind(pattern: &str, info: &KindInfo) -> bool {
    let p = pattern.trim().to_ascii_lowercase();
    let kind = info.kind.to_ascii_lowercase();
    let plural = info.resource.split('.').next().unwrap_or(&info.resource);
    p == "*"
        || p == info.resource
        || p == plural
        || p == kind
        || (!info.group.is_empty() && p == format!("{kind}.{}", info.group))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::KindTable;
    use rstest::rstest;

    fn filters(include: &[&str], exclude: &[&str]) -> Filters {
        Filters {
            include_resources: include.iter().map(|s| s.to_string()).collect(),
            exclude_resources: exclude.iter().map(|s| s.to_string()).collect(),
            ..Filters::default()
        }
    }

    #[rstest]
    #[case(&["pods"], &[], "", "Pod", true)]
    #[case(&["Pod"], &[], "", "Pod", true)]
    #[case(&["POD"], &[], "", "Pod", true)]
    #[case(&["deployments.apps"], &[], "apps", "Deployment", true)]
    #[case(&["deployments"], &[], "apps", "Deployment", true)]
    #[case(&["deployment.apps"], &[], "apps", "Deployment", true)]
    #[case(&["pods"], &[], "apps", "Deployment", false)]
    #[case(&[], &["secrets"], "", "Secret", false)]
    #[case(&["*"], &["Secret"], "", "Secret", false)]
    #[case(&["*"], &["secrets"], "", "ConfigMap", true)]
    fn resources_match_by_any_name(
        #[case] inc: &[&str],
        #[case] exc: &[&str],
        #[case] group: &str,
        #[case] kind: &str,
        #[case] ok: bool,
    ) {
        let info = KindTable::default().resolve(group, kind);
        assert_eq!(filters(inc, exc).resource_ok(&info), ok);
    }

    #[test]
    fn exclude_namespace_wins() {
        let f = Filters {
            include_namespaces: vec!["*".into()],
            exclude_namespaces: vec!["kube-system".into()],
            ..Filters::default()
        };
        assert!(f.namespace_filtered());
        assert!(f.namespace_ok("app"));
        assert!(!f.namespace_ok("kube-system"));
        assert!(!f.cluster_direct());
        assert!(f.cluster_related());
    }
}
