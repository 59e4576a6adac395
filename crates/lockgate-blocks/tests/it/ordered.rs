//! Ordered resources: their blocks run first, one at a time, in the listed order.

use crate::fixtures::*;
use lockgate_blocks::{BackupConfig, ItemRef, NoopMover, Phase, PlanOptions};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

fn ts(v: &Value) -> jiff::Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn ordered_blocks_run_first_one_at_a_time_in_listed_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut items: Vec<Value> = (0..8).map(|i| pod("app", &format!("p{i}"), &[])).collect();
    items.push(pvc("app", "data", Some("pv-data")));
    items.push(pv("pv-data", "app", "data"));
    let ordered = names(&[
        "pods/app/p5",
        "persistentvolumeclaims/app/data",
        "pods/app/p1",
        "pods/app/p5",
    ]);
    let opts = PlanOptions {
        ordered,
        ..PlanOptions::default()
    };
    let plan = load(dir.path(), &items, &opts);
    assert_eq!(plan.ordered_block_count(), 3);
    let dry: Value = serde_json::from_str(&plan.blocks_json()).unwrap();
    assert_eq!(dry[0]["items"][0], "pods/app/p5");
    assert_eq!(
        dry[1]["items"],
        serde_json::json!([
            "persistentvolumeclaims/app/data",
            "persistentvolumes/pv-data"
        ])
    );
    assert_eq!(dry[2]["items"][0], "pods/app/p1");

    let out = dir.path().join("ordered.tar.gz");
    let mut config = BackupConfig::new("ordered", &out, Arc::new(NoopMover));
    config.item_action = Some(Arc::new(|_: &ItemRef<'_>, _: &mut Value| {
        std::thread::sleep(Duration::from_millis(30));
        Ok(())
    }));
    let result = lockgate_blocks::run_to_completion(plan, config, 4).unwrap();
    assert_eq!(result.phase, Phase::Completed);
    let files = read_archive(&out);
    let runs = archive_json(&files, "metadata/blocks.json");
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 9);
    let firsts: Vec<&str> = runs[..3]
        .iter()
        .map(|b| b["items"][0].as_str().unwrap())
        .collect();
    assert_eq!(
        firsts,
        [
            "pods/app/p5",
            "persistentvolumeclaims/app/data",
            "pods/app/p1"
        ]
    );
    for w in runs[..3].windows(2) {
        assert!(
            ts(&w[0]["finished_at"]) <= ts(&w[1]["started_at"]),
            "{w:#?}"
        );
    }
    let last_ordered_end = ts(&runs[2]["finished_at"]);
    for b in &runs[3..] {
        assert!(
            ts(&b["started_at"]) >= last_ordered_end,
            "{b:#?} started before the ordered blocks ended"
        );
    }
    let parallel_starts: Vec<jiff::Timestamp> =
        runs[3..].iter().map(|b| ts(&b["started_at"])).collect();
    let spread = parallel_starts
        .iter()
        .max()
        .unwrap()
        .duration_since(*parallel_starts.iter().min().unwrap());
    assert!(
        spread < jiff::SignedDuration::from_millis(6 * 30),
        "the unordered blocks ran in parallel: {spread:?}"
    );
}
