//! `lockgate job`: submit, list, show, explain, wait for, cancel, set (priority) and retry
//! jobs, and read their logs (`job_logs.rs`).

use super::exit::Exit;
use super::output::{self, or_dash, print_json, table};
use super::{flags, session};
use crate::GlobalArgs;
use lockgate_api::{ExplainView, JobOrder, JobQuery, JobView, SubmitRequest};
use lockgate_client::Client;
use lockgate_core::policy::Executor;
use lockgate_core::{JobState, Timestamp};
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
        /// Wait until the job has ended and print how it ended (exit status as `job wait`).
        #[arg(long)]
        wait: bool,
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
    /// Print the output of the command the job ran (`lockgate run --log`, agent handlers).
    Logs(super::job_logs::LogsArgs),
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
    /// Only jobs that have not ended (queued, preparing, prepared, running).
    #[arg(long)]
    active: bool,
    /// Only jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Only jobs of this owner.
    #[arg(long)]
    owner: Option<String>,
    /// Only jobs on this node.
    #[arg(long)]
    node: Option<String>,
    /// Only jobs with this attribute (repeatable: all must hold).
    #[arg(long, value_name = "KEY=VALUE", value_parser = flags::key_value)]
    attr: Vec<(String, String)>,
    /// Page size.
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// Oldest first (the default is newest first).
    #[arg(long)]
    oldest_first: bool,
    /// Jobs with a smaller id than this (the next page, newest first).
    #[arg(long)]
    before: Option<u64>,
    /// Jobs with a larger id than this (the next page with --oldest-first).
    #[arg(long)]
    after: Option<u64>,
    /// Every page.
    #[arg(long)]
    all: bool,
}

/// How long a job waited and ran, in milliseconds, as of `now`: the wait from entering
/// the queue (its latest entry, after a retry) to admission, or until `now` while it is
/// queued, or until it ended unadmitted; the run from `started_at` to its end, or until
/// `now` while admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Durations {
    wait: Option<u64>,
    run: Option<u64>,
}

fn durations(j: &JobView, now: Timestamp) -> Durations {
    let at = |t: Option<&String>| t.and_then(|t| lockgate_api::time::parse(t).ok());
    let queued = at(j.queued_at.as_ref()).or(at(Some(&j.submitted_at)));
    let admitted = at(j.prepare_started_at.as_ref())
        .or(at(j.started_at.as_ref()))
        .filter(|a| queued.is_none_or(|q| *a >= q));
    let finished = at(j.finished_at.as_ref());
    let end = if j.state.is_terminal() {
        finished
    } else {
        Some(now)
    };
    let wait = match (queued, admitted) {
        (Some(q), Some(a)) => Some(a.since(q)),
        (Some(q), None) => end.map(|e| e.since(q)),
        _ => None,
    };
    let started = at(j.started_at.as_ref()).filter(|s| queued.is_none_or(|q| *s >= q));
    let run = match (started, end) {
        (Some(s), Some(e)) if j.state != JobState::Queued => Some(e.since(s)),
        _ => None,
    };
    Durations { wait, run }
}

/// One table row per job; the waits and runs of live jobs count up to `now`.
pub fn job_rows(jobs: &[JobView], now: Timestamp) -> Vec<Vec<String>> {
    jobs.iter()
        .map(|j| {
            let attrs: Vec<String> = j.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let d = durations(j, now);
            vec![
                j.id.to_string(),
                j.kind.clone(),
                j.state.to_string(),
                j.owner.clone(),
                j.priority.to_string(),
                or_dash(j.node.as_ref()),
                output::time(&j.submitted_at),
                output::time_or_dash(j.started_at.as_ref()),
                or_dash(d.wait.map(output::duration)),
                or_dash(d.run.map(output::duration)),
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
    "STARTED",
    "WAIT",
    "RUN",
    "ATTRS",
];

/// One job as `job show` prints it: `Field:  value` lines, its times (each in the fixed
/// width of [`output::time`]) and durations as of `now`, then its message.
/// The state, with "cancel requested" while an admitted job's holder has yet to stop.
fn state_text(job: &JobView) -> String {
    if job.cancel_requested && !job.is_final() {
        let why = if job.preempted() {
            "preempted"
        } else {
            "cancel requested"
        };
        format!("{} ({why})", job.state)
    } else {
        job.state.to_string()
    }
}

fn render_job(job: &JobView, now: Timestamp) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let mut field = |k: &str, v: String| {
        let _ = writeln!(text, "{k:<12} {v}");
    };
    let attrs: Vec<String> = job.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let d = durations(job, now);
    field("Id:", job.id.to_string());
    field("Kind:", job.kind.clone());
    field("State:", state_text(job));
    field("Owner:", job.owner.clone());
    field("Priority:", job.priority.to_string());
    field(
        "Executor:",
        match job.executor {
            Executor::Client => "client",
            Executor::Agent => "agent",
        }
        .to_string(),
    );
    field("Node:", or_dash(job.node.as_ref()));
    field(
        "Attrs:",
        or_dash((!attrs.is_empty()).then(|| attrs.join(","))),
    );
    field("Attempt:", job.attempt.to_string());
    field("Submitted:", output::time(&job.submitted_at));
    if job
        .queued_at
        .as_ref()
        .is_some_and(|q| *q != job.submitted_at)
    {
        field("Queued:", output::time_or_dash(job.queued_at.as_ref()));
    }
    if let Some(t) = &job.not_before {
        field("Not before:", output::time(t));
    }
    let admitted = job.prepare_started_at.as_ref().or(job.started_at.as_ref());
    field("Admitted:", output::time_or_dash(admitted));
    if job.two_stage {
        field("Prepared:", output::time_or_dash(job.prepared_at.as_ref()));
    }
    field("Started:", output::time_or_dash(job.started_at.as_ref()));
    field("Finished:", output::time_or_dash(job.finished_at.as_ref()));
    if let Some(t) = &job.retry_at {
        field("Retry at:", output::time(t));
    }
    field("Wait:", or_dash(d.wait.map(output::duration)));
    field("Run:", or_dash(d.run.map(output::duration)));
    if let Some(e) = &job.expected {
        // "p50 X, p90 Y (N runs, by KEY)": a stage's times and the size alike.
        let line = |p50: String, p90: String, runs: usize, basis: &str, key: &[String]| {
            let by = if key.is_empty() {
                basis.to_string()
            } else {
                key.join(",")
            };
            format!("p50 {p50}, p90 {p90} ({runs} runs, by {by})")
        };
        let stage = |s: &Option<lockgate_api::StageEstimateView>| match s {
            Some(s) => line(
                output::duration((s.p50_s * 1000.0) as u64),
                output::duration((s.p90_s * 1000.0) as u64),
                s.samples,
                &s.basis,
                &s.key,
            ),
            None => "-".into(),
        };
        if job.two_stage {
            field("Exp prepare:", stage(&e.prepare));
        }
        field("Expected:", stage(&e.run));
        if let Some(size) = &e.size {
            use lockgate_core::usage::format_bytes as b;
            let (p50, p90) = (b(size.p50_bytes), b(size.p90_bytes));
            field(
                "Exp size:",
                line(p50, p90, size.samples, &size.basis, &size.key),
            );
        }
        if let Some(end) = &e.end_at {
            field("Ends:", format!("{} at its own rate", output::time(end)));
        }
    }
    if let Some(u) = &job.usage {
        let (usage, rate) = usage_lines(u);
        field("Usage:", usage);
        field("Rate:", rate);
    }
    if let Some(m) = &job.message {
        field("Message:", m.clone());
    }
    text
}

/// A job's usage in two lines: the totals, then the rates (now, where two reports gave
/// one, and the mean).
fn usage_lines(u: &lockgate_api::UsageView) -> (String, String) {
    use lockgate_core::usage::format_bytes as b;
    let t = &u.totals;
    let totals = format!(
        "written {} ({} to disk), read {} ({} from disk), CPU {:.1}s, peak RSS {}",
        b(t.written_bytes),
        b(t.disk_written_bytes),
        b(t.read_bytes),
        b(t.disk_read_bytes),
        t.cpu_ms as f64 / 1000.0,
        b(t.peak_rss_bytes)
    );
    let one = |now: Option<u64>, mean: u64| match now {
        Some(now) => format!("{}/s now, mean {}/s", b(now), b(mean)),
        None => format!("mean {}/s", b(mean)),
    };
    let rates = format!(
        "written {}; read {}",
        one(u.written_per_s, u.mean_written_per_s),
        one(u.read_per_s, u.mean_read_per_s)
    );
    (totals, rates)
}

/// `job explain` for people: the summary (position and effective priority with its
/// terms), then every holding condition once, one per line. The one-line `text` of the
/// JSON ends with the same conditions joined by `; `; that tail is left out of the first
/// line so no reason is printed twice.
/// `job ID: ...` and one line per reason; estimate times past `now` say they are overdue.
pub(super) fn render_explain(id: u64, ex: &ExplainView, now: Timestamp) -> String {
    let reasons: Vec<&str> = ex.reasons.iter().map(|r| r.text.as_str()).collect();
    let tail = format!("; {}", reasons.join("; "));
    let head = match ex.text.strip_suffix(&tail) {
        Some(head) if !reasons.is_empty() => head,
        _ => ex.text.as_str(),
    };
    let mut text = format!("job {id}: {head}\n");
    for r in reasons {
        text.push_str(&format!("  - {r}\n"));
    }
    if let Some(e) = &ex.estimate {
        text.push_str(&format!("  estimate: {}\n", estimate_text(e, now)));
    }
    text
}

/// `start 02:10 (p90 02:40), end 03:05 (p90 04:00)`, `unknown` where history does not allow.
/// The estimate's times; one already past `now` says so (`overdue by 33s`) instead of
/// reading as a time to come.
pub(super) fn estimate_text(e: &lockgate_api::EstimateView, now: Timestamp) -> String {
    let t = |x: &Option<String>| match x.as_deref() {
        None => "unknown".to_string(),
        Some(text) => match lockgate_api::time::parse(text) {
            Ok(at) if at < now => format!(
                "{} (overdue by {})",
                output::time(text),
                output::duration(now.since(at))
            ),
            _ => output::time(text),
        },
    };
    format!(
        "start {} (p90 {}), end {} (p90 {})",
        t(&e.start_p50),
        t(&e.start_p90),
        t(&e.end_p50),
        t(&e.end_p90)
    )
}

fn show(global: &GlobalArgs, job: &JobView) {
    if output::json(global) {
        print_json(job);
    } else {
        output::print_text(&render_job(job, output::now()));
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
                output::print_text(&render_explain(id, &ex, output::now()));
            }
        }
        Sub::Wait { id, from, timeout } => {
            return Ok(wait(global, &client, id, from, timeout)?.into())
        }
        Sub::Cancel { id, force, wait: w } => {
            let job = client.cancel(id, force)?;
            if !w || job.is_final() {
                show(global, &job);
                return Ok(ExitCode::SUCCESS);
            }
            if !output::json(global) {
                eprintln!(
                    "lockgate: job {id}: cancel requested; waiting for its holder to stop it"
                );
            }
            return Ok(wait(global, &client, id, None, None)?.into());
        }
        Sub::Set { id, priority } => show(global, &client.set_job(id, priority)?),
        Sub::Retry { id } => show(global, &client.retry_job(id)?),
        Sub::Logs(a) => super::job_logs::run(global, &client, &a)?,
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

/// The listing query of `job ls`: newest first unless `--oldest-first`.
fn query(a: &LsArgs) -> JobQuery {
    let attr: Vec<String> = a.attr.iter().map(|(k, v)| format!("{k}={v}")).collect();
    JobQuery {
        state: a.state.clone(),
        kind: a.kind.clone(),
        owner: a.owner.clone(),
        node: a.node.clone(),
        limit: Some(a.limit),
        after: a.after,
        before: a.before,
        order: Some(if a.oldest_first {
            JobOrder::Asc
        } else {
            JobOrder::Desc
        }),
        active: a.active.then_some(true),
        attr: (!attr.is_empty()).then(|| attr.join(",")),
    }
}

/// `job ls`: one page, or every page with `--all`.
fn ls(global: &GlobalArgs, client: &Client, a: LsArgs) -> anyhow::Result<()> {
    let mut q = query(&a);
    let mut jobs = Vec::new();
    let mut next;
    loop {
        let page = client.jobs(&q)?;
        jobs.extend(page.jobs);
        next = page.next;
        match next {
            Some(n) if a.all && a.oldest_first => q.after = Some(n),
            Some(n) if a.all => q.before = Some(n),
            _ => break,
        }
    }
    if output::json(global) {
        print_json(&lockgate_api::JobList { jobs, next });
    } else {
        table(HEADER, &job_rows(&jobs, output::now()));
        if let Some(n) = next {
            let flag = if a.oldest_first { "after" } else { "before" };
            eprintln!("more: --{flag} {n} (or --all)");
        }
    }
    Ok(())
}

/// `job wait`: long-polls until the job ends (or leaves `from`) or `timeout` passes; the
/// exit code says how the job ended ([`Exit::of_job`]).
fn wait(
    global: &GlobalArgs,
    client: &Client,
    id: u64,
    from: Option<String>,
    timeout: Option<Duration>,
) -> anyhow::Result<Exit> {
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
    Ok(Exit::of_job(job.state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::output::render_table;
    use crate::cmd::testdata;

    /// The snapshots' clock: ten minutes after the fixtures' submit time.
    fn now() -> Timestamp {
        lockgate_api::time::parse("2026-03-27T22:27:41.250Z").unwrap()
    }

    #[test]
    fn job_ls_table() {
        let jobs = testdata::jobs();
        insta::assert_snapshot!(render_table(HEADER, &job_rows(&jobs, now())));
    }

    #[test]
    fn job_show_with_its_message() {
        insta::assert_snapshot!(render_job(&testdata::jobs()[2], now()));
    }

    #[test]
    fn job_show_has_times_and_durations() {
        let shown: Vec<String> = testdata::jobs()
            .iter()
            .map(|j| render_job(j, now()))
            .collect();
        insta::assert_snapshot!(shown.join("\n"));
    }

    #[test]
    fn durations_of_a_retried_job_count_from_its_latest_queue_entry() {
        let mut j = testdata::jobs()[0].clone();
        j.state = JobState::Queued;
        j.queued_at = Some("2026-03-27T22:25:41.250Z".into());
        let d = durations(&j, now());
        assert_eq!(
            d,
            Durations {
                wait: Some(120_000),
                run: None
            }
        );
    }

    #[test]
    fn job_ls_asks_newest_first_with_the_filters() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            ls: LsArgs,
        }
        let cli = Cli::parse_from([
            "ls",
            "--active",
            "--attr",
            "datastore=ds1",
            "--attr",
            "group=vm/100",
            "--kind",
            "backup",
        ]);
        let q = query(&cli.ls);
        assert_eq!(q.order, Some(JobOrder::Desc));
        assert_eq!(q.active, Some(true));
        assert_eq!(q.attr.as_deref(), Some("datastore=ds1,group=vm/100"));
        assert_eq!(q.kind.as_deref(), Some("backup"));
        let old = Cli::parse_from(["ls", "--oldest-first", "--after", "7"]);
        let q = query(&old.ls);
        assert_eq!(
            (q.order, q.after, q.active),
            (Some(JobOrder::Asc), Some(7), None)
        );
    }

    #[test]
    fn job_explain_text() {
        insta::assert_snapshot!(render_explain(4, &testdata::explain(), now()));
    }

    #[test]
    fn job_explain_prints_every_reason_once() {
        let ex = testdata::explain();
        let text = render_explain(4, &ex, now());
        for r in &ex.reasons {
            assert_eq!(text.matches(&r.text).count(), 1, "{text}");
        }
        let admissible = ExplainView {
            reasons: vec![],
            text: "queued, 1st in line, effective priority 0.00; admissible now".into(),
            ..ex
        };
        assert_eq!(
            render_explain(9, &admissible, now()),
            "job 9: queued, 1st in line, effective priority 0.00; admissible now\n"
        );
    }

    #[test]
    fn an_estimate_already_past_says_overdue_not_a_time_to_come() {
        let at = |ms: u64| lockgate_api::time::format(Timestamp(now().0 - ms));
        let ahead = lockgate_api::time::format(Timestamp(now().0 + 60_000));
        let e = lockgate_api::EstimateView {
            start_p50: Some(at(33_000)),
            start_p90: Some(ahead.clone()),
            end_p50: Some(ahead),
            ..Default::default()
        };
        let text = estimate_text(&e, now());
        assert!(text.starts_with("start "), "{text}");
        assert!(text.contains("(overdue by 33s)"), "{text}");
        assert_eq!(text.matches("overdue").count(), 1, "{text}");
    }
}
