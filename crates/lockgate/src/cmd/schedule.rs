//! `lockgate schedule`: periodic schedules (design `schedules.md`).
//!
//! `add`, `ls`, `show` and `rm` talk to the server (`/v1/schedules`). `next` prints the next
//! planned times of a bare expression without any server: an argument that parses as an
//! expression is one (so a schedule named like a keyword, `daily`, is reached through
//! `show`); anything else is looked up on the server as a schedule name. Times of an
//! expression without a zone are read in this machine's local zone (`TZ`, else
//! `/etc/localtime`, else UTC); for a named schedule in the server's zone.

use super::output::{self, or_dash, print_json, table};
use super::{flags, session};
use crate::GlobalArgs;
use anyhow::{bail, Context};
use lockgate_api::{
    time, NextTimes, ScheduleJob, ScheduleRequest, ScheduleRetry, ScheduleRunView, ScheduleView,
};
use lockgate_core::calendar::Schedule;
use lockgate_core::Timestamp;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `lockgate schedule`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Create a schedule through the API (policy-file schedules are `[[schedule]]` tables).
    Add(Box<AddArgs>),
    /// Every schedule with its last run, that run's outcome and the next planned time.
    Ls,
    /// One schedule and its planned times, each with its job or "skipped" and why.
    Show {
        /// Schedule name.
        name: String,
        /// Show at most this many planned times (newest first).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Remove a schedule created through the API (runs already submitted are not touched).
    Rm {
        /// Schedule name.
        name: String,
    },
    /// Print the next planned times of an expression (no server needed) or of a schedule, as
    /// RFC 3339 UTC times.
    Next(NextArgs),
}

#[derive(Debug, clap::Args)]
struct AddArgs {
    /// Unique name: letters, digits or . _ : @ - (runs are owned by schedule:NAME).
    name: String,
    /// Calendar event (`mon..fri 02:00`, `*:0/15`, `sat *-1..7 03:30 Europe/Vienna`) or
    /// cron line (`30 2 * * 1-5`, `@daily`); without a zone, in the server's local time.
    #[arg(long, value_name = "EXPR")]
    when: String,
    #[command(flatten)]
    job: flags::JobShape,
    /// When the previous run is still queued or running: skip this one (default), queue
    /// both, or cancel the previous one (only if queued, or even if running).
    #[arg(long, value_enum)]
    duplicates: Option<DuplicatesArg>,
    /// After the server was down across planned times: one catch-up run (default) or none.
    #[arg(long, value_enum)]
    misfire: Option<MisfireArg>,
    /// A run not admitted within this long of its planned time ends `expired`.
    #[arg(long, value_parser = flags::duration)]
    max_start_delay: Option<Duration>,
    /// Spread runs by up to this much (the same offset for a given planned time).
    #[arg(long, value_parser = flags::duration)]
    jitter: Option<Duration>,
    /// Queue a failed run again this many times (a cancelled run never).
    #[arg(long, requires = "retry_interval")]
    retry_times: Option<u32>,
    /// Wait this long between a failure and its retry.
    #[arg(long, value_parser = flags::duration, requires = "retry_times")]
    retry_interval: Option<Duration>,
    /// Each run waits for the latest run of this schedule planned at or before it to end
    /// (verify after the same night's backup); without such a run it does not wait.
    #[arg(long, value_name = "SCHEDULE")]
    after: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum DuplicatesArg {
    Skip,
    Queue,
    CancelQueued,
    CancelRunning,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum MisfireArg {
    RunOnce,
    Skip,
}

#[derive(Debug, clap::Args)]
struct NextArgs {
    /// An expression (`mon..fri 02:00`, `30 2 * * 1-5`) or the name of a schedule.
    #[arg(value_name = "EXPR|NAME")]
    target: String,
    /// Times after this one (RFC 3339; default: now).
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// How many times.
    #[arg(short = 'n', default_value_t = 5)]
    n: usize,
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Next(a) => next(global, a)?,
        Sub::Add(a) => {
            let view = session::client(global)?.create_schedule(&request(*a))?;
            if output::json(global) {
                print_json(&view);
            } else {
                list_table(std::slice::from_ref(&view));
            }
        }
        Sub::Ls => {
            let list = session::client(global)?.schedules()?;
            if output::json(global) {
                print_json(&list);
            } else {
                list_table(&list.schedules);
            }
        }
        Sub::Show { name, limit } => {
            let view = session::client(global)?.schedule(&name, limit)?;
            if output::json(global) {
                print_json(&view);
            } else {
                show(&view);
            }
        }
        Sub::Rm { name } => {
            let v = session::client(global)?.delete_schedule(&name)?;
            if output::json(global) {
                print_json(&v);
            } else {
                println!("removed schedule {name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn request(a: AddArgs) -> ScheduleRequest {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    ScheduleRequest {
        name: a.name,
        when: a.when,
        job: ScheduleJob {
            executor: a.job.executor(),
            kind: a.job.kind,
            attrs: a.job.job.attr_map(),
            priority: a.job.job.priority,
            cost: a.job.job.cost.iter().cloned().collect(),
            node: a.job.job.node,
            node_selector: a.job.node_selector,
            two_stage: a.job.two_stage.then_some(true),
            max_wait_s: None,
            max_run_s: secs(a.job.max_run),
        },
        duplicates: a.duplicates.map(|d| {
            match d {
                DuplicatesArg::Skip => "skip",
                DuplicatesArg::Queue => "queue",
                DuplicatesArg::CancelQueued => "cancel-queued",
                DuplicatesArg::CancelRunning => "cancel-running",
            }
            .into()
        }),
        misfire: a.misfire.map(|m| {
            match m {
                MisfireArg::RunOnce => "run-once",
                MisfireArg::Skip => "skip",
            }
            .into()
        }),
        max_start_delay_s: secs(a.max_start_delay),
        jitter_s: secs(a.jitter),
        retry: match (a.retry_times, a.retry_interval) {
            (Some(times), Some(interval)) => Some(ScheduleRetry {
                times,
                interval_s: interval.as_secs_f64(),
            }),
            _ => None,
        },
        after: a.after,
    }
}

/// `schedule next`: an expression is computed here; a name is asked of the server (for its
/// expression and zone), and the times are computed here too.
fn next(global: &GlobalArgs, a: NextArgs) -> anyhow::Result<()> {
    let from = match &a.from {
        Some(t) => time::parse(t).map_err(|m| anyhow::anyhow!("--from: {m}"))?,
        None => Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        ),
    };
    let (expr, zone) = match Schedule::parse(&a.target) {
        Ok(expr) => (expr, lockgate_host::zone::local_zone()),
        Err(parse) => lookup(global, &a.target, &parse)?,
    };
    let mut times = Vec::with_capacity(a.n);
    let mut t = from.0;
    while times.len() < a.n {
        match expr.next_after(t, &zone) {
            Ok(Some(n)) => {
                times.push(time::format(Timestamp(n)));
                t = n;
            }
            Ok(None) => break,
            Err(e) => bail!("{:?}: {e}", expr.text()),
        }
    }
    if output::json(global) {
        print_json(&NextTimes {
            expr: expr.text().to_string(),
            next: times,
        });
    } else {
        if times.is_empty() {
            eprintln!("lockgate: {:?} never elapses after --from", expr.text());
        }
        for t in times {
            println!("{t}");
        }
    }
    Ok(())
}

/// The expression and zone of the schedule named `name`, or an error that also says why
/// `name` is not an expression.
fn lookup(
    global: &GlobalArgs,
    name: &str,
    parse: &lockgate_core::calendar::CalendarError,
) -> anyhow::Result<(Schedule, String)> {
    if !lockgate_core::schedule::valid_name(name) {
        bail!("invalid schedule expression {name:?}: {parse}");
    }
    let client = session::client(global)?;
    match client.schedule(name, 1) {
        Ok(view) => {
            let expr = Schedule::parse(&view.when)
                .with_context(|| format!("schedule {name:?} has the expression {:?}", view.when))?;
            Ok((expr, view.zone))
        }
        Err(e) if e.status() == Some(404) => bail!(
            "invalid schedule expression {name:?}: {parse}; nor is it the name of a schedule on {}",
            global.server
        ),
        Err(e) => bail!("invalid schedule expression {name:?}: {parse} (as a schedule name: {e})"),
    }
}

fn outcome(run: Option<&ScheduleRunView>) -> String {
    match run {
        None => "-".into(),
        Some(r) => match (r.job, r.state) {
            (Some(id), Some(state)) => format!("job {id} {state}"),
            (Some(id), None) => format!("job {id}"),
            (None, _) => "skipped".into(),
        },
    }
}

fn list_table(list: &[ScheduleView]) {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.source.clone(),
                s.when.clone(),
                or_dash(s.last_run.as_ref().map(|r| r.planned.clone())),
                outcome(s.last_run.as_ref()),
                match (&s.error, &s.next) {
                    (Some(_), _) => "suspended".into(),
                    (None, n) => or_dash(n.as_ref()),
                },
            ]
        })
        .collect();
    table(
        &["NAME", "SOURCE", "WHEN", "LAST", "OUTCOME", "NEXT"],
        &rows,
    );
}

fn show(s: &ScheduleView) {
    output::print_text(&format!("name:        {}", s.name));
    output::print_text(&format!("source:      {}", s.source));
    output::print_text(&format!(
        "when:        {} (zone {} for times without one)",
        s.when, s.zone
    ));
    let attrs: Vec<String> = s
        .job
        .attrs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    output::print_text(&format!(
        "job:         kind {} {}",
        s.job.kind,
        attrs.join(",")
    ));
    output::print_text(&format!(
        "duplicates:  {}   misfire: {}",
        s.duplicates, s.misfire
    ));
    output::print_text(&format!("next:        {}", or_dash(s.next.as_ref())));
    if let Some(e) = &s.error {
        output::print_text(&format!("suspended:   {e}"));
    }
    println!();
    let rows: Vec<Vec<String>> = s
        .history
        .iter()
        .map(|r| {
            vec![
                r.planned.clone(),
                r.job
                    .map(|j| j.to_string())
                    .unwrap_or_else(|| "skipped".into()),
                or_dash(r.state),
                or_dash(r.note.as_ref()),
            ]
        })
        .collect();
    table(&["PLANNED", "JOB", "STATE", "NOTE"], &rows);
}
