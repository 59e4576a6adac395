//! Warnings about a valid policy that would silently do nothing, or something else than
//! meant: a `match` that selects no job, a `per`/`keys` attribute no job has, two conflicts
//! on one key where one serialises what the other lets share (`lockgate policy check`,
//! `policy diff`; `--strict` refuses on any).
//!
//! Two sources say what jobs look like:
//! - **Jobs seen** (the server's recent history, [`Seen`]): a selector is judged by the
//!   jobs it would have matched. This is the strong check: `match = "knd=backup"` matched
//!   none of 812 jobs.
//! - **The policy alone** (no history, or none yet): the kinds and attribute names the
//!   policy itself names elsewhere (`[kinds]`, schedules, `per`, `keys`, `overlap`, other
//!   selectors). A selector key or a `kind` value one or two letters away from a known
//!   name, but not it, is a likely typo (`knd`, `kind=bakup`).
//!
//! A warning names the rule and, when the policy's text is given, its line. Nothing here
//! changes the policy or refuses it: validation (`validate.rs`) refuses what cannot work,
//! the lint warns about what probably does not do what was meant.

use super::locate::{FieldPath, Lines};
use super::{Conflict, PerKey, Policy};
use crate::selector::{Requirement, Selector};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A job as the lint sees it: what selectors and `per` keys look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenJob {
    /// Kind.
    pub kind: String,
    /// Owner.
    pub owner: String,
    /// Pinned node, if any.
    pub node: Option<String>,
    /// Attributes.
    pub attrs: BTreeMap<String, String>,
}

impl SeenJob {
    fn value(&self, key: &str) -> Option<&str> {
        match key {
            "kind" => Some(&self.kind),
            "owner" => Some(&self.owner),
            "node" => self.node.as_deref(),
            attr => self.attrs.get(attr).map(String::as_str),
        }
    }

    fn has(&self, key: &PerKey) -> bool {
        match key {
            PerKey::Kind | PerKey::Owner => true,
            PerKey::Attr(a) => self.attrs.contains_key(a),
        }
    }
}

/// The jobs a server has seen over a recent window.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The jobs (any state).
    pub jobs: Vec<SeenJob>,
    /// The window, as it is said in a warning (`the last 7d`).
    pub window: String,
}

/// One warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The rule, as the policy names it (`[[limit]] "backups"`, `[[conflict]] 2`).
    pub rule: String,
    /// The line of the rule's field in the policy text, when the text was given.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}: {}", self.rule, self.message),
            None => write!(f, "{}: {}", self.rule, self.message),
        }
    }
}

/// One selector of a rule, with where it is written.
struct Named<'a> {
    rule: String,
    field: &'static str,
    path: FieldPath,
    selector: &'a Selector,
}

/// The warnings for `policy` (see the module docs); `text` is the policy's TOML, for
/// lines; `seen` the server's recent jobs, when there is a server.
pub fn lint(policy: &Policy, text: Option<&str>, seen: Option<&Seen>) -> Vec<Warning> {
    let lines = text.and_then(|t| Lines::parse(t).ok());
    let line = |p: &FieldPath| lines.as_ref().and_then(|l| l.line(p));
    let known = Known::of(policy);
    let seen = seen.filter(|s| !s.jobs.is_empty());
    let mut out = Vec::new();
    let mut warn = |rule: &str, path: &FieldPath, message: String| {
        out.push(Warning {
            rule: rule.to_string(),
            line: line(path),
            message,
        });
    };
    for n in selectors(policy) {
        let field = n.field;
        match seen {
            Some(s) => {
                let hits = s
                    .jobs
                    .iter()
                    .filter(|j| n.selector.matches(|k| j.value(k)))
                    .count();
                if hits == 0 {
                    let hint = typos(n.selector, &known)
                        .map(|t| format!(" ({t})"))
                        .unwrap_or_default();
                    warn(
                        &n.rule,
                        &n.path,
                        format!(
                            "{field} {:?} matched none of the {} jobs of {}{hint}: the rule applies to nothing",
                            n.selector.text(),
                            s.jobs.len(),
                            s.window
                        ),
                    );
                }
            }
            None => {
                if let Some(t) = typos(n.selector, &known) {
                    warn(
                        &n.rule,
                        &n.path,
                        format!("{field} {:?}: {t}", n.selector.text()),
                    );
                }
            }
        }
    }
    for (rule, path, keys) in partition_keys(policy) {
        for key in keys {
            let PerKey::Attr(name) = key else { continue };
            let missing = match seen {
                Some(s) => (!s.jobs.iter().any(|j| j.has(key))).then(|| {
                    format!(
                        "no job of {} ({} jobs) has the attribute {name:?}{}: the rule counts nothing",
                        s.window,
                        s.jobs.len(),
                        near(name, &known.attrs)
                            .map(|m| format!(" (did you mean {m:?}?)"))
                            .unwrap_or_default()
                    )
                }),
                None => near(name, &known.attrs)
                    .filter(|m| *m != name)
                    .map(|m| format!("attribute {name:?} is named nowhere else; did you mean {m:?}?")),
            };
            if let Some(m) = missing {
                warn(&rule, &path, m);
            }
        }
    }
    for (i, j) in serialising(policy, seen) {
        let a = &policy.conflicts[i];
        let keys = |c: &Conflict| {
            c.keys
                .iter()
                .map(|k| k.name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (shared, alone) = if a.exclusive.is_some() {
            (i, j)
        } else {
            (j, i)
        };
        warn(
            &format!("[[conflict]] {}", alone + 1),
            &FieldPath::root().key("conflict").at(alone),
            format!(
                "it makes every job with {} run alone, including the jobs [[conflict]] {} lets share \
                 (outside its exclusive {:?}); they will run one at a time. Give each conflict a \
                 `match` that names its tool (match = \"tool=borg\" and match = \"tool=restic\")",
                keys(&policy.conflicts[alone]),
                shared + 1,
                policy.conflicts[shared]
                    .exclusive
                    .as_ref()
                    .map(Selector::text)
                    .unwrap_or_default(),
            ),
        );
    }
    out
}

/// The attributes a selector fixes with `k=v` (kind, owner and node left out): what a job
/// the server submits for a rule is given so that the rule's `match` takes it.
pub(crate) fn equal_attrs(selector: &Selector) -> BTreeMap<String, String> {
    selector
        .requirements()
        .iter()
        .filter_map(|r| match r {
            Requirement::Equals { key, value }
                if !matches!(key.as_str(), "kind" | "owner" | "node") =>
            {
                Some((key.clone(), value.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Every job selector of the policy, with its rule and field.
fn selectors(policy: &Policy) -> Vec<Named<'_>> {
    let mut out = Vec::new();
    for (i, l) in policy.limits.iter().enumerate() {
        if let Some(s) = &l.matcher {
            out.push(Named {
                rule: format!("[[limit]] {:?}", l.name),
                field: "match",
                path: FieldPath::root().key("limit").at(i).key("match"),
                selector: s,
            });
        }
    }
    for (i, c) in written(policy) {
        for (field, s) in [("match", &c.matcher), ("exclusive", &c.exclusive)] {
            if let Some(s) = s {
                out.push(Named {
                    rule: format!("[[conflict]] {}", i + 1),
                    field,
                    path: FieldPath::root().key("conflict").at(i).key(field),
                    selector: s,
                });
            }
        }
    }
    for (i, m) in policy.maintenance.iter().enumerate() {
        if let Some(s) = &m.matcher {
            out.push(Named {
                rule: format!("[[maintenance]] {:?}", m.name),
                field: "match",
                path: FieldPath::root().key("maintenance").at(i).key("match"),
                selector: s,
            });
        }
    }
    out.retain(|n| !n.selector.is_empty());
    out
}

/// Every rule's partition keys (`per`, `keys`, `overlap`), with its rule and field.
fn partition_keys(policy: &Policy) -> Vec<(String, FieldPath, Vec<&PerKey>)> {
    let mut out = Vec::new();
    for (i, l) in policy.limits.iter().enumerate() {
        out.push((
            format!("[[limit]] {:?}", l.name),
            FieldPath::root().key("limit").at(i).key("per"),
            l.per.iter().collect(),
        ));
    }
    for (i, c) in written(policy) {
        out.push((
            format!("[[conflict]] {}", i + 1),
            FieldPath::root().key("conflict").at(i).key("keys"),
            c.keys.iter().collect(),
        ));
    }
    for (name, p) in &policy.value_pools {
        out.push((
            format!("[resources.{name}]"),
            FieldPath::root().key("resources").key(name).key("per"),
            p.per.iter().collect(),
        ));
    }
    out
}

/// Pairs of conflicts on the same keys where one lets jobs share (it has `exclusive`) and
/// the other makes every job it takes run alone, and some job is taken by both: by the
/// jobs seen, or, without them, because one of the two has no `match` (or both the same).
fn serialising(policy: &Policy, seen: Option<&Seen>) -> Vec<(usize, usize)> {
    let cs = &policy.conflicts;
    let mut out = Vec::new();
    for i in 0..cs.len() {
        for j in i + 1..cs.len() {
            let (a, b) = (&cs[i], &cs[j]);
            let same_keys = !a.keys.is_empty() && a.keys == b.keys && a.overlap == b.overlap;
            if !same_keys || a.exclusive.is_some() == b.exclusive.is_some() {
                continue;
            }
            let takes = |c: &Conflict, job: &SeenJob| {
                c.matcher
                    .as_ref()
                    .is_none_or(|m| m.matches(|k| job.value(k)))
                    && c.keys.iter().all(|k| job.has(k))
            };
            // The shared conflict's shared jobs: taken and outside its `exclusive`.
            let (shared, alone) = if a.exclusive.is_some() {
                (a, b)
            } else {
                (b, a)
            };
            let meet = match seen {
                Some(s) => s.jobs.iter().any(|job| {
                    takes(shared, job)
                        && takes(alone, job)
                        && shared
                            .exclusive
                            .as_ref()
                            .is_some_and(|x| !x.matches(|k| job.value(k)))
                }),
                None => match (&a.matcher, &b.matcher) {
                    (None, _) | (_, None) => true,
                    (Some(x), Some(y)) => x == y,
                },
            };
            if meet {
                out.push((i, j));
            }
        }
    }
    out
}

/// The kinds and attribute names the policy names.
struct Known {
    kinds: BTreeSet<String>,
    /// Every attribute name the policy names, selectors included.
    attrs: BTreeSet<String>,
    /// The attributes a schedule sets or a rule partitions by: surely real.
    declared: BTreeSet<String>,
}

impl Known {
    fn of(policy: &Policy) -> Known {
        let mut kinds: BTreeSet<String> = policy.kinds.keys().cloned().collect();
        let mut attrs = BTreeSet::new();
        for s in &policy.schedules {
            kinds.insert(s.job.kind.clone());
            attrs.extend(s.job.attrs.keys().cloned());
        }
        for (_, _, keys) in partition_keys(policy) {
            for k in keys {
                if let PerKey::Attr(a) = k {
                    attrs.insert(a.clone());
                }
            }
        }
        attrs.extend(written(policy).filter_map(|(_, c)| c.overlap.clone()));
        let declared = attrs.clone();
        for n in selectors(policy) {
            for r in n.selector.requirements() {
                match (r.key(), r) {
                    ("kind", Requirement::Equals { value, .. }) => {
                        kinds.insert(value.clone());
                    }
                    ("kind", Requirement::In { values, .. }) => kinds.extend(values.clone()),
                    ("kind" | "owner" | "node", _) => {}
                    (key, _) => {
                        attrs.insert(key.to_string());
                    }
                }
            }
        }
        Known {
            kinds,
            attrs,
            declared,
        }
    }
}

/// Likely typos in a selector: a key near `kind`/`owner`/`node` or near another attribute
/// the policy names; a kind value near a named kind. `None` when none.
fn typos(selector: &Selector, known: &Known) -> Option<String> {
    let fixed: BTreeSet<String> = ["kind", "owner", "node"].map(String::from).into();
    let mut found = Vec::new();
    for r in selector.requirements() {
        let key = r.key();
        if key == "kind" {
            let values: Vec<&String> = match r {
                Requirement::Equals { value, .. } | Requirement::NotEquals { value, .. } => {
                    vec![value]
                }
                Requirement::In { values, .. } | Requirement::NotIn { values, .. } => {
                    values.iter().collect()
                }
                _ => Vec::new(),
            };
            for v in values {
                let others: BTreeSet<String> =
                    known.kinds.iter().filter(|k| *k != v).cloned().collect();
                if let Some(m) = near(v, &others) {
                    found.push(format!("kind {v:?} is close to the kind {m:?}"));
                }
            }
            continue;
        }
        if fixed.contains(key) || known.declared.contains(key) {
            continue;
        }
        if let Some(m) = near(key, &fixed) {
            found.push(format!(
                "{key:?} is an attribute, not {m:?}; did you mean {m:?}?"
            ));
        } else {
            let others: BTreeSet<String> =
                known.attrs.iter().filter(|a| *a != key).cloned().collect();
            if let Some(m) = near(key, &others) {
                found.push(format!(
                    "attribute {key:?} is close to the attribute {m:?} other rules name"
                ));
            }
        }
    }
    (!found.is_empty()).then(|| found.join("; "))
}

/// The name in `names` one or two edits away from `word` (one edit for words of up to 4
/// letters), if any; `word` itself counts.
fn near<'a>(word: &str, names: &'a BTreeSet<String>) -> Option<&'a str> {
    if let Some(n) = names.get(word) {
        return Some(n);
    }
    let most = if word.chars().count() <= 4 { 1 } else { 2 };
    names
        .iter()
        .map(|n| (edits(word, n), n))
        .filter(|(d, _)| *d <= most)
        .min()
        .map(|(_, n)| n.as_str())
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The policy's own `[[conflict]]` tables with their index (not the built-in ones: they
/// have no place in the document to point at).
fn written(policy: &Policy) -> impl Iterator<Item = (usize, &Conflict)> {
    policy
        .conflicts
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.built_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::from_toml(text, None).unwrap()
    }

    fn job(kind: &str, attrs: &[(&str, &str)]) -> SeenJob {
        SeenJob {
            kind: kind.into(),
            owner: "admin".into(),
            node: None,
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn seen(jobs: Vec<SeenJob>) -> Seen {
        Seen {
            jobs,
            window: "the last 7d".into(),
        }
    }

    const TYPO: &str =
        "[kinds.backup]\n\n[[limit]]\nname = \"backups\"\nmatch = \"knd=backup\"\nmax = 2\n";

    #[test]
    fn a_key_one_letter_from_kind_is_a_typo_without_a_server() {
        let p = policy(TYPO);
        let w = lint(&p, Some(TYPO), None);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].line, Some(5));
        assert_eq!(w[0].rule, "[[limit]] \"backups\"");
        assert!(w[0].message.contains("did you mean \"kind\""), "{}", w[0]);
        assert!(lint(&policy(&TYPO.replace("knd", "kind")), None, None).is_empty());
    }

    #[test]
    fn with_history_a_selector_that_matched_nothing_is_named_with_the_count() {
        let p = policy(TYPO);
        let s = seen(vec![job("backup", &[]), job("prune", &[])]);
        let w = lint(&p, None, Some(&s));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].message
                .contains("matched none of the 2 jobs of the last 7d"),
            "{}",
            w[0]
        );
        let ok = policy(&TYPO.replace("knd", "kind"));
        assert!(lint(&ok, None, Some(&s)).is_empty());
        // A kind no job had is as silent as a typo.
        let other = policy(&TYPO.replace("knd=backup", "kind=verify"));
        assert_eq!(lint(&other, None, Some(&s)).len(), 1);
    }

    #[test]
    fn a_per_attribute_no_job_has_counts_nothing() {
        let text = "[[limit]]\nname = \"per-ds\"\nper = [\"datastor\"]\nmax = 1\n";
        let s = seen(vec![job("backup", &[("datastore", "ds1")])]);
        let w = lint(&policy(text), Some(text), Some(&s));
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].line, Some(3));
        assert!(w[0].message.contains("\"datastor\""), "{}", w[0]);
        let fixed = text.replace("datastor\"", "datastore\"");
        assert!(lint(&policy(&fixed), None, Some(&s)).is_empty());
    }

    const BOTH: &str = r#"
[[conflict]]
keys = ["repo"]
exclusive = "kind in (prune, check)"

[[conflict]]
keys = ["repo"]
"#;

    #[test]
    fn the_restic_and_borg_conflicts_pasted_together_serialise_the_shared_backups() {
        let w = lint(&policy(BOTH), Some(BOTH), None);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].rule, "[[conflict]] 2");
        assert_eq!(w[0].line, Some(6));
        assert!(w[0].message.contains("one at a time"), "{}", w[0]);
        // Each with its tool's match: no warning, with or without history.
        let apart = "[[conflict]]\nkeys = [\"repo\"]\nmatch = \"tool=restic\"\nexclusive = \"kind in (prune, check)\"\n\n[[conflict]]\nkeys = [\"repo\"]\nmatch = \"tool=borg\"\n";
        let p = policy(apart);
        assert!(
            lint(&p, None, None).is_empty(),
            "{:?}",
            lint(&p, None, None)
        );
        let s = seen(vec![
            job("backup", &[("repo", "r1"), ("tool", "restic")]),
            job("backup", &[("repo", "b1"), ("tool", "borg")]),
            job("prune", &[("repo", "r1"), ("tool", "restic")]),
        ]);
        assert!(lint(&p, None, Some(&s)).is_empty());
        assert_eq!(lint(&policy(BOTH), None, Some(&s)).len(), 1);
    }

    #[test]
    fn edits_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edits("knd", "kind"), 1);
        assert_eq!(edits("bakup", "backup"), 1);
        assert_eq!(edits("kind", "kind"), 0);
        assert_eq!(edits("repo", "host"), 4);
    }
}
