//! The contention model: shared resources (a datastore, a link) with a capacity in MB/s,
//! shared by the jobs running on them, so that a job's run time comes out of how many
//! others run beside it (`lockgate simulate --contention FILE`).
//!
//! The file (TOML) declares resources:
//!
//! ```toml
//! [[resource]]
//! name = "ds1"
//! capacity_mb_s = 400        # what the resource moves with one job on it
//! match = "datastore=ds1"    # which jobs use it (a job selector: kind, owner, attributes)
//! job_max_mb_s = 150         # optional: one job never moves more than this (client, CPU)
//! loss_per_job = 0.1         # optional: each job beyond the first costs 10% of capacity
//! ```
//!
//! The model, exactly:
//!
//! - A job uses every resource whose `match` it satisfies; its size is `size_mb` from the
//!   workload, or else `run_s` times its rate alone (so `run_s` stays the run time alone).
//!   A job on no resource runs `run_s`, as without this file.
//! - With `n` jobs on it, a resource moves at most `capacity_mb_s / (1 + loss_per_job *
//!   (n - 1))` in total (seek and thrash overhead grows with concurrency).
//! - Rates are max-min fair (progressive filling): every job's rate rises together until a
//!   resource it uses is full or it reaches its own cap (the smallest `job_max_mb_s` of its
//!   resources); frozen jobs keep their rate and the others go on rising.
//! - Rates change only when a job starts or ends; between two such events every rate is
//!   constant, so the next end is computed exactly (`remaining / rate`), rounded up to the
//!   millisecond the simulator counts in. No time step.
//!
//! Invariants: on every resource the sum of the rates never exceeds its effective capacity;
//! a job's rate never exceeds its cap; every running job on a resource has a rate > 0 (the
//! filling gives each an equal share before freezing), so every job ends.

use crate::input::WorkloadJob;
use lockgate_core::selector::Selector;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One `[[resource]]` of the contention file, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Name, for messages.
    pub name: String,
    /// Throughput with one job on it, MB/s (> 0).
    pub capacity_mb_s: f64,
    /// Which jobs use it.
    pub matcher: Selector,
    /// Per-job cap, MB/s; `None`: none.
    pub job_max_mb_s: Option<f64>,
    /// Share of the capacity lost per job beyond the first (>= 0; default 0).
    pub loss_per_job: f64,
}

impl Resource {
    /// Total throughput with `n >= 1` jobs on it.
    pub fn effective(&self, n: usize) -> f64 {
        self.capacity_mb_s / (1.0 + self.loss_per_job * (n.max(1) - 1) as f64)
    }
}

/// The validated contention file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contention {
    /// Resources in file order.
    pub resources: Vec<Resource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    resource: Vec<RawResource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    name: String,
    capacity_mb_s: f64,
    #[serde(rename = "match")]
    matcher: String,
    job_max_mb_s: Option<f64>,
    #[serde(default)]
    loss_per_job: f64,
}

/// The contention file is invalid: the message names the file, the resource and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ContentionError {
    /// The file as named on the command line.
    pub file: String,
    /// What is wrong.
    pub message: String,
}

/// Parses a contention file.
///
/// # Errors
/// [`ContentionError`] for invalid TOML, an unknown key, a capacity or cap that is not a
/// positive number, a negative loss, a bad selector or a duplicate name.
pub fn parse_contention(text: &str, file: &str) -> Result<Contention, ContentionError> {
    let err = |message: String| ContentionError {
        file: file.to_string(),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    let mut resources = Vec::new();
    for (i, r) in raw.resource.into_iter().enumerate() {
        let at = format!("resource[{i}] ({:?})", r.name);
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(r.capacity_mb_s) {
            let got = r.capacity_mb_s;
            return Err(err(format!(
                "{at}: capacity_mb_s: expected a positive number, got {got}"
            )));
        }
        if let Some(m) = r.job_max_mb_s.filter(|&m| !positive(m)) {
            return Err(err(format!(
                "{at}: job_max_mb_s: expected a positive number, got {m}"
            )));
        }
        if !(r.loss_per_job.is_finite() && r.loss_per_job >= 0.0) {
            let got = r.loss_per_job;
            return Err(err(format!(
                "{at}: loss_per_job: expected a number >= 0, got {got}"
            )));
        }
        if resources.iter().any(|x: &Resource| x.name == r.name) {
            return Err(err(format!("{at}: name: duplicate {:?}", r.name)));
        }
        let matcher =
            Selector::parse_jobs(&r.matcher).map_err(|e| err(format!("{at}: match: {e}")))?;
        resources.push(Resource {
            name: r.name,
            capacity_mb_s: r.capacity_mb_s,
            matcher,
            job_max_mb_s: r.job_max_mb_s,
            loss_per_job: r.loss_per_job,
        });
    }
    Ok(Contention { resources })
}

impl Contention {
    /// The resources (indices) a job uses.
    pub fn resources_of(&self, job: &WorkloadJob) -> Vec<usize> {
        let lookup = |k: &str| match k {
            "kind" => Some(job.kind.as_str()),
            "owner" => Some(job.owner()),
            "node" => job.node.as_deref(),
            _ => job.attrs.get(k).map(String::as_str),
        };
        (0..self.resources.len())
            .filter(|&r| self.resources[r].matcher.matches(lookup))
            .collect()
    }

    /// A job's own cap on `res`: the smallest `job_max_mb_s`, infinite when none is set.
    fn cap(&self, res: &[usize]) -> f64 {
        res.iter()
            .filter_map(|&r| self.resources[r].job_max_mb_s)
            .fold(f64::INFINITY, f64::min)
    }

    /// A job's rate alone on `res` (non-empty).
    pub fn alone_rate(&self, res: &[usize]) -> f64 {
        res.iter()
            .map(|&r| self.resources[r].capacity_mb_s)
            .fold(self.cap(res), f64::min)
    }

    /// The size a job moves on `res`: `size_mb`, else `run_s` at its rate alone.
    pub fn size_mb(&self, job: &WorkloadJob, res: &[usize]) -> f64 {
        job.size_mb
            .unwrap_or_else(|| job.run_s * self.alone_rate(res))
    }

    /// How long the job runs alone, ms.
    pub fn alone_ms(&self, job: &WorkloadJob, res: &[usize]) -> u64 {
        secs_to_ms_up(self.size_mb(job, res) / self.alone_rate(res))
    }
}

/// Seconds to milliseconds, rounded up (a float hair above a whole millisecond stays on
/// it).
fn secs_to_ms_up(s: f64) -> u64 {
    ((s * 1000.0) - 1e-6).ceil().max(0.0) as u64
}

#[derive(Debug, Clone)]
struct Flow {
    resources: Vec<usize>,
    cap: f64,
    remaining_mb: f64,
    rate: f64,
}

/// The jobs moving data now, keyed by `K`, with their max-min fair rates.
#[derive(Debug, Clone)]
pub struct Flows<K: Ord + Copy> {
    model: Contention,
    active: BTreeMap<K, Flow>,
    /// Time the `remaining_mb` values are for.
    at_ms: u64,
    /// Bumped on every change: an armed end check of an older epoch is stale.
    epoch: u64,
}

impl<K: Ord + Copy> Flows<K> {
    /// No job moving.
    pub fn new(model: Contention) -> Self {
        Flows {
            model,
            active: BTreeMap::new(),
            at_ms: 0,
            epoch: 0,
        }
    }

    /// The model.
    pub fn model(&self) -> &Contention {
        &self.model
    }

    /// The current epoch (changes whenever a job starts or ends).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Starts moving `size_mb` for `key` on `res` (non-empty) at `now`.
    pub fn start(&mut self, key: K, res: Vec<usize>, size_mb: f64, now: u64) {
        self.advance(now);
        let cap = self.model.cap(&res);
        self.active.insert(
            key,
            Flow {
                resources: res,
                cap,
                remaining_mb: size_mb,
                rate: 0.0,
            },
        );
        self.refill();
    }

    /// Stops `key` (it ended otherwise: cancelled, requeued); no-op when not moving.
    pub fn remove(&mut self, key: K, now: u64) {
        if self.active.contains_key(&key) {
            self.advance(now);
            self.active.remove(&key);
            self.refill();
        }
    }

    /// When the next job ends at the current rates.
    pub fn next_end(&self) -> Option<u64> {
        self.active
            .values()
            .map(|f| self.at_ms + secs_to_ms_up(f.remaining_mb / f.rate))
            .min()
    }

    /// Advances to `now` and removes and returns every job whose data is moved.
    pub fn take_done(&mut self, now: u64) -> Vec<K> {
        self.advance(now);
        // Less than a millisecond of work left counts as done (the end was rounded up).
        let done: Vec<K> = self
            .active
            .iter()
            .filter(|(_, f)| f.remaining_mb <= f.rate * 1e-3 + 1e-9)
            .map(|(&k, _)| k)
            .collect();
        for k in &done {
            self.active.remove(k);
        }
        if !done.is_empty() {
            self.refill();
        }
        done
    }

    fn advance(&mut self, now: u64) {
        let dt = now.saturating_sub(self.at_ms) as f64 / 1000.0;
        for f in self.active.values_mut() {
            f.remaining_mb = (f.remaining_mb - f.rate * dt).max(0.0);
        }
        self.at_ms = self.at_ms.max(now);
    }

    /// Progressive filling (see the module docs).
    fn refill(&mut self) {
        self.epoch += 1;
        let nres = self.model.resources.len();
        let mut count = vec![0usize; nres];
        for f in self.active.values() {
            for &r in &f.resources {
                count[r] += 1;
            }
        }
        let mut residual: Vec<f64> = (0..nres)
            .map(|r| self.model.resources[r].effective(count[r]))
            .collect();
        let mut unfrozen = count.clone();
        let mut flows: Vec<&mut Flow> = self.active.values_mut().collect();
        for f in flows.iter_mut() {
            f.rate = 0.0;
        }
        let mut frozen = vec![false; flows.len()];
        while frozen.iter().any(|f| !f) {
            let by_resource = (0..nres)
                .filter(|&r| unfrozen[r] > 0)
                .map(|r| residual[r] / unfrozen[r] as f64)
                .fold(f64::INFINITY, f64::min);
            let inc = flows
                .iter()
                .zip(&frozen)
                .filter(|(_, &z)| !z)
                .map(|(f, _)| f.cap - f.rate)
                .fold(by_resource, f64::min);
            if !inc.is_finite() {
                break; // only jobs on no resource, which `start` never adds
            }
            for (f, _) in flows.iter_mut().zip(&frozen).filter(|(_, &z)| !z) {
                f.rate += inc;
                for &r in &f.resources {
                    residual[r] -= inc;
                }
            }
            for (i, f) in flows.iter().enumerate() {
                let full = f.resources.iter().any(|&r| residual[r] <= 1e-9);
                if !frozen[i] && (full || f.cap - f.rate <= 1e-9) {
                    frozen[i] = true;
                    for &r in &f.resources {
                        unfrozen[r] -= 1;
                    }
                }
            }
        }
    }

    /// The current rate of `key`, MB/s (for tests and traces).
    pub fn rate(&self, key: K) -> Option<f64> {
        self.active.get(&key).map(|f| f.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> Contention {
        parse_contention(text, "c.toml").unwrap()
    }

    const DS: &str = "[[resource]]\nname = \"ds1\"\ncapacity_mb_s = 400\nmatch = \"datastore=ds1\"\njob_max_mb_s = 150\nloss_per_job = 0.1\n";

    #[test]
    fn throughput_peaks_at_three_jobs() {
        let r = &model(DS).resources[0];
        let total = |n: usize| (n as f64 * 150.0).min(r.effective(n));
        assert_eq!(total(1), 150.0);
        assert_eq!(total(2), 300.0);
        assert!(total(3) > total(2) && total(3) > total(4), "{}", total(3));
    }

    #[test]
    fn max_min_fair_with_two_resources() {
        // a on ds1 only; b on ds1 and a 100 MB/s link: b is held to 100 by the link, a
        // takes the rest of ds1 up to its cap of 150.
        let m = model(&format!(
            "{DS}[[resource]]\nname = \"link\"\ncapacity_mb_s = 100\nmatch = \"site=remote\"\n"
        ));
        let mut f: Flows<u32> = Flows::new(m);
        f.start(1, vec![0], 1500.0, 0);
        f.start(2, vec![0, 1], 1000.0, 0);
        let ds_total = 400.0 / 1.1;
        assert!((f.rate(2).unwrap() - 100.0).abs() < 1e-9);
        assert!((f.rate(1).unwrap() - 150.0f64.min(ds_total - 100.0)).abs() < 1e-9);
        // a (1500 MB at 150) ends at 10 s; b (1000 at 100) at 10 s too.
        assert_eq!(f.next_end(), Some(10_000));
        assert_eq!(f.take_done(10_000), vec![1, 2]);
    }

    #[test]
    fn a_start_slows_the_running_job_down() {
        let mut f: Flows<u32> = Flows::new(model(
            "[[resource]]\nname = \"d\"\ncapacity_mb_s = 100\nmatch = \"\"\n",
        ));
        f.start(1, vec![0], 1000.0, 0); // alone: 10 s
        f.start(2, vec![0], 250.0, 5_000); // 500 left each at 50 MB/s: 2 ends at 10 s
        assert_eq!(f.next_end(), Some(10_000));
        assert_eq!(f.take_done(10_000), vec![2]);
        // 1 has 250 left, alone again at 100 MB/s: ends at 12.5 s.
        assert_eq!(f.next_end(), Some(12_500));
    }

    #[test]
    fn file_errors_name_the_field() {
        let e = parse_contention(
            "[[resource]]\nname = \"d\"\ncapacity_mb_s = 0\nmatch = \"\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.toml: resource[0] (\"d\"): capacity_mb_s: expected a positive number, got 0"
        );
        let e =
            parse_contention("[[resource]]\nname = \"d\"\ncapacity = 1\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("unknown field `capacity`"), "{e}");
    }
}
