//! A small SVG writer: elements with attributes, text, groups; nothing else.
//!
//! # Invariants
//! - The output is well-formed XML: every attribute value and every text node goes through
//!   [`escape`], and every [`Svg::open`] is matched by a [`Svg::close`] before
//!   [`Svg::finish`] (which closes what is still open, so a forgotten close cannot produce a
//!   broken document).
//! - Numbers are written with at most two decimals (`num`), so a picture of the same run is
//!   the same bytes.

use std::fmt::Write as _;

/// Escapes `&`, `<`, `>`, `"` and `'` for text and attribute values; drops the control
/// characters XML 1.0 forbids (a job attribute could carry one).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// A number as an attribute value: integers bare, others with up to two decimals.
pub fn num(x: f64) -> String {
    let r = (x * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        let s = format!("{r:.2}");
        s.trim_end_matches('0').to_string()
    }
}

/// An SVG document being written.
#[derive(Debug)]
pub struct Svg {
    out: String,
    open: Vec<&'static str>,
}

impl Svg {
    /// A document of `width` x `height` pixels.
    pub fn new(width: f64, height: f64) -> Svg {
        let mut s = Svg {
            out: String::new(),
            open: Vec::new(),
        };
        let (w, h) = (num(width), num(height));
        let _ = writeln!(
            s.out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">"
        );
        s.open.push("svg");
        s
    }

    fn attrs(&mut self, attrs: &[(&str, String)]) {
        for (k, v) in attrs {
            let _ = write!(self.out, " {k}=\"{}\"", escape(v));
        }
    }

    /// `<tag attrs...>`, to be closed with [`Svg::close`].
    pub fn open(&mut self, tag: &'static str, attrs: &[(&str, String)]) {
        self.out.push('<');
        self.out.push_str(tag);
        self.attrs(attrs);
        self.out.push_str(">\n");
        self.open.push(tag);
    }

    /// Closes the innermost open element (never the root: that is [`Svg::finish`]'s).
    pub fn close(&mut self) {
        if self.open.len() > 1 {
            let tag = self.open.pop().expect("checked");
            let _ = writeln!(self.out, "</{tag}>");
        }
    }

    /// `<tag attrs.../>`, or `<tag attrs...><title>tip</title></tag>` with a tooltip.
    pub fn leaf(&mut self, tag: &str, attrs: &[(&str, String)], tip: Option<&str>) {
        self.out.push('<');
        self.out.push_str(tag);
        self.attrs(attrs);
        match tip {
            Some(t) => {
                let _ = writeln!(self.out, "><title>{}</title></{tag}>", escape(t));
            }
            None => self.out.push_str("/>\n"),
        }
    }

    /// `<text x y attrs...>text</text>`.
    pub fn text(&mut self, x: f64, y: f64, attrs: &[(&str, String)], text: &str) {
        let _ = write!(self.out, "<text x=\"{}\" y=\"{}\"", num(x), num(y));
        self.attrs(attrs);
        let _ = writeln!(self.out, ">{}</text>", escape(text));
    }

    /// Closes everything still open and returns the document.
    pub fn finish(mut self) -> String {
        while let Some(tag) = self.open.pop() {
            let _ = writeln!(self.out, "</{tag}>");
        }
        self.out
    }
}

/// `(name, value)` for an attribute list.
pub fn a(name: &'static str, value: impl ToString) -> (&'static str, String) {
    (name, value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_closes() {
        let mut s = Svg::new(10.0, 5.5);
        s.open("g", &[a("class", "x<y")]);
        s.text(1.0, 2.0, &[], "a & \"b\"\u{1}");
        s.leaf("rect", &[a("width", num(1.234))], Some("<tip>"));
        let doc = s.finish();
        assert!(doc.contains("class=\"x&lt;y\""), "{doc}");
        assert!(doc.contains(">a &amp; &quot;b&quot;</text>"), "{doc}");
        assert!(doc.contains("width=\"1.23\"><title>&lt;tip&gt;</title></rect>"));
        assert!(doc.ends_with("</g>\n</svg>\n"), "{doc}");
    }

    #[test]
    fn numbers() {
        assert_eq!(num(3.0), "3");
        assert_eq!(num(3.456), "3.46");
        assert_eq!(num(3.5), "3.5");
        assert_eq!(num(-0.001), "0");
    }
}
