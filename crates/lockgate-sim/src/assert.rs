//! Policy assertions (`lockgate policy test --assert FILE`): promises an admin writes about
//! a policy, checked against a simulated run of a workload, with the numbers that decided.
//!
//! ```toml
//! [[assert]]                      # a scope never above N
//! scope = "limit:per-storage[storage=s3-archive]"
//! max = 2
//!
//! [[assert]]                      # a kind's p90 wait under a bound
//! kind = "data-upload"
//! wait_p90 = "10m"
//!
//! [[assert]]                      # the nightly window done by a time (from the workload's 0)
//! done_within = "6h"
//!
//! [[assert]]                      # every restore starts within a bound of its submit
//! kind = "data-download"
//! start_within = "2m"
//!
//! [[assert]]                      # ... or at the first slot that frees after its submit
//! kind = "data-download"
//! start_within_releases = 1
//! ```
//!
//! # Invariants
//! - **Every error names its line.** A file that does not parse, an unknown key, an
//!   assertion with none or two of the checks, a scope the run never saw or a kind the
//!   workload does not have: refused before anything is judged, with `FILE:LINE`.
//! - **A result carries its numbers**: what was measured, the bound, and how many jobs it
//!   was measured over, so a failure says by how much.
//! - **Nothing unfinished passes a time bound**: a job that never started fails
//!   `start_within`, `start_within_releases` and `wait_p90`, and one that never ended
//!   fails `done_within`.
//! - **A slot release is read from the records**, not assumed: the instant a job of the
//!   run ends, or a two-stage job leaves its prepare step (its prepare slot frees).

use crate::report::secs;
use crate::report::ScopePeak;
use crate::sim::{JobRecord, Run};
use crate::WorkloadJob;
use lockgate_core::durations::quantile;
use lockgate_core::time::parse_duration;
use std::time::Duration;

/// One assertion as written.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    scope: Option<String>,
    kind: Option<String>,
    max: Option<u64>,
    wait_p90: Option<String>,
    done_within: Option<String>,
    start_within: Option<String>,
    start_within_releases: Option<u64>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default, rename = "assert")]
    asserts: Vec<toml::Spanned<Raw>>,
}

/// What one assertion checks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "check")]
pub enum Check {
    /// The scope's peak never above `max`.
    Max {
        /// Scope name as `simulate` prints it.
        scope: String,
        /// The bound.
        max: u64,
    },
    /// The p90 of the wait (submit to admission) at most `bound_ms`.
    WaitP90 {
        /// The bound.
        bound_ms: u64,
    },
    /// Every job ended within `bound_ms` of the workload's 0.
    DoneWithin {
        /// The bound.
        bound_ms: u64,
    },
    /// Every job admitted within `bound_ms` of its submit.
    StartWithin {
        /// The bound.
        bound_ms: u64,
    },
    /// Every job admitted no later than the `releases`-th slot release after its submit
    /// (1: the first slot that frees is its).
    StartWithinReleases {
        /// The bound, at least 1.
        releases: u64,
    },
}

/// One assertion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Assertion {
    /// Its line in the file.
    pub line: usize,
    /// Its `name`, else a description made from it.
    pub name: String,
    /// Only the jobs of this kind (`None`: all).
    pub kind: Option<String>,
    /// What it checks.
    #[serde(flatten)]
    pub check: Check,
}

/// The result of one assertion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// The assertion.
    #[serde(flatten)]
    pub assertion: Assertion,
    /// Whether it held.
    pub ok: bool,
    /// What was measured, in words with its numbers.
    pub measured: String,
}

/// An assertion file that cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct AssertError {
    /// The file.
    pub file: String,
    /// Its line (1-based).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn duration_ms(text: &str) -> Result<u64, String> {
    parse_duration(text)
        .map(|d: Duration| d.as_millis() as u64)
        .map_err(|e| format!("{text:?}: {e}"))
}

/// Parses an assertion file. `file` is only used in errors.
///
/// # Errors
/// [`AssertError`] naming the line: a syntax error, an unknown key, an assertion with none
/// or more than one check, `max` without `scope`, a bad duration.
pub fn parse(text: &str, file: &str) -> Result<Vec<Assertion>, AssertError> {
    let err = |line: usize, message: String| AssertError {
        file: file.to_string(),
        line,
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        err(line, e.message().to_string())
    })?;
    if raw.asserts.is_empty() {
        return Err(err(1, "no [[assert]] table: nothing to check".into()));
    }
    let mut out = Vec::new();
    for spanned in raw.asserts {
        let line = line_of(text, spanned.span().start);
        let r = spanned.into_inner();
        let given = [
            r.max.is_some(),
            r.wait_p90.is_some(),
            r.done_within.is_some(),
            r.start_within.is_some(),
            r.start_within_releases.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(err(
                line,
                "an [[assert]] has exactly one of max (with scope), wait_p90, done_within, start_within, start_within_releases".into(),
            ));
        }
        let given_ms = |t: &Option<String>| t.as_deref().map(duration_ms).transpose();
        let check = if let Some(max) = r.max {
            let Some(scope) = r.scope.clone() else {
                return Err(err(
                    line,
                    "max needs a scope (a name `lockgate simulate` prints under scopes)".into(),
                ));
            };
            if r.kind.is_some() {
                return Err(err(line, "max is per scope: a kind does not apply".into()));
            }
            Check::Max { scope, max }
        } else if r.scope.is_some() {
            return Err(err(line, "scope goes with max only".into()));
        } else if let Some(b) =
            given_ms(&r.wait_p90).map_err(|m| err(line, format!("wait_p90 {m}")))?
        {
            Check::WaitP90 { bound_ms: b }
        } else if let Some(b) =
            given_ms(&r.done_within).map_err(|m| err(line, format!("done_within {m}")))?
        {
            Check::DoneWithin { bound_ms: b }
        } else if let Some(releases) = r.start_within_releases {
            if releases == 0 {
                return Err(err(
                    line,
                    "start_within_releases is at least 1 (1: the first slot release after the submit)".into(),
                ));
            }
            Check::StartWithinReleases { releases }
        } else {
            let b = given_ms(&r.start_within)
                .map_err(|m| err(line, format!("start_within {m}")))?
                .expect("one check is given");
            Check::StartWithin { bound_ms: b }
        };
        let name = r
            .name
            .unwrap_or_else(|| describe(&check, r.kind.as_deref()));
        out.push(Assertion {
            line,
            name,
            kind: r.kind,
            check,
        });
    }
    Ok(out)
}

fn describe(check: &Check, kind: Option<&str>) -> String {
    let jobs = kind.map_or("every job".to_string(), |k| format!("every {k}"));
    match check {
        Check::Max { scope, max } => format!("{scope} never above {max}"),
        Check::WaitP90 { bound_ms } => format!(
            "p90 wait of {} at most {}",
            kind.unwrap_or("all jobs"),
            bound(*bound_ms)
        ),
        Check::DoneWithin { bound_ms } => {
            format!("{jobs} done within {}", bound(*bound_ms))
        }
        Check::StartWithin { bound_ms } => {
            format!("{jobs} started within {} of its submit", bound(*bound_ms))
        }
        Check::StartWithinReleases { releases: 1 } => {
            format!("{jobs} started at the first slot release after its submit")
        }
        Check::StartWithinReleases { releases } => {
            format!("{jobs} started within {releases} slot releases of its submit")
        }
    }
}

/// Checks that every scope and kind the assertions name exists in the run (a misspelt
/// name would otherwise pass vacuously).
///
/// # Errors
/// [`AssertError`] at the assertion's line, listing what exists.
pub fn check_names(
    asserts: &[Assertion],
    jobs: &[WorkloadJob],
    scopes: &[ScopePeak],
    file: &str,
) -> Result<(), AssertError> {
    for a in asserts {
        if let Some(kind) = &a.kind {
            if !jobs.iter().any(|j| &j.kind == kind) {
                let mut kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
                kinds.sort();
                kinds.dedup();
                return Err(AssertError {
                    file: file.to_string(),
                    line: a.line,
                    message: format!(
                        "kind {kind:?}: no job of the workload has it (kinds: {})",
                        kinds.join(", ")
                    ),
                });
            }
        }
        if let Check::Max { scope, .. } = &a.check {
            if !scopes.iter().any(|s| &s.scope == scope) {
                let names: Vec<&str> = scopes.iter().map(|s| s.scope.as_str()).collect();
                return Err(AssertError {
                    file: file.to_string(),
                    line: a.line,
                    message: format!(
                        "scope {scope:?}: no job of the run touched it (scopes: {})",
                        names.join(", ")
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A measured duration in milliseconds for people (`12m30s`).
fn format_duration_ms(ms: u64) -> String {
    secs(ms as f64 / 1000.0)
}

/// A bound as the policy writes durations (`10m`).
fn bound(ms: u64) -> String {
    lockgate_core::time::format_duration(Duration::from_millis(ms))
}

/// Judges every assertion against the run of `jobs`.
pub fn judge(asserts: &[Assertion], jobs: &[WorkloadJob], run: &Run) -> Vec<Verdict> {
    asserts
        .iter()
        .map(|a| {
            // The records of the jobs the assertion is about.
            let chosen: Vec<(usize, &JobRecord)> = run
                .jobs
                .iter()
                .enumerate()
                .filter(|(i, _)| a.kind.as_ref().is_none_or(|k| &jobs[*i].kind == k))
                .collect();
            let (ok, measured) = match &a.check {
                Check::Max { scope, max } => max_peak(run, scope, *max),
                Check::WaitP90 { bound_ms } => wait_p90(&chosen, *bound_ms),
                Check::DoneWithin { bound_ms } => done_within(&chosen, *bound_ms),
                Check::StartWithin { bound_ms } => start_within(&chosen, *bound_ms),
                Check::StartWithinReleases { releases } => {
                    start_within_releases(&chosen, &release_instants(run), *releases)
                }
            };
            Verdict {
                assertion: a.clone(),
                ok,
                measured,
            }
        })
        .collect()
}

/// The wait of a job, submit to admission (`None`: it never started).
fn wait(r: &JobRecord) -> Option<u64> {
    r.admitted_ms.map(|at| at.saturating_sub(r.submitted_ms))
}

fn max_peak(run: &Run, scope: &str, max: u64) -> (bool, String) {
    let peak = run
        .scopes
        .iter()
        .find(|s| s.scope == scope)
        .map_or(0, |s| s.peak);
    (peak <= max, format!("peak {peak} (bound {max})"))
}

fn wait_p90(chosen: &[(usize, &JobRecord)], bound_ms: u64) -> (bool, String) {
    let mut waits: Vec<u64> = chosen.iter().filter_map(|(_, r)| wait(r)).collect();
    let never = chosen.len() - waits.len();
    if never > 0 {
        return (
            false,
            format!("{never} of {} jobs never started", chosen.len()),
        );
    }
    waits.sort_unstable();
    let p90 = quantile(&waits, 0.9);
    (
        p90 <= bound_ms,
        format!(
            "p90 wait {} over {} jobs (max {}; bound {})",
            format_duration_ms(p90),
            waits.len(),
            format_duration_ms(*waits.last().unwrap_or(&0)),
            bound(bound_ms)
        ),
    )
}

fn done_within(chosen: &[(usize, &JobRecord)], bound_ms: u64) -> (bool, String) {
    let never = chosen
        .iter()
        .filter(|(_, r)| r.finished_ms.is_none())
        .count();
    if never > 0 {
        return (
            false,
            format!("{never} of {} jobs never ended", chosen.len()),
        );
    }
    let last = chosen
        .iter()
        .filter_map(|(_, r)| r.finished_ms)
        .max()
        .unwrap_or(0);
    (
        last <= bound_ms,
        format!(
            "the last of {} jobs ended at {} (bound {})",
            chosen.len(),
            format_duration_ms(last),
            bound(bound_ms)
        ),
    )
}

fn start_within(chosen: &[(usize, &JobRecord)], bound_ms: u64) -> (bool, String) {
    // The longest wait; a job that never started counts as the longest.
    let worst = chosen
        .iter()
        .map(|(i, r)| (wait(r), *i))
        .max_by_key(|(w, _)| w.unwrap_or(u64::MAX));
    match worst {
        None => (true, "no job".into()),
        Some((None, i)) => (false, format!("workload job {} never started", i + 1)),
        Some((Some(w), i)) => (
            w <= bound_ms,
            format!(
                "the longest of {} waits {} (workload job {}; bound {})",
                chosen.len(),
                format_duration_ms(w),
                i + 1,
                bound(bound_ms)
            ),
        ),
    }
}

/// Every instant a slot frees, sorted, once each: a job ending, a two-stage job leaving
/// its prepare step.
fn release_instants(run: &Run) -> Vec<u64> {
    let mut at: Vec<u64> = run
        .jobs
        .iter()
        .flat_map(|r| {
            let left_prepare = r.started_ms.filter(|s| Some(*s) != r.admitted_ms);
            [r.finished_ms, left_prepare]
        })
        .flatten()
        .collect();
    at.sort_unstable();
    at.dedup();
    at
}

/// How many slot releases passed a job by: releases after its submit and before its
/// admission (`None`: it never started).
fn passed_by(r: &JobRecord, releases: &[u64]) -> Option<u64> {
    let admitted = r.admitted_ms?;
    let from = releases.partition_point(|&t| t <= r.submitted_ms);
    let to = releases.partition_point(|&t| t < admitted);
    Some(to.saturating_sub(from) as u64)
}

fn start_within_releases(
    chosen: &[(usize, &JobRecord)],
    releases: &[u64],
    bound: u64,
) -> (bool, String) {
    let worst = chosen
        .iter()
        .map(|(i, r)| (passed_by(r, releases), *i))
        .max_by_key(|(p, _)| p.unwrap_or(u64::MAX));
    match worst {
        None => (true, "no job".into()),
        Some((None, i)) => (false, format!("workload job {} never started", i + 1)),
        Some((Some(p), i)) => (
            p < bound,
            format!(
                "of {} jobs, the latest started at slot release {} after its submit \
                 (workload job {}; bound {bound})",
                chosen.len(),
                p + 1,
                i + 1
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(sub: u64, adm: Option<u64>, start: Option<u64>, fin: Option<u64>) -> JobRecord {
        JobRecord {
            submitted_ms: sub,
            admitted_ms: adm,
            started_ms: start,
            finished_ms: fin,
            node: None,
            outcome: None,
            run_alone_ms: None,
        }
    }

    #[test]
    fn releases_are_read_from_the_records() {
        // Two backups end at 10 and 20; a two-stage one leaves its prepare step at 15.
        let run = [
            rec(0, Some(0), Some(0), Some(10)),
            rec(0, Some(0), Some(15), Some(30)),
            rec(0, Some(0), Some(0), Some(20)),
        ];
        let run = Run {
            jobs: run.to_vec(),
            scopes: Vec::new(),
            nodes: Vec::new(),
        };
        let releases = release_instants(&run);
        assert_eq!(releases, [10, 15, 20, 30]);
        let at_first = rec(5, Some(10), None, None);
        let at_second = rec(5, Some(15), None, None);
        let at_once = rec(12, Some(12), None, None);
        let never = rec(5, None, None, None);
        assert_eq!(passed_by(&at_first, &releases), Some(0));
        assert_eq!(passed_by(&at_second, &releases), Some(1));
        assert_eq!(passed_by(&at_once, &releases), Some(0));
        assert_eq!(passed_by(&never, &releases), None);
        let chosen = [(0, &at_first), (1, &at_second)];
        let (ok, said) = start_within_releases(&chosen, &releases, 1);
        assert!(!ok, "{said}");
        assert!(
            said.contains("slot release 2 after its submit (workload job 2; bound 1)"),
            "{said}"
        );
        assert!(start_within_releases(&chosen, &releases, 2).0);
        assert!(!start_within_releases(&[(0, &never)], &releases, 9).0);
    }

    #[test]
    fn errors_name_their_line() {
        let cases = [
            ("[[assert]]\nmax = 2\n", 1, "max needs a scope"),
            (
                "[[assert]]\nscope = \"global\"\nmax = 2\n\n[[assert]]\nkind = \"b\"\n",
                5,
                "exactly one of",
            ),
            ("[[assert]]\nwait_p90 = \"10 parsecs\"\n", 1, "wait_p90"),
            (
                "[[assert]]\nwait_p90 = \"1m\"\ndone_within = \"1h\"\n",
                1,
                "exactly one of",
            ),
            ("[[assert]]\nmaximum = 3\n", 2, "unknown field"),
            ("[[assert]]\nstart_within_releases = 0\n", 1, "at least 1"),
            ("\n\n[[assert]\n", 3, ""),
            ("# nothing\n", 1, "no [[assert]]"),
            (
                "[[assert]]\nscope = \"global\"\nwait_p90 = \"1m\"\n",
                1,
                "scope goes with max",
            ),
        ];
        for (text, line, needle) in cases {
            let e = parse(text, "a.toml").expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
            assert!(
                e.to_string().starts_with(&format!("a.toml:{line}: ")),
                "{e}"
            );
        }
    }
}
