//! `lockgate events`: the event log, or (--follow) the live stream.
//!
//! A job event's line names the job beyond its id: its kind, attributes, owner and node,
//! then the change and the state (`job 5 backup datastore=ds1 by admin on pve1: admitted,
//! running`). While `--follow` cannot reach the server it says so once, with the URL once,
//! and then stays quiet until the stream is back and lost again.

use super::{output, session};
use crate::GlobalArgs;
use lockgate_api::{EventView, JobView};
use lockgate_client::ClientError;
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

/// `job 5 backup datastore=ds1,group=vm/100 by admin on pve1`.
fn job_words(j: &JobView) -> String {
    let mut text = format!("job {} {}", j.id, j.kind);
    let attrs: Vec<String> = j.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !attrs.is_empty() {
        text.push(' ');
        text.push_str(&attrs.join(","));
    }
    text.push_str(&format!(" by {}", j.owner));
    if let Some(n) = &j.node {
        text.push_str(&format!(" on {n}"));
    }
    text
}

/// One event in words (the `lockgate top` overview shows the same lines).
pub(super) fn line(ev: &EventView) -> String {
    let ty = ev.data.get("type").and_then(|v| v.as_str()).unwrap_or("?");
    let job = ev
        .data
        .get("job")
        .and_then(|j| serde_json::from_value::<JobView>(j.clone()).ok());
    let rest = match (ty, job) {
        ("job", Some(j)) => {
            let change = ev.data.get("change").and_then(|v| v.as_str());
            format!("{}: {}, {}", job_words(&j), change.unwrap_or("?"), j.state)
        }
        _ => {
            let mut d = ev.data.clone();
            d.remove("type");
            format!("{ty} {}", serde_json::Value::Object(d))
        }
    };
    format!("{:>6}  {}  {rest}", ev.seq, output::time(&ev.at))
}

/// What `--follow` says about a lost stream: the error, with the URL once (the
/// transport's message repeats it), or nothing when it said the same last time.
fn lost_note(e: &ClientError, last: &mut Option<String>) -> Option<String> {
    let text = match e {
        ClientError::Unreachable { url, message } => {
            let why = message.strip_prefix(&format!("{url}: ")).unwrap_or(message);
            format!("cannot reach the lockgate server at {url}: {why}")
        }
        other => other.to_string(),
    };
    if last.as_ref() == Some(&text) {
        return None;
    }
    *last = Some(text.clone());
    Some(format!("lockgate: {text}; reconnecting every second"))
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
    let mut last_note = None;
    loop {
        let r = client.follow_events(after, |ev| {
            print(&ev);
            after = ev.seq;
            // The stream is back: a later loss is news again.
            last_note = None;
            true
        });
        match r {
            Ok(()) => {}
            Err(e) if e.is_temporary() => {
                if let Some(note) = lost_note(&e, &mut last_note) {
                    eprintln!("{}", output::escape_lines(&note));
                }
            }
            Err(e) => return Err(e.into()),
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, data: serde_json::Value) -> EventView {
        let mut v = serde_json::json!({"seq": seq, "at": "2026-03-27T22:17:41.5Z"});
        for (k, x) in data.as_object().expect("an object") {
            v[k] = x.clone();
        }
        serde_json::from_value(v).expect("an event")
    }

    #[test]
    fn event_lines_name_the_job() {
        let jobs = crate::cmd::testdata::jobs();
        let lines: Vec<String> = [
            event(
                1,
                serde_json::json!({"type": "job", "change": "admitted", "job": jobs[0]}),
            ),
            event(
                2,
                serde_json::json!({"type": "job", "change": "submitted", "job": jobs[1]}),
            ),
            event(
                12,
                serde_json::json!({"type": "job", "change": "finished", "job": jobs[3]}),
            ),
            event(
                130,
                serde_json::json!({"type": "node_lost", "node": "pve3"}),
            ),
        ]
        .iter()
        .map(line)
        .collect();
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn a_lost_stream_names_its_url_once() {
        let url = "http://127.0.0.1:9/v1/events/stream";
        let e = ClientError::Unreachable {
            url: url.into(),
            message: format!("{url}: Connection Failed: Connect error: connection refused"),
        };
        let mut last = None;
        let first = lost_note(&e, &mut last).expect("said once");
        assert_eq!(first.matches(url).count(), 1, "{first}");
        assert_eq!(
            first,
            format!("lockgate: cannot reach the lockgate server at {url}: Connection Failed: Connect error: connection refused; reconnecting every second")
        );
        assert_eq!(lost_note(&e, &mut last), None, "not on every reconnect");
        last = None;
        assert!(
            lost_note(&e, &mut last).is_some(),
            "again after the stream was back"
        );
    }
}
