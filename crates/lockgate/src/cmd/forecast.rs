//! `lockgate forecast`: when the queue and the scheduled runs up to a time are done (p50 and
//! p90), which jobs would miss that time, and which scope is the bottleneck
//! (docs/forecasts.md).

use super::output::{self, or_dash, print_json, table};
use super::session;
use crate::GlobalArgs;
use lockgate_api::{ForecastQuery, ForecastView};
use std::process::ExitCode;

/// Arguments of `lockgate forecast`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan the schedules' runs up to this time and list the jobs that would end after it:
    /// RFC 3339, or a duration from now (8h). Default: 24 hours from now.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only the jobs this match expression selects: "kind=backup", "datastore in (a, b)".
    #[arg(long = "match", value_name = "EXPR")]
    selector: Option<String>,
}

fn time_or_unknown(t: Option<&String>) -> String {
    t.map_or_else(|| "unknown".to_string(), |t| output::time(t))
}

/// The forecast for people: the totals, the bottleneck, then the jobs that miss `until`.
fn render(f: &ForecastView) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let _ = writeln!(text, "{} jobs up to {}", f.jobs, output::time(&f.until));
    let _ = writeln!(
        text,
        "done (p50):  {}\ndone (p90):  {}",
        time_or_unknown(f.done_p50.as_ref()),
        time_or_unknown(f.done_p90.as_ref())
    );
    if f.unknown > 0 {
        let _ = writeln!(
            text,
            "{} jobs have no estimate (no successful run of their kind yet; see [forecast] default_run)",
            f.unknown
        );
    }
    match &f.bottleneck {
        Some(b) => {
            let s = f.waits_s.get(b).copied().unwrap_or(0.0);
            let _ = writeln!(
                text,
                "bottleneck:  {b} ({} of waiting)",
                output::duration((s * 1000.0) as u64)
            );
        }
        None => text.push_str("bottleneck:  none (no job waits on a full scope)\n"),
    }
    if !f.complete {
        text.push_str(
            "note: the forecast was cut short by its time bound; later jobs are unknown\n",
        );
    }
    let late = f.missing.len() - f.unknown;
    let _ = writeln!(
        text,
        "{late} jobs would end after {}",
        output::time(&f.until)
    );
    text
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let until = args
        .until
        .as_deref()
        .map(super::queue::until_text)
        .transpose()?;
    let f = client.forecast(&ForecastQuery {
        until,
        r#match: args.selector,
    })?;
    if output::json(global) {
        print_json(&f);
        return Ok(ExitCode::SUCCESS);
    }
    output::print_text(&render(&f));
    if !f.missing.is_empty() {
        let rows: Vec<Vec<String>> = f
            .missing
            .iter()
            .map(|j| {
                vec![
                    or_dash(j.id),
                    j.schedule.clone().unwrap_or_else(|| "-".into()),
                    j.kind.clone(),
                    j.state.clone(),
                    time_or_unknown(j.estimate.start_p50.as_ref()),
                    time_or_unknown(j.estimate.end_p90.as_ref()),
                ]
            })
            .collect();
        table(
            &["ID", "SCHEDULE", "KIND", "STATE", "START P50", "END P90"],
            &rows,
        );
    }
    Ok(ExitCode::SUCCESS)
}
