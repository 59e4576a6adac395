//! Snapshots of what users see: the full text of representative policy errors (TOML and
//! JSON, serde errors and rule errors) and `policy show` of the example policies.
//! Review a change with `cargo insta review`.

use super::{DESIGN_EXAMPLES, OTHER_KEYS};
use lockgate_core::Policy;

/// TOML documents, each with one problem, as `lockgate.toml`.
const TOML_ERRORS: &[&str] = &[
    // Syntax.
    "[global]\nmax_running = 1\n[limit\n",
    "[global]\n[global]\n",
    "a = 1\na = 2\n",
    // Unknown keys, wherever they are written.
    "[global]\nmax_running = 1\nmax_runing = 2\n",
    "[global]\n[bogus]\nx = 1\n",
    "[global]\n[global.bogus]\nx = 1\n",
    "[[bogus]]\nx = 1\n",
    "[kinds.backup]\ncost.threads = 1\nretry.count = 1\n",
    "[[limit]]\nname = \"a\"\n\n[[limit]]\nname = \"b\"\nmaximum = 3\n",
    "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = { kind = \"a\", nodes = \"x\" }\n",
    "[leases]\nttl = \"30s\"\n[leases.x]\n",
    "[global]\nx.y = 1\n",
    "[[nodes.rule]]\nselector = \"\"\nmax_running = 1\n[bogus]\n",
    // Wrong types and missing keys.
    "[global]\nmax_running = 2.5\n",
    "[global]\n\nprepare_queue = \"8\"\n",
    "global = 3\n",
    "limit = 1\n",
    "[queue]\nstrict = \"yes\"\n",
    "[[limit]]\nname = \"a\"\nper = \"kind\"\n",
    "[[limit]]\nname = \"a\"\nper = [\"kind\", 3]\n",
    "[[nodes.rule]]\nmax_running = 1\n",
    "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\n",
    "[global]\nmax_running = 1979-05-27\n",
    "[resources]\nthreads = 99999999999999999999\n",
    "[[limit]]\nname = \"a\"\nvalues = 1979-05-27\n",
    // Rules.
    "[[limit]]\nname = \"a\"\nmax = 2\n\n[[limit]]\nname = \"b\"\nmax = -1\n",
    "[global]\nmax_running = 99999999999\n",
    "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost.threads = -4\n",
    "[[limit]]\nname = \"a\"\n[[limit]]\nname = \"a\"\n",
    "[[limit]]\nname = \"a\"\nper = [\"datastore\", \"kind\"]\nvalues = { \"ds1\" = 2 }\n",
    "[[limit]]\nname = \"a\"\nper = [\"kind\", \"node\"]\n",
    "[[limit]]\nname = \"a\"\nmatch = \"kind in ()\"\n",
    "[[nodes.rule]]\nselector = \"group=vm/100\"\nmax_running = 1\n",
    "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost = { threads = 4, gpus = 1 }\n",
    "[kinds.backup]\ncost = { threads = 1 }\n",
    "[resources]\nthreads = 10\n[nodes.resources]\nthreads = 2\n",
    "[owners.alice]\nweight = 0\n",
    "[leases]\nttl = \"30 seconds\"\n",
    "[kinds.data-upload]\nretry = { times = 3 }\n",
    "[[schedule]]\nname = \"s\"\nwhen = \"mon..xyz 02:00\"\njob = { kind = \"verify\" }\n",
    "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = { kind = \"verify\", attrs = { owner = \"x\" } }\n",
    "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = { kind = \"verify\" }\nduplicates = \"cancel\"\n",
    "[global]\n\n[[conflict]]\nmatch = \"kind=backup\"\n",
    "[[blocks.rule]]\nmatch = \"kind=Pod\"\ngroup_by = [\"label:a\", \"app\"]\n",
    "[blocks]\nvolume_group_label = \"-bad\"\n",
];

/// JSON documents, each with one problem.
const JSON_ERRORS: &[&str] = &[
    "{\n  \"global\": {\n    \"max_running\": 1,\n  }\n}",
    "{\n  \"global\": {\n    \"max_runing\": 1\n  }\n}",
    "{\"limit\": [{\"name\": \"a\"},\n {\"name\": \"b\", \"max\": 1.5}]}",
    "{\"nodes\": {\"rule\": [{\"max_running\": 1}]}}",
    "{\"limit\": [{\"name\": \"a\", \"max\": -1}]}",
    "[1]",
    "{\"queue\": {\"strict\": \"yes\"}}",
    "{\"kinds\": {\"backup\": {\"retry\": {\"count\": 1}}}}",
    "{\"schedule\": [{\"name\": \"s\", \"when\": \"daily\", \"job\": {\"kind\": \"a\", \"attrs\": {\"x\": 1}}}]}",
    "{\"global\": {\"max_running\": null}, \"limit\": [{\"name\": \"a\", \"per\": \"kind\"}]}",
    "{\"limit\": [{\"name\": null}]}",
    "{\"kinds\": null}",
    "{\"limit\": [{\"name\": \"a\", \"per\": [null]}]}",
    "{\"global\": {\"max_running\": 18446744073709551615}}",
    "{\"global\": {}} {}",
    "{\"global\": {\"max_running\": 1, \"bogus\": 2}, \"limit\": {}}",
];

fn render(inputs: &[&str], error: impl Fn(&str) -> String) -> String {
    inputs
        .iter()
        .map(|text| format!("{}\n=> {}\n", text.trim_end(), error(text)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn toml_error_texts() {
    insta::assert_snapshot!(render(TOML_ERRORS, |text| {
        Policy::from_toml(text, Some("lockgate.toml"))
            .expect_err(text)
            .to_string()
    }));
}

#[test]
fn json_error_texts() {
    insta::assert_snapshot!(render(JSON_ERRORS, |text| {
        Policy::from_json(text).expect_err(text).to_string()
    }));
}

/// `policy show` of each example policy: the TOML writer's output, which must also read
/// back as the same policy.
#[rstest::rstest]
#[case::mixed("mixed")]
#[case::pbs_like("pbs-like")]
#[case::velero_like("velero-like")]
fn examples_written_as_toml(#[case] name: &str) {
    let path = format!(
        "{}/../../examples/{name}/policy.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let policy = Policy::from_toml(&text, Some(&path)).unwrap_or_else(|e| panic!("{e}"));
    let written = policy.to_toml_string();
    assert_eq!(
        Policy::from_toml(&written, None).unwrap(),
        policy,
        "{written}"
    );
    insta::assert_snapshot!(format!("example_{name}"), written);
}

/// The writer's output for every key the design names.
#[rstest::rstest]
#[case::design_examples("design_examples", DESIGN_EXAMPLES)]
#[case::other_keys("other_keys", OTHER_KEYS)]
#[case::node_pools_and_rules("node_pools_and_rules", "[[nodes.rule]]\nselector = \"a=b\"\nmax_running = 2\n[nodes.resources]\ngpus = 1\n[kinds.empty]\n[global]\n")]
fn every_key_written_as_toml(#[case] name: &str, #[case] text: &str) {
    let policy = Policy::from_toml(text, None).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!(format!("written_{name}"), policy.to_toml_string());
}
