//! `--gantt out.svg` and `--report out.html` for `lockgate simulate` (plain and
//! `--from-server`): the pictures are drawn by `lockgate_sim::gantt`, the report by
//! `lockgate_sim::html`.
//!
//! With several runs (the recorded history, the active policy, a candidate), `--gantt`
//! draws the last one (the candidate's when given) and the report holds every one.

use anyhow::Context as _;
use lockgate_core::Policy;
use lockgate_sim::html::{html, Section};
use lockgate_sim::{gantt, Run, WorkloadJob};
use std::path::PathBuf;

/// One run to draw.
pub struct Drawn<'a> {
    /// Heading (`candidate policy (candidate.toml)`).
    pub title: String,
    /// The policy it ran under (its limited scopes are charted).
    pub policy: &'a Policy,
    /// The run.
    pub run: &'a Run,
}

/// Where to write.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `--gantt`.
    pub gantt: Option<PathBuf>,
    /// `--report`.
    pub report: Option<PathBuf>,
}

impl Outputs {
    /// Whether anything is to be drawn.
    pub fn any(&self) -> bool {
        self.gantt.is_some() || self.report.is_some()
    }
}

/// Writes the picture of the last run to `--gantt` and the report (`context` under the
/// title, `table` first, then every run's picture) to `--report`.
///
/// # Errors
/// A file that cannot be written (the message names it).
pub fn write(
    out: &Outputs,
    jobs: &[WorkloadJob],
    runs: &[Drawn<'_>],
    context: &str,
    table: &str,
) -> anyhow::Result<()> {
    let svgs: Vec<(String, String)> = runs
        .iter()
        .map(|d| (d.title.clone(), gantt(d.policy, jobs, d.run, &d.title).svg))
        .collect();
    let write = |path: &PathBuf, text: &str| {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    if let (Some(path), Some((_, svg))) = (&out.gantt, svgs.last()) {
        write(path, svg)?;
    }
    if let Some(path) = &out.report {
        let mut sections = vec![Section::Table("Summary".into(), table.to_string())];
        sections.extend(svgs.into_iter().map(|(t, s)| Section::Picture(t, s)));
        write(path, &html("lockgate simulate", context, &sections))?;
    }
    Ok(())
}
