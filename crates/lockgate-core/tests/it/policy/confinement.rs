//! `[blocks]` input roots and caps, and the backup keys of `[owners.<name>]`: their
//! defaults, their parsed values, and the error table (line, field, text).

use lockgate_core::policy::*;
use rstest::rstest;
use std::path::PathBuf;

#[test]
fn defaults_confine_a_submitter_to_nothing() {
    let p = Policy::from_toml("[owners.alice]\nweight = 2\n", None).unwrap();
    assert!(p.blocks.input_roots.is_empty());
    assert_eq!(p.blocks.max_file_bytes, 64 << 20);
    assert_eq!(p.blocks.max_total_bytes, 2 << 30);
    assert_eq!(p.blocks.max_items, 500_000);
    assert_eq!(p.blocks.max_entries, 1_000_000);
    let alice = &p.owners["alice"];
    assert!(!alice.allow_hooks);
    assert!(alice.backup_namespaces.is_empty());
}

#[test]
fn roots_caps_and_owner_keys_parse_and_write_back() {
    let text = r#"
[owners.alice]
allow_hooks = true
backup_namespaces = ["app", "web-2"]

[blocks]
input_roots = ["/srv/backup-input", "/data/in"]
max_file_bytes = "8MiB"
max_total_bytes = 1000000
max_items = 10
max_entries = 20
"#;
    let p = Policy::from_toml(text, None).unwrap();
    assert_eq!(
        p.blocks.input_roots,
        vec![
            PathBuf::from("/srv/backup-input"),
            PathBuf::from("/data/in")
        ]
    );
    assert_eq!(p.blocks.max_file_bytes, 8 << 20);
    assert_eq!(p.blocks.max_total_bytes, 1_000_000);
    assert_eq!((p.blocks.max_items, p.blocks.max_entries), (10, 20));
    assert!(p.owners["alice"].allow_hooks);
    assert_eq!(
        p.owners["alice"]
            .backup_namespaces
            .iter()
            .collect::<Vec<_>>(),
        ["app", "web-2"]
    );
    let again = Policy::from_toml(&p.to_toml_string(), None).unwrap();
    assert_eq!(again.blocks, p.blocks);
    assert_eq!(again.owners, p.owners);
    let changed = Policy::from_toml(&text.replace("\"8MiB\"", "\"16MiB\""), None).unwrap();
    assert_eq!(
        p.diff(&changed),
        vec!["blocks: max_file_bytes \"8MiB\" -> \"16MiB\"".to_string()]
    );
}

#[rstest]
#[case::relative_root(
    "[blocks]\ninput_roots = [\"/srv\", \"in\"]\n",
    2,
    "blocks.input_roots[1]",
    "expected an absolute directory path, got \"in\""
)]
#[case::size_unit(
    "[blocks]\n\nmax_file_bytes = \"64 megs\"\n",
    3,
    "blocks.max_file_bytes",
    "expected a size of at least 1 byte such as \"64MiB\", \"500MB\" or a whole number of bytes, got \"64 megs\""
)]
#[case::zero_size(
    "[blocks]\nmax_total_bytes = 0\n",
    2,
    "blocks.max_total_bytes",
    "expected a whole number >= 1, got 0"
)]
#[case::size_type(
    "[blocks]\nmax_total_bytes = true\n",
    2,
    "blocks.max_total_bytes",
    "a size: a whole number of bytes or a string such as \"64MiB\""
)]
#[case::negative_items(
    "[blocks]\nmax_items = -1\n",
    2,
    "blocks.max_items",
    "expected a whole number >= 1, got -1"
)]
#[case::zero_entries(
    "[blocks]\nmax_entries = 0\n",
    2,
    "blocks.max_entries",
    "expected a whole number >= 1, got 0"
)]
#[case::namespace_syntax(
    "[owners.alice]\nbackup_namespaces = [\"app\", \"Kube_System\"]\n",
    2,
    "owners.alice.backup_namespaces[1]",
    "expected a namespace name (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit), got \"Kube_System\""
)]
#[case::allow_hooks_type(
    "[owners.alice]\nallow_hooks = \"yes\"\n",
    2,
    "owners.alice.allow_hooks",
    "expected true or false, got \"yes\""
)]
fn confinement_errors_name_line_field_and_value(
    #[case] text: &str,
    #[case] line: usize,
    #[case] field: &str,
    #[case] needle: &str,
) {
    let e = Policy::from_toml(text, Some("lockgate.toml")).expect_err(text);
    assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
    assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
}
