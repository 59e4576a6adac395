//! Per-value pools, `windows` and `[[maintenance]]`: the error table (line, field, text)
//! and a TOML round trip.

use lockgate_core::policy::*;
use rstest::rstest;

#[rstest]
#[case::bad_weekday(
    "[[limit]]\nname = \"a\"\nmax = 2\nwindows = [{ when = \"mon..xyz 08:00-18:00\", max = 1 }]\n",
    4,
    "limit[0].windows[0].when",
    "expected a daily duration such as \"mon..fri 08:00-18:00\", got \"mon..xyz 08:00-18:00\": column 6: unknown weekday \"xyz\""
)]
#[case::bad_hour(
    "[global]\nmax_running = 4\nwindows = [{ when = \"25:00-06:00\", max = 1 }]\n",
    3,
    "global.windows[0].when",
    "column 1: hour 25 is out of range 0..24"
)]
#[case::empty_window(
    "[global]\nwindows = [{ when = \"mon 08:00-8:00\", max = 1 }]\n",
    2,
    "global.windows[0].when",
    "column 11: the end equals the start"
)]
#[case::negative_window_max(
    "[global]\nwindows = [{ when = \"08:00-18:00\", max = -1 }]\n",
    2,
    "global.windows[0].max",
    "expected a whole number >= 0, got -1"
)]
#[case::window_without_max(
    "[[limit]]\nname = \"a\"\nwindows = [{ when = \"08:00-18:00\" }]\n",
    3,
    "limit[0].windows[0].max",
    "missing"
)]
#[case::window_unknown_key(
    "[[limit]]\nname = \"a\"\nwindows = [{ when = \"08:00-18:00\", max = 1, min = 0 }]\n",
    3,
    "limit[0].windows[0].min",
    "unknown"
)]
#[case::maintenance_when(
    "[[maintenance]]\nname = \"fsck\"\nwhen = \"sun 02:00\"\n",
    3,
    "maintenance[0].when",
    "column 10: expected \"-\" between start and end"
)]
#[case::maintenance_name_twice(
    "[[maintenance]]\nname = \"fsck\"\nwhen = \"sun 02:00-04:00\"\n\n[[maintenance]]\nname = \"fsck\"\nwhen = \"sat 02:00-04:00\"\n",
    6,
    "maintenance[1].name",
    "maintenance name \"fsck\" is already used by maintenance[0], expected unique names"
)]
#[case::maintenance_name_blank(
    "[[maintenance]]\nname = \"a b\"\nwhen = \"sun 02:00-04:00\"\n",
    2,
    "maintenance[0].name",
    "maintenance name \"a b\" holds ' ', expected no whitespace or brackets"
)]
#[case::maintenance_match(
    "[[maintenance]]\nname = \"fsck\"\nwhen = \"sun 02:00-04:00\"\nmatch = \"datastore==\"\n",
    4,
    "maintenance[0].match",
    "invalid job selector"
)]
#[case::pool_per_empty(
    "[resources.repo-io]\nper = []\ncapacity = 4\n",
    2,
    "resources.repo-io.per",
    "expected at least one key (kind, owner or an attribute name), got []"
)]
#[case::pool_reserve_after(
    "[resources.repo-io]\nper = [\"repo\"]\ncapacity = 4\nreserve_after = \"soon\"\n",
    4,
    "resources.repo-io.reserve_after",
    "invalid duration \"soon\": expected a whole number followed by ms, s, m, h or d"
)]
#[case::plain_pool_table_strict(
    "[resources.threads]\ncapacity = 10\nstrict = \"yes\"\n",
    3,
    "resources.threads.strict",
    "expected true or false, got \"yes\""
)]
#[case::plain_pool_table_capacity(
    "[resources.threads]\ncapacity = -1\n",
    2,
    "resources.threads.capacity",
    "expected a whole number >= 0, got -1"
)]
#[case::pool_per_node(
    "[resources.repo-io]\nper = [\"node\"]\ncapacity = 4\n",
    2,
    "resources.repo-io.per[0]",
    "\"node\" is not allowed in a pool's `per`"
)]
#[case::pool_capacity_negative(
    "[resources.repo-io]\nper = [\"repo\"]\ncapacity = -4\n",
    3,
    "resources.repo-io.capacity",
    "expected a whole number >= 0, got -4"
)]
#[case::pool_not_a_table(
    "[resources]\nrepo-io = \"four\"\n",
    2,
    "resources.repo-io",
    "expected a whole number, got \"four\""
)]
#[case::pool_both_global_and_node(
    "[resources.repo-io]\nper = [\"repo\"]\ncapacity = 4\n[nodes.resources]\nrepo-io = 1\n",
    5,
    "nodes.resources.repo-io",
    "already declared in [resources]"
)]
#[case::undeclared_pool_lists_value_pools(
    "[resources.repo-io]\nper = [\"repo\"]\ncapacity = 4\n[kinds.prune]\ncost = { repo = 4 }\n",
    5,
    "kinds.prune.cost.repo",
    "expected a pool declared in [resources] or [nodes.resources]: repo-io"
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
[global]
max_running = 8
windows = [{ when = "mon..fri 08:00-18:00", max = 2 }]

[[limit]]
name = "per-repo"
per = ["repo"]
max = 2
windows = [{ when = "22:00-06:00", max = 4 }, { when = "sun 02:00-04:00", max = 0 }]

[resources]
threads = 10

[resources.repo-io]
per = ["repo"]
capacity = 4

[kinds.prune]
cost = { repo-io = 4 }

[[maintenance]]
name = "ds1-fsck"
when = "sun 02:00-04:00"
match = "datastore=ds1"
"#;

#[test]
fn parses_and_round_trips() {
    let p = Policy::from_toml(DOC, None).unwrap();
    assert_eq!(p.resources["threads"], 10, "a plain pool keeps its meaning");
    let vp = &p.value_pools["repo-io"];
    assert_eq!(
        (vp.per.clone(), vp.capacity),
        (vec![PerKey::Attr("repo".into())], 4)
    );
    assert_eq!(p.global.windows[0].when.text(), "mon..fri 08:00-18:00");
    assert_eq!(p.global.windows[0].max, 2);
    assert_eq!(p.limits[0].windows.len(), 2);
    assert!(p.limits[0].windows[0].when.crosses_midnight());
    assert_eq!(p.maintenance[0].name, "ds1-fsck");
    assert!(p.limits_anything());
    let again = Policy::from_toml(&p.to_toml_string(), None).unwrap();
    assert_eq!(again.raw, p.raw, "{}", p.to_toml_string());
    let json = Policy::from_json(&p.to_json_value().to_string()).unwrap();
    assert_eq!(json.raw, p.raw);
    let changed = Policy::from_toml(&DOC.replace("capacity = 4", "capacity = 6"), None).unwrap();
    let diff = p.diff(&changed);
    assert!(diff.iter().any(|l| l.contains("repo-io")), "{diff:?}");
}

#[test]
fn a_maintenance_window_alone_limits_something() {
    let p = Policy::from_toml(
        "[[maintenance]]\nname = \"m\"\nwhen = \"sun 02:00-04:00\"\n",
        None,
    )
    .unwrap();
    assert!(p.limits_anything());
    assert!(p.maintenance[0].matcher.is_none(), "no match: every job");
}

#[test]
fn pools_carry_their_reservations() {
    let text = "[resources.threads]\ncapacity = 10\nreserve_after = \"30s\"\n\n\
                [resources.repo-io]\nper = [\"repo\"]\ncapacity = 4\nstrict = true\n\n\
                [resources]\ngpus = 2\n";
    let p = Policy::from_toml(text, None).unwrap();
    assert_eq!(
        p.resources["threads"], 10,
        "a table without `per` is one pool"
    );
    assert_eq!(p.resources["gpus"], 2);
    assert!(!p.value_pools.contains_key("threads"));
    assert_eq!(
        p.pool_reserves["threads"],
        Reserve {
            after: Some(std::time::Duration::from_secs(30)),
            strict: false
        }
    );
    assert_eq!(
        p.pool_reserves["repo-io"],
        Reserve {
            after: None,
            strict: true
        }
    );
    assert!(!p.pool_reserves.contains_key("gpus"));
    let again = Policy::from_toml(&p.to_toml_string(), None).unwrap();
    assert_eq!(again.raw, p.raw, "{}", p.to_toml_string());
    assert_eq!(again.pool_reserves, p.pool_reserves);
}
