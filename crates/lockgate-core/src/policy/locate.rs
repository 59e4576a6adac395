//! Where a problem is: field paths, their lines in a TOML text, and serde errors turned into
//! `field: expected .., got ..`.
//!
//! Invariants, and why they hold:
//! - A serde error's field path comes from `serde_path_to_error`, which records the map keys
//!   and sequence indices serde itself walked to reach the error, for TOML and JSON alike;
//!   nothing is inferred from byte offsets.
//! - A line comes from `toml_edit`'s public spans (`ImDocument` keeps the position of every
//!   key, value and table header). A path is looked up from the root; a key that is not
//!   written (a missing required key) is reported at the line of its table.
//! - Only public APIs of toml, toml_edit, serde_json and serde_path_to_error are used, and
//!   the test table in `tests/it/policy/errors.rs` pins the line of an error at every kind
//!   of table, so a dependency upgrade cannot move error lines unnoticed.

use super::raw::RawPolicy;
use super::PolicyError;
use serde_path_to_error::Segment;
use std::fmt;
use std::ops::Range;
use toml_edit::{ArrayOfTables, ImDocument, Item, Table, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A field path such as `limit[1].max` or `kinds.tape-backup.cost.threads`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(pub(crate) Vec<Seg>);

impl FieldPath {
    pub(crate) fn root() -> FieldPath {
        FieldPath(Vec::new())
    }
    /// This path followed by a key.
    pub(crate) fn key(&self, key: &str) -> FieldPath {
        let mut p = self.clone();
        p.0.push(Seg::Key(key.to_string()));
        p
    }
    /// This path followed by an array index.
    pub(crate) fn at(&self, index: usize) -> FieldPath {
        let mut p = self.clone();
        p.0.push(Seg::Index(index));
        p
    }

    /// The path serde walked to an error. It stops at a step that is not part of the
    /// document: `Enum` and `Unknown` (which a policy document does not have) and the
    /// `$__..` keys through which toml hands a date-time to serde.
    fn of_serde(path: &serde_path_to_error::Path) -> FieldPath {
        let segs = path.iter().map_while(|seg| match seg {
            Segment::Map { key } if key.starts_with("$__") => None,
            Segment::Map { key } => Some(Seg::Key(key.clone())),
            Segment::Seq { index } => Some(Seg::Index(*index)),
            Segment::Enum { .. } | Segment::Unknown => None,
        });
        FieldPath(segs.collect())
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A parsed TOML text, to find the line a field path is written on.
pub(crate) struct Lines<'t> {
    text: &'t str,
    doc: ImDocument<&'t str>,
}

/// A node of a `toml_edit` document: the three shapes a path step can land on.
#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Tables(&'a ArrayOfTables),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    fn of(item: &'a Item) -> Option<Node<'a>> {
        match item {
            Item::None => None,
            Item::Value(v) => Some(Node::Value(v)),
            Item::Table(t) => Some(Node::Table(t)),
            Item::ArrayOfTables(a) => Some(Node::Tables(a)),
        }
    }

    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Table(t) => t.span(),
            Node::Tables(a) => a.span(),
            Node::Value(v) => v.span(),
        }
    }

    fn child(self, seg: &Seg) -> Option<Node<'a>> {
        match (self, seg) {
            (Node::Table(t), Seg::Key(k)) => t.get(k).and_then(Node::of),
            (Node::Tables(a), Seg::Index(i)) => a.get(*i).map(Node::Table),
            (Node::Value(Value::InlineTable(t)), Seg::Key(k)) => t.get(k).map(Node::Value),
            (Node::Value(Value::Array(a)), Seg::Index(i)) => a.get(*i).map(Node::Value),
            _ => None,
        }
    }

    fn children(self) -> Vec<Node<'a>> {
        match self {
            Node::Table(t) => t.iter().filter_map(|(_, item)| Node::of(item)).collect(),
            Node::Tables(a) => a.iter().map(Node::Table).collect(),
            Node::Value(Value::InlineTable(t)) => t.iter().map(|(_, v)| Node::Value(v)).collect(),
            Node::Value(Value::Array(a)) => a.iter().map(Node::Value).collect(),
            Node::Value(_) => Vec::new(),
        }
    }

    /// Where the node is written: its own span (a value, or a table from its header), else
    /// the earliest of its children (a table that exists only through `[kinds.x]` headers
    /// or dotted keys such as `cost.threads = 1`).
    fn start(self) -> Option<usize> {
        self.span()
            .map(|s| s.start)
            .or_else(|| self.children().into_iter().filter_map(Node::start).min())
    }
}

impl<'t> Lines<'t> {
    /// Parses the text.
    ///
    /// # Errors
    /// The syntax error, when the text is not TOML.
    pub(crate) fn parse(text: &'t str) -> Result<Lines<'t>, toml_edit::TomlError> {
        Ok(Lines {
            text,
            doc: ImDocument::parse(text)?,
        })
    }

    /// The line of the deepest node written along `path` (a key that is not written is
    /// reported at its table); `None` for the root.
    pub(crate) fn line(&self, path: &FieldPath) -> Option<usize> {
        let mut node = Node::Table(self.doc.as_table());
        let mut start = None;
        for seg in &path.0 {
            let Some(next) = node.child(seg) else { break };
            node = next;
            start = next.start().or(start);
        }
        start.map(|s| line_of(self.text, s))
    }
}

// ---------------------------------------------------------------------------------------
// Serde errors, translated.

/// Reads a TOML document; a syntax, unknown-key or type error becomes a [`PolicyError`]
/// with its line and field.
pub(crate) fn read_toml(text: &str, file: Option<&str>) -> Result<RawPolicy, PolicyError> {
    let file = file.map(str::to_string);
    let lines = match Lines::parse(text) {
        Ok(lines) => lines,
        Err(e) => {
            let message = e.message().trim().replace('\n', ": ");
            return Err(PolicyError {
                file,
                line: e.span().map(|s| line_of(text, s.start)),
                field: String::new(),
                message: format!("invalid TOML: {message}"),
            });
        }
    };
    serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
        let (path, message) = translate(FieldPath::of_serde(e.path()), e.inner().message());
        PolicyError {
            file,
            line: lines.line(&path),
            field: path.to_string(),
            message,
        }
    })
}

/// Reads a JSON document; a syntax, unknown-key or type error becomes a [`PolicyError`]
/// with its line (serde_json's) and field.
pub(crate) fn read_json(text: &str) -> Result<RawPolicy, PolicyError> {
    // serde reads a struct from a sequence too: `[]` would be the empty policy.
    if let Some(kind) = not_an_object(text) {
        let start = text.len() - text.trim_start().len();
        return Err(PolicyError {
            file: None,
            line: Some(text[..start].matches('\n').count() + 1),
            field: String::new(),
            message: format!("the policy document is {kind}, expected a table (a JSON object)"),
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let e = match serde_path_to_error::deserialize::<_, RawPolicy>(&mut de) {
        Ok(raw) => return de.end().map(|()| raw).map_err(|e| json_syntax(&e)),
        Err(e) => e,
    };
    let inner = e.inner();
    if !inner.is_data() {
        return Err(json_syntax(inner));
    }
    let plain = json_message(inner);
    let is_object = matches!(
        serde_json::from_str::<serde_json::Value>(text),
        Ok(serde_json::Value::Object(_))
    );
    let (field, message) = if is_object {
        let (path, message) = translate(FieldPath::of_serde(e.path()), &plain);
        (path.to_string(), message)
    } else {
        // Not a table at all: the message as serde gives it, for the whole document.
        (String::new(), plain)
    };
    Err(PolicyError {
        file: None,
        line: (inner.line() > 0).then_some(inner.line()),
        field,
        message,
    })
}

/// What a JSON document is when it is valid JSON but not an object (`None` otherwise,
/// and for invalid JSON, whose error serde gives).
fn not_an_object(text: &str) -> Option<&'static str> {
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => {}
        Err(_) => return None,
    }
    match text.trim_start().chars().next() {
        Some('{') | None => None,
        Some('[') => Some("an array"),
        Some('"') => Some("a string"),
        Some('n') => Some("null"),
        Some('t' | 'f') => Some("a boolean"),
        Some(_) => Some("a number"),
    }
}

fn json_syntax(e: &serde_json::Error) -> PolicyError {
    PolicyError {
        file: None,
        line: (e.line() > 0).then_some(e.line()),
        field: String::new(),
        message: format!("invalid JSON: {}", json_message(e)),
    }
}

/// serde_json's message without the ` at line L column C` it appends.
fn json_message(e: &serde_json::Error) -> String {
    let plain = e.to_string();
    plain
        .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
        .unwrap_or(&plain)
        .to_string()
}

/// Turns a serde message at `path` into "expected .., got ..", and the path into the path
/// of the offending field (an unknown or missing key is named by the message).
fn translate(path: FieldPath, message: &str) -> (FieldPath, String) {
    let ticked = |s: &str| s.split('`').nth(1).map(str::to_string);
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let key = ticked(rest).unwrap_or_default();
        let expected = rest.split_once(", expected ").map(|(_, e)| e);
        let message = match expected {
            Some(e) => format!("unknown key, expected {e}"),
            None => "unknown key, this table takes no keys".to_string(),
        };
        // serde_path_to_error ends the path with the key it was reading; toml ends it at
        // the table when the key is a header of its own (`[global.bogus]`).
        let path = match path.0.last() {
            Some(Seg::Key(k)) if *k == key => path,
            _ => path.key(&key),
        };
        return (path, message);
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let key = ticked(rest).unwrap_or_default();
        return (path.key(&key), "missing, this key is required".to_string());
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((got, expected)) = rest.rsplit_once(", expected ") {
                let message = format!(
                    "expected {}, got {}",
                    expected_name(expected),
                    got_name(got)
                );
                return (path, message);
            }
        }
    }
    if message.contains("too large") {
        return (
            path,
            "expected a whole number, got a number too large".to_string(),
        );
    }
    (path, message.trim().replace('\n', ": "))
}

fn expected_name(e: &str) -> String {
    match e {
        "i64" | "u64" | "u32" | "i32" | "usize" => "a whole number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        other => other.into(),
    }
}

fn got_name(g: &str) -> String {
    if let Some(v) = g.split('`').nth(1) {
        return v.to_string();
    }
    if let Some(s) = g.strip_prefix("string ") {
        return s.to_string();
    }
    match g {
        "sequence" => "an array".into(),
        "map" => "a table".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segs: &[&str]) -> FieldPath {
        let mut p = FieldPath::root();
        for s in segs {
            p = match s.parse::<usize>() {
                Ok(i) => p.at(i),
                Err(_) => p.key(s),
            };
        }
        p
    }

    const DOC: &str = "[global]\nmax_running = 1\n\n[[limit]]\nname = 'a'\n\n[[limit]]\nname = 'b'\nper = ['x', 'y']\nvalues = { 'p,q' = 2 }\n\n[kinds.tape-backup]\ncost = { threads = 4 }\n[kinds.backup]\ncost.threads = 1\nwhen = 1979-05-27T07:32:00Z\n";

    #[test]
    fn finds_lines_of_paths() {
        let lines = Lines::parse(DOC).unwrap();
        for (segs, line) in [
            (&["global", "max_running"][..], 2),
            (&["global"][..], 1),
            (&["limit", "0", "name"][..], 5),
            (&["limit", "1", "name"][..], 8),
            (&["limit", "1", "per", "1"][..], 9),
            (&["limit", "1", "values", "p,q"][..], 10),
            (&["limit", "1", "max"][..], 7),
            (&["kinds", "tape-backup", "cost", "threads"][..], 13),
            (&["kinds", "backup", "cost", "threads"][..], 15),
            (&["kinds", "backup", "when"][..], 16),
            (&["kinds"][..], 12),
        ] {
            let p = path(segs);
            assert_eq!(lines.line(&p), Some(line), "{p}");
        }
        assert_eq!(lines.line(&FieldPath::root()), None);
    }
}
