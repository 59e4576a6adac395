//! The order of a restore's phases: resources with a priority first, in its order; then
//! every other resource by name; then the low-priority ones.
//!
//! The default is Velero's (`restoreResourcePriorities`, its server's default), with one
//! fix: Velero lists `volumesnapshotclass.snapshot.storage.k8s.io` in the singular, which
//! names no resource; here it is `volumesnapshotclasses`.
//!
//! # Invariants
//! - Every resource of the restore is in exactly one phase, whatever the priorities name.
//! - A priority without an API group (`storageclasses`) matches that plural in any group;
//!   one with a group (`replicasets.apps`) matches only that group's.

/// The default priorities, Velero's: the high ones, `-`, the low ones.
pub const DEFAULT_PRIORITIES: &[&str] = &[
    "customresourcedefinitions",
    "namespaces",
    "storageclasses",
    "volumesnapshotclasses.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
    "volumesnapshots.snapshot.storage.k8s.io",
    "datauploads.velero.io",
    "persistentvolumes",
    "persistentvolumeclaims",
    "clusterroles",
    "roles",
    "serviceaccounts",
    "clusterrolebindings",
    "rolebindings",
    "secrets",
    "configmaps",
    "limitranges",
    "priorityclasses",
    "pods",
    "replicasets.apps",
    "clusterclasses.cluster.x-k8s.io",
    "endpoints",
    "services",
    "-",
    "clusterbootstraps.run.tanzu.vmware.com",
    "clusters.cluster.x-k8s.io",
    "clusterresourcesets.addons.cluster.x-k8s.io",
    "apps.kappctrl.k14s.io",
    "packageinstalls.packaging.carvel.dev",
];

/// Restore priorities (`--restore-resource-priorities a,b,-,c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priorities {
    high: Vec<String>,
    low: Vec<String>,
}

impl Default for Priorities {
    fn default() -> Self {
        Priorities::from_list(DEFAULT_PRIORITIES.iter().copied())
    }
}

impl Priorities {
    /// Parses a comma-separated list: resources restored first, in order, then `-` and
    /// the resources restored last.
    ///
    /// # Errors
    /// An empty entry, a name that is not a lowercase resource name, or more than one `-`.
    pub fn parse(text: &str) -> Result<Priorities, String> {
        let entries: Vec<&str> = text.split(',').map(str::trim).collect();
        if entries.iter().filter(|e| **e == "-").count() > 1 {
            return Err("at most one '-' (it separates the high priorities from the low)".into());
        }
        for e in entries.iter().filter(|e| **e != "-") {
            if !crate::names::is_resource_name(e) {
                return Err(format!(
                    "{e:?} is not a resource name (lowercase plural, with its API group if any: \
                     pods, replicasets.apps)"
                ));
            }
        }
        Ok(Priorities::from_list(entries.into_iter()))
    }

    fn from_list<'a>(entries: impl Iterator<Item = &'a str>) -> Priorities {
        let mut p = Priorities {
            high: Vec::new(),
            low: Vec::new(),
        };
        let mut low = false;
        for e in entries {
            match e {
                "-" => low = true,
                _ if low => p.low.push(e.to_string()),
                _ => p.high.push(e.to_string()),
            }
        }
        p
    }

    /// `resources` in restore order.
    pub(super) fn sort(&self, mut rest: Vec<String>) -> Vec<String> {
        rest.sort();
        rest.dedup();
        let mut high = Vec::with_capacity(rest.len());
        for e in &self.high {
            high.extend(pick(e, &mut rest));
        }
        let mut low = Vec::new();
        for e in &self.low {
            low.extend(pick(e, &mut rest));
        }
        high.extend(rest);
        high.extend(low);
        high
    }
}

/// Takes the resources `entry` names out of `rest`: a core one before the same plural in
/// another group.
fn pick(entry: &str, rest: &mut Vec<String>) -> Vec<String> {
    let (mut hit, keep): (Vec<String>, Vec<String>) =
        rest.drain(..).partition(|r| matches(entry, r));
    *rest = keep;
    hit.sort_by(|a, b| (a.contains('.'), a).cmp(&(b.contains('.'), b)));
    hit
}

/// Whether a priority entry names `resource`.
fn matches(entry: &str, resource: &str) -> bool {
    entry == resource || (!entry.contains('.') && resource.split('.').next() == Some(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(p: &Priorities, r: &[&str]) -> Vec<String> {
        p.sort(r.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn velero_order_then_the_rest_by_name_then_the_low_ones() {
        let got = sorted(
            &Priorities::default(),
            &[
                "services",
                "deployments.apps",
                "pods",
                "clusters.cluster.x-k8s.io",
                "namespaces",
                "customresourcedefinitions.apiextensions.k8s.io",
                "configmaps",
                "storageclasses.storage.k8s.io",
                "persistentvolumeclaims",
                "persistentvolumes",
                "statefulsets.apps",
            ],
        );
        assert_eq!(
            got,
            [
                "customresourcedefinitions.apiextensions.k8s.io",
                "namespaces",
                "storageclasses.storage.k8s.io",
                "persistentvolumes",
                "persistentvolumeclaims",
                "configmaps",
                "pods",
                "services",
                "deployments.apps",
                "statefulsets.apps",
                "clusters.cluster.x-k8s.io",
            ]
        );
    }

    #[test]
    fn a_grouped_entry_names_only_its_group_and_a_plain_one_prefers_core() {
        let p = Priorities::parse("pods,replicasets.apps").unwrap();
        let got = sorted(
            &p,
            &["pods.metrics.k8s.io", "pods", "replicasets.extensions"],
        );
        assert_eq!(
            got,
            ["pods", "pods.metrics.k8s.io", "replicasets.extensions"]
        );
    }

    #[test]
    fn parse_refuses_what_names_no_resource() {
        assert!(Priorities::parse("pods,,secrets").is_err());
        assert!(Priorities::parse("Pods").is_err());
        assert!(Priorities::parse("a,-,b,-,c").is_err());
        let p = Priorities::parse("secrets,-,pods").unwrap();
        assert_eq!(
            sorted(&p, &["pods", "configmaps", "secrets"]),
            ["secrets", "configmaps", "pods"]
        );
    }
}
