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
}
