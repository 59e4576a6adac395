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
//! - [`compare`]: a server's recorded history and its replays side by side ([`compare::Column`]);
//! - [`mod@gantt`]: the picture of a run (`--gantt`), written by the small [`svg`] writer;
//! - [`html`]: the self-contained HTML report (`--report`);
//! - [`baselines`]: models of PBS, Bacula, Velero 1.17 and no limits at all, for
//!   `--compare pbs|bacula|velero-1.17|unlimited` ([`baseline`] runs any of them);
//! - [`contention`]: shared resources whose throughput the running jobs share
//!   ([`Contention`], `--contention`), taken by [`simulate_with`] and [`run_with`];
//! - [`sweep`](mod@sweep): one run per value of a limit, the best named ([`SweepReport`]);
//! - [`report`]: the summary printed by `lockgate simulate` ([`Report`], [`Summary`]).
#![warn(missing_docs)]

pub mod assert;
pub mod baselines;
pub mod bound;
pub mod compare;
pub mod contention;
pub mod forecast;
pub mod gantt;
pub mod html;
pub mod input;
pub mod pbs_shape;
pub mod report;
pub mod sim;
pub mod svg;
pub mod sweep;
pub mod velero;

pub use gantt::{gantt, Gantt};

pub use bound::{lower_bound, LowerBound};
pub use contention::{parse_contention, Contention, ContentionError};
pub use input::{parse_nodes, parse_workload, InputError, NodeSpec, WorkloadJob};
pub use report::{NodeBusy, Report, ScopePeak, Slowdown, Summary, Waits};
pub use sim::{
    simulate, simulate_at, simulate_at_with, simulate_with, JobRecord, Run, SimError, STOP_MS,
};
pub use sweep::{sweep, SweepError, SweepReport, SweepSpec};

use lockgate_core::Policy;

/// A baseline to compare lockgate against (`--compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Baseline {
    /// Velero's node-agent admission ([`velero`]).
    Velero,
    /// Proxmox Backup Server: no limit, group locks, failed attempts retried
    /// ([`baselines::pbs`]).
    Pbs,
    /// Bacula's director: strict priority, head-of-line blocking, 30 s re-check
    /// ([`baselines::bacula`]).
    Bacula,
    /// Velero 1.17's best-effort prepare queue ([`baselines::velero117`]).
    Velero117,
    /// No limits at all ([`baselines::unlimited`]).
    Unlimited,
}

/// Every baseline name, for messages.
pub const BASELINES: &str = "velero, velero-1.17, pbs, bacula, unlimited";

impl Baseline {
    /// The name used on the command line and as the key under `"compare"`.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Velero => "velero",
            Baseline::Pbs => "pbs",
            Baseline::Bacula => "bacula",
            Baseline::Velero117 => "velero-1.17",
            Baseline::Unlimited => "unlimited",
        }
    }

    /// Parses a baseline name.
    pub fn parse(text: &str) -> Option<Baseline> {
        match text {
            "velero" => Some(Baseline::Velero),
            "pbs" => Some(Baseline::Pbs),
            "bacula" => Some(Baseline::Bacula),
            "velero-1.17" => Some(Baseline::Velero117),
            "unlimited" => Some(Baseline::Unlimited),
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
    run_with(policy, nodes, jobs, compare, None)
}

/// Runs one baseline on the input (under the contention model when one is given).
pub fn baseline(
    b: Baseline,
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    contention: Option<&Contention>,
) -> Run {
    match b {
        Baseline::Velero => velero::simulate_with(policy, nodes, jobs, contention),
        Baseline::Pbs => baselines::pbs::simulate(policy, nodes, jobs, contention),
        Baseline::Bacula => baselines::bacula::simulate(policy, nodes, jobs, contention),
        Baseline::Velero117 => baselines::velero117::simulate(policy, nodes, jobs, contention),
        Baseline::Unlimited => baselines::unlimited::simulate(policy, nodes, jobs, contention),
    }
}

/// [`run`] with a contention model: lockgate and every baseline take their run times
/// from it.
///
/// # Errors
/// As [`run`].
pub fn run_with(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    compare: &[Baseline],
    contention: Option<&Contention>,
) -> Result<Report, SimError> {
    run_keeping_records(policy, nodes, jobs, compare, contention).map(|(report, _)| report)
}

/// [`run_with`], also giving lockgate's [`Run`] (its per-job records, for the pictures),
/// so a caller that needs both simulates once.
///
/// # Errors
/// As [`run`].
pub fn run_keeping_records(
    policy: &Policy,
    nodes: &[NodeSpec],
    jobs: &[WorkloadJob],
    compare: &[Baseline],
    contention: Option<&Contention>,
) -> Result<(Report, Run), SimError> {
    let lockgate = simulate_with(policy, nodes, jobs, contention)?;
    let bound = lower_bound(policy, nodes, jobs);
    let mut compared = std::collections::BTreeMap::new();
    for &b in compare {
        let run = baseline(b, policy, nodes, jobs, contention);
        compared.insert(b.name().to_string(), Summary::from_run(&run));
    }
    let report = Report::new(Summary::from_run(&lockgate), &bound, compared);
    Ok((report, lockgate))
}
