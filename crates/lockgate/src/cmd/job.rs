//! `lockgate job`: submit, list, show, explain, wait for, cancel, set (priority) and retry
//! jobs.

use super::output::{self, or_dash, print_json, render_table, table};
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::{ExplainView, JobQuery, JobView, SubmitRequest};
use lockgate_client::Client;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `lockgate job`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Submit a job (it is run by an agent or by whoever holds its lease).
    Submit(SubmitArgs),
    /// List jobs.
    Ls(LsArgs),
    /// Show one job.
    Show {
        /// Job id.
        id: u64,
    },
    /// Say why a job waits: position, effective priority and every condition that holds it.
    Explain {
        /// Job id.
        id: u64,
    },
    /// Wait until the job ends (or, with --from, until its state differs from STATE).
    Wait {
        /// Job id.
        id: u64,
        /// Return on the first change away from this state.
        #[arg(long)]
        from: Option<String>,
        /// Give up after this long (prints the job as it is).
        #[arg(long, value_parser = flags::duration)]
        timeout: Option<Duration>,
    },
    /// Cancel a job: queued at once; admitted: its holder is asked to stop.
    Cancel {
        /// Job id.
        id: u64,
        /// Revoke the lease at once (admin).
        #[arg(long)]
        force: bool,
    },
    /// Change a queued job: its priority (within your max_priority; admins any).
    Set {
        /// Job id.
        id: u64,
        /// The new priority; the queue re-ranks the job at once.
        #[arg(long, allow_hyphen_values = true)]
        priority: i64,
    },
    /// Queue a failed agent job again, as a new attempt with the same id.
    Retry {
        /// Job id.
        id: u64,
    },
}

#[derive(Debug, clap::Args)]
struct SubmitArgs {
    #[command(flatten)]
    shape: flags::JobShape,
    /// Do not start before this time (RFC 3339).
    #[arg(long)]
    not_before: Option<String>,
    /// Give up after waiting this long.
    #[arg(long, value_parser = flags::duration)]
    max_wait: Option<Duration>,
    /// Idempotency key: a resubmission with the same key returns the existing job.
    #[arg(long)]
    idempotency_key: Option<String>,
    #[command(flatten)]
    deps: flags::DepFlags,
}

#[derive(Debug, clap::Args)]
struct LsArgs {
    /// Only jobs in this state.
    #[arg(long)]
    state: Option<String>,
    /// Only jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Only jobs of this owner.
    #[arg(long)]
    owner: Option<String>,
    /// Only jobs on this node.
    #[arg(long)]
    node: Option<String>,
    /// Page size.
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// Jobs with a larger id than this.
    #[arg(long)]
    after: Option<u64>,
    /// Every page.
    #[arg(long)]
    all: bool,
}

/// One table row per job.
pub fn job_rows(jobs: &[JobView]) -> Vec<Vec<String>> {
    jobs.iter()
        .map(|j| {
            let attrs: Vec<String> = j.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                j.id.to_string(),
                j.kind.clone(),
                j.state.to_string(),
                j.owner.clone(),
                j.priority.to_string(),
                or_dash(j.node.as_ref()),
                j.submitted_at.clone(),
                attrs.join(","),
            ]
        })
        .collect()
}

const HEADER: &[&str] = &[
    "ID",
    "KIND",
    "STATE",
    "OWNER",
    "PRIO",
    "NODE",
    "SUBMITTED",
    "ATTRS",
];

/// One job as `job show` prints it: its table row and its message.
fn render_job(job: &JobView) -> String {
    let mut text = render_table(HEADER, &job_rows(std::slice::from_ref(job)));
    if let Some(m) = &job.message {
        text.push_str(&format!("message: {m}\n"));
    }
    text
}

/// `job explain` for people: the one-line text, then every holding condition.
fn render_explain(id: u64, ex: &ExplainView) -> String {
    let mut text = format!("job {id}: {}\n", ex.text);
    for r in &ex.reasons {
        text.push_str(&format!("  - {}\n", r.text));
    }
    text
}

fn show(global: &GlobalArgs, job: &JobView) {
    if output::json(global) {
        print_json(job);
    } else {
        output::print_text(&render_job(job));
    }
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    match args.command {
        Sub::Submit(a) => submit(global, &client, a)?,
        Sub::Ls(a) => ls(global, &client, a)?,
        Sub::Show { id } => show(global, &client.job(id)?),
        Sub::Explain { id } => {
            let ex = client.explain(id)?;
            if output::json(global) {
                print_json(&ex);
            } else {
                output::print_text(&render_explain(id, &ex));
            }
        }
        Sub::Wait { id, from, timeout } => wait(global, &client, id, from, timeout)?,
        Sub::Cancel { id, force } => show(global, &client.cancel(id, force)?),
        Sub::Set { id, priority } => show(global, &client.set_job(id, priority)?),
        Sub::Retry { id } => show(global, &client.retry_job(id)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `job submit`: the request from the flags, then the job as the server took it.
fn submit(global: &GlobalArgs, client: &Client, a: SubmitArgs) -> anyhow::Result<()> {
    let executor = a.shape.executor();
    let j = a.shape;
    let req = SubmitRequest {
        kind: j.kind,
        attrs: j.job.attr_map(),
        priority: j.job.priority,
        cost: j.job.cost_map(),
        node: j.job.node,
        node_selector: j.node_selector,
        executor,
        two_stage: j.two_stage.then_some(true),
        not_before: a.not_before,
        max_wait_s: a.max_wait.map(|d| d.as_secs_f64()),
        max_run_s: j.max_run.map(|d| d.as_secs_f64()),
        idempotency_key: a.idempotency_key,
        after: a.deps.after,
        after_ok: a.deps.after_ok,
    };
    let (job, created) = client.submit(&req)?;
    if !created && !output::json(global) {
        eprintln!("lockgate: an existing job has this idempotency key");
    }
    show(global, &job);
    Ok(())
}

/// `job ls`: one page, or every page with `--all`.
fn ls(global: &GlobalArgs, client: &Client, a: LsArgs) -> anyhow::Result<()> {
    let mut q = JobQuery {
        state: a.state,
        kind: a.kind,
        owner: a.owner,
        node: a.node,
        limit: Some(a.limit),
        after: a.after,
    };
    let mut jobs = Vec::new();
    let mut next;
    loop {
        let page = client.jobs(&q)?;
        jobs.extend(page.jobs);
        next = page.next;
        match next {
            Some(n) if a.all => q.after = Some(n),
            _ => break,
        }
    }
    if output::json(global) {
        print_json(&lockgate_api::JobList { jobs, next });
    } else {
        table(HEADER, &job_rows(&jobs));
        if let Some(n) = next {
            eprintln!("more: --after {n} (or --all)");
        }
    }
    Ok(())
}

/// `job wait`: long-polls until the job ends (or leaves `from`) or `timeout` passes.
fn wait(
    global: &GlobalArgs,
    client: &Client,
    id: u64,
    from: Option<String>,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let limit = timeout.unwrap_or(Duration::MAX);
    let from = match from {
        Some(f) => Some(
            lockgate_core::JobState::parse(&f)
                .ok_or_else(|| anyhow::anyhow!("--from: unknown state {f:?}"))?,
        ),
        None => None,
    };
    let mut job = client.job(id)?;
    loop {
        let done = match from {
            Some(f) => job.state != f,
            None => job.is_final(),
        };
        let left = limit.saturating_sub(start.elapsed());
        if done || left.is_zero() {
            break;
        }
        let secs = left.as_secs().clamp(1, 30);
        job = client.wait(id, job.state, secs)?;
    }
    show(global, &job);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testdata;

    #[test]
    fn job_ls_table() {
        let jobs = testdata::jobs();
        insta::assert_snapshot!(render_table(HEADER, &job_rows(&jobs)));
    }

    #[test]
    fn job_show_with_its_message() {
        insta::assert_snapshot!(render_job(&testdata::jobs()[2]));
    }

    #[test]
    fn job_explain_text() {
        insta::assert_snapshot!(render_explain(4, &testdata::explain()));
    }
}
