//! Generated PBS-shaped workloads: one Proxmox Backup Server night, from a seed.
//!
//! The shape the PBS scheduler RFC describes: hosts back up their VMs to datastores of
//! unequal load (a few datastores hold most groups), at most two backups per host, a few
//! per datastore and a global cap; a prune per group conflicts with that group's backup
//! (`[[conflict]] keys = ["datastore", "group"]`); every datastore is verified once, and
//! the `verify` kind is limited to 1, so the verify chain can be the bottleneck.
//!
//! The generator is deterministic (a xorshift stream from the seed): the same seed gives
//! the same policy, nodes and jobs. Every job's `run_s` is known, as
//! `[queue] order = "window"` needs; [`PbsShape::policy_toml`] leaves the order to the caller.

use crate::input::{NodeSpec, WorkloadJob};
use std::collections::BTreeMap;

/// One generated night.
#[derive(Debug, Clone)]
pub struct PbsShape {
    /// The policy, without `[queue] order` (append it).
    pub policy_toml: String,
    /// The hosts.
    pub nodes: Vec<NodeSpec>,
    /// Backups, prunes and verifies, by arrival.
    pub jobs: Vec<WorkloadJob>,
}

/// A small deterministic stream (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[lo, hi)`, rounded to 0.1.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((lo + u * (hi - lo)) * 10.0).round() / 10.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn job(at: f64, kind: &str, attrs: &[(&str, String)], run_s: f64) -> WorkloadJob {
    WorkloadJob {
        at,
        kind: kind.to_string(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        owner: None,
        priority: None,
        node: None,
        node_selector: None,
        two_stage: None,
        prepare_s: None,
        run_s,
        cost: None,
        size_mb: None,
    }
}

/// Generates one night from `seed`: 12 hosts, 6 datastores whose shares of the VMs fall
/// as 6:4:3:2:2:1, 120 VMs (incremental backups of 1 to 7 minutes, one in seven a full
/// one of 7 to 20), arriving over two minutes; 15 prunes; one verify of 5 to 15 minutes per
/// datastore, 10 minutes in.
pub fn generate(seed: u64) -> PbsShape {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let hosts: Vec<String> = (1..=12).map(|i| format!("pve-{i:02}")).collect();
    let shares = [6, 4, 3, 2, 2, 1];
    let datastores: Vec<String> = (1..=shares.len()).map(|i| format!("ds-{i}")).collect();
    let weighted: Vec<&String> = datastores
        .iter()
        .zip(shares)
        .flat_map(|(d, n)| std::iter::repeat_n(d, n))
        .collect();
    let mut jobs = Vec::new();
    let mut groups = Vec::new();
    for vm in 0..120 {
        let host = &hosts[vm % hosts.len()];
        let ds = weighted[rng.below(weighted.len())].clone();
        let group = format!("vm/{}", 100 + vm);
        let run = if rng.below(7) == 0 {
            rng.uniform(420.0, 1200.0)
        } else {
            rng.uniform(60.0, 420.0)
        };
        let mut j = job(
            rng.uniform(0.0, 120.0),
            "backup",
            &[("datastore", ds.clone()), ("group", group.clone())],
            run,
        );
        j.node = Some(host.clone());
        j.owner = Some(format!("host-{host}"));
        jobs.push(j);
        groups.push((ds, group));
    }
    for _ in 0..15 {
        let (ds, group) = groups[rng.below(groups.len())].clone();
        let run = rng.uniform(5.0, 30.0);
        jobs.push(job(
            130.0,
            "prune",
            &[("datastore", ds), ("group", group)],
            run,
        ));
    }
    for ds in &datastores {
        let run = rng.uniform(300.0, 900.0);
        jobs.push(job(600.0, "verify", &[("datastore", ds.clone())], run));
    }
    jobs.sort_by(|a, b| a.at.total_cmp(&b.at));
    PbsShape {
        policy_toml: POLICY.to_string(),
        nodes: hosts
            .iter()
            .map(|h| NodeSpec {
                name: h.clone(),
                labels: BTreeMap::from([("role".to_string(), "pve".to_string())]),
            })
            .collect(),
        jobs,
    }
}

/// The generated nights' policy (no `[queue] order`).
const POLICY: &str = r#"[global]
max_running = 10

[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 3

[[limit]]
name = "per-kind"
per = ["kind"]
values = { verify = 1, prune = 1 }

[[conflict]]
keys = ["datastore", "group"]

[nodes]
max_running = 2
"#;
