//! `Policy::diff`: what `policy apply` prints.

use super::DESIGN_EXAMPLES;
use lockgate_core::Policy;

#[test]
fn diff_names_what_changed() {
    let old = Policy::from_toml(DESIGN_EXAMPLES, None).unwrap();
    let text = DESIGN_EXAMPLES
        .replace("max = 2\nvalues = { ds-fast = 4 }", "max = 3\nvalues = { ds-fast = 4 }")
        .replace(
            "[[limit]]                       # a limit can apply to some jobs only\nname = \"restores\"\nmatch = \"kind in (restore, data-download)\"\nmax = 4\n",
            "",
        )
        .replace(
            "[[nodes.rule]]\nselector = \"role=database\"\nmax_running = 0                 # no data movement on database nodes\n",
            "",
        )
        .replace("max_running = 8 ", "max_running = 10 ")
        .replace("[resources]\n", "[resources]\ntapes = 2\n");
    let new = Policy::from_toml(&text, None).unwrap();
    assert_eq!(
        old.diff(&new),
        [
            "global: max_running 8 -> 10",
            "limit \"per-datastore\": max 2 -> 3",
            "- limit \"restores\"",
            "nodes.rule[2]: removed",
            "resources: tapes unset -> 2",
        ]
    );
    assert_eq!(
        new.diff(&old),
        [
            "global: max_running 10 -> 8",
            "limit \"per-datastore\": max 3 -> 2",
            "+ limit \"restores\": match = \"kind in (restore, data-download)\", max = 4",
            "nodes.rule[2]: added (max_running = 0, selector = \"role=database\")",
            "resources: tapes 2 -> unset",
        ]
    );
}

#[test]
fn diff_of_sections_and_entries() {
    let old = Policy::from_toml(
        "[queue]\naging = \"10m\"\n[kinds.backup]\npriority = 1\n",
        None,
    )
    .unwrap();
    let new = Policy::from_toml(
        "[queue]\nstrict = true\n[owners.alice]\nweight = 2\n[[conflict]]\nkeys = [\"datastore\"]\n",
        None,
    )
    .unwrap();
    assert_eq!(
        old.diff(&new),
        [
            "conflict[0]: added (keys = [\"datastore\"])",
            "queue: aging \"10m\" -> unset",
            "queue: strict unset -> true",
            "+ owners.alice: weight = 2",
            "- kinds.backup",
        ]
    );
}
