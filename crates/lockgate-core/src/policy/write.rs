//! [`RawPolicy::to_toml_string`](super::raw::RawPolicy::to_toml_string): the document as
//! TOML in the style of design `policy.md`, laid out by [`super::document`].
//!
//! Invariant: the text reads back as the same document (`tests/it/policy` round-trips every
//! design example and snapshots the examples' output). It holds because every table is
//! written either under a header naming its full path or inline, values before the headers
//! of sub-tables, and keys that are not bare are quoted as TOML strings.

use super::document::{ordered, shape_of, Key, Shape, ROOT};
use super::raw::RawPolicy;
use std::fmt::Write as _;
use toml::{Table, Value};

/// The document as TOML; empty for the empty document.
pub(super) fn document(raw: &RawPolicy) -> String {
    let mut out = String::new();
    if let Ok(Value::Table(root)) = Value::try_from(raw) {
        body(&mut out, &[], ROOT, &root);
    }
    out
}

/// A key as TOML writes it: bare when it can be, else quoted.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

/// A value on one line; `keys` orders an inline table's keys.
fn inline(keys: &[Key], v: &Value) -> String {
    match v {
        Value::Table(t) if t.is_empty() => "{}".into(),
        Value::Table(t) => {
            let parts: Vec<String> = ordered(keys, t)
                .into_iter()
                .map(|(k, v)| {
                    let inner = match shape_of(keys, k) {
                        Shape::Value(inner) => inner,
                        _ => &[],
                    };
                    format!("{} = {}", key(k), inline(inner, v))
                })
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(|v| inline(&[], v)).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

fn header(out: &mut String, path: &[&str], double: bool) {
    let name = path.iter().map(|s| key(s)).collect::<Vec<_>>().join(".");
    let gap = if out.is_empty() { "" } else { "\n" };
    let _ = match double {
        true => writeln!(out, "{gap}[[{name}]]"),
        false => writeln!(out, "{gap}[{name}]"),
    };
}

/// A table's body: its values as `key = value`, then its sub-tables under their headers.
fn body(out: &mut String, path: &[&str], keys: &[Key], t: &Table) {
    let entries = ordered(keys, t);
    for (k, v) in &entries {
        if let Shape::Value(inner) = shape_of(keys, k) {
            let _ = writeln!(out, "{} = {}", key(k), inline(inner, v));
        }
    }
    for (k, v) in entries {
        let p: Vec<&str> = path.iter().copied().chain([k.as_str()]).collect();
        match shape_of(keys, k) {
            Shape::Value(_) => {}
            Shape::Section(inner) => section(out, &p, inner, v),
            Shape::Entries(inner) => {
                for (name, entry) in ordered(&[], v.as_table().into_iter().flatten()) {
                    let ep: Vec<&str> = p.iter().copied().chain([name.as_str()]).collect();
                    section(out, &ep, inner, entry);
                }
            }
            Shape::Named(inner) | Shape::Numbered(inner) => {
                let tables = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_table);
                for item in tables {
                    header(out, &p, true);
                    body(out, &p, inner, item);
                }
            }
        }
    }
}

/// A `[path]` table; the header is left out when the table holds only sub-tables.
fn section(out: &mut String, path: &[&str], keys: &[Key], v: &Value) {
    let Some(t) = v.as_table() else { return };
    let has_values = t
        .keys()
        .any(|k| matches!(shape_of(keys, k), Shape::Value(_)));
    if has_values || t.is_empty() {
        header(out, path, false);
    }
    body(out, path, keys, t);
}
