//! Validation of `[[rpo]]`: the same `file:line: field: expected .., got ..` errors as the
//! rest.

use super::{bad, duration, job_selector, name, Checked};
use crate::policy::locate::FieldPath;
use crate::policy::raw::RawRpo;
use crate::policy::{PerKey, RpoRule};
use std::collections::{BTreeMap, BTreeSet};

/// `[[rpo]]`: every rule, with unique (given or derived) names.
pub(super) fn rules(raw: &[RawRpo], p: &FieldPath) -> Checked<Vec<RpoRule>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let rp = p.at(i);
        let (rule_name, name_path) = match &r.name {
            Some(n) => {
                name(n, &rp.key("name"), "rpo rule")?;
                (n.clone(), rp.key("name"))
            }
            None => (
                RpoRule::derived_name(r.r#match.as_deref(), &r.per),
                rp.key("max_age"),
            ),
        };
        if let Some(first) = seen.insert(rule_name.clone(), i) {
            let how = if r.name.is_some() {
                ""
            } else {
                " (derived from match and per)"
            };
            return bad(
                &name_path,
                format!(
                    "rpo rule name {rule_name:?}{how} is already used by rpo[{first}], expected unique names: give one of them a `name`"
                ),
            );
        }
        if r.name.is_none() {
            name(&rule_name, &rp.key("per"), "derived rpo rule")?;
        }
        let max_age = duration(&r.max_age, &rp.key("max_age"))?;
        if max_age.is_zero() {
            return bad(
                &rp.key("max_age"),
                format!("expected a duration greater than zero, got {:?}", r.max_age),
            );
        }
        out.push(RpoRule {
            name: rule_name,
            matcher: r
                .r#match
                .as_ref()
                .map(|s| job_selector(s, &rp.key("match")))
                .transpose()?,
            per: per_keys(&r.per, &rp.key("per"))?,
            max_age,
        });
    }
    Ok(out)
}

/// `per`: any key a job has (`kind`, `owner`, `node` or an attribute), each once.
fn per_keys(list: &[String], p: &FieldPath) -> Checked<Vec<PerKey>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, k) in list.iter().enumerate() {
        let kp = p.at(i);
        if k.is_empty() {
            return bad(
                &kp,
                "expected a key name (kind, owner or an attribute name), got an empty string",
            );
        }
        if !seen.insert(k.as_str()) {
            return bad(
                &kp,
                format!("{k:?} is listed twice, expected each key once"),
            );
        }
        out.push(match k.as_str() {
            "kind" => PerKey::Kind,
            "owner" => PerKey::Owner,
            attr => PerKey::Attr(attr.to_string()),
        });
    }
    Ok(out)
}
