//! `lockgate events`: the event log, or (--follow) the live stream.

use super::{output, session};
use crate::GlobalArgs;
use lockgate_api::EventView;
use std::process::ExitCode;

/// Arguments of `lockgate events`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep streaming new events (Server-Sent Events; resumes after reconnects).
    #[arg(long)]
    pub follow: bool,
    /// Only events after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: u64,
}

fn line(ev: &EventView) -> String {
    let ty = ev.data.get("type").and_then(|v| v.as_str()).unwrap_or("?");
    let rest = match ty {
        "job" => {
            let change = ev
                .data
                .get("change")
                .and_then(|v| v.as_str())
                .unwrap_or("?");
            let job = ev.data.get("job");
            let f = |k: &str| {
                job.and_then(|j| j.get(k))
                    .map(|v| v.to_string().trim_matches('"').to_string())
                    .unwrap_or_default()
            };
            format!(
                "job {} {change}: {} ({} by {})",
                f("id"),
                f("state"),
                f("kind"),
                f("owner")
            )
        }
        _ => {
            let mut d = ev.data.clone();
            d.remove("type");
            format!("{ty} {}", serde_json::Value::Object(d))
        }
    };
    format!("{:>6}  {}  {rest}", ev.seq, ev.at)
}

/// Runs the subcommand (JSON: one event per line).
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let json = output::json(global);
    let print = |ev: &EventView| {
        if json {
            println!("{}", serde_json::to_string(ev).expect("serializes"));
        } else {
            output::print_text(&line(ev));
        }
    };
    let mut after = args.after;
    loop {
        let page = client.events(after)?;
        if page.events.is_empty() {
            break;
        }
        for ev in &page.events {
            print(ev);
            after = ev.seq;
        }
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let r = client.follow_events(after, |ev| {
            print(&ev);
            after = ev.seq;
            true
        });
        match r {
            Ok(()) => {}
            Err(e) if e.is_temporary() => eprintln!("lockgate: {e}; reconnecting"),
            Err(e) => return Err(e.into()),
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
