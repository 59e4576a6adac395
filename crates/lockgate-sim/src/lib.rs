//! lockgate-sim: replays a workload against a policy in virtual time.
//!
//! The simulator drives the real engine ([`lockgate_core::Engine`] in
//! [`Mode::Indexed`](lockgate_core::Mode)) the way the server and the agents would: it
//! registers the nodes, submits every job at its `at`, and plays the holder of every
//! admitted job (a two-stage job reports `prepared` after `prepare_s`, is started by the
//! engine, runs `run_s` and finishes `succeeded`; leases and nodes are renewed every
//! TTL/3 so nothing expires spuriously). Nothing reads a clock: the same input gives the
//! same [`Report`], byte for byte.
//!
//! Main types:
//! - [`input`]: the file formats of `lockgate simulate` ([`NodeSpec`], [`WorkloadJob`]);
//! - [`simulate`]: the lockgate run, giving a [`Run`] (one [`JobRecord`] per job);
//! - [`bound`]: a lower bound on the makespan that any scheduler obeying the policy's
//!   limits must respect ([`LowerBound`]);
//! - [`pbs_shape`]: generated PBS-shaped nights (the `order = "window"` measurements);
//! - [`forecast`]: a live engine played forward with learned durations ([`forecast::forward`]);
//! - [`velero`]: a model of Velero's own admission, for `--compare velero`;
//! - [`report`]: the summary printed by `lockgate simulate` ([`Report`], [`Summary`]);
//! - [`compare`]: a server's recorded history and its replays side by side ([`compare::Column`]);
//! - [`mod@gantt`]: the picture of a run (`--gantt`), written by the small [`svg`] writer;
//! - [`html`]: the self-contained HTML report (`--report`).
#![warn(missing_docs)]

pub mod bound;
pub mod compare;
pub mod gantt;
pub mod html;
pub mod forecast;
pub mod input;
pub mod pbs_shape;
pub mod report;
pub mod sim;
pub mod svg;
pub mod velero;

pub use gantt::{gantt, Gantt};

pub use bound::{lower_bound, LowerBound};
pub use input::{parse_nodes, parse_workload, InputError, NodeSpec, WorkloadJob};
pub use report::{NodeBusy, Report, ScopePeak, Summary, Waits};
pub use sim::{simulate, simulate_at, JobRecord, Run, SimError, STOP_MS};

use lockgate_core::Policy;

/// A baseline to compare lockgate against (`--compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Baseline {
    /// Velero's node-agent admission ([`velero`]).
    Velero,
}

impl Baseline {
    /// The name used on the command line and as the key under `"compare"`.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Velero => "velero",
        }
    }

    /// Parses a baseline name.
    pub fn parse(text: &str) -> Option<Baseline> {
        match text {
            "velero" => Some(Baseline::Velero),
            _ => None,
        }
    }
}

/// Runs lockgate on the input, computes the lower bound and every requested baseline.
///
/// # Errors
/// [`SimError`] when a job of the workload is refused by the engine (the error names the
/// workload line).
pub fn run(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    compare: &[Baseline],
) -> Result<Report, SimError> {
    let lockgate = simulate(policy, nodes, jobs)?;
    let bound = lower_bound(policy, nodes, jobs);
    let mut compared = std::collections::BTreeMap::new();
    for &b in compare {
        let run = match b {
            Baseline::Velero => velero::simulate(policy, nodes, jobs),
        };
        compared.insert(b.name().to_string(), Summary::from_run(&run));
    }
    Ok(Report::new(Summary::from_run(&lockgate), &bound, compared))
}
