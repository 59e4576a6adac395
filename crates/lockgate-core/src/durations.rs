//! Learned durations: what a job of a kind (and of its key values, `[forecast] key`)
//! usually takes, from the history of successful runs.
//!
//! [`Durations`] keeps, per kind and per (kind, leading key values), the last
//! [`ForecastPolicy::samples`] prepare and run durations of jobs that succeeded, in
//! arrival order. The key is a list of attributes, most significant first; by default
//! [`DEFAULT_KEY`] (`tool`, `repo`, `datastore`, `group`), the attributes that tell a
//! restic check from a borg check and one repository or backup group from another. A job
//! is filed under every leading part of its key values (`tool=restic`, then
//! `tool=restic,repo=main`, ...), trailing attributes it lacks left out. [`Durations::expected`]
//! answers with the median (p50) and the 90th percentile (p90) of the most specific set
//! that has a sample: the longest leading part of the key, then the kind, then the policy's
//! `default_run` / `default_prepare`, then none.
//!
//! # Invariants
//! - Pure and cheap: [`Durations::observe`] is O(key length) amortised (a bounded ring per
//!   set), and reads no clock; [`Durations::expected`] sorts at most `samples` values.
//! - An estimate exists from the first successful run on. Quantiles are nearest-rank
//!   (`ceil(q * n)`-th smallest), so while there are fewer than 10 samples the p90 is the
//!   largest one seen, and `p50 <= p90` always.
//! - Only jobs that succeeded count: a failed or cancelled run says nothing about how long
//!   the work takes. A stage counts only when both its ends are known.
//! - Runs of different tools or targets are never mixed while a set of their own has a
//!   sample: a kind-wide estimate is used only for a job whose first key attribute has no
//!   history yet.

use crate::job::Job;
use crate::policy::PerKey;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Samples kept per key when the policy does not say (`[forecast] samples`).
pub const DEFAULT_SAMPLES: usize = 20;

/// `[forecast] key` when the policy does not say: the attributes that separate tools and
/// targets, most significant first.
pub const DEFAULT_KEY: [&str; 4] = ["tool", "repo", "datastore", "group"];

/// [`DEFAULT_KEY`] as policy keys.
pub fn default_key() -> Vec<PerKey> {
    DEFAULT_KEY
        .iter()
        .map(|a| PerKey::Attr((*a).to_string()))
        .collect()
}

/// `[forecast]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForecastPolicy {
    /// What, beside the kind, splits the history, most significant first
    /// (`key = ["group"]`). Default: [`DEFAULT_KEY`]; `key = []` keeps one history per kind.
    pub key: Vec<PerKey>,
    /// Run time assumed for a kind with no history. Default: none (no estimate).
    pub default_run: Option<Duration>,
    /// Prepare time assumed for a two-stage kind with no history. Default: none.
    pub default_prepare: Option<Duration>,
    /// Successful runs kept per key (the window the quantiles are taken over). Default 20.
    pub samples: usize,
}

impl Default for ForecastPolicy {
    fn default() -> ForecastPolicy {
        ForecastPolicy {
            key: default_key(),
            default_run: None,
            default_prepare: None,
            samples: DEFAULT_SAMPLES,
        }
    }
}

/// Where an estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Runs of the same kind and leading key values (how many: [`Estimate::key_len`]).
    Key,
    /// Runs of the same kind (no run with these key values yet).
    Kind,
    /// The policy's `default_run` / `default_prepare`.
    Default,
}

/// One stage's estimate, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Estimate {
    /// Median.
    pub p50_ms: u64,
    /// 90th percentile (the largest seen while there are fewer than 10 samples).
    pub p90_ms: u64,
    /// Samples it was taken from (0 for a policy default).
    pub samples: usize,
    /// Where it came from.
    pub basis: Basis,
    /// With [`Basis::Key`], how many leading attributes of the key the runs shared with
    /// the job (0 otherwise).
    pub key_len: usize,
}

impl Estimate {
    /// A fixed duration (a policy default, or a known one in a simulation).
    pub fn fixed(ms: u64, basis: Basis) -> Estimate {
        Estimate {
            p50_ms: ms,
            p90_ms: ms,
            samples: 0,
            basis,
            key_len: 0,
        }
    }
}

/// A job's expected prepare and run stages, and its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// From prepare admission to `prepared` (two-stage jobs only).
    pub prepare: Option<Estimate>,
    /// From start to finish.
    pub run: Option<Estimate>,
    /// The bytes it moves ([`moved`]), from runs that succeeded and reported usage: the
    /// estimate's `p50_ms` and `p90_ms` hold bytes here. No policy default.
    pub size: Option<Estimate>,
}

/// What a job moved, by its holder's report: its larger direction (a copy reads what it
/// writes, and counts once). `None` without a report or with nothing moved.
pub fn moved(job: &Job) -> Option<u64> {
    let u = job.usage.as_deref()?;
    Some(u.read_bytes.max(u.written_bytes)).filter(|&b| b > 0)
}

#[derive(Debug, Clone, Default)]
struct Samples {
    prepare: VecDeque<u64>,
    run: VecDeque<u64>,
    size: VecDeque<u64>,
}

fn push(ring: &mut VecDeque<u64>, v: u64, cap: usize) {
    if ring.len() == cap {
        ring.pop_front();
    }
    ring.push_back(v);
}

/// The nearest-rank quantile `q` (0 < q <= 1) of `sorted` (non-empty).
/// The nearest-rank `q` quantile of sorted values (0 when there are none); the simulator's
/// report uses it too.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn estimate(ring: &VecDeque<u64>, basis: Basis, key_len: usize) -> Option<Estimate> {
    if ring.is_empty() {
        return None;
    }
    let mut v: Vec<u64> = ring.iter().copied().collect();
    v.sort_unstable();
    Some(Estimate {
        p50_ms: quantile(&v, 0.5),
        p90_ms: quantile(&v, 0.9),
        samples: v.len(),
        basis,
        key_len,
    })
}

/// The learned durations. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct Durations {
    policy: ForecastPolicy,
    by_kind: HashMap<String, Samples>,
    by_key: HashMap<(String, Vec<String>), Samples>,
}

/// How long a finished job's stages took: (prepare, run) in ms, each when both ends are
/// known; `None` for a job that did not succeed.
pub fn stages_of(job: &Job) -> Option<(Option<u64>, Option<u64>)> {
    if job.outcome.unwrap_or(job.state) != crate::job::JobState::Succeeded {
        return None;
    }
    let span = |a: Option<Timestamp>, b: Option<Timestamp>| Some(b?.since(a?));
    Some((
        span(job.prepare_started_at, job.prepared_at),
        span(job.started_at, job.finished_at),
    ))
}

impl Durations {
    /// No history yet.
    pub fn new(policy: ForecastPolicy) -> Durations {
        Durations {
            policy,
            ..Durations::default()
        }
    }

    /// The settings in force.
    pub fn policy(&self) -> &ForecastPolicy {
        &self.policy
    }

    /// The key values of a job under `[forecast] key`, without the trailing attributes it
    /// lacks (one it lacks before one it has counts as `""`).
    pub fn key_of(&self, job: &Job) -> Vec<String> {
        let mut values: Vec<String> = self
            .policy
            .key
            .iter()
            .map(|k| job.key_value(k.name()).unwrap_or("").to_string())
            .collect();
        while values.last().is_some_and(String::is_empty) {
            values.pop();
        }
        values
    }

    /// The first `len` attributes of `job`'s key, as `name=value`: what an estimate with
    /// [`Estimate::key_len`] `len` was taken over.
    pub fn key_text(&self, job: &Job, len: usize) -> Vec<String> {
        self.policy
            .key
            .iter()
            .zip(self.key_of(job))
            .take(len)
            .map(|(k, v)| format!("{}={v}", k.name()))
            .collect()
    }

    /// Takes a job that ended into the history (only a success counts): under its kind
    /// and under every leading part of its key values.
    pub fn observe(&mut self, job: &Job) {
        let Some((prepare, run)) = stages_of(job) else {
            return;
        };
        let cap = self.policy.samples.max(1);
        let size = moved(job);
        let add = |s: &mut Samples| {
            if let Some(p) = prepare {
                push(&mut s.prepare, p, cap);
            }
            if let Some(r) = run {
                push(&mut s.run, r, cap);
            }
            if let Some(b) = size {
                push(&mut s.size, b, cap);
            }
        };
        add(self.by_kind.entry(job.kind.clone()).or_default());
        let mut key = (job.kind.clone(), self.key_of(job));
        while !key.1.is_empty() {
            add(self.by_key.entry(key.clone()).or_default());
            key.1.pop();
        }
    }

    /// What a job like `job` is expected to take: the longest leading part of its key with
    /// history, then its kind, then the policy default.
    pub fn expected(&self, job: &Job) -> Expected {
        let values = self.key_of(job);
        let kind = self.by_kind.get(&job.kind);
        let pick = |stage: fn(&Samples) -> &VecDeque<u64>, default: Option<Duration>| {
            (1..=values.len())
                .rev()
                .find_map(|len| {
                    let key = (job.kind.clone(), values[..len].to_vec());
                    estimate(stage(self.by_key.get(&key)?), Basis::Key, len)
                })
                .or_else(|| kind.and_then(|s| estimate(stage(s), Basis::Kind, 0)))
                .or_else(|| default.map(|d| Estimate::fixed(d.as_millis() as u64, Basis::Default)))
        };
        Expected {
            prepare: if job.two_stage {
                pick(|s| &s.prepare, self.policy.default_prepare)
            } else {
                None
            },
            run: pick(|s| &s.run, self.policy.default_run),
            size: pick(|s| &s.size, None),
        }
    }

    /// The expected run time (p50) of a job, in ms: what `order = "window"` packs by.
    pub fn expected_run_p50_ms(&self, job: &Job) -> Option<u64> {
        self.expected(job).run.map(|e| e.p50_ms)
    }

    /// Kinds with history (for metrics and tests).
    pub fn kinds(&self) -> usize {
        self.by_kind.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobState;

    fn job(kind: &str, group: &str, run_ms: u64) -> Job {
        let spec = crate::job::JobSpec {
            kind: kind.into(),
            owner: "t".into(),
            attrs: [("group".to_string(), group.to_string())].into(),
            ..crate::job::JobSpec::default()
        };
        let policy = crate::Policy::from_toml("", None).unwrap();
        let mut j = spec.check(&policy).unwrap().into_job(1, Timestamp(0));
        j.state = JobState::Succeeded;
        j.outcome = Some(JobState::Succeeded);
        j.started_at = Some(Timestamp(1000));
        j.finished_at = Some(Timestamp(1000 + run_ms));
        j
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(quantile(&[5], 0.5), 5);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.5), 2);
        assert_eq!(quantile(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 0.9), 9);
        let ten: Vec<u64> = (1..=10).collect();
        assert_eq!(quantile(&ten, 0.9), 9);
    }

    #[test]
    fn key_then_kind_then_default_then_none() {
        let mut d = Durations::new(ForecastPolicy {
            key: vec![PerKey::Attr("group".into())],
            default_run: Some(Duration::from_secs(7)),
            ..ForecastPolicy::default()
        });
        // Without history and without a default there is no estimate.
        let bare = Durations::new(ForecastPolicy::default());
        assert_eq!(bare.expected(&job("verify", "a", 0)).run, None);
        d.observe(&job("backup", "a", 100));
        d.observe(&job("backup", "a", 300));
        d.observe(&job("backup", "b", 50));
        let a = d.expected(&job("backup", "a", 0)).run.unwrap();
        assert_eq!(
            (a.p50_ms, a.p90_ms, a.samples, a.basis),
            (100, 300, 2, Basis::Key)
        );
        let c = d.expected(&job("backup", "c", 0)).run.unwrap();
        assert_eq!((c.p50_ms, c.p90_ms, c.basis), (100, 300, Basis::Kind));
        let v = d.expected(&job("verify", "a", 0)).run.unwrap();
        assert_eq!((v.p50_ms, v.basis), (7000, Basis::Default));
        assert_eq!(d.expected_run_p50_ms(&job("backup", "b", 0)), Some(50));
    }

    #[test]
    fn sizes_are_learned_from_reported_usage_and_only_from_successes() {
        let mut d = Durations::new(ForecastPolicy {
            key: vec![PerKey::Attr("group".into())],
            default_run: Some(Duration::from_secs(7)),
            ..ForecastPolicy::default()
        });
        let sized = |group: &str, read: u64, written: u64| {
            let mut j = job("backup", group, 100);
            j.usage = Some(Box::new(crate::Usage {
                read_bytes: read,
                written_bytes: written,
                ..crate::Usage::default()
            }));
            j
        };
        // No size without a report, and no policy default stands in for one.
        d.observe(&job("backup", "a", 100));
        assert_eq!(d.expected(&job("backup", "a", 0)).size, None);
        // The larger direction counts: a copy reads what it writes.
        d.observe(&sized("a", 4_000, 1_000));
        d.observe(&sized("a", 2_000, 6_000));
        let mut failed = sized("a", 1, 90_000);
        failed.outcome = Some(JobState::Failed);
        d.observe(&failed);
        let a = d.expected(&job("backup", "a", 0)).size.unwrap();
        assert_eq!((a.p50_ms, a.p90_ms, a.samples), (4_000, 6_000, 2));
        // Another group has no size of its own: the kind's.
        let b = d.expected(&job("backup", "b", 0)).size.unwrap();
        assert_eq!((b.p50_ms, b.basis), (4_000, Basis::Kind));
    }

    fn run_of(kind: &str, attrs: &[(&str, &str)], run_ms: u64) -> Job {
        let mut j = job(kind, "", run_ms);
        let map = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        j.attrs = crate::job::Attrs::pack(&map).unwrap();
        j
    }

    #[test]
    fn by_default_tools_and_repositories_are_learned_apart_with_the_kind_last() {
        let mut d = Durations::new(ForecastPolicy::default());
        for ms in [100_000, 110_000] {
            d.observe(&run_of("check", &[("tool", "restic"), ("repo", "a")], ms));
        }
        d.observe(&run_of("check", &[("tool", "borg"), ("repo", "b")], 400));
        let run = |attrs: &[(&str, &str)]| {
            let j = run_of("check", attrs, 0);
            let e = d.expected(&j).run.unwrap();
            (e.p50_ms, e.basis, d.key_text(&j, e.key_len))
        };
        // restic and borg checks are not mixed.
        let (ms, basis, key) = run(&[("tool", "restic"), ("repo", "a")]);
        assert_eq!((ms, basis), (100_000, Basis::Key));
        assert_eq!(key, ["tool=restic", "repo=a"]);
        assert_eq!(run(&[("tool", "borg"), ("repo", "b")]).0, 400);
        // A new repository of a known tool: the tool's runs.
        let (ms, _, key) = run(&[("tool", "restic"), ("repo", "new")]);
        assert_eq!((ms, key), (100_000, vec!["tool=restic".to_string()]));
        // A new tool: the kind's runs, all of them.
        let (ms, basis, key) = run(&[("tool", "kopia")]);
        assert_eq!((ms, basis, key.len()), (100_000, Basis::Kind, 0));
        // `key = []` keeps one history per kind.
        let mut flat = Durations::new(ForecastPolicy {
            key: Vec::new(),
            ..ForecastPolicy::default()
        });
        flat.observe(&run_of("check", &[("tool", "borg")], 400));
        let e = flat.expected(&run_of("check", &[("tool", "restic")], 0));
        assert_eq!(e.run.map(|e| e.basis), Some(Basis::Kind));
    }

    #[test]
    fn only_successes_count_and_the_window_is_bounded() {
        let mut d = Durations::new(ForecastPolicy {
            samples: 3,
            ..ForecastPolicy::default()
        });
        let mut failed = job("backup", "a", 9_999);
        failed.outcome = Some(JobState::Failed);
        failed.state = JobState::Failed;
        d.observe(&failed);
        assert_eq!(d.expected(&job("backup", "a", 0)).run, None);
        for ms in [1000, 10, 20, 30] {
            d.observe(&job("backup", "a", ms));
        }
        let e = d.expected(&job("backup", "a", 0)).run.unwrap();
        assert_eq!((e.p50_ms, e.p90_ms, e.samples), (20, 30, 3));
    }

    #[test]
    fn prepare_is_learned_apart_for_two_stage_jobs() {
        let mut d = Durations::new(ForecastPolicy::default());
        let mut j = job("upload", "a", 500);
        j.two_stage = true;
        j.prepare_started_at = Some(Timestamp(0));
        j.prepared_at = Some(Timestamp(40));
        d.observe(&j);
        let e = d.expected(&j);
        assert_eq!(e.prepare.map(|p| p.p50_ms), Some(40));
        assert_eq!(e.run.map(|p| p.p50_ms), Some(500));
        assert_eq!(d.expected(&job("upload", "a", 0)).prepare, None);
    }
}
