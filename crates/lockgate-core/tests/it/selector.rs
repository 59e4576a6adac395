//! Selectors: the parse table (label and job grammars), the error columns, matching.

use lockgate_core::selector::{Requirement, Selector};
use rstest::rstest;
use std::collections::{BTreeMap, BTreeSet};

fn set(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|s| s.to_string()).collect()
}

fn eq(k: &str, v: &str) -> Requirement {
    Requirement::Equals {
        key: k.into(),
        value: v.into(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[rstest]
#[case("", vec![])]
#[case("   ", vec![])]
#[case("a=b", vec![eq("a", "b")])]
#[case("a==b", vec![eq("a", "b")])]
#[case(" a = b ", vec![eq("a", "b")])]
#[case("a=", vec![eq("a", "")])]
#[case("a= ,b=c", vec![eq("a", ""), eq("b", "c")])]
#[case("a!=b", vec![Requirement::NotEquals { key: "a".into(), value: "b".into() }])]
#[case("a != ", vec![Requirement::NotEquals { key: "a".into(), value: "".into() }])]
#[case("env in (prod, qa)", vec![Requirement::In { key: "env".into(), values: set(&["prod", "qa"]) }])]
#[case("env in(prod)", vec![Requirement::In { key: "env".into(), values: set(&["prod"]) }])]
#[case("env notin ( a , b )", vec![Requirement::NotIn { key: "env".into(), values: set(&["a", "b"]) }])]
#[case("gpu", vec![Requirement::Exists { key: "gpu".into() }])]
#[case("!gpu", vec![Requirement::NotExists { key: "gpu".into() }])]
#[case("! gpu", vec![Requirement::NotExists { key: "gpu".into() }])]
#[case("in in (in)", vec![Requirement::In { key: "in".into(), values: set(&["in"]) }])]
#[case(
    "kubernetes.io/hostname in (node-1, node-2), !gpu",
    vec![
        Requirement::In { key: "kubernetes.io/hostname".into(), values: set(&["node-1", "node-2"]) },
        Requirement::NotExists { key: "gpu".into() },
    ]
)]
#[case(
    "beta.kubernetes.io/instance-type=Standard_B4ms",
    vec![eq("beta.kubernetes.io/instance-type", "Standard_B4ms")]
)]
#[case("a=b,c,!d,e!=f", vec![
    eq("a", "b"),
    Requirement::Exists { key: "c".into() },
    Requirement::NotExists { key: "d".into() },
    Requirement::NotEquals { key: "e".into(), value: "f".into() },
])]
#[case("A.b-c_d=X_1.y", vec![eq("A.b-c_d", "X_1.y")])]
#[case("x\t=\ty\n", vec![eq("x", "y")])]
fn parses_label_selectors(#[case] text: &str, #[case] want: Vec<Requirement>) {
    let sel = Selector::parse_labels(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(sel.requirements(), &want[..], "{text:?}");
    assert_eq!(sel.text(), text.trim());
    assert_eq!(sel.is_empty(), want.is_empty());
}

#[rstest]
#[case("kind in (a b)", 11, "expected ',' or ')'")]
#[case("kind in (a", 10, "no closing ')'")]
#[case("kind in a,b", 8, "expected '('")]
#[case("kind in (a))", 11, "expected ',' or the end")]
#[case("a=b c=d", 4, "expected ',' or the end")]
#[case("a=b,", 4, "after ','")]
#[case(",a=b", 0, "expected a key")]
#[case("a=b,,c=d", 4, "after ','")]
#[case("=b", 0, "expected a key")]
#[case(" = b", 1, "expected a key")]
#[case("!a=b", 2, "takes no operator or value")]
#[case("!a in (b)", 3, "takes no operator or value")]
#[case("!", 1, "after '!'")]
#[case("!!a", 1, "after '!'")]
#[case("a==b==c", 4, "expected ',' or the end")]
#[case("a===b", 3, "expected a value")]
#[case("a=!b", 2, "expected a value")]
#[case("a=(b)", 2, "expected a value")]
#[case("a b", 2, "expected an operator")]
#[case("a||b", 0, "holds '|'")]
#[case("a<x", 2, "expected an integer")]
#[case("a>", 2, "expected an integer")]
#[case("a>1.5", 2, "expected an integer")]
#[case("a>-1", 2, "begin and end")]
#[case("a>1 2", 4, "expected ',' or the end")]
#[case("Kube.io/a=b", 0, "not a DNS subdomain")]
#[case("/a=b", 0, "prefix before '/' is empty")]
#[case("example.com/=b", 0, "the name is empty")]
#[case("a/b/c=d", 0, "at most one '/'")]
#[case("-a=b", 0, "begin and end")]
#[case("a_=b", 0, "begin and end")]
#[case("a=b_", 2, "begin and end")]
#[case("a=vm/100", 2, "holds '/'")]
#[case("a=b:c", 2, "holds ':'")]
#[case("a..b.example.com/x", 0, "not a DNS subdomain")]
#[case("héllo=b", 0, "holds 'é'")]
fn rejects_bad_label_selectors(#[case] text: &str, #[case] position: usize, #[case] needle: &str) {
    let e = Selector::parse_labels(text).expect_err(text);
    assert!(
        e.message.contains(needle),
        "{text:?}: {e} (wanted {needle:?})"
    );
    assert_eq!(e.position, position, "{text:?}: {e}");
}

#[rstest]
#[case(&"a".repeat(63), true)]
#[case(&"a".repeat(64), false)]
#[case(&format!("{}/a", "b".repeat(253)), true)]
#[case(&format!("{}/a", "b".repeat(254)), false)]
#[case(&format!("{}.{}/a", "b".repeat(63), "c".repeat(63)), true)]
fn label_key_lengths(#[case] key: &str, #[case] ok: bool) {
    assert_eq!(Selector::parse_labels(key).is_ok(), ok, "{key}");
    assert_eq!(
        Selector::parse_labels(&format!("{key}=v")).is_ok(),
        ok,
        "{key}"
    );
}

#[rstest]
#[case(&"v".repeat(63), true)]
#[case(&"v".repeat(64), false)]
fn label_value_lengths(#[case] value: &str, #[case] ok: bool) {
    let r = Selector::parse_labels(&format!("k={value}"));
    assert_eq!(r.is_ok(), ok, "{r:?}");
    if let Err(e) = r {
        assert!(e.message.contains("at most 63"), "{e}");
    }
}

#[rstest]
#[case("group=vm/100", vec![eq("group", "vm/100")])]
#[case("kind in (restore, data-download)", vec![Requirement::In { key: "kind".into(), values: set(&["restore", "data-download"]) }])]
#[case("owner=schedule:verify-ds1", vec![eq("owner", "schedule:verify-ds1")])]
#[case("kind=Pod, app.kubernetes.io/managed-by=cass-operator", vec![eq("kind", "Pod"), eq("app.kubernetes.io/managed-by", "cass-operator")])]
#[case("path=/srv/a_b-", vec![eq("path", "/srv/a_b-")])]
#[case("size=<big>", vec![eq("size", "<big>")])]
#[case("node, !namespaces", vec![Requirement::Exists { key: "node".into() }, Requirement::NotExists { key: "namespaces".into() }])]
#[case("", vec![])]
fn parses_job_selectors(#[case] text: &str, #[case] want: Vec<Requirement>) {
    let sel = Selector::parse_jobs(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(sel.requirements(), &want[..], "{text:?}");
}

#[rstest]
#[case("kind=", 5, "expected a value")]
#[case("kind!=", 6, "expected a value")]
#[case("kind=,a=b", 5, "expected a value")]
#[case("kind in ()", 9, "empty list")]
#[case("kind in (a,)", 11, "values may not be empty")]
#[case("=backup", 0, "expected a key")]
#[case("kind=a=b", 6, "expected ',' or the end")]
#[case("kind=back up", 10, "expected ',' or the end")]
#[case("kind=backup(x)", 11, "expected ',' or the end")]
fn rejects_bad_job_selectors(#[case] text: &str, #[case] position: usize, #[case] needle: &str) {
    let e = Selector::parse_jobs(text).expect_err(text);
    assert!(
        e.message.contains(needle),
        "{text:?}: {e} (wanted {needle:?})"
    );
    assert_eq!(e.position, position, "{text:?}: {e}");
}

#[rstest]
#[case("", &[], true)]
#[case("", &[("a", "b")], true)]
#[case("a=b", &[("a", "b")], true)]
#[case("a=b", &[("a", "c")], false)]
#[case("a=b", &[], false)]
#[case("a=", &[("a", "")], true)]
#[case("a=", &[], false)]
#[case("a!=b", &[("a", "c")], true)]
#[case("a!=b", &[("a", "b")], false)]
#[case("a!=b", &[], true)]
#[case("a in (b,c)", &[("a", "c")], true)]
#[case("a in (b,c)", &[("a", "d")], false)]
#[case("a in (b,c)", &[], false)]
#[case("a notin (b,c)", &[("a", "d")], true)]
#[case("a notin (b,c)", &[("a", "b")], false)]
#[case("a notin (b,c)", &[], true)]
#[case("a", &[("a", "")], true)]
#[case("a", &[("b", "x")], false)]
#[case("!a", &[("b", "x")], true)]
#[case("!a", &[("a", "x")], false)]
#[case("a=b,c", &[("a", "b"), ("c", "x")], true)]
#[case("a=b,c", &[("a", "b")], false)]
#[case("kubernetes.io/hostname in (node-1, node-2), !gpu", &[("kubernetes.io/hostname", "node-2")], true)]
#[case("kubernetes.io/hostname in (node-1, node-2), !gpu", &[("kubernetes.io/hostname", "node-2"), ("gpu", "true")], false)]
fn matches_labels(#[case] text: &str, #[case] pairs: &[(&str, &str)], #[case] want: bool) {
    let sel = Selector::parse_labels(text).unwrap();
    assert_eq!(
        sel.matches_map(&labels(pairs)),
        want,
        "{text:?} over {pairs:?}"
    );
    let map = labels(pairs);
    assert_eq!(sel.matches(|k| map.get(k).map(String::as_str)), want);
}

#[test]
fn matches_jobs_through_a_lookup() {
    let sel = Selector::parse_jobs("kind=backup, group=vm/100, node notin (db-1)").unwrap();
    let job = |k: &str| match k {
        "kind" => Some("backup"),
        "group" => Some("vm/100"),
        _ => None,
    };
    assert!(sel.matches(job));
    let pinned = |k: &str| match k {
        "kind" => Some("backup"),
        "group" => Some("vm/100"),
        "node" => Some("db-1"),
        _ => None,
    };
    assert!(!sel.matches(pinned));
}

#[rstest]
#[case("kind in (restore, data-download)", "kind", "restore", true)]
#[case("kind in (restore, data-download)", "kind", "backup", false)]
#[case("kind=resource-backup", "kind", "resource-backup", true)]
#[case("kind==resource-backup", "kind", "resource-backup", true)]
#[case("kind!=backup", "kind", "restore", false)]
#[case("kind notin (backup)", "kind", "restore", false)]
#[case("kind", "kind", "restore", false)]
#[case("owner=restore", "kind", "restore", false)]
#[case("", "kind", "restore", false)]
fn names_value(#[case] text: &str, #[case] key: &str, #[case] value: &str, #[case] want: bool) {
    assert_eq!(
        Selector::parse_jobs(text).unwrap().names_value(key, value),
        want
    );
}

#[test]
fn everything_is_the_empty_selector() {
    let all = Selector::everything();
    assert!(all.is_empty());
    assert_eq!(all, Selector::parse_labels("").unwrap());
    assert_eq!(all, Selector::parse_jobs("  ").unwrap());
    assert!(all.matches(|_| None));
}

#[test]
fn displays_and_serializes_as_its_text() {
    let sel = Selector::parse_labels("  a in (x, y) ,!b ").unwrap();
    assert_eq!(sel.to_string(), "a in (x, y) ,!b");
    assert_eq!(serde_json::to_string(&sel).unwrap(), r#""a in (x, y) ,!b""#);
    let canonical: Vec<String> = sel.requirements().iter().map(|r| r.to_string()).collect();
    assert_eq!(canonical, ["a in (x,y)", "!b"]);
}

#[test]
fn error_display_names_the_column() {
    let e = Selector::parse_labels("a=b c").unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 5: found \"c\", expected ',' or the end of the selector (requirements are joined by commas)"
    );
}

// apimachinery's `pkg/labels/selector_test.go` (TestSelectorParse, TestSetSelectorParser,
// TestToString): what `kubectl get -l` accepts, in canonical form (values sorted, as its
// `sets.String` keeps them), and what it refuses.
#[rstest]
#[case("x=a,y=b,z=c", "x=a,y=b,z=c")]
#[case("x!=a,y=b", "x!=a,y=b")]
#[case("x=", "x=")]
#[case("x= ", "x=")]
#[case("x=,z= ", "x=,z=")]
#[case("x= ,z= ", "x=,z=")]
#[case("!x", "!x")]
#[case("x>1", "x>1")]
#[case("x>1,z<5", "x>1,z<5")]
#[case("x<7", "x<7")]
#[case("\rx", "x")]
#[case(
    "this-is-a-dns.domain.com/key-with-dash",
    "this-is-a-dns.domain.com/key-with-dash"
)]
#[case(
    "this-is-another-dns.domain.com/key-with-dash in (so,what)",
    "this-is-another-dns.domain.com/key-with-dash in (so,what)"
)]
#[case(
    "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
    "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)"
)]
#[case("foo  in\t (abc)", "foo in (abc)")]
#[case("x notin\n (abc)", "x notin (abc)")]
#[case("x  notin\t\t\t(abc,def)", "x notin (abc,def)")]
#[case("x in (abc,)", "x in (,abc)")]
#[case("x in ()", "x in ()")]
#[case("x notin (abc,,def),bar,z in (),w", "x notin (,abc,def),bar,z in (),w")]
#[case("x notin ( )", "x notin ()")]
#[case("x notin (, a)", "x notin (,a)")]
#[case("a ", "a")]
#[case("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)")]
#[case("x in (abc,def),y notin (jkl),z", "x in (abc,def),y notin (jkl),z")]
#[case("x=abc,y==jkl,z!=a,z", "x=abc,y=jkl,z!=a,z")]
#[case("x>2,y<8,z", "x>2,y<8,z")]
fn reads_label_selectors_as_kubectl(#[case] text: &str, #[case] canonical: &str) {
    let sel = Selector::parse_labels(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let got: Vec<String> = sel.requirements().iter().map(|r| r.to_string()).collect();
    assert_eq!(got.join(","), canonical, "{text:?}");
    // The canonical form reads back as the same requirements.
    assert_eq!(
        Selector::parse_labels(canonical).unwrap().requirements(),
        sel.requirements()
    );
}

#[rstest]
#[case("x=a||y=b")]
#[case("x==a==b")]
#[case("!x=a")]
#[case("x<a")]
#[case("x,,y")]
#[case(",x,y")]
#[case("x nott in (y)")]
#[case("a in (xyz),")]
#[case("a in (xyz)b notin ()")]
#[case("a in (xyz abc)")]
#[case("a notin(")]
#[case("a (")]
#[case("(")]
#[case("foo>bar")]
#[case("barz<blah")]
fn refuses_what_kubectl_refuses(#[case] text: &str) {
    assert!(Selector::parse_labels(text).is_err(), "{text:?} parsed");
}

// TestSelectorMatches and TestRequirementSelectorMatching.
#[rstest]
#[case("x>1", &[("x", "2")], true)]
#[case("x<1", &[("x", "0")], true)]
#[case("x>1", &[("x", "0")], false)]
#[case("x<1", &[("x", "2")], false)]
#[case("z>1", &[("z", "v2")], false)]
#[case("z>1", &[], false)]
#[case("z<1", &[], false)]
#[case("x notin (),y", &[("y", "")], true)]
#[case("!x,y", &[("y", "")], true)]
#[case("x notin (),!y", &[("y", "")], false)]
#[case("x in ()", &[("y", "baz")], false)]
#[case("x in ()", &[("x", "")], true)]
#[case("x in (a,)", &[("x", "")], true)]
#[case("x in (a,)", &[("x", "a")], true)]
#[case("notin=in", &[("notin", "in")], true)]
#[case("x!=y,z!=w", &[("x", "z"), ("z", "a")], true)]
#[case("x!=y,z!=w", &[("x", "z"), ("z", "w")], false)]
#[case("foo=bar,foobar=bar,baz=blah", &[("foo", "bar"), ("baz", "blah")], false)]
fn matches_as_kubectl(#[case] text: &str, #[case] pairs: &[(&str, &str)], #[case] want: bool) {
    let sel = Selector::parse_labels(text).unwrap();
    assert_eq!(
        sel.matches_map(&labels(pairs)),
        want,
        "{text:?} over {pairs:?}"
    );
}

#[test]
fn job_selectors_keep_their_own_rules() {
    // Deliberate differences (selector.rs header): `<` and `>` belong to values and are
    // refused in keys, and a value may not be empty.
    let e = Selector::parse_jobs("kind=backup, size>10").unwrap_err();
    assert_eq!(e.position, 17, "{e}");
    assert!(e.message.contains("no '<' or '>' comparisons"), "{e}");
    for text in ["kind in ()", "kind in (a,)", "kind=", "kind in (,a)"] {
        assert!(Selector::parse_jobs(text).is_err(), "{text:?} parsed");
    }
}
