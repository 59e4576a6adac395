//! What the client subcommands print: JSON for scripts (`-o json`: JSON on stdout and
//! nothing else), plain tables for people.
//!
//! Tables are rendered to a `String` first ([`render_table`]), so the formats users see
//! are pinned by snapshot tests built from fixed views.
//!
//! # Invariant
//! No control or escape character from server data reaches a terminal: every table cell
//! goes through [`escape`], and every other text print of server data through
//! [`print_text`] (which keeps only line breaks). `ESC[2J` in an attribute prints as
//! `\x1b[2J`. JSON output (`-o json`) is escaped by serde.

use crate::{GlobalArgs, Output};

/// Writes `args` to stdout: every `print!` and `println!` of the crate ends here (they are
/// redefined in main.rs). When the reader has gone (a closed pipe: `lockgate job ls |
/// head`), the process exits 0 at once and silently: the reader took what it wanted.
/// Any other write error panics as `println!` does.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let written = std::io::stdout().lock().write_fmt(args);
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => panic!("failed printing to stdout: {e}"),
    }
}

/// Prints JSON to stdout (pretty).
pub fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializes"));
}

/// Whether to print JSON.
pub fn json(global: &GlobalArgs) -> bool {
    global.output == Output::Json
}

/// `text` with every control character (C0, DEL, C1) and every bidirectional-override
/// character escaped, as `\x1b` below U+0080 and `\u{202e}` above; a backslash stays as it
/// is. With `keep_newlines`, `\n` is kept (for multi-line text).
fn escape_with(text: &str, keep_newlines: bool) -> String {
    use std::fmt::Write;
    let bidi = |c: char| matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' && keep_newlines {
            out.push(c);
        } else if c.is_control() || bidi(c) {
            if (c as u32) < 0x80 {
                let _ = write!(out, "\\x{:02x}", c as u32);
            } else {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` safe for a terminal on one line: every control character escaped (a line break
/// too).
pub fn escape(text: &str) -> String {
    escape_with(text, false)
}

/// `text` with every control character but line breaks escaped (for multi-line text and
/// error messages that hold server data).
pub fn escape_lines(text: &str) -> String {
    escape_with(text, true)
}

/// Prints `text` (and a newline) with every control character but line breaks escaped.
pub fn print_text(text: &str) {
    println!("{}", escape_lines(text).trim_end_matches('\n'));
}

/// Rows as a table with a header, columns padded to their widest cell, the last column
/// unpadded, no trailing spaces; every line ends with a newline.
pub fn render_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let mut text = String::new();
    let mut line = |cells: &[String]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for r in &rows {
        line(r);
    }
    text
}

/// Prints [`render_table`].
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    print!("{}", render_table(header, rows));
}

/// `-` for a missing value.
pub fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// A time as the CLI prints it: RFC 3339 UTC with exactly three fraction digits
/// (`2026-03-27T22:17:41.250Z`, never `.25Z`), so every time has the same width and a
/// column of times lines up. Text that is not an RFC 3339 time is printed as it is.
pub fn time(text: &str) -> String {
    match lockgate_api::time::parse(text) {
        Ok(t) => fixed_time(t),
        Err(_) => text.to_string(),
    }
}

/// [`time`], or `-` for no time.
pub fn time_or_dash(text: Option<&String>) -> String {
    text.map_or_else(|| "-".into(), |t| time(t))
}

/// `t` in the fixed form of [`time`].
pub fn fixed_time(t: lockgate_core::Timestamp) -> String {
    let ms = i64::try_from(t.0).unwrap_or(i64::MAX);
    let ts = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::MAX);
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// A duration in milliseconds as two units at most, each after the first padded to two
/// digits: `0s`, `42s`, `3m05s`, `2h03m`, `3d04h` (whole seconds: milliseconds are noise
/// beside a job's wait or run).
pub fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The wall clock as the engine counts it (ms since the Unix epoch), for the durations of
/// jobs that have not ended.
pub fn now() -> lockgate_core::Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    lockgate_core::Timestamp(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_from_server_data_never_reach_the_terminal() {
        let table = render_table(
            &["ID", "ATTRS"],
            &[vec![
                "1".into(),
                "path=/x\u{1b}[2J\u{7}\r\n\u{202e}evil\u{9b}".into(),
            ]],
        );
        assert_eq!(
            table,
            "ID  ATTRS\n1   path=/x\\x1b[2J\\x07\\x0d\\x0a\\u{202e}evil\\u{9b}\n"
        );
        assert!(!table.contains('\u{1b}'));
        assert_eq!(escape_with("a\nb\u{1b}", true), "a\nb\\x1b");
        assert_eq!(escape("repo=C:\\backup é"), "repo=C:\\backup é");
    }

    #[test]
    fn times_keep_their_trailing_zeros_and_durations_two_units() {
        let times = [
            "2026-03-27T22:17:41.25Z",
            "2026-03-27T22:17:41Z",
            "2026-03-27T23:17:41.5+01:00",
            "2026-03-27T22:17:41.123Z",
        ]
        .map(time);
        assert_eq!(
            times,
            [
                "2026-03-27T22:17:41.250Z",
                "2026-03-27T22:17:41.000Z",
                "2026-03-27T22:17:41.500Z",
                "2026-03-27T22:17:41.123Z",
            ]
        );
        assert_eq!(time("soon"), "soon");
        assert_eq!(time_or_dash(None), "-");
        let got = [0, 999, 42_000, 185_000, 7_380_000, 273_600_000].map(duration);
        assert_eq!(got, ["0s", "0s", "42s", "3m05s", "2h03m", "3d04h"]);
    }
}
