//! The input files of `lockgate simulate` (api.md, "File formats").
//!
//! - `--nodes nodes.json`: a JSON array of `{"name": "n1", "labels": {"zone": "eu-1"}}`;
//! - `--workload jobs.jsonl`: one job a line, `{"at": 0.0, "kind": "data-upload", "attrs":
//!   {...}, "owner": "alice", "priority": 0, "node": "n1" | "node_selector": "zone=eu-1",
//!   "two_stage": true, "prepare_s": 5.0, "run_s": 60.0, "cost": {"threads": 1}}`; only
//!   `at`, `kind` and `run_s` are required. Blank lines and lines starting with `#` are
//!   skipped.
//!
//! Unknown keys are errors (a misspelt `run_s` would otherwise silently become a job that
//! takes no time). Every error names the file, the line and the field. What makes a job
//! valid is not checked here but by [`JobSpec::check`], through the engine's submit (the
//! error then names the job's position in the workload): [`WorkloadJob::spec`] is the one
//! translation to a [`JobSpec`].

use lockgate_core::job::JobSpec;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The owner of a workload job that names none.
pub const DEFAULT_OWNER: &str = "sim";

/// One node of `nodes.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Labels (Kubernetes syntax), matched by node rules and node selectors.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One line of `jobs.jsonl`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadJob {
    /// Submit time, seconds from the start of the run.
    pub at: f64,
    /// Job kind.
    pub kind: String,
    /// Attributes.
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// Owner (default [`DEFAULT_OWNER`]).
    #[serde(default)]
    pub owner: Option<String>,
    /// Priority (default: the kind's).
    #[serde(default)]
    pub priority: Option<i64>,
    /// Pinned node.
    #[serde(default)]
    pub node: Option<String>,
    /// Node selector of a movable job (`""`: any node).
    #[serde(default)]
    pub node_selector: Option<String>,
    /// Two-stage (default: the kind's).
    #[serde(default)]
    pub two_stage: Option<bool>,
    /// Seconds from prepare admission to `prepared` (two-stage jobs; default 0).
    #[serde(default)]
    pub prepare_s: Option<f64>,
    /// Seconds from start to finish.
    pub run_s: f64,
    /// Pool costs (default: the kind's).
    #[serde(default)]
    pub cost: Option<BTreeMap<String, u64>>,
    /// Data the job moves, MB, under the contention model (`--contention`); default:
    /// `run_s` at its rate alone. Ignored without a contention file.
    #[serde(default)]
    pub size_mb: Option<f64>,
}

impl WorkloadJob {
    /// Submit time in milliseconds.
    pub fn at_ms(&self) -> u64 {
        secs_to_ms(self.at)
    }

    /// Prepare time in milliseconds (0 when not given).
    pub fn prepare_ms(&self) -> u64 {
        secs_to_ms(self.prepare_s.unwrap_or(0.0))
    }

    /// Run time in milliseconds.
    pub fn run_ms(&self) -> u64 {
        secs_to_ms(self.run_s)
    }

    /// The owner, or [`DEFAULT_OWNER`].
    pub fn owner(&self) -> &str {
        self.owner.as_deref().unwrap_or(DEFAULT_OWNER)
    }

    /// The spec the simulator submits (and the lower bound checks) for this job.
    pub fn spec(&self) -> JobSpec {
        JobSpec {
            kind: self.kind.clone(),
            attrs: self.attrs.clone(),
            owner: self.owner().to_string(),
            priority: self.priority,
            node: self.node.clone(),
            node_selector: self.node_selector.clone(),
            cost: self.cost.clone(),
            two_stage: self.two_stage,
            ..JobSpec::default()
        }
    }

    /// Whether the job runs on a node (pinned or movable).
    pub fn on_node(&self) -> bool {
        self.node.is_some() || self.node_selector.is_some()
    }
}

/// Seconds (finite, non-negative) to whole milliseconds, rounded to nearest.
pub fn secs_to_ms(s: f64) -> u64 {
    (s * 1000.0).round().max(0.0) as u64
}

/// Milliseconds to seconds.
pub fn ms_to_secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// An input file is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct InputError {
    /// The file as named on the command line.
    pub file: String,
    /// 1-based line, when the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong (field, value given, what was expected).
    pub message: String,
}

/// Parses `nodes.json`.
///
/// # Errors
/// [`InputError`] for invalid JSON, an unknown key, an empty or duplicate name.
pub fn parse_nodes(text: &str, file: &str) -> Result<Vec<NodeSpec>, InputError> {
    let err = |line: Option<usize>, message: String| InputError {
        file: file.to_string(),
        line,
        message,
    };
    let nodes: Vec<NodeSpec> = serde_json::from_str(text).map_err(|e| {
        err(
            Some(e.line()),
            format!("{e}; expected a JSON array of {{\"name\": \"n1\", \"labels\": {{\"zone\": \"eu-1\"}}}}"),
        )
    })?;
    let mut seen = BTreeSet::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.name.trim().is_empty() {
            return Err(err(None, format!("node {i}: \"name\" must not be empty")));
        }
        if !seen.insert(n.name.as_str()) {
            return Err(err(None, format!("node {i}: duplicate name {:?}", n.name)));
        }
    }
    Ok(nodes)
}

/// serde_json's message without its " at line 1 column N" (the line is ours), with the
/// column kept.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(msg) => format!("{msg} (column {})", e.column()),
        None => text,
    }
}

/// Parses `jobs.jsonl`.
///
/// # Errors
/// [`InputError`] naming the line: invalid JSON, an unknown key, a missing `at`, `kind` or
/// `run_s`, a negative or non-finite time.
pub fn parse_workload(text: &str, file: &str) -> Result<Vec<WorkloadJob>, InputError> {
    let mut jobs = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| InputError {
            file: file.to_string(),
            line: Some(i + 1),
            message,
        };
        let job: WorkloadJob = serde_json::from_str(line).map_err(|e| err(without_position(&e)))?;
        for (field, value) in [
            ("at", Some(job.at)),
            ("run_s", Some(job.run_s)),
            ("prepare_s", job.prepare_s),
            ("size_mb", job.size_mb),
        ] {
            if let Some(v) = value {
                if !v.is_finite() || v < 0.0 {
                    return Err(err(format!(
                        "{field}: expected a non-negative number{}, got {v}",
                        if field == "size_mb" {
                            " of MB"
                        } else {
                            " of seconds"
                        }
                    )));
                }
            }
        }
        jobs.push(job);
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_job_and_defaults() {
        let jobs = parse_workload(
            "{\"at\": 1.5, \"kind\": \"backup\", \"run_s\": 60}\n\n# c\n",
            "w.jsonl",
        )
        .unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            (jobs[0].at_ms(), jobs[0].run_ms(), jobs[0].prepare_ms()),
            (1500, 60_000, 0)
        );
        assert_eq!(jobs[0].owner(), DEFAULT_OWNER);
        assert!(!jobs[0].on_node());
    }

    #[test]
    fn errors_name_line_and_field() {
        let text = "{\"at\": 0, \"kind\": \"b\", \"run_s\": 1}\n{\"at\": 0, \"kind\": \"b\", \"run\": 1}\n";
        let e = parse_workload(text, "w.jsonl").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(
            e.to_string().starts_with("w.jsonl:2: unknown field `run`"),
            "{e}"
        );
        let e =
            parse_workload("{\"at\": -1, \"kind\": \"b\", \"run_s\": 1}", "w.jsonl").unwrap_err();
        assert!(e.to_string().contains("at: expected a non-negative"), "{e}");
        let e = parse_nodes("[{\"name\": \"a\"}, {\"name\": \"a\"}]", "n.json").unwrap_err();
        assert!(e.message.contains("duplicate name \"a\""), "{e}");
    }
}
