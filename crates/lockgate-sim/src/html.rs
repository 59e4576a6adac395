//! `--report out.html`: one self-contained HTML file with the tables and the pictures.
//!
//! # Invariants
//! - No external resource: no script, no stylesheet link, no font, no image URL; the
//!   style is inline and the pictures are inline SVG documents from [`mod@crate::gantt`].
//! - Every text given (titles, tables) is escaped; only the SVGs are inserted as markup,
//!   and they come from [`crate::svg`], which escapes their text.

use crate::svg::escape;
use std::fmt::Write as _;

/// One section of the report: a heading and either a preformatted table or a picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    /// A heading and a table for people (monospace, as the CLI prints it).
    Table(String, String),
    /// A heading and an SVG document.
    Picture(String, String),
}

/// The report: `title`, a line of context under it, then the sections in order.
pub fn html(title: &str, context: &str, sections: &[Section]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{t}</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}\n\
         pre {{ background: #f6f6f6; padding: 0.8em; overflow-x: auto; }}\n\
         .picture {{ overflow-x: auto; border: 1px solid #ddd; }}\n\
         </style>\n</head>\n<body>\n<h1>{t}</h1>\n<p>{c}</p>\n",
        t = escape(title),
        c = escape(context)
    );
    for s in sections {
        match s {
            Section::Table(h, text) => {
                let _ = write!(out, "<h2>{}</h2>\n<pre>{}</pre>\n", escape(h), escape(text));
            }
            Section::Picture(h, svg) => {
                let _ = write!(
                    out,
                    "<h2>{}</h2>\n<div class=\"picture\">\n{svg}</div>\n",
                    escape(h)
                );
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_contained_and_escaped() {
        let doc = html(
            "a <b>",
            "c & d",
            &[
                Section::Table("t".into(), "x < y".into()),
                Section::Picture("p".into(), "<svg></svg>\n".into()),
            ],
        );
        assert!(doc.contains("<h1>a &lt;b&gt;</h1>"));
        assert!(doc.contains("<pre>x &lt; y</pre>"));
        assert!(doc.contains("<svg></svg>"));
        for external in ["<script", "<link", "src=", "href=", "url("] {
            assert!(!doc.contains(external), "{external}");
        }
    }
}
