//! [`RawPolicy::diff`](super::raw::RawPolicy::diff): both documents are flattened into
//! items (a section, a named or a numbered table, as [`super::document`] describes them)
//! holding `field -> rendered value`, then compared item by item.
//!
//! Invariant: items are ordered by their place in the description, then by name or
//! position, so the lines come out in document order and equal documents give no lines.

use super::document::{Key, Shape, ROOT};
use super::raw::RawPolicy;
use serde_json::Value;
use std::collections::BTreeMap;

/// How an item appears or disappears as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whole {
    /// A section (`[global]`): only its fields are compared.
    Section,
    /// A named entry (`limit "x"`, `kinds.backup`): `+ label` / `- label`.
    Named,
    /// A numbered entry (`nodes.rule[1]`): `label: added` / `label: removed`.
    Numbered,
}

struct Item {
    label: String,
    whole: Whole,
    fields: BTreeMap<String, String>,
}

/// Items by (place in the description, name or position within it).
type Items = BTreeMap<(usize, String), Item>;

/// The differences from `old` to `new`, one line each.
pub(super) fn diff(old: &RawPolicy, new: &RawPolicy) -> Vec<String> {
    compare(&items(old), &items(new))
}

fn items(raw: &RawPolicy) -> Items {
    let doc = serde_json::to_value(raw).unwrap_or(Value::Null);
    let mut out = Items::new();
    collect(&mut out, &mut 0, "", ROOT, &doc);
    out
}

/// Adds the items below the table `v` at `path`, numbering each described sub-table in
/// description order (whether or not the document has it, so both sides agree).
fn collect(out: &mut Items, place: &mut usize, path: &str, keys: &[Key], v: &Value) {
    for k in keys {
        let label = if path.is_empty() {
            k.name.to_string()
        } else {
            format!("{path}.{}", k.name)
        };
        let child = v.get(k.name).unwrap_or(&Value::Null);
        let mut add = |key: String, label: String, whole: Whole, fields| {
            let item = Item {
                label,
                whole,
                fields,
            };
            out.insert((*place, key), item);
        };
        match k.shape {
            Shape::Value(_) => continue,
            Shape::Section(inner) => {
                add(
                    String::new(),
                    label.clone(),
                    Whole::Section,
                    fields(child, inner, &[]),
                );
                *place += 1;
                collect(out, place, &label, inner, child);
                continue;
            }
            Shape::Entries(inner) => {
                for (name, e) in child.as_object().into_iter().flatten() {
                    let fields = fields(e, inner, &[]);
                    add(
                        name.clone(),
                        format!("{label}.{name}"),
                        Whole::Named,
                        fields,
                    );
                }
            }
            Shape::Named(inner) => {
                for e in child.as_array().into_iter().flatten() {
                    let name = e.get("name").and_then(Value::as_str).unwrap_or("");
                    let fields = fields(e, inner, &["name"]);
                    add(
                        name.to_string(),
                        format!("{label} {name:?}"),
                        Whole::Named,
                        fields,
                    );
                }
            }
            Shape::Numbered(inner) => {
                for (i, e) in child.as_array().into_iter().flatten().enumerate() {
                    let fields = fields(e, inner, &[]);
                    add(
                        format!("{i:010}"),
                        format!("{label}[{i}]"),
                        Whole::Numbered,
                        fields,
                    );
                }
            }
        }
        *place += 1;
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Null => {}
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The values of table `v` (not its sub-tables, nor the keys in `skip`), flattened.
fn fields(v: &Value, keys: &[Key], skip: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in v.as_object().into_iter().flatten() {
        let plain = matches!(super::document::shape_of(keys, k), Shape::Value(_));
        if plain && !skip.contains(&k.as_str()) {
            flatten(k, v, &mut out);
        }
    }
    out
}

fn summary(fields: &BTreeMap<String, String>) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn compare(old: &Items, new: &Items) -> Vec<String> {
    let mut keys: Vec<&(usize, String)> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    let empty = BTreeMap::new();
    for key in keys {
        let (o, n) = (old.get(key), new.get(key));
        let Some(item) = n.or(o) else { continue };
        match (o.is_some(), n.is_some(), item.whole) {
            (false, true, Whole::Named) if item.fields.is_empty() => {
                out.push(format!("+ {}", item.label))
            }
            (false, true, Whole::Named) => {
                out.push(format!("+ {}: {}", item.label, summary(&item.fields)))
            }
            (false, true, Whole::Numbered) => {
                out.push(format!("{}: added ({})", item.label, summary(&item.fields)))
            }
            (true, false, Whole::Named) => out.push(format!("- {}", item.label)),
            (true, false, Whole::Numbered) => out.push(format!("{}: removed", item.label)),
            _ => {
                let (a, b) = (
                    o.map_or(&empty, |i| &i.fields),
                    n.map_or(&empty, |i| &i.fields),
                );
                let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
                names.sort();
                names.dedup();
                for f in names {
                    let (x, y) = (a.get(f), b.get(f));
                    if x != y {
                        let show =
                            |v: Option<&String>| v.cloned().unwrap_or_else(|| "unset".into());
                        out.push(format!("{}: {f} {} -> {}", item.label, show(x), show(y)));
                    }
                }
            }
        }
    }
    out
}
