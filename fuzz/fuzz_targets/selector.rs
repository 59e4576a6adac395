//! Label selectors (`lockgate_core::selector`), in both modes.
//!
//! Properties checked for every input that parses:
//! - the displayed text re-parses to an equal selector, and the canonical form (each
//!   requirement's `Display`, joined by `,`) re-parses to the same requirements;
//! - it serialises as its text;
//! - in label mode every key and value passes `validate_label_key`/`validate_label_value`;
//! - a label selector without an empty value and without `<`/`>` parses in job mode to the
//!   same requirements (job syntax is a superset of label syntax for those);
//! - against no labels at all, only "absent-tolerant" requirements (`!=`, `notin`, `!k`)
//!   hold; a selector of only `=`/`in`/exists requirements, one per key, matches the
//!   labels it names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgate_core::selector::{validate_label_key, validate_label_value, Requirement, Selector};
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let labels = Selector::parse_labels(text);
    let jobs = Selector::parse_jobs(text);
    if let Ok(sel) = &labels {
        round_trips(sel, Selector::parse_labels);
        for r in sel.requirements() {
            validate_label_key(r.key()).unwrap_or_else(|m| panic!("{text:?}: key {m}"));
            for v in values(r) {
                validate_label_value(v).unwrap_or_else(|m| panic!("{text:?}: value {m}"));
            }
        }
        let has_empty_value = sel
            .requirements()
            .iter()
            .any(|r| values(r).any(str::is_empty));
        let compares = sel.requirements().iter().any(|r| {
            matches!(
                r,
                Requirement::GreaterThan { .. } | Requirement::LessThan { .. }
            )
        });
        if !has_empty_value && !compares {
            let as_jobs = jobs
                .as_ref()
                .unwrap_or_else(|e| panic!("{text:?} is a label selector but not a job one: {e}"));
            assert_eq!(as_jobs.requirements(), sel.requirements(), "{text:?}");
        }
    }
    if let Ok(sel) = &jobs {
        round_trips(sel, Selector::parse_jobs);
    }
    for e in [labels.err(), jobs.err()].into_iter().flatten() {
        assert!(
            e.position <= text.chars().count(),
            "{text:?}: error column past the end: {e}"
        );
        assert!(!e.message.is_empty());
    }
});

fn round_trips(
    sel: &Selector,
    parse: fn(&str) -> Result<Selector, lockgate_core::selector::SelectorError>,
) {
    let shown = sel.to_string();
    let again = parse(&shown).unwrap_or_else(|e| panic!("{shown:?} displayed, then: {e}"));
    assert_eq!(&again, sel, "display round trip of {shown:?}");
    let canonical: Vec<String> = sel.requirements().iter().map(|r| r.to_string()).collect();
    let canonical = canonical.join(",");
    let again = parse(&canonical).unwrap_or_else(|e| panic!("canonical {canonical:?}: {e}"));
    assert_eq!(
        again.requirements(),
        sel.requirements(),
        "canonical {canonical:?}"
    );
    assert_eq!(
        serde_json::to_value(sel).unwrap(),
        serde_json::Value::String(shown.clone())
    );

    let tolerant = |r: &Requirement| {
        matches!(
            r,
            Requirement::NotEquals { .. }
                | Requirement::NotIn { .. }
                | Requirement::NotExists { .. }
        )
    };
    let all_tolerant = sel.requirements().iter().all(tolerant);
    assert_eq!(
        sel.matches(|_| None),
        all_tolerant,
        "{shown:?} over no labels"
    );
    // A selector of positive requirements, one per key, holds for the labels it names.
    let keys: std::collections::BTreeSet<&str> =
        sel.requirements().iter().map(|r| r.key()).collect();
    // (`k>MAX` holds for no value, so it is left out.)
    let satisfiable = !sel.requirements().iter().any(|r| {
        matches!(
            r,
            Requirement::GreaterThan { value: i64::MAX, .. }
                | Requirement::LessThan { value: i64::MIN, .. }
        )
    });
    if !sel.requirements().iter().any(tolerant)
        && keys.len() == sel.requirements().len()
        && satisfiable
    {
        let map: BTreeMap<String, String> = sel
            .requirements()
            .iter()
            .map(|r| {
                let v = match r {
                    Requirement::Equals { value, .. } => value.clone(),
                    Requirement::In { values, .. } => {
                        values.iter().next().cloned().unwrap_or_default()
                    }
                    Requirement::GreaterThan { value, .. } => (value.saturating_add(1)).to_string(),
                    Requirement::LessThan { value, .. } => (value.saturating_sub(1)).to_string(),
                    _ => String::new(),
                };
                (r.key().to_string(), v)
            })
            .collect();
        assert!(sel.matches_map(&map), "{shown:?} over {map:?}");
    }
}

/// The values a requirement names (none for exists / does not exist).
fn values(r: &Requirement) -> Box<dyn Iterator<Item = &str> + '_> {
    match r {
        Requirement::Equals { value, .. } | Requirement::NotEquals { value, .. } => {
            Box::new(std::iter::once(value.as_str()))
        }
        Requirement::In { values, .. } | Requirement::NotIn { values, .. } => {
            Box::new(values.iter().map(String::as_str))
        }
        Requirement::Exists { .. }
        | Requirement::NotExists { .. }
        | Requirement::GreaterThan { .. }
        | Requirement::LessThan { .. } => Box::new(std::iter::empty()),
    }
}
