//! The syntax rules of a job's kind and attributes, and the `[quotas]` that bound them
//! (used only by [`super::JobSpec::check`]).
//!
//! Invariants of what passes:
//! - a kind and every attribute name is a Kubernetes qualified name (label-key syntax, as
//!   apimachinery's `IsQualifiedName`): an optional DNS-subdomain prefix of at most 253
//!   characters and `/`, then a name of 1 to 63 characters matching
//!   `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`; so no whitespace, NUL, `=`, `,` or
//!   newline, which is what the packed [`super::Attrs`] and the selectors rely on;
//! - no attribute is named `kind`, `owner` or `node`;
//! - an attribute value holds no whitespace and no control character (every other
//!   printable character is allowed: `vm/100`, `host:/srv/repo`, `a,b`), and is at most
//!   `max_attr_value_bytes` long; a job has at most `max_attrs` attributes.

use super::{invalid, SubmitError};
use crate::limits::shorten;
use crate::policy::QuotasPolicy;
use crate::selector::validate_label_key;
use std::collections::BTreeMap;

/// A kind: a qualified name.
pub(super) fn kind(kind: &str) -> Result<(), SubmitError> {
    if kind.is_empty() {
        return Err(invalid(
            "kind",
            "expected a job kind (such as \"backup\"), got an empty string",
        ));
    }
    validate_label_key(kind).map_err(|m| {
        invalid(
            "kind",
            format!(
                "expected a job kind in Kubernetes label-key syntax ([prefix/]name), got {:?}: {m}",
                shorten(kind)
            ),
        )
    })
}

/// Every attribute, and their number.
pub(super) fn attrs(
    attrs: &BTreeMap<String, String>,
    quotas: &QuotasPolicy,
) -> Result<(), SubmitError> {
    if attrs.len() > quotas.max_attrs as usize {
        return Err(invalid(
            "attrs",
            format!(
                "{} attributes, expected at most {} ([quotas].max_attrs)",
                attrs.len(),
                quotas.max_attrs
            ),
        ));
    }
    attrs.iter().try_for_each(|(k, v)| attr(k, v, quotas))
}

/// One attribute: not a reserved name, a qualified name, a bounded printable value.
fn attr(k: &str, v: &str, quotas: &QuotasPolicy) -> Result<(), SubmitError> {
    let reserved = match k {
        "kind" => Some("set the kind with `kind`"),
        "owner" => Some("the owner is the submitting principal"),
        "node" => Some("pin the job with `node`"),
        _ => None,
    };
    if let Some(hint) = reserved {
        return Err(invalid(
            format!("attrs.{k}"),
            format!("`{k}` is reserved, expected another attribute name ({hint})"),
        ));
    }
    if k.is_empty() {
        return Err(invalid(
            "attrs",
            "expected an attribute name, got an empty string",
        ));
    }
    if let Err(m) = validate_label_key(k) {
        return Err(invalid(
            format!("attrs.{}", shorten(k)),
            format!(
                "expected an attribute name in Kubernetes label-key syntax ([prefix/]name), got {:?}: {m}",
                shorten(k)
            ),
        ));
    }
    let max = quotas.max_attr_value_bytes as usize;
    if v.len() > max {
        return Err(invalid(
            format!("attrs.{k}"),
            format!(
                "the value is {} bytes long, expected at most {max} ([quotas].max_attr_value_bytes)",
                v.len()
            ),
        ));
    }
    if let Some(c) = v.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            format!("attrs.{k}"),
            format!(
                "attribute values may not contain whitespace or control characters, got {c:?} in {v:?}"
            ),
        ));
    }
    Ok(())
}

/// The written limits of a spec's free-form fields and numbers ([`crate::limits`]):
/// priority, idempotency key, node name, node selector, durations.
pub(super) fn bounds(spec: &super::JobSpec) -> Result<(), SubmitError> {
    use crate::limits;
    let refused = |e: limits::LimitError| invalid(e.field, e.message);
    if let Some(p) = spec.priority {
        limits::priority("priority", p).map_err(refused)?;
    }
    let texts = [
        (
            "idempotency_key",
            &spec.idempotency_key,
            limits::MAX_KEY_BYTES,
        ),
        ("node", &spec.node, limits::MAX_NAME_BYTES),
        ("node_selector", &spec.node_selector, limits::MAX_EXPR_BYTES),
    ];
    for (field, value, max) in texts {
        if let Some(v) = value {
            limits::text(field, v, max).map_err(refused)?;
        }
    }
    for (field, ms) in [
        ("max_wait_s", spec.max_wait_ms),
        ("max_run_s", spec.max_run_ms),
    ] {
        if let Some(ms) = ms {
            limits::duration_ms(field, ms).map_err(refused)?;
        }
    }
    Ok(())
}

/// At most this many dependencies (`after` and `after_ok` together) per job.
pub const MAX_DEPS: usize = 64;

/// `after` and `after_ok`: each sorted without duplicates, a job named in both kept only in
/// `after_ok` (the stronger wait), at most [`MAX_DEPS`] in all.
pub(super) fn deps(
    mut after: Vec<super::JobId>,
    mut after_ok: Vec<super::JobId>,
) -> Result<(Vec<super::JobId>, Vec<super::JobId>), SubmitError> {
    after_ok.sort_unstable();
    after_ok.dedup();
    after.sort_unstable();
    after.dedup();
    after.retain(|id| after_ok.binary_search(id).is_err());
    if after.len() + after_ok.len() > MAX_DEPS {
        return Err(invalid(
            "after",
            format!(
                "a job may wait for at most {MAX_DEPS} jobs (after and after_ok together), got {}",
                after.len() + after_ok.len()
            ),
        ));
    }
    Ok((after, after_ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(k: &str, v: &str) -> Result<(), SubmitError> {
        attrs(
            &[(k.to_string(), v.to_string())].into(),
            &QuotasPolicy::default(),
        )
    }

    #[test]
    fn kinds_follow_label_key_syntax() {
        for ok in [
            "backup",
            "data-upload",
            "resource-backup",
            "Tape_Backup.v2",
            "lockgate.io/restore",
            &"a".repeat(63),
        ] {
            assert_eq!(kind(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "has space",
            "nul\0byte",
            "-leading",
            "trailing-",
            "a=b",
            "a,b",
            "/name",
            "Example.com/x",
            "a/b/c",
            &"a".repeat(64),
            &format!("{}/x", "a".repeat(254)),
        ] {
            assert!(kind(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_huge_kind_is_refused_with_a_short_message() {
        let Err(SubmitError::Invalid { message, .. }) = kind(&"k".repeat(100_000)) else {
            panic!("accepted");
        };
        assert!(message.len() < 400, "{message}");
    }

    #[test]
    fn attr_names_follow_label_key_syntax_and_values_stay_printable() {
        for (k, v) in [
            ("group", "vm/100"),
            ("repository", "host:/srv/backup/repo"),
            ("namespaces", "a,b"),
            ("velero.io/backup-name", "x=y"),
            ("empty", ""),
            ("unicode", "naïve"),
        ] {
            assert_eq!(one(k, v), Ok(()), "{k}={v}");
        }
        for (k, v) in [
            ("kind", "x"),
            ("owner", "x"),
            ("node", "x"),
            ("", "x"),
            ("a b", "x"),
            ("a=b", "x"),
            ("a!", "x"),
            ("ok", "has space"),
            ("ok", "nul\0"),
            ("ok", "bell\u{7}"),
            ("ok", "new\nline"),
            ("ok", "nbsp\u{a0}"),
        ] {
            assert!(one(k, v).is_err(), "{k:?}={v:?} accepted");
        }
    }

    #[test]
    fn attr_values_and_counts_are_capped_by_the_quotas() {
        let q = QuotasPolicy::default();
        assert_eq!(one("a", &"x".repeat(1024)), Ok(()));
        let Err(SubmitError::Invalid { field, message }) = one("a", &"x".repeat(1025)) else {
            panic!("a 1025-byte value was accepted");
        };
        assert_eq!(field, "attrs.a");
        assert!(
            message.contains("[quotas].max_attr_value_bytes"),
            "{message}"
        );
        let many = |n: usize| -> BTreeMap<String, String> {
            (0..n).map(|i| (format!("a{i}"), "v".to_string())).collect()
        };
        assert_eq!(attrs(&many(32), &q), Ok(()));
        let Err(SubmitError::Invalid { field, message }) = attrs(&many(33), &q) else {
            panic!("33 attributes were accepted");
        };
        assert_eq!(field, "attrs");
        assert!(
            message.contains("at most 32 ([quotas].max_attrs)"),
            "{message}"
        );
    }
}
