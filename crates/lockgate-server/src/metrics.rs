//! `/metrics` in the Prometheus text format, written by hand (gauges, counters and a few
//! histograms do not need a crate). docs/monitoring.md lists every metric.
//!
//! Invariants:
//! - No submitter can grow the label space without bound. A `kind` label is a kind the
//!   policy names (`[kinds.<kind>]`, a `[[schedule]]` job's kind, or a kind the server
//!   drives itself), every other kind is counted as `other`; a `scope` label shows at most
//!   [`MAX_SERIES_PER_RULE`] scopes of one policy rule (a limit's partitions, a conflict's
//!   keys, the nodes), the busiest first, and folds the rest into one `<rule>:other`
//!   series. So the series count is bounded by the policy, not by the jobs.
//! - A series the policy names does not vanish when its value is 0: every named kind (and
//!   `other`) has its job gauges, counters and histograms from the start, every node state
//!   its gauge, and every scope the policy itself names (`global`, `global-prepare`, an
//!   unpartitioned `[[limit]]`, a `[resources]` pool) its `lockgate_scope_*` series, so
//!   `rate()` and alerts see a 0 rather than no data. Scopes that only exist for the values
//!   jobs bring (a partitioned limit's `limit:<name>[k=v]`, a conflict's keys) are shown
//!   while in use (non-zero) and dropped when they fall back to 0.
//! - Histogram buckets fit backup work: waits and durations from under a second to a day.

use lockgate_core::engine::ScopeUsage;
use lockgate_core::event::JobChange;
use lockgate_core::job::Job;
use lockgate_core::policy::RESOURCE_BACKUP_KIND;
use lockgate_core::scope::ScopeKey;
use lockgate_core::{Engine, JobState, Policy, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Scopes shown per policy rule; the rest are summed into `<rule>:other`.
pub const MAX_SERIES_PER_RULE: usize = 100;

/// The kind label of every kind the policy does not name.
const OTHER: &str = "other";

/// Kinds the server drives itself (always named).
const SERVER_KINDS: [&str; 2] = [RESOURCE_BACKUP_KIND, "data-upload"];

/// The `kind` label of a job of `kind`: the kind if the policy names it, else `other`.
fn kind_label<'a>(policy: &Policy, kind: &'a str) -> &'a str {
    let named = policy.kinds.contains_key(kind)
        || SERVER_KINDS.contains(&kind)
        || policy.schedules.iter().any(|s| s.job.kind == kind);
    if named {
        kind
    } else {
        OTHER
    }
}

/// Every `kind` label the policy allows, `other` included: the series shown at 0.
fn kind_labels(policy: &Policy) -> BTreeSet<String> {
    let mut kinds: BTreeSet<String> = policy.kinds.keys().cloned().collect();
    kinds.extend(SERVER_KINDS.iter().map(|k| k.to_string()));
    kinds.extend(policy.schedules.iter().map(|s| s.job.kind.clone()));
    kinds.insert(OTHER.to_string());
    kinds
}

/// One `scope` series: a scope or a rule's `<rule>:other` remainder.
#[derive(Debug, Clone, PartialEq)]
struct ScopeSeries {
    scope: String,
    used: u64,
    limit: Option<u64>,
    peak: u64,
    /// For the holders' scope of a shared conflict (one with `exclusive`): how it is held
    /// now (`free`, `shared`, `exclusive`).
    mode: Option<&'static str>,
}

/// Whether a scope exists only for the values jobs bring (shown while non-zero).
fn per_value(key: &ScopeKey) -> bool {
    matches!(key, ScopeKey::Limit { parts, .. } if !parts.is_empty())
        || matches!(key, ScopeKey::Conflict { .. })
}

/// The limit shown for a scope. A conflict has no counter limit in the engine, but a key
/// (and, for an `overlap` conflict, each value) that every job needs alone admits one
/// holder at a time: shown as 1. A conflict with `exclusive` is shared: its key counts
/// every holder and has no limit (shared jobs hold it together), and its
/// `conflict-exclusive:` twin, the exclusive holders, shows 1. The overlap bookkeeping
/// counters (`<attr>=`: every holder, `<attr>=*`: star holders) have no limit of their own.
fn shown_limit(policy: &Policy, u: &ScopeUsage) -> Option<u64> {
    let ScopeKey::Conflict {
        index,
        overlap,
        exclusive,
        ..
    } = &u.key
    else {
        return u.limit;
    };
    let bookkeeping = overlap
        .as_ref()
        .is_some_and(|(_, v)| v.is_empty() || v == "*");
    let shared = shared_conflict(policy, *index);
    (!bookkeeping && (*exclusive || !shared)).then_some(1)
}

/// The conflict at `index` has `exclusive`: jobs outside it share its keys.
fn shared_conflict(policy: &Policy, index: usize) -> bool {
    policy
        .conflicts
        .get(index)
        .is_some_and(|c| c.exclusive.is_some())
}

/// How the holders' scope `key` of a shared conflict is held, given each scope's use:
/// `free`, `shared` (shared jobs only: more may join, exclusive jobs wait) or `exclusive`
/// (one exclusive job: nothing joins). `None` for every other scope.
fn held_as(
    policy: &Policy,
    key: &ScopeKey,
    used: u64,
    used_of: &BTreeMap<&ScopeKey, u64>,
) -> Option<&'static str> {
    let ScopeKey::Conflict {
        index,
        parts,
        overlap,
        exclusive: false,
    } = key
    else {
        return None;
    };
    if !shared_conflict(policy, *index) {
        return None;
    }
    let twin = ScopeKey::Conflict {
        index: *index,
        parts: parts.clone(),
        overlap: overlap.clone(),
        exclusive: true,
    };
    Some(match (used, used_of.get(&twin).copied().unwrap_or(0)) {
        (0, _) => "free",
        (_, 0) => "shared",
        _ => "exclusive",
    })
}

/// The scopes the policy names itself, whether or not a job has counted them yet.
fn named_scopes(policy: &Policy) -> Vec<(ScopeKey, String)> {
    let mut keys = Vec::new();
    if policy.global.max_running.is_some() {
        keys.push(ScopeKey::Global);
    }
    if policy.global.prepare_queue.is_some() {
        keys.push(ScopeKey::GlobalPrepare);
    }
    for l in policy.limits.iter().filter(|l| l.per.is_empty()) {
        keys.push(ScopeKey::Limit {
            name: l.name.clone(),
            parts: Vec::new(),
        });
    }
    keys.extend(policy.resources.keys().map(|p| ScopeKey::Pool(p.clone())));
    keys.into_iter()
        .map(|k| {
            let rule = k.rule();
            (k, rule)
        })
        .collect()
}

/// The scopes to show: the policy's named scopes (0 when no job counted them), per-value
/// scopes while in use; per rule at most [`MAX_SERIES_PER_RULE`], busiest (then by name)
/// first, and one `<rule>:other` scope summing the rest (no limit, the highest peak).
fn bounded_scopes(policy: &Policy, usage: Vec<ScopeUsage>) -> Vec<ScopeSeries> {
    let mut by_rule: BTreeMap<String, Vec<ScopeSeries>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let used_of: BTreeMap<&ScopeKey, u64> = usage.iter().map(|u| (&u.key, u.used)).collect();
    for u in &usage {
        seen.insert(u.key.clone());
        if per_value(&u.key) && u.used == 0 {
            continue;
        }
        by_rule
            .entry(u.rule.clone())
            .or_default()
            .push(ScopeSeries {
                limit: shown_limit(policy, u),
                scope: u.scope.clone(),
                used: u.used,
                peak: u.peak,
                mode: held_as(policy, &u.key, u.used, &used_of),
            });
    }
    for (key, rule) in named_scopes(policy) {
        if !seen.contains(&key) {
            by_rule.entry(rule).or_default().push(ScopeSeries {
                scope: key.to_string(),
                used: 0,
                limit: key.limit_in(policy),
                peak: 0,
                mode: None,
            });
        }
    }
    let mut out = Vec::new();
    for (rule, mut scopes) in by_rule {
        scopes.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.scope.cmp(&b.scope)));
        let rest = scopes.split_off(scopes.len().min(MAX_SERIES_PER_RULE));
        out.extend(scopes);
        if !rest.is_empty() {
            out.push(ScopeSeries {
                scope: format!("{rule}:other"),
                used: rest.iter().map(|u| u.used).sum(),
                limit: None,
                peak: rest.iter().map(|u| u.peak).max().unwrap_or(0),
                mode: None,
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

    /// The `# HELP`/`# TYPE` header and one unlabelled series.
    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render_series(out, name, "");
    }

    /// One series; `labels` is empty or `k="v",` (with the trailing comma).
    fn render_series(&self, out: &mut String, name: &str, labels: &str) {
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let labels = labels.trim_end_matches(',');
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// Waits for admission: most are instant, a backup can wait for a night's window.
pub const WAIT_BOUNDS: &[f64] = &[
    0.1, 1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0,
    86400.0,
];
/// Job durations: a snapshot in seconds, a full backup in hours, a day at most.
pub const DURATION_BOUNDS: &[f64] = &[
    1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0, 86400.0,
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
    /// Runs reported after they went ahead without admission, by kind.
    pub unadmitted: BTreeMap<String, u64>,
    /// Leases that ran out.
    pub lease_expiries: u64,
    /// Time from queued to admitted.
    pub wait: Histogram,
    /// Time from started to ended, of jobs that ran, by kind.
    pub duration: BTreeMap<String, Histogram>,
    /// Store commit latency.
    pub commit: Histogram,
    /// Jobs written by commits.
    pub committed_jobs: u64,
    /// Backup plans by outcome (`made`, `refused`, `too_large`, `canceled`, `failed`).
    pub backup_plans: BTreeMap<&'static str, u64>,
}

impl Metrics {
    /// Counts one job change: an admission (and its wait), an end (its duration, and a
    /// lost lease). Kinds the policy does not name are counted as `other`.
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
            if job.unadmitted {
                *self.unadmitted.entry(kind.to_string()).or_default() += 1;
            }
            if let (Some(start), Some(end)) = (job.started_at, job.finished_at) {
                self.duration
                    .entry(kind.to_string())
                    .or_insert_with(|| Histogram::new(DURATION_BOUNDS))
                    .observe(end.since(start) as f64 / 1000.0);
            }
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            admissions: BTreeMap::new(),
            finished: BTreeMap::new(),
            unadmitted: BTreeMap::new(),
            lease_expiries: 0,
            wait: Histogram::new(WAIT_BOUNDS),
            duration: BTreeMap::new(),
            commit: Histogram::new(COMMIT_BOUNDS),
            committed_jobs: 0,
            backup_plans: BTreeMap::new(),
        }
    }
}

/// Escapes a label value (every feature's metrics use it).
pub(crate) fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes a metric's `# HELP` and `# TYPE` lines.
pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

impl Metrics {
    /// The whole exposition at `now` (for the age of the oldest queued job).
    pub fn render(&self, engine: &Engine, last_seq: u64, now: Timestamp) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "lockgate_build_info",
            "gauge",
            "Always 1; the server's version in the label.",
        );
        let _ = writeln!(
            out,
            "lockgate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        let kinds = kind_labels(engine.policy());
        self.render_jobs(&mut out, engine, &kinds, now);
        render_scopes(&mut out, engine);
        self.render_store(&mut out, engine, last_seq);
        out
    }

    /// Live jobs by state and kind, and the oldest queued job of each kind.
    fn render_jobs(
        &self,
        out: &mut String,
        engine: &Engine,
        kinds: &BTreeSet<String>,
        now: Timestamp,
    ) {
        let mut live: BTreeMap<(JobState, String), u64> = BTreeMap::new();
        let mut oldest: BTreeMap<String, u64> = kinds.iter().map(|k| (k.clone(), 0)).collect();
        for k in kinds {
            for s in JobState::ALL.into_iter().filter(|s| !s.is_terminal()) {
                live.insert((s, k.clone()), 0);
            }
        }
        for j in engine.jobs() {
            let kind = kind_label(engine.policy(), &j.kind);
            *live.entry((j.state, kind.to_string())).or_default() += 1;
            if j.state == JobState::Queued {
                let age = oldest.entry(kind.to_string()).or_default();
                *age = (*age).max(now.since(j.queued_at));
            }
        }
        header(
            out,
            "lockgate_jobs",
            "gauge",
            "Jobs the engine holds, by state and kind.",
        );
        for ((s, k), n) in &live {
            let _ = writeln!(
                out,
                "lockgate_jobs{{state=\"{s}\",kind=\"{}\"}} {n}",
                esc(k)
            );
        }
        header(
            out,
            "lockgate_oldest_queued_job_age_seconds",
            "gauge",
            "Seconds the longest-waiting queued job of each kind has waited (0: none queued).",
        );
        for (k, ms) in &oldest {
            let _ = writeln!(
                out,
                "lockgate_oldest_queued_job_age_seconds{{kind=\"{}\"}} {}",
                esc(k),
                *ms as f64 / 1000.0
            );
        }
        self.render_ended(out, kinds);
    }

    /// Finished jobs, admissions, lease expiries, waits and durations.
    fn render_ended(&self, out: &mut String, kinds: &BTreeSet<String>) {
        let mut finished = self.finished.clone();
        for k in kinds {
            for s in JobState::ALL.into_iter().filter(|s| s.is_terminal()) {
                finished.entry((s, k.clone())).or_default();
            }
        }
        header(
            out,
            "lockgate_jobs_finished_total",
            "counter",
            "Jobs that ended since the server started, by state and kind.",
        );
        for ((s, k), n) in &finished {
            let _ = writeln!(
                out,
                "lockgate_jobs_finished_total{{state=\"{s}\",kind=\"{}\"}} {n}",
                esc(k)
            );
        }
        header(
            out,
            "lockgate_unadmitted_runs_total",
            "counter",
            "Runs that went ahead without admission (the server was unreachable; lockgate run --if-unreachable run), reported since the server started, by kind.",
        );
        for k in kinds
            .iter()
            .chain(self.unadmitted.keys())
            .collect::<BTreeSet<_>>()
        {
            let n = self.unadmitted.get(k.as_str()).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "lockgate_unadmitted_runs_total{{kind=\"{}\"}} {n}",
                esc(k)
            );
        }
        header(
            out,
            "lockgate_admissions_total",
            "counter",
            "Admissions since the server started, by kind.",
        );
        for k in kinds
            .iter()
            .chain(self.admissions.keys())
            .collect::<BTreeSet<_>>()
        {
            let n = self.admissions.get(k).copied().unwrap_or(0);
            let _ = writeln!(out, "lockgate_admissions_total{{kind=\"{}\"}} {n}", esc(k));
        }
        header(
            out,
            "lockgate_lease_expiries_total",
            "counter",
            "Leases that ran out (jobs lost).",
        );
        let _ = writeln!(out, "lockgate_lease_expiries_total {}", self.lease_expiries);
        self.wait.render(
            out,
            "lockgate_wait_seconds",
            "Time from queued to admitted.",
        );
        header(
            out,
            "lockgate_job_duration_seconds",
            "histogram",
            "Time from started to ended of jobs that ran, by kind.",
        );
        let empty = Histogram::new(DURATION_BOUNDS);
        for k in kinds
            .iter()
            .chain(self.duration.keys())
            .collect::<BTreeSet<_>>()
        {
            let h = self.duration.get(k).unwrap_or(&empty);
            h.render_series(
                out,
                "lockgate_job_duration_seconds",
                &format!("kind=\"{}\",", esc(k)),
            );
        }
    }

    /// Nodes by state, store commits, the event sequence and backup plans.
    fn render_store(&self, out: &mut String, engine: &Engine, last_seq: u64) {
        header(out, "lockgate_nodes", "gauge", "Registered nodes by state.");
        let mut nodes: BTreeMap<&str, u64> = ["cordoned", "lost", "ready"]
            .into_iter()
            .map(|s| (s, 0))
            .collect();
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
        header(
            out,
            "lockgate_store_committed_jobs_total",
            "counter",
            "Job rows written by commits.",
        );
        let _ = writeln!(
            out,
            "lockgate_store_committed_jobs_total {}",
            self.committed_jobs
        );
        header(
            out,
            "lockgate_event_seq",
            "gauge",
            "Sequence number of the last event.",
        );
        let _ = writeln!(out, "lockgate_event_seq {last_seq}");
        header(
            out,
            "lockgate_backup_plans_total",
            "counter",
            "Backup plans by outcome (canceled: the client went away while it was planned).",
        );
        let mut plans = self.backup_plans.clone();
        for outcome in ["made", "refused", "too_large", "canceled", "failed"] {
            plans.entry(outcome).or_default();
        }
        for (outcome, n) in &plans {
            let _ = writeln!(
                out,
                "lockgate_backup_plans_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
    }
}

/// Units in use, limits and peaks per scope (at most a bounded number per rule).
fn render_scopes(out: &mut String, engine: &Engine) {
    let usage = bounded_scopes(engine.policy(), engine.scope_usage());
    header(
        out,
        "lockgate_scope_running",
        "gauge",
        "Units in use per scope.",
    );
    for u in &usage {
        let _ = writeln!(
            out,
            "lockgate_scope_running{{scope=\"{}\"}} {}",
            esc(&u.scope),
            u.used
        );
    }
    header(
        out,
        "lockgate_scope_limit",
        "gauge",
        "Limit per scope (absent: unlimited; 1 for a key or value held alone, or a shared conflict's exclusive holders).",
    );
    for u in &usage {
        if let Some(l) = u.limit {
            let _ = writeln!(
                out,
                "lockgate_scope_limit{{scope=\"{}\"}} {l}",
                esc(&u.scope)
            );
        }
    }
    header(
        out,
        "lockgate_scope_held_as",
        "gauge",
        "A shared conflict's key (one with exclusive): 1 for how it is held now (free, shared, exclusive).",
    );
    for u in &usage {
        let Some(now) = u.mode else { continue };
        for mode in ["free", "shared", "exclusive"] {
            let _ = writeln!(
                out,
                "lockgate_scope_held_as{{scope=\"{}\",mode=\"{mode}\"}} {}",
                esc(&u.scope),
                u8::from(mode == now)
            );
        }
    }
    header(
        out,
        "lockgate_scope_peak",
        "gauge",
        "Highest count per scope since the policy was applied.",
    );
    for u in &usage {
        let _ = writeln!(
            out,
            "lockgate_scope_peak{{scope=\"{}\"}} {}",
            esc(&u.scope),
            u.peak
        );
    }
}
