//! The overview's scope gauges: the engine's own counts, with the two-stage share apart.
//!
//! # Invariants
//! - `used` and `limit` are the server's numbers, exactly: the `lockgate_scope_running` and
//!   `lockgate_scope_limit` series of `GET /metrics` (the same ones the demo's view reads),
//!   so a gauge never disagrees with the engine, whatever the policy does with windows or
//!   lowered limits.
//! - `preparing` and `prepared` split those units by the holder's stage. The API does not
//!   count them per scope, so they are recomputed here with [`Policy::scopes_of`], the one
//!   pure answer to "which scopes does this job take" that the engine itself uses, over the
//!   active policy and the jobs in `preparing`/`prepared`. Node scopes come from each
//!   node's own counts. The split is clamped to `used`, so a policy applied a moment
//!   before the jobs were read can shift units between the parts but never invent any.
//! - Node scopes (`node:`, `node-prepare:`) are left out of the list: the nodes panel shows
//!   the same numbers beside each node's rule.

use lockgate_api::{JobView, NodeView, SubmitRequest};
use lockgate_core::{JobState, Policy};
use std::collections::BTreeMap;

/// One scope's gauge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRow {
    /// Scope name (policy.md, "Scope names").
    pub scope: String,
    /// Units in use (jobs admitted to prepare or later, or their pool amounts).
    pub used: u64,
    /// The limit now; `None` when unlimited.
    pub limit: Option<u64>,
    /// Units held by jobs in `preparing`.
    pub preparing: u64,
    /// Units held by jobs in `prepared`.
    pub prepared: u64,
    /// A shared conflict's key: how it is held (`free`, `shared`, `exclusive`); it has no
    /// limit, shared holders hold it together.
    pub held_as: Option<String>,
}

impl ScopeRow {
    /// Units held by jobs that are running (the rest of `used`).
    pub fn running(&self) -> u64 {
        self.used.saturating_sub(self.preparing + self.prepared)
    }

    /// More in use than the limit allows (a lowered limit drains).
    pub fn over_limit(&self) -> bool {
        self.limit.is_some_and(|l| self.used > l)
    }
}

/// What `GET /metrics` says about scopes, and the last event's sequence number.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// `(scope, used)` in the order the server lists them.
    pub used: Vec<(String, u64)>,
    /// Limits by scope (absent: unlimited).
    pub limits: BTreeMap<String, u64>,
    /// How each shared conflict's key is held (`lockgate_scope_held_as` at 1).
    pub held_as: BTreeMap<String, String>,
    /// `lockgate_event_seq`.
    pub event_seq: Option<u64>,
}

/// Reads the scope series and the event sequence out of the Prometheus text.
pub fn parse_metrics(text: &str) -> Metrics {
    let mut m = Metrics::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(v) = line.strip_prefix("lockgate_event_seq ") {
            m.event_seq = v.trim().parse::<f64>().ok().map(|v| v as u64);
            continue;
        }
        let Some((name, rest)) = line.split_once("{scope=\"") else {
            continue;
        };
        if name == "lockgate_scope_held_as" {
            if let Some((scope, mode)) = held_as(rest) {
                m.held_as.insert(scope, mode);
            }
            continue;
        }
        let Some((scope, value)) = rest.rsplit_once("\"} ") else {
            continue;
        };
        let Ok(v) = value.trim().parse::<u64>() else {
            continue;
        };
        let scope = scope.replace("\\\"", "\"").replace("\\\\", "\\");
        match name {
            "lockgate_scope_running" => m.used.push((scope, v)),
            "lockgate_scope_limit" => {
                m.limits.insert(scope, v);
            }
            _ => {}
        }
    }
    m
}

/// `<scope>",mode="<mode>"} 1` (the rest of a `lockgate_scope_held_as` line): the scope and
/// the mode it is held in; `None` for a mode at 0.
fn held_as(rest: &str) -> Option<(String, String)> {
    let (labels, value) = rest.rsplit_once("\"} ")?;
    if value.trim() != "1" {
        return None;
    }
    let (scope, mode) = labels.rsplit_once("\",mode=\"")?;
    let scope = scope.replace("\\\"", "\"").replace("\\\\", "\\");
    Some((scope, mode.to_string()))
}

/// The job as the policy sees it (defaults already applied by the server), or `None` when
/// the active policy no longer accepts it (a pool removed since): it then adds to no part.
fn core_job(policy: &Policy, j: &JobView) -> Option<lockgate_core::job::Job> {
    let req = SubmitRequest {
        kind: j.kind.clone(),
        attrs: j.attrs.clone(),
        node: j.node.clone().filter(|_| j.pinned),
        node_selector: j.node_selector.clone().filter(|_| !j.pinned),
        executor: Some(j.executor),
        cost: Some(j.cost.clone()),
        two_stage: Some(j.two_stage),
        priority: Some(j.priority),
        ..SubmitRequest::default()
    };
    let spec = req.into_spec(j.owner.clone()).ok()?;
    Some(spec.check(policy).ok()?.job().clone())
}

/// Units per scope held by jobs in `preparing` and in `prepared`: `(preparing, prepared)`.
fn stage_units(
    policy: Option<&Policy>,
    jobs: &[JobView],
    nodes: &[NodeView],
) -> BTreeMap<String, (u64, u64)> {
    let mut parts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut add = |scope: String, stage: JobState, n: u64| {
        let e = parts.entry(scope).or_default();
        match stage {
            JobState::Preparing => e.0 += n,
            _ => e.1 += n,
        }
    };
    for j in jobs {
        if !matches!(j.state, JobState::Preparing | JobState::Prepared) {
            continue;
        }
        let Some(job) = policy.and_then(|p| core_job(p, j).map(|job| (p, job))) else {
            continue;
        };
        let (policy, job) = job;
        let scopes = policy.scopes_of(&job);
        for u in scopes.common.iter().filter(|u| u.take > 0) {
            add(u.key.to_string(), j.state, u.take);
        }
        if let Some(key) = scopes.prepare {
            add(key.to_string(), j.state, 1);
        }
        if let Some(node) = &j.node {
            for (pool, amount) in &scopes.node_cost {
                add(format!("pool:{pool}@{node}"), j.state, *amount);
            }
        }
    }
    for n in nodes {
        let e = parts.entry(format!("node-prepare:{}", n.name)).or_default();
        *e = (u64::from(n.preparing), u64::from(n.prepared));
    }
    parts
}

/// Whether a scope belongs to the nodes panel rather than the scope list.
fn is_node_scope(scope: &str) -> bool {
    scope.starts_with("node:") || scope.starts_with("node-prepare:")
}

/// The gauges: every scope the server lists (apart from node scopes), with its stage split.
pub fn rows(
    metrics: &Metrics,
    policy: Option<&Policy>,
    jobs: &[JobView],
    nodes: &[NodeView],
) -> Vec<ScopeRow> {
    let parts = stage_units(policy, jobs, nodes);
    metrics
        .used
        .iter()
        .filter(|(scope, _)| !is_node_scope(scope))
        .map(|(scope, used)| {
            let (preparing, prepared) = parts.get(scope).copied().unwrap_or_default();
            let preparing = preparing.min(*used);
            ScopeRow {
                scope: scope.clone(),
                used: *used,
                limit: metrics.limits.get(scope).copied(),
                preparing,
                prepared: prepared.min(used - preparing),
                held_as: metrics.held_as.get(scope).cloned(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP lockgate_scope_running Units in use per scope.
# TYPE lockgate_scope_running gauge
lockgate_scope_running{scope="global"} 3
lockgate_scope_running{scope="limit:repo[repo=main]"} 2
lockgate_scope_running{scope="node:pve1"} 1
lockgate_scope_running{scope="conflict:a=\"x\""} 1
lockgate_scope_limit{scope="global"} 4
lockgate_scope_limit{scope="limit:repo[repo=main]"} 1
lockgate_scope_peak{scope="global"} 4
lockgate_scope_held_as{scope="conflict:a=\"x\"",mode="free"} 0
lockgate_scope_held_as{scope="conflict:a=\"x\"",mode="shared"} 1
lockgate_scope_held_as{scope="conflict:a=\"x\"",mode="exclusive"} 0
lockgate_event_seq 41
"#;

    #[test]
    fn metrics_give_used_limits_and_the_event_sequence() {
        let m = parse_metrics(TEXT);
        assert_eq!(
            m.used,
            [
                ("global".to_string(), 3),
                ("limit:repo[repo=main]".to_string(), 2),
                ("node:pve1".to_string(), 1),
                ("conflict:a=\"x\"".to_string(), 1),
            ]
        );
        assert_eq!(m.limits.get("global"), Some(&4));
        assert_eq!(m.event_seq, Some(41));
        assert_eq!(
            m.held_as.into_iter().collect::<Vec<_>>(),
            [("conflict:a=\"x\"".to_string(), "shared".to_string())]
        );
    }

    fn job(id: u64, state: JobState, repo: &str) -> JobView {
        let mut j = crate::cmd::testdata::jobs()[0].clone();
        j.id = id;
        j.state = state;
        j.kind = "backup".into();
        j.attrs = [("repo".to_string(), repo.to_string())].into();
        j.two_stage = true;
        j.pinned = false;
        j.node = None;
        j.node_selector = None;
        j.cost.clear();
        j
    }

    #[test]
    fn the_two_stage_share_is_split_out_with_the_engines_own_scopes() {
        let policy = Policy::from_toml(
            "[global]\nmax_running = 4\n[[limit]]\nname = \"repo\"\nper = [\"repo\"]\nmax = 1\n",
            None,
        )
        .unwrap();
        let jobs = [
            job(1, JobState::Preparing, "main"),
            job(2, JobState::Prepared, "main"),
            job(3, JobState::Running, "main"),
            job(4, JobState::Prepared, "other"),
        ];
        let rows = rows(&parse_metrics(TEXT), Some(&policy), &jobs, &[]);
        let names: Vec<&str> = rows.iter().map(|r| r.scope.as_str()).collect();
        assert_eq!(
            names,
            ["global", "limit:repo[repo=main]", "conflict:a=\"x\""]
        );
        let global = &rows[0];
        assert_eq!(
            (global.preparing, global.prepared, global.running()),
            (1, 2, 0)
        );
        assert!(!global.over_limit());
        let main = &rows[1];
        // Two units in use, one preparing and one prepared: nothing left running, and the
        // limit of 1 is passed (the policy was lowered under them).
        assert_eq!((main.used, main.limit), (2, Some(1)));
        assert_eq!((main.preparing, main.prepared, main.running()), (1, 1, 0));
        assert!(main.over_limit());
        assert_eq!(rows[2].limit, None);
    }
}
