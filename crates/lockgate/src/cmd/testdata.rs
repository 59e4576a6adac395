//! Fixed views for the snapshot tests of what the CLI prints: no server, no clock.

use lockgate_api::{ExplainView, JobView, NodeView, ReasonView};
use serde_json::json;

fn job(id: u64, state: &str, extra: serde_json::Value) -> JobView {
    let mut v = json!({
        "id": id, "kind": "backup", "attrs": {}, "owner": "admin", "priority": 0,
        "executor": "client", "state": state, "node": null, "attempt": 1, "lease": null,
        "cancel_requested": false, "submitted_at": "2026-03-27T22:17:41.250Z",
        "prepare_started_at": null, "started_at": null, "finished_at": null,
        "outcome": null, "message": null
    });
    for (k, x) in extra.as_object().expect("an object") {
        v[k] = x.clone();
    }
    serde_json::from_value(v).expect("a job view")
}

/// Jobs in several states, with and without attributes, node and message.
pub fn jobs() -> Vec<JobView> {
    vec![
        job(
            1,
            "running",
            json!({"attrs": {"datastore": "ds1", "group": "vm/100"}, "node": "pve1",
                   "queued_at": "2026-03-27T22:17:41.250Z",
                   "started_at": "2026-03-27T22:18:03Z"}),
        ),
        job(
            2,
            "queued",
            json!({"kind": "verify", "owner": "ci", "priority": -1,
                   "attrs": {"datastore": "ds1"}}),
        ),
        job(
            3,
            "cancelled",
            json!({"kind": "prune", "priority": 10, "node": "pve2",
                   "started_at": "2026-03-27T22:20:11.5Z",
                   "finished_at": "2026-03-27T22:21:00Z",
                   "message": "cancel requested; command exited with signal 15"}),
        ),
        job(
            4,
            "failed",
            json!({"owner": "schedule:nightly", "executor": "agent", "two_stage": true,
                   "prepare_started_at": "2026-03-27T22:17:42Z",
                   "prepared_at": "2026-03-27T22:17:50.1Z",
                   "started_at": "2026-03-27T22:17:52Z",
                   "finished_at": "2026-03-27T23:00:00Z",
                   "attempt": 2, "queued_at": "2026-03-27T22:17:41.250Z",
                   "retry_at": "2026-03-27T23:30:00Z",
                   "message": "command exited with exit status 3"}),
        ),
    ]
}

/// Why job 4 waits: a full scope and a conflict.
pub fn explain() -> ExplainView {
    let reason =
        |scope: Option<&str>, kind: &str, count, limit, holders: Vec<u64>, text: &str| ReasonView {
            scope: scope.map(str::to_string),
            kind: kind.into(),
            count,
            limit,
            holders,
            text: text.into(),
        };
    ExplainView {
        position: 2,
        effective_priority: 5.5,
        reasons: vec![
            reason(
                Some("datastore:ds1"),
                "capacity",
                Some(2),
                Some(2),
                vec![1, 2],
                "datastore:ds1 is full (2/2: jobs 1, 2)",
            ),
            reason(
                None,
                "conflict",
                None,
                None,
                vec![3],
                "conflicts with job 3 (same group vm/100)",
            ),
        ],
        text: "queued, 2nd in line, effective priority 5.50 (priority 5, +0.50 for 5m waiting \
               at aging 10m); datastore:ds1 is full (2/2: jobs 1, 2); conflicts with job 3 \
               (same group vm/100)"
            .into(),
        estimate: None,
    }
}

/// A ready node with a rule, a cordoned one, a lost one without a number.
pub fn nodes() -> Vec<NodeView> {
    let node = |name: &str, state: &str, v: serde_json::Value| {
        let mut n = json!({
            "name": name, "labels": {}, "state": state, "cordoned": state == "cordoned",
            "number": null, "rule": null, "running": 0, "preparing": 0, "prepared": 0,
            "kinds": [], "resources": {}, "last_seen": "2026-03-27T22:17:41Z"
        });
        for (k, x) in v.as_object().expect("an object") {
            n[k] = x.clone();
        }
        serde_json::from_value::<NodeView>(n).expect("a node view")
    };
    vec![
        node(
            "pve1",
            "ready",
            json!({"labels": {"rack": "a", "zone": "west"}, "number": 2,
                   "rule": "zone=west", "running": 2, "prepared": 1,
                   "kinds": ["data-upload", "restic"], "last_seen": "2026-03-27T22:17:40.5Z"}),
        ),
        node(
            "pve2",
            "cordoned",
            json!({"number": 1, "running": 1, "preparing": 1, "kinds": ["backup"]}),
        ),
        node("pve3", "lost", json!({"labels": {"zone": "east"}})),
    ]
}
