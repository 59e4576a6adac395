//! Validation of `[quotas]`: every number a whole number, at least 1 (`max_attrs` may be 0).

use super::{bad, count, Checked};
use crate::policy::locate::FieldPath;
use crate::policy::raw::RawQuotas;
use crate::policy::QuotasPolicy;

/// `[quotas]`, each key defaulting on its own.
pub(super) fn quotas_policy(q: &RawQuotas, p: &FieldPath) -> Checked<QuotasPolicy> {
    let d = QuotasPolicy::default();
    let at_least = |v: Option<i64>, key: &str, min: u32, default: u32| -> Checked<u32> {
        let path = p.key(key);
        match v {
            None => Ok(default),
            Some(v) if v < i64::from(min) => {
                bad(&path, format!("expected a whole number >= {min}, got {v}"))
            }
            Some(v) => count(v, &path),
        }
    };
    Ok(QuotasPolicy {
        max_attrs: at_least(q.max_attrs, "max_attrs", 0, d.max_attrs)?,
        max_attr_value_bytes: at_least(
            q.max_attr_value_bytes,
            "max_attr_value_bytes",
            1,
            d.max_attr_value_bytes,
        )?,
        max_message_bytes: at_least(
            q.max_message_bytes,
            "max_message_bytes",
            1,
            d.max_message_bytes,
        )?,
        max_queued_per_owner: at_least(
            q.max_queued_per_owner,
            "max_queued_per_owner",
            1,
            d.max_queued_per_owner,
        )?,
    })
}
