//! `lockgate simulate --sweep SPEC`: runs the same workload once per value of one number
//! of the policy and names the best value.
//!
//! `SPEC` is `limit:NAME=A..B` (the `max` of the `[[limit]]` named NAME), `global=A..B`
//! (`[global].max_running`) or `pool:NAME=A..B` (the capacity of the `[resources]` pool
//! NAME), with an inclusive range `1 <= A <= B`, at most [`MAX_POINTS`] values. For a limit
//! the value replaces `max` for every partition: its `values` overrides and `windows` are
//! dropped while sweeping (they would hide the value); for `global` its windows are.
//!
//! Each point reports the makespan, the waits (p50, p95, max), the per-job slowdown (run
//! time over run time alone: 1 for every job without a contention model) and the jobs
//! left unfinished. The best value is the one with the smallest makespan among those that
//! leave no more jobs unfinished than any other; ties go to the lower wait p95, then p50,
//! then to the smaller value (the cheaper setting). Every run is a full, deterministic
//! simulation: the sweep is exactly as repeatable as one run.

use crate::contention::Contention;
use crate::input::{NodeSpec, WorkloadJob};
use crate::report::{secs, Slowdown, Summary, Waits};
use crate::sim::{simulate_with, SimError};
use lockgate_core::Policy;
use serde::Serialize;
use std::fmt::Write as _;

/// The most values one sweep runs.
pub const MAX_POINTS: u32 = 256;

/// Which number a sweep sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepTarget {
    /// A `[[limit]]`'s `max`, by name.
    Limit(String),
    /// `[global].max_running`.
    Global,
    /// A `[resources]` pool's capacity, by name.
    Pool(String),
}

/// A parsed `--sweep` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    /// What is swept.
    pub target: SweepTarget,
    /// First value.
    pub from: u32,
    /// Last value (inclusive).
    pub to: u32,
}

/// A sweep cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// The argument does not parse.
    #[error("--sweep {given:?}: {expected}")]
    Syntax {
        /// The argument.
        given: String,
        /// What was expected instead.
        expected: String,
    },
    /// The policy has no limit or pool of that name.
    #[error("--sweep: the policy has no {what} named {name:?}; it has: {have}")]
    Unknown {
        /// `limit` or `pool`.
        what: &'static str,
        /// The name given.
        name: String,
        /// The names it has, comma-separated (`none` when empty).
        have: String,
    },
    /// One run failed.
    #[error("--sweep at {value}: {error}")]
    Run {
        /// The value being run.
        value: u32,
        /// The simulator's error.
        error: SimError,
    },
}

impl SweepSpec {
    /// Parses `limit:NAME=A..B`, `global=A..B` or `pool:NAME=A..B`.
    ///
    /// # Errors
    /// [`SweepError::Syntax`] naming what was expected.
    pub fn parse(text: &str) -> Result<SweepSpec, SweepError> {
        let bad = |expected: &str| SweepError::Syntax {
            given: text.to_string(),
            expected: expected.to_string(),
        };
        let form = "expected limit:NAME=A..B, global=A..B or pool:NAME=A..B";
        let (lhs, range) = text.split_once('=').ok_or_else(|| bad(form))?;
        let target = match lhs.trim() {
            "global" => SweepTarget::Global,
            l => match l.split_once(':') {
                Some(("limit", n)) if !n.is_empty() => SweepTarget::Limit(n.to_string()),
                Some(("pool", n)) if !n.is_empty() => SweepTarget::Pool(n.to_string()),
                _ => return Err(bad(form)),
            },
        };
        let range_form = "expected an inclusive range A..B of whole numbers with 1 <= A <= B";
        let (a, b) = range
            .trim()
            .split_once("..")
            .ok_or_else(|| bad(range_form))?;
        let (from, to) = match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            (Ok(a), Ok(b)) if 1 <= a && a <= b => (a, b),
            _ => return Err(bad(range_form)),
        };
        if to - from >= MAX_POINTS {
            return Err(bad(&format!("at most {MAX_POINTS} values")));
        }
        Ok(SweepSpec { target, from, to })
    }

    /// The spec as written (`limit:per-datastore=1..8`).
    pub fn label(&self) -> String {
        format!("{}={}..{}", self.name(), self.from, self.to)
    }

    fn name(&self) -> String {
        match &self.target {
            SweepTarget::Limit(n) => format!("limit:{n}"),
            SweepTarget::Global => "global".to_string(),
            SweepTarget::Pool(n) => format!("pool:{n}"),
        }
    }

    /// The policy with the swept number set to `value`.
    ///
    /// # Errors
    /// [`SweepError::Unknown`] when the policy has no such limit or pool.
    pub fn apply(&self, policy: &Policy, value: u32) -> Result<Policy, SweepError> {
        let mut p = policy.clone();
        match &self.target {
            SweepTarget::Global => {
                p.global.max_running = Some(value);
                p.global.windows.clear();
            }
            SweepTarget::Limit(name) => {
                let have = || names(policy.limits.iter().map(|l| l.name.as_str()));
                let unknown = || SweepError::Unknown {
                    what: "limit",
                    name: name.clone(),
                    have: have(),
                };
                let l = p.limits.iter_mut().find(|l| &l.name == name);
                let l = l.ok_or_else(unknown)?;
                l.max = Some(value);
                l.values.clear();
                l.windows.clear();
            }
            SweepTarget::Pool(name) => {
                let have = names(policy.resources.keys().map(String::as_str));
                let cap = p.resources.get_mut(name).ok_or(SweepError::Unknown {
                    what: "pool",
                    name: name.clone(),
                    have,
                })?;
                *cap = u64::from(value);
            }
        }
        Ok(p)
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// One value's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The value.
    pub value: u32,
    /// Makespan, seconds.
    pub makespan_s: f64,
    /// Waits for admission.
    pub wait_s: Waits,
    /// Per-job slowdown (1 without a contention model).
    pub slowdown: Slowdown,
    /// Jobs that did not succeed.
    pub unfinished: usize,
}

/// What `--sweep` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// The spec (`limit:per-datastore=1..8`).
    pub sweep: String,
    /// One point per value, in order.
    pub points: Vec<SweepPoint>,
    /// The best value (see the module docs).
    pub best: u32,
}

/// Runs the sweep.
///
/// # Errors
/// [`SweepError::Unknown`] for a limit or pool the policy lacks, [`SweepError::Run`] when
/// the engine refuses a workload job.
pub fn sweep(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    spec: &SweepSpec,
    contention: Option<&Contention>,
) -> Result<SweepReport, SweepError> {
    let mut points = Vec::new();
    for value in spec.from..=spec.to {
        let p = spec.apply(policy, value)?;
        let run = simulate_with(&p, nodes, jobs, contention)
            .map_err(|error| SweepError::Run { value, error })?;
        let s = Summary::from_run(&run);
        points.push(SweepPoint {
            value,
            makespan_s: s.makespan_s,
            wait_s: s.wait_s,
            slowdown: s.slowdown.unwrap_or(Slowdown {
                p50: 1.0,
                p95: 1.0,
                max: 1.0,
            }),
            unfinished: s.unfinished,
        });
    }
    let fewest_unfinished = points.iter().map(|p| p.unfinished).min().unwrap_or(0);
    let best = points
        .iter()
        .filter(|p| p.unfinished == fewest_unfinished)
        .min_by(|a, b| {
            a.makespan_s
                .total_cmp(&b.makespan_s)
                .then(a.wait_s.p95.total_cmp(&b.wait_s.p95))
                .then(a.wait_s.p50.total_cmp(&b.wait_s.p50))
                .then(a.value.cmp(&b.value))
        })
        .map_or(spec.from, |p| p.value);
    Ok(SweepReport {
        sweep: spec.label(),
        points,
        best,
    })
}

impl SweepReport {
    /// The report as a table for people, the best value marked.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "sweep {}", self.sweep);
        let _ = writeln!(
            out,
            "{:>7}{:>12}{:>10}{:>10}{:>10}{:>10}{:>12}",
            "VALUE", "MAKESPAN", "WAIT P50", "WAIT P95", "SLOW P50", "SLOW P95", "UNFINISHED"
        );
        for p in &self.points {
            let mark = if p.value == self.best {
                "  <- best"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{:>7}{:>12}{:>10}{:>10}{:>9.2}x{:>9.2}x{:>12}{mark}",
                p.value,
                secs(p.makespan_s),
                secs(p.wait_s.p50),
                secs(p.wait_s.p95),
                p.slowdown.p50,
                p.slowdown.p95,
                p.unfinished
            );
        }
        let name = self.sweep.split('=').next().unwrap_or_default();
        if let Some(b) = self.points.iter().find(|p| p.value == self.best) {
            let _ = writeln!(
                out,
                "best: {name} = {} (makespan {})",
                self.best,
                secs(b.makespan_s)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_forms_and_errors() {
        let s = SweepSpec::parse("limit:per-datastore=1..8").unwrap();
        assert_eq!(
            s,
            SweepSpec {
                target: SweepTarget::Limit("per-datastore".into()),
                from: 1,
                to: 8
            }
        );
        assert_eq!(s.label(), "limit:per-datastore=1..8");
        assert_eq!(
            SweepSpec::parse("global=2..2").unwrap().target,
            SweepTarget::Global
        );
        assert_eq!(
            SweepSpec::parse("pool:threads=8..24").unwrap().target,
            SweepTarget::Pool("threads".into())
        );
        for bad in [
            "per-datastore=1..8",
            "limit:x=0..3",
            "limit:x=4..3",
            "limit:x=3",
            "limit:=1..2",
        ] {
            assert!(SweepSpec::parse(bad).is_err(), "{bad}");
        }
        let e = SweepSpec::parse("limit:x=5..1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sweep \"limit:x=5..1\": expected an inclusive range A..B of whole numbers with 1 <= A <= B"
        );
    }

    #[test]
    fn unknown_limit_names_the_ones_there_are() {
        let p = Policy::from_toml("[[limit]]\nname = \"a\"\nmax = 1\n", None).unwrap();
        let e = SweepSpec::parse("limit:b=1..2")
            .unwrap()
            .apply(&p, 1)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sweep: the policy has no limit named \"b\"; it has: a"
        );
    }
}
