//! `[[rpo]]`: the error table (line, field, text), derived names, which value a job
//! belongs to, and a TOML round trip.

use crate::common::{engine, spec, submit};
use lockgate_core::policy::*;
use rstest::rstest;
use std::time::Duration;

#[rstest]
#[case::no_max_age(
    "[[rpo]]\nmatch = \"kind=backup\"\nper = [\"group\"]\n",
    1,
    "rpo[0].max_age",
    "missing"
)]
#[case::bad_max_age(
    "[[rpo]]\nmatch = \"kind=backup\"\nmax_age = \"a day\"\n",
    3,
    "rpo[0].max_age",
    "invalid duration \"a day\": expected a whole number followed by ms, s, m, h or d"
)]
#[case::zero_max_age(
    "[[rpo]]\nmax_age = \"0s\"\n",
    2,
    "rpo[0].max_age",
    "expected a duration greater than zero, got \"0s\""
)]
#[case::bad_match(
    "[[rpo]]\nmatch = \"kind==\"\nmax_age = \"26h\"\n",
    2,
    "rpo[0].match",
    "invalid job selector \"kind==\""
)]
#[case::per_twice(
    "[[rpo]]\nper = [\"group\", \"group\"]\nmax_age = \"26h\"\n",
    2,
    "rpo[0].per[1]",
    "\"group\" is listed twice, expected each key once"
)]
#[case::per_empty_key(
    "[[rpo]]\nper = [\"\"]\nmax_age = \"26h\"\n",
    2,
    "rpo[0].per[0]",
    "expected a key name"
)]
#[case::blank_name(
    "[[rpo]]\nname = \"vm groups\"\nmax_age = \"26h\"\n",
    2,
    "rpo[0].name",
    "rpo rule name \"vm groups\" holds ' ', expected no whitespace or brackets"
)]
#[case::name_twice(
    "[[rpo]]\nname = \"vms\"\nmax_age = \"26h\"\n\n[[rpo]]\nname = \"vms\"\nmax_age = \"2d\"\n",
    6,
    "rpo[1].name",
    "rpo rule name \"vms\" is already used by rpo[0], expected unique names"
)]
#[case::derived_name_twice(
    "[[rpo]]\nmatch = \"kind=backup\"\nper = [\"group\"]\nmax_age = \"26h\"\n\n[[rpo]]\nmatch = \"kind = backup\"\nper = [\"group\"]\nmax_age = \"50h\"\n",
    9,
    "rpo[1].max_age",
    "rpo rule name \"kind=backup:group\" (derived from match and per) is already used by rpo[0]"
)]
#[case::unknown_key(
    "[[rpo]]\nmax_age = \"26h\"\nevery = \"1d\"\n",
    3,
    "rpo[0].every",
    "unknown"
)]
fn rejects(#[case] text: &str, #[case] line: usize, #[case] field: &str, #[case] needle: &str) {
    let e = Policy::from_toml(text, Some("p.toml")).expect_err(text);
    assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
    assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("p.toml:{line}: {field}: ")),
        "{e}"
    );
}

const DOC: &str = r#"
[[rpo]]
match = "kind=backup"
per = ["group"]
max_age = "26h"

[[rpo]]
name = "repos"
match = "kind in (backup, verify)"
per = ["repo", "kind"]
max_age = "7d"

[[rpo]]
max_age = "1h"
"#;

#[test]
fn parses_derives_names_and_round_trips() {
    let p = Policy::from_toml(DOC, None).unwrap();
    let names: Vec<&str> = p.rpo.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["kind=backup:group", "repos", "all"]);
    assert_eq!(p.rpo[0].max_age, Duration::from_secs(26 * 3600));
    assert_eq!(
        p.rpo[1].per,
        [PerKey::Attr("repo".into()), PerKey::Kind],
        "per keeps its order"
    );
    let again = Policy::from_toml(&p.to_toml_string(), None).unwrap();
    assert_eq!(again.raw, p.raw, "{}", p.to_toml_string());
    let json = Policy::from_json(&p.to_json_value().to_string()).unwrap();
    assert_eq!(json.raw, p.raw);
    let changed = Policy::from_toml(&DOC.replace("\"7d\"", "\"8d\""), None).unwrap();
    let diff = p.diff(&changed);
    assert!(
        diff.iter()
            .any(|l| l.contains("rpo[1]") && l.contains("8d")),
        "{diff:?}"
    );
    assert!(!p.limits_anything(), "an rpo rule holds no job back");
}

#[test]
fn a_job_belongs_to_the_value_of_its_per_keys() {
    let p = Policy::from_toml(DOC, None).unwrap();
    let mut e = engine(DOC);
    let mut job = |kind: &str, attrs: &[(&str, &str)]| {
        let id = submit(&mut e, spec(kind, attrs), 0);
        e.job(id).unwrap().clone()
    };
    let backup = job("backup", &[("group", "vm/100"), ("repo", "r1")]);
    assert_eq!(
        p.rpo[0].value_of(&backup),
        Some(vec![("group".into(), "vm/100".into())])
    );
    assert_eq!(
        p.rpo[1].value_of(&backup),
        Some(vec![
            ("repo".into(), "r1".into()),
            ("kind".into(), "backup".into())
        ])
    );
    assert_eq!(
        p.rpo[2].value_of(&backup),
        Some(vec![]),
        "one value for the rule"
    );
    let no_group = job("backup", &[("repo", "r1")]);
    assert_eq!(p.rpo[0].value_of(&no_group), None, "a job without the key");
    let prune = job("prune", &[("group", "vm/100")]);
    assert_eq!(p.rpo[0].value_of(&prune), None, "match does not select it");
}
