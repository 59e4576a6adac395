//! Same input, same output, byte for byte.

use crate::common::*;
use lockgate_sim::Baseline;

#[test]
fn same_input_twice_gives_identical_json() {
    for name in EXAMPLES {
        let i = example(name);
        let runs: Vec<String> = (0..2)
            .map(|_| {
                let report =
                    lockgate_sim::run(&i.policy, &i.nodes, &i.jobs, &[Baseline::Velero]).unwrap();
                serde_json::to_string(&report).unwrap()
            })
            .collect();
        assert_eq!(runs[0], runs[1], "{name}: two runs differ");
    }
}

#[test]
fn json_starts_with_the_contract_keys() {
    let i = example("velero-like");
    let report = lockgate_sim::run(&i.policy, &i.nodes, &i.jobs, &[Baseline::Velero]).unwrap();
    let text = serde_json::to_string(&report).unwrap();
    assert!(text.starts_with("{\"jobs\":100,\"makespan_s\":"), "{text}");
    // Keys in the order of the contract (first occurrences are the top-level ones).
    let order = [
        "jobs",
        "makespan_s",
        "wait_s",
        "p50",
        "p95",
        "max",
        "scopes",
        "scope",
        "limit",
        "peak",
        "nodes",
        "unfinished",
        "lower_bound_s",
        "lower_bound_by",
        "compare",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|k| {
            text.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "key order {order:?} at {at:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["jobs"], 100);
    assert!(v["compare"]["velero"]["makespan_s"].is_number());
    // Without --compare there is no "compare" key at all.
    let plain = lockgate_sim::run(&i.policy, &i.nodes, &i.jobs, &[]).unwrap();
    assert!(serde_json::to_value(&plain)
        .unwrap()
        .get("compare")
        .is_none());
}
