//! Loading the examples of `examples/` at the repository root.

use lockgate_core::Policy;
use lockgate_sim::{NodeSpec, WorkloadJob};
use std::path::PathBuf;

/// Every example shipped in `examples/`.
pub const EXAMPLES: [&str; 3] = ["velero-like", "pbs-like", "mixed"];

pub struct Input {
    pub policy: Policy,
    pub nodes: Vec<NodeSpec>,
    pub jobs: Vec<WorkloadJob>,
}

pub fn example_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

pub fn example(name: &str) -> Input {
    let dir = example_dir(name);
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
    };
    Input {
        policy: Policy::from_toml(&read("policy.toml"), Some("policy.toml"))
            .unwrap_or_else(|e| panic!("{name}: {e}")),
        nodes: lockgate_sim::parse_nodes(&read("nodes.json"), "nodes.json").unwrap(),
        jobs: lockgate_sim::parse_workload(&read("workload.jsonl"), "workload.jsonl").unwrap(),
    }
}

pub fn input(policy: &str, nodes: &str, jobs: &str) -> Input {
    Input {
        policy: Policy::from_toml(policy, None).unwrap(),
        nodes: lockgate_sim::parse_nodes(nodes, "nodes.json").unwrap(),
        jobs: lockgate_sim::parse_workload(jobs, "workload.jsonl").unwrap(),
    }
}
