//! `lockgate job logs ID [--follow] [--raw]`: the output of the command a job ran, as
//! its holder sent it (`lockgate run --log`, agent handlers).
//!
//! `--follow` long-polls `GET /v1/jobs/{id}/logs?after=SEQ&timeout_s=30`: the server answers
//! as soon as a line after SEQ is stored or the job ends, so a line shows up while the
//! command runs, and the command returns once the job has ended and every line is shown.
//!
//! On a terminal every control character of a line (ESC, BEL, CR, ...; bidirectional
//! overrides too) is shown escaped (`\x1b`), so a command's output cannot move the cursor,
//! retitle the window or hide text; `--raw` prints the bytes as they were, and so does
//! output to a file or a pipe.

use super::output;
use crate::GlobalArgs;
use lockgate_api::{LogLineView, LogStream};
use lockgate_client::{Client, RetryError};
use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Arguments of `lockgate job logs`.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Job id.
    pub id: u64,
    /// Keep printing new lines until the job ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print control characters as they are, also on a terminal.
    #[arg(long)]
    pub raw: bool,
    /// Start each line with the time it was read and its stream (stdout, stderr).
    #[arg(long)]
    pub timestamps: bool,
}

/// The longest long-poll of `--follow`, in seconds.
const FOLLOW_POLL_S: u64 = 30;

/// How long `--follow` keeps trying to reach the server before it gives up.
const UNREACHABLE_FOR: Duration = Duration::from_secs(60);

/// A line as `job logs` prints it: escaped (control characters shown as `\x1b`) when
/// `escape`, else as it is; lockgate's own markers start with `[lockgate] `; with
/// `timestamps`, the time and the stream first.
pub fn render_line(line: &LogLineView, escape: bool, timestamps: bool) -> String {
    let text: Cow<str> = if escape {
        Cow::Owned(output::escape(&line.text))
    } else {
        Cow::Borrowed(&line.text)
    };
    let marker = if line.stream == LogStream::Lockgate {
        "[lockgate] "
    } else {
        ""
    };
    if timestamps {
        format!("{} {:<6} {marker}{text}", line.at, line.stream.as_str())
    } else {
        format!("{marker}{text}")
    }
}

/// Runs `job logs`.
///
/// # Errors
/// The server's refusal (404, 403), or an unreachable server.
pub fn run(global: &GlobalArgs, client: &Client, a: &LogsArgs) -> anyhow::Result<()> {
    let escape = !a.raw && std::io::stdout().is_terminal();
    let json = output::json(global);
    let mut out = std::io::stdout().lock();
    let mut after = 0;
    loop {
        let page = if a.follow {
            lockgate_client::retry(UNREACHABLE_FOR, || {
                client.job_logs(a.id, after, Some(FOLLOW_POLL_S))
            })
            .map_err(|(RetryError::GaveUp(e) | RetryError::Permanent(e))| e)?
        } else {
            client.job_logs(a.id, after, None)?
        };
        for l in &page.lines {
            let text = if json {
                serde_json::to_string(l).expect("serializes")
            } else {
                render_line(l, escape, a.timestamps)
            };
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                // The reader went away (`| head`): nothing more to show.
                return Ok(());
            }
        }
        after = page.next;
        if page.lines.is_empty() && (page.ended || !a.follow) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(stream: LogStream, text: &str) -> LogLineView {
        LogLineView {
            seq: 1,
            at: "2026-12-01T10:00:00.250Z".into(),
            stream,
            text: text.into(),
        }
    }

    #[test]
    fn control_characters_are_escaped_unless_raw() {
        let l = line(
            LogStream::Stdout,
            "red \x1b[31mX\x1b[0m bell\x07 cr\r tab\t \u{202e}rev",
        );
        assert_eq!(
            render_line(&l, true, false),
            "red \\x1b[31mX\\x1b[0m bell\\x07 cr\\x0d tab\\x09 \\u{202e}rev"
        );
        assert_eq!(render_line(&l, false, false), l.text);
    }

    #[test]
    fn markers_and_timestamps_are_shown() {
        let m = line(LogStream::Lockgate, "3 lines dropped");
        assert_eq!(render_line(&m, true, false), "[lockgate] 3 lines dropped");
        let e = line(LogStream::Stderr, "oops");
        assert_eq!(
            render_line(&e, true, true),
            "2026-12-01T10:00:00.250Z stderr oops"
        );
    }
}
