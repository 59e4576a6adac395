//! What `lockgate demo` sets up: the policy, the three nodes and their agents' handlers,
//! the files the handlers work on, and the workload.
//!
//! The story it tells (Velero's data movers, issues 6734 and 8344, and the loadConcurrency
//! design): three nodes with per-node numbers from label rules, where `node-c` is matched
//! by two rules and gets the smaller number, 0, so it runs nothing and its pinned jobs wait
//! and say why, until the demo raises that rule with a policy change that takes effect
//! without a restart; movable two-stage uploads spread over the free nodes, and at most
//! `max_running + prepare_queue` of them are exposed per node at once; datastore limits and
//! a group conflict hold the rest.

use lockgate_api::SubmitRequest;
use lockgate_core::policy::Executor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The policy the demo starts with.
pub const POLICY: &str = r#"# lockgate demo policy
[global]
max_running = 5                  # at most 5 jobs hold slots at once

[leases]
ttl = "3s"

[nodes]
max_running = 2                  # every node, unless a rule says otherwise
prepare_queue = 1                # one upload may be exposed beyond the run slots
ttl = "3s"

[[nodes.rule]]
selector = "disk=ssd"
max_running = 3
[[nodes.rule]]
selector = "role=database"
max_running = 0                  # no data movement on the database node (for now)

[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 2
values = { ds-fast = 3 }

[[conflict]]
keys = ["datastore", "group"]    # one job per (datastore, group) at a time

[kinds.data-upload]
two_stage = true
"#;

/// The rule change the demo applies halfway: the database node may run one job.
pub fn policy_after() -> String {
    POLICY.replace(
        "max_running = 0                  # no data movement on the database node (for now)",
        "max_running = 1                  # the database node may run one job now",
    )
}

/// One demo node.
pub struct NodeSpec {
    /// Name.
    pub name: &'static str,
    /// Labels.
    pub labels: &'static [(&'static str, &'static str)],
}

/// The three nodes: `node-a` gets 3 (`disk=ssd`), `node-b` the default 2, `node-c` 0
/// (matched by `disk=ssd` and `role=database`: the smaller number wins).
pub const NODES: [NodeSpec; 3] = [
    NodeSpec {
        name: "node-a",
        labels: &[("disk", "ssd"), ("zone", "eu-1")],
    },
    NodeSpec {
        name: "node-b",
        labels: &[("disk", "hdd"), ("zone", "eu-2")],
    },
    NodeSpec {
        name: "node-c",
        labels: &[("disk", "ssd"), ("zone", "eu-1"), ("role", "database")],
    },
];

/// Where everything lives in the demo's temporary directory.
pub struct Paths {
    /// The temporary directory.
    pub root: PathBuf,
    /// The handlers' own start/end records.
    pub record: PathBuf,
}

impl Paths {
    /// Paths under `root`.
    pub fn new(root: &Path) -> Paths {
        Paths {
            root: root.to_path_buf(),
            record: root.join("records.txt"),
        }
    }

    /// A file or directory under the root.
    pub fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// Writes the policy, the source volumes and the directories the handlers use.
///
/// # Errors
/// I/O errors.
pub fn write_files(p: &Paths) -> std::io::Result<()> {
    for d in ["data", "volumes", "snapshots", "repo"] {
        std::fs::create_dir_all(p.at(d))?;
    }
    std::fs::write(p.at("policy.toml"), POLICY)?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..VOLUMES {
        let data: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(p.at(&format!("volumes/vol-{i:02}.img")), data)?;
    }
    Ok(())
}

/// Source volumes written.
const VOLUMES: usize = 24;

/// The agent configuration: the same handlers on every node. `exe` is the lockgate binary
/// (the handlers are `lockgate __demo-task`).
pub fn agent_toml(exe: &Path, p: &Paths) -> String {
    let exe = toml_str(&exe.display().to_string());
    let rec = toml_str(&p.record.display().to_string());
    format!(
        r#"[agent]
grace = "1s"
output_lines = 5

# expose: copy the volume to a snapshot; upload: checksum the snapshot into the repository
[handlers.data-upload]
prepare = [{exe}, "__demo-task", "--ms", "{{attr.prepare_ms}}", "--copy", "{{attr.volume}}", "{{attr.snapshot}}", "--record", {rec}, "--label", "{{job.kind}}@{{node}}"]
run = [{exe}, "__demo-task", "--ms", "{{attr.ms}}", "--checksum", "{{attr.snapshot}}", "{{attr.target}}", "--record", {rec}, "--label", "{{job.kind}}@{{node}}"]

# verify: checksum a volume
[handlers.verify]
run = [{exe}, "__demo-task", "--ms", "{{attr.ms}}", "--checksum", "{{attr.volume}}", "{{attr.target}}", "--record", {rec}, "--label", "{{job.kind}}@{{node}}"]

# file-system backup of the database node: copy a volume into the repository
[handlers.fs-backup]
run = [{exe}, "__demo-task", "--ms", "{{attr.ms}}", "--copy", "{{attr.volume}}", "{{attr.target}}", "--record", {rec}, "--label", "{{job.kind}}@{{node}}"]
"#
    )
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// One job of the workload: when to submit it (seconds from the start) and what.
pub struct Planned {
    /// Submit time, seconds from the start.
    pub at: f64,
    /// The request.
    pub req: SubmitRequest,
}

/// The mixed workload: 24 two-stage uploads (movable) over two datastores, 8 verifies
/// (movable, two pairs in the same group: a conflict), 4 file-system backups pinned to
/// `node-c`; submitted in three waves.
pub fn workload(p: &Paths) -> Vec<Planned> {
    let mut out = uploads(p);
    out.extend(verifies(p));
    out.extend(fs_backups(p));
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// 24 two-stage data uploads over `ds-fast` and `ds-slow`, 14 at once and 10 at 1.5 s.
fn uploads(p: &Paths) -> Vec<Planned> {
    let path = |rel: String| p.at(&rel).display().to_string();
    let mut out = Vec::new();
    for i in 0..24usize {
        let ds = if i % 3 == 2 { "ds-slow" } else { "ds-fast" };
        let attrs = BTreeMap::from([
            ("datastore".to_string(), ds.to_string()),
            ("group".to_string(), format!("pvc-{i:02}")),
            (
                "volume".to_string(),
                path(format!("volumes/vol-{i:02}.img")),
            ),
            (
                "snapshot".to_string(),
                path(format!("snapshots/vol-{i:02}.snap")),
            ),
            ("target".to_string(), path(format!("repo/vol-{i:02}.sum"))),
            ("prepare_ms".to_string(), "250".to_string()),
            ("ms".to_string(), (500 + 100 * (i % 5)).to_string()),
        ]);
        out.push(Planned {
            at: if i < 14 { 0.0 } else { 1.5 },
            req: SubmitRequest {
                kind: "data-upload".into(),
                attrs,
                node_selector: Some(String::new()),
                executor: Some(Executor::Agent),
                two_stage: Some(true),
                idempotency_key: Some(format!("demo-upload-{i}")),
                ..SubmitRequest::default()
            },
        });
    }
    out
}

/// 8 verifies on `ds-slow`, two per VM group (pairs conflict), 4 at once and 4 at 3 s.
fn verifies(p: &Paths) -> Vec<Planned> {
    let path = |rel: String| p.at(&rel).display().to_string();
    let mut out = Vec::new();
    for i in 0..8usize {
        let attrs = BTreeMap::from([
            ("datastore".to_string(), "ds-slow".to_string()),
            ("group".to_string(), format!("vm/{}", 100 + i / 2)),
            (
                "volume".to_string(),
                path(format!("volumes/vol-{i:02}.img")),
            ),
            ("target".to_string(), path(format!("repo/verify-{i}.sum"))),
            ("ms".to_string(), "400".to_string()),
        ]);
        out.push(Planned {
            at: if i < 4 { 0.0 } else { 3.0 },
            req: SubmitRequest {
                kind: "verify".into(),
                attrs,
                node_selector: Some(String::new()),
                executor: Some(Executor::Agent),
                idempotency_key: Some(format!("demo-verify-{i}")),
                ..SubmitRequest::default()
            },
        });
    }
    out
}

/// 4 file-system backups pinned to `node-c`, all at once.
fn fs_backups(p: &Paths) -> Vec<Planned> {
    let path = |rel: String| p.at(&rel).display().to_string();
    let mut out = Vec::new();
    for i in 0..4usize {
        let attrs = BTreeMap::from([
            ("datastore".to_string(), "ds-fast".to_string()),
            ("group".to_string(), format!("db-{i}")),
            (
                "volume".to_string(),
                path(format!("volumes/vol-{:02}.img", 20 + i)),
            ),
            ("target".to_string(), path(format!("repo/db-{i}.img"))),
            ("ms".to_string(), "300".to_string()),
        ]);
        out.push(Planned {
            at: 0.0,
            req: SubmitRequest {
                kind: "fs-backup".into(),
                attrs,
                node: Some("node-c".into()),
                executor: Some(Executor::Agent),
                idempotency_key: Some(format!("demo-fs-backup-{i}")),
                ..SubmitRequest::default()
            },
        });
    }
    out
}

/// When the demo applies [`policy_after`], seconds from the start.
pub const POLICY_CHANGE_AT: f64 = 2.5;
