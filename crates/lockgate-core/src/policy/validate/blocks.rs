//! The rules of `[blocks]` and of the backup keys of `[owners.<name>]` (`allow_hooks`,
//! `backup_namespaces`): what confines a non-admin's backup.
//!
//! Invariants of what they return: every `input_roots` entry is an absolute path (whether it
//! exists is the server's check: the core reads no file); every cap is at least 1; every
//! `backup_namespaces` entry is a Kubernetes namespace name (RFC 1123 label).

use super::{bad, job_selector, label_selector, Checked, FieldPath};
use crate::policy::raw::{RawBlocks, RawOwner, RawSize};
use crate::policy::{BlockRule, BlocksPolicy};
use crate::selector::validate_label_key;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// `allow_hooks` (default false) and `backup_namespaces` (default none) of one owner.
pub(super) fn owner_backups(o: &RawOwner, p: &FieldPath) -> Checked<(bool, BTreeSet<String>)> {
    let mut namespaces = BTreeSet::new();
    for (i, ns) in o.backup_namespaces.iter().flatten().enumerate() {
        namespace(ns, &p.key("backup_namespaces").at(i))?;
        namespaces.insert(ns.clone());
    }
    Ok((o.allow_hooks.unwrap_or(false), namespaces))
}

/// A Kubernetes namespace name: at most 63 lowercase letters, digits and `-`, starting and
/// ending with a letter or digit.
fn namespace(ns: &str, p: &FieldPath) -> Checked<()> {
    if crate::selector::is_namespace_name(ns) {
        Ok(())
    } else {
        bad(
            p,
            format!("expected a namespace name (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit), got {ns:?}"),
        )
    }
}

/// `input_roots` and the four caps.
fn input_caps(b: &RawBlocks, p: &FieldPath, out: &mut BlocksPolicy) -> Checked<()> {
    for (i, root) in b.input_roots.iter().flatten().enumerate() {
        let path = PathBuf::from(root);
        if !path.is_absolute() {
            return bad(
                &p.key("input_roots").at(i),
                format!("expected an absolute directory path, got {root:?}"),
            );
        }
        out.input_roots.push(path);
    }
    if let Some(s) = &b.max_file_bytes {
        out.max_file_bytes = size(s, &p.key("max_file_bytes"))?;
    }
    if let Some(s) = &b.max_total_bytes {
        out.max_total_bytes = size(s, &p.key("max_total_bytes"))?;
    }
    if let Some(n) = b.max_items {
        out.max_items = at_least_one(n, &p.key("max_items"))?;
    }
    if let Some(n) = b.max_entries {
        out.max_entries = at_least_one(n, &p.key("max_entries"))?;
    }
    Ok(())
}

fn at_least_one(n: i64, p: &FieldPath) -> Checked<u64> {
    match u64::try_from(n) {
        Ok(n) if n >= 1 => Ok(n),
        _ => bad(p, format!("expected a whole number >= 1, got {n}")),
    }
}

/// A size of at least one byte: a whole number of bytes, or a string of a whole number and
/// a unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`, or the decimal `kB`, `MB`, `GB`, `TB`).
pub(super) fn size(s: &RawSize, p: &FieldPath) -> Checked<u64> {
    let text = match s {
        RawSize::Bytes(n) => return at_least_one(*n, p),
        RawSize::Text(t) => t,
    };
    parse_size(text).map_or_else(
        || bad(p, format!("expected a size of at least 1 byte such as \"64MiB\", \"500MB\" or a whole number of bytes, got {text:?}")),
        Ok,
    )
}

/// `"64MiB"` -> 67108864; `None` for anything else, zero or an overflow.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().ok()?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor).filter(|&b| b >= 1)
}

pub(super) fn blocks_policy(b: &RawBlocks, p: &FieldPath) -> Checked<BlocksPolicy> {
    let mut out = BlocksPolicy::default();
    input_caps(b, p, &mut out)?;
    if let Some(argv) = &b.exec_template {
        if argv.first().is_none_or(|program| program.trim().is_empty()) {
            return bad(
                &p.key("exec_template"),
                "expected a non-empty argv whose first entry is the program, such as [\"kubectl\", \"exec\", \"-n\", \"{namespace}\", \"{pod}\", \"-c\", \"{container}\", \"--\", \"{command}\"]",
            );
        }
        out.exec_template = argv.clone();
    }
    if let Some(label) = &b.volume_group_label {
        validate_label_key(label).or_else(|m| {
            bad(
                &p.key("volume_group_label"),
                format!("expected a Kubernetes label key, got {label:?}: {m}"),
            )
        })?;
        out.volume_group_label = label.clone();
    }
    if let Some(image) = &b.restore_wait_image {
        if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
            return bad(
                &p.key("restore_wait_image"),
                format!("expected a container image reference with lockgate in it, such as \"registry.example/lockgate:0.1\", got {image:?}"),
            );
        }
        out.restore_wait_image = Some(image.clone());
    }
    if let Some(sel) = &b.data_upload_selector {
        label_selector(sel, &p.key("data_upload_selector"))?;
        out.data_upload_selector = sel.trim().to_string();
    }
    for (i, r) in b.rule.iter().enumerate() {
        let rp = p.key("rule").at(i);
        let matcher = job_selector(&r.r#match, &rp.key("match"))?;
        if r.group_by.is_empty() {
            return bad(
                &rp.key("group_by"),
                "expected at least one `label:<name>` or `field:<dotted.path>` entry, got an empty list",
            );
        }
        for (j, g) in r.group_by.iter().enumerate() {
            let ok = ["label:", "field:"].iter().any(|pre| {
                g.strip_prefix(pre)
                    .is_some_and(|rest| !rest.trim().is_empty())
            });
            if !ok {
                return bad(
                    &rp.key("group_by").at(j),
                    format!("expected `label:<name>` or `field:<dotted.path>`, got {g:?}"),
                );
            }
        }
        out.rules.push(BlockRule {
            matcher,
            group_by: r.group_by.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("2 GiB"), Some(2 << 30));
        assert_eq!(parse_size("500MB"), Some(500_000_000));
        assert_eq!(parse_size("1500"), Some(1500));
        assert_eq!(parse_size("0MiB"), None);
        assert_eq!(parse_size("1.5GiB"), None);
        assert_eq!(parse_size("64mib"), None);
        assert_eq!(parse_size("99999999999TiB"), None);
        assert_eq!(parse_size(""), None);
    }
}
