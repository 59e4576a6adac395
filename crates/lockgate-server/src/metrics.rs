//! `/metrics` in the Prometheus text format, written by hand (a few gauges, counters and
//! two histograms do not need a crate).
//!
//! Invariant: no submitter can grow the label space without bound. A `kind` label is a
//! kind the policy names (`[kinds.<kind>]`, a `[[schedule]]` job's kind, or a kind the
//! server drives itself), every other kind is counted as `other`; a `scope` label shows at
//! most [`MAX_SERIES_PER_RULE`] scopes of one policy rule (a limit's partitions, a
//! conflict's keys, the nodes), the busiest first, and folds the rest into one
//! `<rule>:other` series. So the series count is bounded by the policy, not by the jobs.

use lockgate_core::engine::ScopeUsage;
use lockgate_core::event::JobChange;
use lockgate_core::job::Job;
use lockgate_core::policy::RESOURCE_BACKUP_KIND;
use lockgate_core::{Engine, JobState, Policy};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Scopes shown per policy rule; the rest are summed into `<rule>:other`.
pub const MAX_SERIES_PER_RULE: usize = 100;

/// The `kind` label of a job of `kind`: the kind if the policy names it, else `other`.
fn kind_label<'a>(policy: &Policy, kind: &'a str) -> &'a str {
    let named = policy.kinds.contains_key(kind)
        || kind == RESOURCE_BACKUP_KIND
        || kind == "data-upload"
        || policy.schedules.iter().any(|s| s.job.kind == kind);
    if named {
        kind
    } else {
        "other"
    }
}

/// The scopes to show: per rule at most [`MAX_SERIES_PER_RULE`], busiest (then by name)
/// first, and one `<rule>:other` scope summing the rest (no limit, the highest peak).
fn bounded_scopes(usage: Vec<ScopeUsage>) -> Vec<ScopeUsage> {
    let mut by_rule: BTreeMap<String, Vec<ScopeUsage>> = BTreeMap::new();
    for u in usage {
        by_rule.entry(u.rule.clone()).or_default().push(u);
    }
    let mut out = Vec::new();
    for (rule, mut scopes) in by_rule {
        scopes.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.scope.cmp(&b.scope)));
        let rest = scopes.split_off(scopes.len().min(MAX_SERIES_PER_RULE));
        out.extend(scopes);
        if !rest.is_empty() {
            out.push(ScopeUsage {
                scope: format!("{rule}:other"),
                used: rest.iter().map(|u| u.used).sum(),
                limit: None,
                peak: rest.iter().map(|u| u.peak).max().unwrap_or(0),
                rule,
            });
        }
    }
    out
}

/// A cumulative histogram with fixed bounds.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// A histogram with these upper bounds (seconds).
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation.
    pub fn observe(&mut self, v: f64) {
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

const WAIT_BOUNDS: &[f64] = &[
    0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 14400.0,
];
const COMMIT_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Counters the event loop keeps.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Admissions (to prepare, or to run for one-stage jobs) by kind.
    pub admissions: BTreeMap<String, u64>,
    /// Jobs that ended, by (state, kind).
    pub finished: BTreeMap<(JobState, String), u64>,
    /// Leases that ran out.
    pub lease_expiries: u64,
    /// Time from queued to admitted.
    pub wait: Histogram,
    /// Store commit latency.
    pub commit: Histogram,
    /// Jobs written by commits.
    pub committed_jobs: u64,
    /// Backup plans by outcome (`made`, `refused`, `too_large`, `canceled`, `failed`).
    pub backup_plans: BTreeMap<&'static str, u64>,
}

impl Metrics {
    /// Counts one job change: an admission (and its wait), an end (and a lost lease).
    /// Kinds the policy does not name are counted as `other`.
    pub fn observe(&mut self, change: JobChange, job: &Job, policy: &Policy) {
        let kind = kind_label(policy, &job.kind);
        let admitted_at = match change {
            JobChange::AdmittedPrepare => job.prepare_started_at,
            JobChange::Started if job.prepare_started_at.is_none() => job.started_at,
            _ => None,
        };
        if let Some(at) = admitted_at {
            *self.admissions.entry(kind.to_string()).or_default() += 1;
            self.wait.observe(at.since(job.queued_at) as f64 / 1000.0);
        }
        if change == JobChange::Finished {
            *self
                .finished
                .entry((job.state, kind.to_string()))
                .or_default() += 1;
            if job.state == JobState::Lost {
                self.lease_expiries += 1;
            }
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            admissions: BTreeMap::new(),
            finished: BTreeMap::new(),
            lease_expiries: 0,
            wait: Histogram::new(WAIT_BOUNDS),
            commit: Histogram::new(COMMIT_BOUNDS),
            committed_jobs: 0,
            backup_plans: BTreeMap::new(),
        }
    }
}

/// Escapes a label value.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// The whole exposition.
    pub fn render(&self, engine: &Engine, last_seq: u64) -> String {
        let mut out = String::new();
        self.render_jobs(&mut out, engine);
        render_scopes(&mut out, engine);
        self.render_store(&mut out, engine, last_seq);
        out
    }

    /// Jobs by state and kind, finished jobs, admissions, lease expiries and waits.
    fn render_jobs(&self, out: &mut String, engine: &Engine) {
        let mut live: BTreeMap<(JobState, String), u64> = BTreeMap::new();
        for j in engine.jobs() {
            let kind = kind_label(engine.policy(), &j.kind);
            *live.entry((j.state, kind.to_string())).or_default() += 1;
        }
        out.push_str("# HELP lockgate_jobs Jobs the engine holds, by state and kind.\n# TYPE lockgate_jobs gauge\n");
        for ((s, k), n) in &live {
            let _ = writeln!(
                out,
                "lockgate_jobs{{state=\"{s}\",kind=\"{}\"}} {n}",
                esc(k)
            );
        }
        out.push_str("# HELP lockgate_jobs_finished_total Jobs that ended since the server started, by state and kind.\n# TYPE lockgate_jobs_finished_total counter\n");
        for ((s, k), n) in &self.finished {
            let _ = writeln!(
                out,
                "lockgate_jobs_finished_total{{state=\"{s}\",kind=\"{}\"}} {n}",
                esc(k)
            );
        }
        out.push_str("# HELP lockgate_admissions_total Admissions since the server started, by kind.\n# TYPE lockgate_admissions_total counter\n");
        for (k, n) in &self.admissions {
            let _ = writeln!(out, "lockgate_admissions_total{{kind=\"{}\"}} {n}", esc(k));
        }
        out.push_str("# HELP lockgate_lease_expiries_total Leases that ran out (jobs lost).\n# TYPE lockgate_lease_expiries_total counter\n");
        let _ = writeln!(out, "lockgate_lease_expiries_total {}", self.lease_expiries);
        self.wait.render(
            out,
            "lockgate_wait_seconds",
            "Time from queued to admitted.",
        );
    }

    /// Nodes by state, store commits, the event sequence and backup plans.
    fn render_store(&self, out: &mut String, engine: &Engine, last_seq: u64) {
        out.push_str(
            "# HELP lockgate_nodes Registered nodes by state.\n# TYPE lockgate_nodes gauge\n",
        );
        let mut nodes: BTreeMap<&str, u64> = BTreeMap::new();
        for n in engine.nodes() {
            *nodes.entry(n.state_name()).or_default() += 1;
        }
        for (s, n) in nodes {
            let _ = writeln!(out, "lockgate_nodes{{state=\"{s}\"}} {n}");
        }
        self.commit.render(
            out,
            "lockgate_store_commit_seconds",
            "Store group-commit latency.",
        );
        out.push_str("# HELP lockgate_store_committed_jobs_total Job rows written by commits.\n# TYPE lockgate_store_committed_jobs_total counter\n");
        let _ = writeln!(
            out,
            "lockgate_store_committed_jobs_total {}",
            self.committed_jobs
        );
        out.push_str("# HELP lockgate_event_seq Sequence number of the last event.\n# TYPE lockgate_event_seq gauge\n");
        let _ = writeln!(out, "lockgate_event_seq {last_seq}");
        out.push_str("# HELP lockgate_backup_plans_total Backup plans by outcome (canceled: the client went away while it was planned).\n# TYPE lockgate_backup_plans_total counter\n");
        for (outcome, n) in &self.backup_plans {
            let _ = writeln!(
                out,
                "lockgate_backup_plans_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
    }
}

/// Units in use, limits and peaks per scope (at most a bounded number per rule).
fn render_scopes(out: &mut String, engine: &Engine) {
    out.push_str("# HELP lockgate_scope_running Units in use per scope.\n# TYPE lockgate_scope_running gauge\n");
    let usage = bounded_scopes(engine.scope_usage());
    for u in &usage {
        let _ = writeln!(
            out,
            "lockgate_scope_running{{scope=\"{}\"}} {}",
            esc(&u.scope),
            u.used
        );
    }
    out.push_str("# HELP lockgate_scope_limit Limit per scope (absent: unlimited).\n# TYPE lockgate_scope_limit gauge\n");
    for u in &usage {
        if let Some(l) = u.limit {
            let _ = writeln!(
                out,
                "lockgate_scope_limit{{scope=\"{}\"}} {l}",
                esc(&u.scope)
            );
        }
    }
    out.push_str("# HELP lockgate_scope_peak Highest count per scope since the policy was applied.\n# TYPE lockgate_scope_peak gauge\n");
    for u in &usage {
        let _ = writeln!(
            out,
            "lockgate_scope_peak{{scope=\"{}\"}} {}",
            esc(&u.scope),
            u.peak
        );
    }
}
