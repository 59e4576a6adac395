//! Validation of per-value pools (`[resources.<name>]` with `per`), `windows` lists and
//! `[[maintenance]]`: the same `file:line: field: expected .., got ..` errors as the rest.

use super::{bad, capacity, count, job_selector, keys, name, Checked};
use crate::daily::DailyWindow;
use crate::policy::locate::FieldPath;
use crate::policy::raw::{RawMaintenance, RawResource, RawWindow};
use crate::policy::{LimitWindow, Maintenance, Reserve, ValuePool};
use std::collections::BTreeMap;

/// `[resources]`, validated.
pub(super) struct Resources {
    /// The plain pools (`name = N`, or a table without `per`).
    pub plain: BTreeMap<String, u64>,
    /// The per-value pools.
    pub per_value: BTreeMap<String, ValuePool>,
    /// Reservation settings of the pools that set any.
    pub reserves: BTreeMap<String, Reserve>,
}

/// `[resources]`: the plain pools, the per-value pools and their reservation settings.
pub(super) fn resources(raw: &BTreeMap<String, RawResource>, p: &FieldPath) -> Checked<Resources> {
    let (mut plain, mut per_value, mut reserves) =
        (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (pool, r) in raw {
        let pp = p.key(pool);
        if pool.is_empty() {
            return bad(&pp, "expected a pool name, got an empty string");
        }
        match r {
            RawResource::Capacity(cap) => {
                plain.insert(pool.clone(), capacity(*cap, &pp)?);
            }
            RawResource::PerValue(v) => {
                let rule = super::reserve(&v.reserve_after, v.strict, &pp)?;
                if rule != Reserve::default() {
                    reserves.insert(pool.clone(), rule);
                }
                let Some(per) = &v.per else {
                    plain.insert(pool.clone(), capacity(v.capacity, &pp.key("capacity"))?);
                    continue;
                };
                if per.is_empty() {
                    return bad(
                        &pp.key("per"),
                        "expected at least one key (kind, owner or an attribute name), got []; a pool with one capacity is written `name = N`",
                    );
                }
                let per = keys(per, &pp.key("per"), "a pool's `per`")?;
                let capacity = capacity(v.capacity, &pp.key("capacity"))?;
                per_value.insert(pool.clone(), ValuePool { per, capacity });
            }
        }
    }
    Ok(Resources {
        plain,
        per_value,
        reserves,
    })
}

/// A `windows` list.
pub(super) fn windows(raw: &[RawWindow], p: &FieldPath) -> Checked<Vec<LimitWindow>> {
    raw.iter()
        .enumerate()
        .map(|(i, w)| {
            let wp = p.at(i);
            Ok(LimitWindow {
                when: daily(&w.when, &wp.key("when"))?,
                max: count(w.max, &wp.key("max"))?,
            })
        })
        .collect()
}

/// A daily duration.
fn daily(text: &str, p: &FieldPath) -> Checked<DailyWindow> {
    DailyWindow::parse(text).or_else(|e| {
        bad(
            p,
            format!(
                "expected a daily duration such as \"mon..fri 08:00-18:00\", got {text:?}: column {}: {}",
                e.column, e.message
            ),
        )
    })
}

/// `[[maintenance]]`.
pub(super) fn maintenance(raw: &[RawMaintenance], p: &FieldPath) -> Checked<Vec<Maintenance>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (i, m) in raw.iter().enumerate() {
        let mp = p.at(i);
        name(&m.name, &mp.key("name"), "maintenance")?;
        if let Some(first) = seen.insert(m.name.as_str(), i) {
            return bad(
                &mp.key("name"),
                format!(
                    "maintenance name {:?} is already used by maintenance[{first}], expected unique names",
                    m.name
                ),
            );
        }
        out.push(Maintenance {
            name: m.name.clone(),
            when: daily(&m.when, &mp.key("when"))?,
            matcher: m
                .r#match
                .as_ref()
                .map(|s| job_selector(s, &mp.key("match")))
                .transpose()?,
        });
    }
    Ok(out)
}
