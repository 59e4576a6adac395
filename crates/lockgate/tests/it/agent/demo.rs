//! `lockgate demo --json` runs to completion and prints the summary of `simulate -o json`.

use super::serial;
use crate::harness::BIN;
use std::process::Command;

#[test]
fn the_demo_runs_to_completion_within_its_limits() {
    let _serial = serial();
    let out = Command::new(BIN)
        .args(["demo", "--json"])
        .env_remove("LOCKGATE_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON only ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["jobs"], 36);
    assert_eq!(v["unfinished"], 0);
    assert!(v["makespan_s"].as_f64().unwrap() > 0.0);
    for k in ["p50", "p95", "max"] {
        assert!(v["wait_s"][k].is_number(), "wait_s.{k}");
    }
    let scopes = v["scopes"].as_array().unwrap();
    let names: Vec<&str> = scopes
        .iter()
        .map(|s| s["scope"].as_str().unwrap())
        .collect();
    for want in [
        "global",
        "node:node-a",
        "node:node-b",
        "node:node-c",
        "node-prepare:node-a",
        "limit:per-datastore[datastore=ds-fast]",
    ] {
        assert!(names.contains(&want), "no scope {want} in {names:?}");
    }
    // A per-value scope nothing holds at the end still has its limit in the summary (the
    // live view showed 3/3, the summary once showed 3/-).
    let ds = scopes
        .iter()
        .find(|s| s["scope"] == "limit:per-datastore[datastore=ds-fast]")
        .unwrap();
    assert!(ds["limit"].is_u64(), "{ds}");
    for s in scopes {
        let peak = s["peak"].as_u64().unwrap();
        assert!(peak > 0);
        if let Some(limit) = s["limit"].as_u64() {
            assert!(peak <= limit, "{s} exceeds its limit");
        }
    }
    assert_eq!(v["nodes"].as_array().unwrap().len(), 3);
    // The temporary directory is gone.
    let dir = stderr
        .split("temporary dir ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("the demo names its temporary dir");
    assert!(!std::path::Path::new(dir).exists(), "{dir} was left behind");
}
