//! `lockgate simulate --from-server`: the server's own history, replayed.
//!
//! The finished jobs of the period are read through `GET /v1/jobs` (newest first, 1000 a
//! page, stopping at the first job submitted before `--since`, and at `--max-jobs`), the
//! nodes through `GET /v1/nodes`, the active policy through `GET /v1/policy`. Each job
//! that ran becomes a workload job:
//!
//! - arrival: its submit time (for a job with `after`/`after_ok`, the time it was queued
//!   once its dependencies ended; a `not_before` later than that wins), in seconds from the
//!   earliest arrival of the period (time 0);
//! - `prepare_s`: `prepared_at - prepare_started_at`; `run_s`: `finished_at - started_at`
//!   (its last attempt: a retried or preempted job's earlier attempts are not replayed);
//! - kind, attrs, owner, the pinned node or the selector of a movable job; priority, cost
//!   and two-stage only where they differ from the active policy's kind defaults, so a
//!   candidate that changes a default is replayed with the candidate's.
//!
//! Jobs still active, and jobs that ended without ever running (cancelled or expired
//! while queued), are left out and counted. The recorded times themselves are the
//! `recorded` column: what really happened, summarised as the simulations are.
//!
//! # Invariants
//! - The workload and the records are in the same order (oldest first), one per job.
//! - Nothing is written to the server: only GETs, so a viewer token is enough.

use anyhow::Context as _;
use lockgate_api::{JobOrder, JobQuery, JobView};
use lockgate_client::Client;
use lockgate_core::{Policy, Timestamp};
use lockgate_sim::compare::{recorded_run, Column};
use lockgate_sim::{JobRecord, NodeSpec, Run, WorkloadJob};
use serde::Serialize;
use std::collections::BTreeMap;

/// Jobs per page.
const PAGE: u32 = 1000;

/// The history of a period, as a workload and as what really happened.
#[derive(Debug)]
pub struct History {
    /// Time 0: the earliest arrival (ms since the epoch).
    pub origin: Timestamp,
    /// One workload job per job that ran, oldest first.
    pub jobs: Vec<WorkloadJob>,
    /// The same jobs as they really ran (ms from `origin`).
    pub records: Vec<JobRecord>,
    /// The nodes the server knows and those the jobs name.
    pub nodes: Vec<NodeSpec>,
    /// What was left out.
    pub left_out: LeftOut,
}

/// Jobs of the period that are not replayed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LeftOut {
    /// Not ended yet.
    pub active: usize,
    /// Ended without running (cancelled or expired while queued).
    pub never_ran: usize,
    /// `--max-jobs` was reached: older jobs of the period were not read.
    pub truncated: bool,
}

/// The active policy, as the server holds it.
///
/// # Errors
/// The call fails, or the server's policy does not parse here (a newer server).
pub fn active_policy(client: &Client) -> anyhow::Result<Policy> {
    let view = client.policy().context("reading the active policy")?;
    let text = serde_json::to_string(&view.policy)?;
    Policy::from_json(&text)
        .map_err(|e| anyhow::anyhow!("the server's policy does not parse here: {e}"))
}

/// An RFC 3339 time of a job view, as ms since the epoch (`None` when absent).
fn ms(t: &Option<String>) -> Option<u64> {
    t.as_deref().and_then(at)
}

fn at(t: &str) -> Option<u64> {
    lockgate_api::time::parse(t).ok().map(|t| t.0)
}

/// Reads the history since `since` (ms since the epoch), at most `max_jobs` jobs.
///
/// # Errors
/// A failed call, or a job whose times do not parse.
pub fn fetch(
    client: &Client,
    policy: &Policy,
    since: u64,
    max_jobs: usize,
) -> anyhow::Result<History> {
    let (all, truncated) = recent(client, since, max_jobs)?;
    let mut views: Vec<JobView> = Vec::new();
    let mut left_out = LeftOut {
        truncated,
        ..LeftOut::default()
    };
    for j in all {
        match (j.is_final(), &j.started_at) {
            (false, _) => left_out.active += 1,
            (true, None) => left_out.never_ran += 1,
            (true, Some(_)) => views.push(j),
        }
    }
    views.reverse();
    let nodes = nodes(client, &views)?;
    Ok(to_workload(policy, views, nodes, left_out))
}

/// The jobs submitted since `since` (ms since the epoch), newest first, at most `max_jobs`
/// (true: more were left out).
///
/// # Errors
/// A failed call.
pub fn recent(
    client: &Client,
    since: u64,
    max_jobs: usize,
) -> anyhow::Result<(Vec<JobView>, bool)> {
    let mut views: Vec<JobView> = Vec::new();
    let mut before = None;
    loop {
        let q = JobQuery {
            order: Some(JobOrder::Desc),
            limit: Some(PAGE),
            before,
            ..JobQuery::default()
        };
        let page = client.jobs(&q).context("listing jobs")?;
        for j in page.jobs {
            if at(&j.submitted_at).unwrap_or(0) < since {
                return Ok((views, false));
            }
            if views.len() >= max_jobs {
                return Ok((views, true));
            }
            views.push(j);
        }
        match page.next {
            Some(n) => before = Some(n),
            None => return Ok((views, false)),
        }
    }
}

/// The server's nodes with their labels, and any node a job names that is gone now.
fn nodes(client: &Client, views: &[JobView]) -> anyhow::Result<Vec<NodeSpec>> {
    let mut by_name: BTreeMap<String, BTreeMap<String, String>> = client
        .nodes()
        .context("listing nodes")?
        .nodes
        .into_iter()
        .map(|n| (n.name, n.labels))
        .collect();
    for v in views {
        if let Some(n) = &v.node {
            by_name.entry(n.clone()).or_default();
        }
    }
    Ok(by_name
        .into_iter()
        .map(|(name, labels)| NodeSpec { name, labels })
        .collect())
}

/// The arrival of a job: submit, or queued-after-dependencies, or `not_before`.
fn arrival(v: &JobView) -> u64 {
    let submitted = at(&v.submitted_at).unwrap_or(0);
    let queued = if v.after.is_empty() && v.after_ok.is_empty() {
        submitted
    } else {
        ms(&v.queued_at).unwrap_or(submitted)
    };
    queued.max(ms(&v.not_before).unwrap_or(0))
}

/// Builds the workload and the records (see the module docs); `views` oldest first.
pub fn to_workload(
    policy: &Policy,
    views: Vec<JobView>,
    nodes: Vec<NodeSpec>,
    left_out: LeftOut,
) -> History {
    let origin = views.iter().map(arrival).min().unwrap_or(0);
    let secs = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1000.0),
        _ => None,
    };
    let (mut jobs, mut records) = (Vec::new(), Vec::new());
    for v in views {
        let at = arrival(&v) - origin;
        let (prep, prepared, started, finished) = (
            ms(&v.prepare_started_at),
            ms(&v.prepared_at),
            ms(&v.started_at),
            ms(&v.finished_at),
        );
        let kind_two_stage = policy
            .kind(&v.kind)
            .and_then(|k| k.two_stage)
            .unwrap_or(false);
        jobs.push(WorkloadJob {
            at: at as f64 / 1000.0,
            kind: v.kind.clone(),
            attrs: v.attrs.clone(),
            owner: Some(v.owner.clone()),
            priority: (v.priority != policy.kind_priority(&v.kind)).then_some(v.priority),
            node: v.node.clone().filter(|_| v.pinned),
            node_selector: v.node_selector.clone(),
            two_stage: (v.two_stage != kind_two_stage).then_some(v.two_stage),
            prepare_s: if v.two_stage {
                secs(prep, prepared)
            } else {
                None
            },
            run_s: secs(started, finished).unwrap_or(0.0),
            cost: (v.cost != policy.kind_cost(&v.kind)).then(|| v.cost.clone()),
            size_mb: None,
        });
        let rel = |t: Option<u64>| t.map(|t| t.saturating_sub(origin));
        records.push(JobRecord {
            submitted_ms: at,
            admitted_ms: rel(prep.or(started)),
            started_ms: rel(started),
            finished_ms: rel(finished),
            node: v.node.clone(),
            outcome: Some(v.outcome.unwrap_or(v.state)),
            run_alone_ms: None,
        });
    }
    History {
        origin: Timestamp(origin),
        jobs,
        records,
        nodes,
        left_out,
    }
}

/// One policy's replay: its column and its run (for the pictures).
pub struct Replay {
    /// `recorded`, `active` or `candidate`.
    pub name: &'static str,
    /// The policy it ran under.
    pub policy: Policy,
    /// Its run.
    pub run: Run,
}

/// The recorded run, the replay under `active` and, when given, under `candidate`.
///
/// # Errors
/// A job of the history the engine refuses under a policy (an undeclared pool, ...).
pub fn replays(
    h: &History,
    active: &Policy,
    candidate: Option<&Policy>,
) -> anyhow::Result<Vec<Replay>> {
    let recorded = recorded_run(active, &h.nodes, &h.jobs, h.records.clone());
    let mut out = vec![Replay {
        name: "recorded",
        policy: active.clone(),
        run: recorded,
    }];
    let mut policies = vec![("active", active)];
    policies.extend(candidate.map(|c| ("candidate", c)));
    for (name, p) in policies {
        let run = lockgate_sim::simulate_at(p, &h.nodes, &h.jobs, h.origin)
            .with_context(|| format!("replaying the history under the {name} policy"))?;
        out.push(Replay {
            name,
            policy: p.clone(),
            run,
        });
    }
    Ok(out)
}

/// The JSON of `-o json` (docs/simulate.md).
#[derive(Debug, Serialize)]
pub struct Comparison {
    /// Start of the period (RFC 3339).
    pub since: String,
    /// Time 0 of every column: the earliest arrival (RFC 3339).
    pub origin: String,
    /// The deadline (RFC 3339), when given.
    pub deadline: Option<String>,
    /// Jobs of the period not replayed.
    pub left_out: LeftOut,
    /// `recorded`, `active`, and `candidate` when given.
    pub columns: Vec<Column>,
}

impl Comparison {
    /// The comparison of `replays`, misses counted against `deadline` (ms since the epoch).
    pub fn new(h: &History, since: u64, deadline: Option<u64>, replays: &[Replay]) -> Comparison {
        let rel = deadline.map(|d| d.saturating_sub(h.origin.0));
        Comparison {
            since: lockgate_api::time::format(Timestamp(since)),
            origin: lockgate_api::time::format(h.origin),
            deadline: deadline.map(|d| lockgate_api::time::format(Timestamp(d))),
            left_out: h.left_out,
            columns: replays
                .iter()
                .map(|r| Column::of(r.name, &r.run, rel))
                .collect(),
        }
    }

    /// The table for people, with one line on what was left out and the makespan ratios.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "history since {} (time 0 = {}): {} jobs replayed",
            self.since,
            self.origin,
            self.columns.first().map_or(0, |c| c.summary.jobs)
        );
        let l = &self.left_out;
        if l.active + l.never_ran > 0 || l.truncated {
            out.push_str(&format!(
                "; left out: {} still active, {} never ran{}",
                l.active,
                l.never_ran,
                if l.truncated {
                    ", older jobs past --max-jobs"
                } else {
                    ""
                }
            ));
        }
        if let Some(d) = &self.deadline {
            out.push_str(&format!("; deadline {d}"));
        }
        out.push_str("\n\n");
        out.push_str(&lockgate_sim::compare::table(&self.columns));
        let find = |n: &str| self.columns.iter().find(|c| c.name == n);
        for (a, b) in [("recorded", "active"), ("active", "candidate")] {
            if let (Some(a), Some(b)) = (find(a), find(b)) {
                if let Some(line) = lockgate_sim::compare::ratio_line(a, b) {
                    out.push('\n');
                    out.push_str(&line);
                }
            }
        }
        out.push('\n');
        out
    }
}
