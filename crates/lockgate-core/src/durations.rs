//! Learned durations: what a job of a kind (and of a key, `[forecast] key`) usually takes,
//! from the history of successful runs.
//!
//! [`Durations`] keeps, per kind and per (kind, key values), the last
//! [`ForecastPolicy::samples`] prepare and run durations of jobs that succeeded, in
//! arrival order. [`Durations::expected`] answers with the median (p50) and the 90th
//! percentile (p90) of the most specific set that has a sample: the key, then the kind,
//! then the policy's `default_run` / `default_prepare`, then none.
//!
//! # Invariants
//! - Pure and cheap: [`Durations::observe`] is O(1) amortised (a bounded ring per key), and
//!   reads no clock; [`Durations::expected`] sorts at most `samples` values.
//! - An estimate exists from the first successful run on. Quantiles are nearest-rank
//!   (`ceil(q * n)`-th smallest), so while there are fewer than 10 samples the p90 is the
//!   largest one seen, and `p50 <= p90` always.
//! - Only jobs that succeeded count: a failed or cancelled run says nothing about how long
//!   the work takes. A stage counts only when both its ends are known.

use crate::job::Job;
use crate::policy::PerKey;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Samples kept per key when the policy does not say (`[forecast] samples`).
pub const DEFAULT_SAMPLES: usize = 20;

/// `[forecast]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForecastPolicy {
    /// What, beside the kind, splits the history (`key = ["group"]`). Default: nothing
    /// (one history per kind).
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
            key: Vec::new(),
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
    /// Runs of the same kind and key values.
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
}

impl Estimate {
    /// A fixed duration (a policy default, or a known one in a simulation).
    pub fn fixed(ms: u64, basis: Basis) -> Estimate {
        Estimate {
            p50_ms: ms,
            p90_ms: ms,
            samples: 0,
            basis,
        }
    }
}

/// A job's expected prepare and run stages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// From prepare admission to `prepared` (two-stage jobs only).
    pub prepare: Option<Estimate>,
    /// From start to finish.
    pub run: Option<Estimate>,
}

#[derive(Debug, Clone, Default)]
struct Samples {
    prepare: VecDeque<u64>,
    run: VecDeque<u64>,
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

fn estimate(ring: &VecDeque<u64>, basis: Basis) -> Option<Estimate> {
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

    /// The key values of a job under `[forecast] key` (a missing attribute counts as `""`).
    fn key_of(&self, job: &Job) -> Vec<String> {
        let key = &self.policy.key;
        key.iter()
            .map(|k| job.key_value(k.name()).unwrap_or("").to_string())
            .collect()
    }

    /// Takes a job that ended into the history (only a success counts).
    pub fn observe(&mut self, job: &Job) {
        let Some((prepare, run)) = stages_of(job) else {
            return;
        };
        let cap = self.policy.samples.max(1);
        let key = (job.kind.clone(), self.key_of(job));
        let keyed = !self.policy.key.is_empty();
        let add = |s: &mut Samples| {
            if let Some(p) = prepare {
                push(&mut s.prepare, p, cap);
            }
            if let Some(r) = run {
                push(&mut s.run, r, cap);
            }
        };
        add(self.by_kind.entry(job.kind.clone()).or_default());
        if keyed {
            add(self.by_key.entry(key).or_default());
        }
    }

    /// What a job like `job` is expected to take: key, then kind, then the policy default.
    pub fn expected(&self, job: &Job) -> Expected {
        let keyed = (!self.policy.key.is_empty())
            .then(|| self.by_key.get(&(job.kind.clone(), self.key_of(job))))
            .flatten();
        let kind = self.by_kind.get(&job.kind);
        let pick = |stage: fn(&Samples) -> &VecDeque<u64>, default: Option<Duration>| {
            keyed
                .and_then(|s| estimate(stage(s), Basis::Key))
                .or_else(|| kind.and_then(|s| estimate(stage(s), Basis::Kind)))
                .or_else(|| default.map(|d| Estimate::fixed(d.as_millis() as u64, Basis::Default)))
        };
        Expected {
            prepare: if job.two_stage {
                pick(|s| &s.prepare, self.policy.default_prepare)
            } else {
                None
            },
            run: pick(|s| &s.run, self.policy.default_run),
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
