//! What the client subcommands print: JSON for scripts (`-o json`: JSON on stdout and
//! nothing else), plain tables for people.
//!
//! Tables are rendered to a `String` first ([`render_table`]), so the formats users see
//! are pinned by snapshot tests built from fixed views.

use crate::{GlobalArgs, Output};

/// Prints JSON to stdout (pretty).
pub fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializes"));
}

/// Whether to print JSON.
pub fn json(global: &GlobalArgs) -> bool {
    global.output == Output::Json
}

/// Rows as a table with a header, columns padded to their widest cell, the last column
/// unpadded, no trailing spaces; every line ends with a newline.
pub fn render_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
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
    for r in rows {
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
