//! The shape of a policy document, described once: for every table, its keys in the order
//! they are written and how each is written. The TOML writer ([`super::write`]) and the
//! diff ([`super::diff`]) both walk this description, so a key added to [`super::raw`] and
//! here is written and compared in the same place.
//!
//! Invariants:
//! - every key a raw struct serializes is listed under its table (the test below serializes
//!   a document that sets every field and checks each key is described); keys not listed are the
//!   user's names (pools, attributes, owners, kinds, `values` keys) and are plain values,
//!   written after the listed keys in byte order;
//! - a key that is a [`Shape::Section`], [`Shape::Entries`] or an array of tables is only
//!   used at the top level or directly under a section, where TOML headers can name it.

/// How a key's value is written and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `key = value`, inline tables included (`values`, `cost`, `attrs`); `keys` orders an
    /// inline table's own keys (`retry`, `job`) and is empty for the others. A diff compares
    /// it as one or more fields of the table it is in.
    Value(&'static [Key]),
    /// A `[key]` table (`[global]`, `[nodes.resources]`); its header is left out when it
    /// holds only sub-tables. A diff compares its values as one item, `label: field a -> b`.
    Section(&'static [Key]),
    /// `[key.<name>]` tables, one per user-chosen name (`[owners.alice]`). A diff shows each
    /// as `+ key.name` / `- key.name` or by field.
    Entries(&'static [Key]),
    /// `[[key]]` tables identified by their `name` key (`[[limit]]`): `+ limit "x"` /
    /// `- limit "x"` or by field.
    Named(&'static [Key]),
    /// `[[key]]` tables identified by position (`[[nodes.rule]]`): `nodes.rule[1]: added
    /// (..)` / `removed` or by field.
    Numbered(&'static [Key]),
}

/// One key of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) shape: Shape,
}

const fn value(name: &'static str) -> Key {
    Key {
        name,
        shape: Shape::Value(&[]),
    }
}

const fn key(name: &'static str, shape: Shape) -> Key {
    Key { name, shape }
}

/// The whole document, in the order of design `policy.md`.
pub(crate) const ROOT: &[Key] = &[
    key(
        "global",
        Shape::Section(&[
            value("max_running"),
            value("prepare_queue"),
            value("windows"),
        ]),
    ),
    key(
        "limit",
        Shape::Named(&[
            value("name"),
            value("per"),
            value("match"),
            key(
                "max",
                Shape::Value(&[
                    value("auto"),
                    value("min"),
                    value("max"),
                    value("gain"),
                    value("interval"),
                    value("pin"),
                ]),
            ),
            value("values"),
            value("reserve_after"),
            value("strict"),
            value("windows"),
        ]),
    ),
    key(
        "nodes",
        Shape::Section(&[
            value("max_running"),
            value("prepare_queue"),
            value("ttl"),
            key("resources", Shape::Section(&[])),
            key(
                "rule",
                Shape::Numbered(&[
                    value("selector"),
                    value("max_running"),
                    key(
                        "guard",
                        Shape::Value(&[value("cpu"), value("io"), value("memory")]),
                    ),
                ]),
            ),
        ]),
    ),
    key("resources", Shape::Section(&[])),
    key(
        "conflict",
        Shape::Numbered(&[
            value("keys"),
            value("overlap"),
            value("match"),
            value("exclusive"),
            value("exclusive_delay"),
            value("reserve_after"),
            value("strict"),
            value("recover"),
        ]),
    ),
    key("leases", Shape::Section(&[value("ttl")])),
    key(
        "queue",
        Shape::Section(&[
            value("aging"),
            value("strict"),
            value("reserve_after"),
            value("fair_share"),
            value("order"),
            value("window_horizon"),
        ]),
    ),
    key(
        "owners",
        Shape::Entries(&[
            value("weight"),
            value("max_priority"),
            value("allow_hooks"),
            value("backup_namespaces"),
        ]),
    ),
    key(
        "kinds",
        Shape::Entries(&[
            value("priority"),
            value("cost"),
            value("two_stage"),
            value("prepare_timeout"),
            key("retry", Shape::Value(RETRY)),
            value("coordinator"),
            value("preempt"),
            value("preemptible"),
            value("log"),
            value("if_unreachable"),
        ]),
    ),
    key(
        "retention",
        Shape::Section(&[
            value("days"),
            value("job_log_bytes"),
            value("job_logs_total_bytes"),
        ]),
    ),
    key(
        "schedule",
        Shape::Named(&[
            value("name"),
            value("when"),
            key("job", Shape::Value(JOB)),
            key("retry", Shape::Value(RETRY)),
            value("duplicates"),
            value("misfire"),
            value("max_start_delay"),
            value("jitter"),
            value("after"),
        ]),
    ),
    key(
        "blocks",
        Shape::Section(&[
            value("exec_template"),
            value("volume_group_label"),
            value("data_upload_selector"),
            value("restore_wait_image"),
            value("input_roots"),
            value("max_file_bytes"),
            value("max_total_bytes"),
            value("max_items"),
            value("max_entries"),
            key(
                "rule",
                Shape::Numbered(&[value("match"), value("group_by")]),
            ),
        ]),
    ),
    key(
        "quotas",
        Shape::Section(&[
            value("max_attrs"),
            value("max_attr_value_bytes"),
            value("max_message_bytes"),
            value("max_queued_per_owner"),
        ]),
    ),
    key(
        "maintenance",
        Shape::Named(&[value("name"), value("when"), value("match")]),
    ),
    key(
        "rpo",
        Shape::Numbered(&[
            value("name"),
            value("match"),
            value("per"),
            value("max_age"),
        ]),
    ),
    key(
        "notify",
        Shape::Named(&[
            value("name"),
            value("url"),
            value("smtp"),
            value("to"),
            value("from"),
            value("starttls"),
            value("secret_file"),
            value("secret_env"),
            value("match"),
            value("timeout"),
            value("retries"),
        ]),
    ),
    key(
        "forecast",
        Shape::Section(&[
            value("key"),
            value("default_run"),
            value("default_prepare"),
            value("samples"),
        ]),
    ),
    key(
        "deadline",
        Shape::Named(&[value("name"), value("match"), value("by")]),
    ),
];

/// `retry = { times = 3, interval = "30s" }`.
const RETRY: &[Key] = &[value("times"), value("interval")];

/// `job = { kind = "backup", .. }` of a `[[schedule]]`.
const JOB: &[Key] = &[
    value("kind"),
    value("attrs"),
    value("priority"),
    value("node"),
    value("node_selector"),
    value("executor"),
    value("cost"),
    value("two_stage"),
    value("max_wait"),
    value("max_run"),
];

/// The shape of `name` in a table with `keys`: a listed key's, else a plain value (a name the
/// user chose).
pub(crate) fn shape_of(keys: &[Key], name: &str) -> Shape {
    keys.iter()
        .find(|k| k.name == name)
        .map_or(Shape::Value(&[]), |k| k.shape)
}

/// `entries` in writing order: listed keys in their order, then the others in byte order.
pub(crate) fn ordered<'a, V>(
    keys: &[Key],
    entries: impl IntoIterator<Item = (&'a String, V)>,
) -> Vec<(&'a String, V)> {
    let rank = |k: &str| keys.iter().position(|o| o.name == k).unwrap_or(keys.len());
    let mut v: Vec<_> = entries.into_iter().collect();
    v.sort_by(|a, b| (rank(a.0), a.0).cmp(&(rank(b.0), b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of `value` (a serialized raw document) is listed under its table.
    fn all_described(keys: &[Key], value: &serde_json::Value, path: &str) {
        let Some(map) = value.as_object() else { return };
        for (k, v) in map {
            let Some(described) = keys.iter().find(|d| d.name == k) else {
                panic!("{path}.{k} is not in the document description");
            };
            let here = format!("{path}.{k}");
            match described.shape {
                Shape::Value(inner) if !inner.is_empty() => all_described(inner, v, &here),
                Shape::Value(_) => {}
                Shape::Section(&[]) => {}
                Shape::Section(inner) => all_described(inner, v, &here),
                Shape::Entries(inner) => {
                    for (name, e) in v.as_object().into_iter().flatten() {
                        all_described(inner, e, &format!("{here}.{name}"));
                    }
                }
                Shape::Named(inner) | Shape::Numbered(inner) => {
                    for e in v.as_array().into_iter().flatten() {
                        all_described(inner, e, &here);
                    }
                }
            }
        }
    }

    /// Long on purpose: one literal sets every field of every raw struct, with no
    /// `..Default::default()`, so a field added to `raw.rs` does not compile here until it
    /// is set, and then fails this test until it is described in [`ROOT`].
    #[test]
    fn every_key_of_the_raw_structs_is_described() {
        use crate::policy::raw::*;
        let retry = || {
            Some(RawRetry {
                times: Some(1),
                interval: Some("1s".into()),
            })
        };
        let doc = RawPolicy {
            global: Some(RawGlobal {
                max_running: Some(1),
                prepare_queue: Some(1),
                windows: vec![RawWindow::default()],
            }),
            limit: vec![RawLimit {
                name: "a".into(),
                per: vec!["kind".into()],
                r#match: Some("".into()),
                max: Some(RawMax::Auto(RawAuto {
                    auto: "throughput".into(),
                    min: 1,
                    max: 2,
                    gain: Some(5),
                    interval: Some("1s".into()),
                    pin: Some(2),
                })),
                values: [("x".to_string(), 1)].into(),
                reserve_after: Some("1s".into()),
                strict: Some(true),
                windows: vec![RawWindow::default()],
            }],
            nodes: Some(RawNodes {
                max_running: Some(1),
                prepare_queue: Some(1),
                ttl: Some("1s".into()),
                rule: vec![RawNodeRule {
                    selector: String::new(),
                    max_running: 0,
                    guard: Some(RawGuard {
                        cpu: Some(1),
                        io: Some(1),
                        memory: Some(1),
                    }),
                }],
                resources: [("gpus".to_string(), 1)].into(),
            }),
            resources: [
                ("threads".to_string(), RawResource::Capacity(1)),
                (
                    "repo-io".to_string(),
                    RawResource::PerValue(RawValuePool {
                        per: Some(vec!["repo".into()]),
                        capacity: 1,
                        reserve_after: Some("1s".into()),
                        strict: Some(true),
                    }),
                ),
            ]
            .into(),
            conflict: vec![RawConflict {
                keys: vec!["a".into()],
                overlap: Some("b".into()),
                r#match: Some("".into()),
                exclusive: Some("kind=prune".into()),
                exclusive_delay: Some("1s".into()),
                reserve_after: Some("1s".into()),
                strict: Some(true),
                recover: Some("unlock".into()),
            }],
            leases: Some(RawLeases {
                ttl: Some("1s".into()),
            }),
            queue: Some(RawQueue {
                aging: Some("1s".into()),
                strict: Some(true),
                reserve_after: Some("1s".into()),
                fair_share: Some("owner".into()),
                order: Some("window".into()),
                window_horizon: Some("1s".into()),
            }),
            owners: [(
                "alice".to_string(),
                RawOwner {
                    weight: Some(1),
                    max_priority: Some(1),
                    allow_hooks: Some(true),
                    backup_namespaces: Some(vec!["app".into()]),
                },
            )]
            .into(),
            kinds: [(
                "backup".to_string(),
                RawKind {
                    priority: Some(1),
                    cost: [("threads".to_string(), 1)].into(),
                    two_stage: Some(true),
                    prepare_timeout: Some("1s".into()),
                    retry: retry(),
                    coordinator: Some(true),
                    preempt: Some(true),
                    preemptible: Some(false),
                    log: Some(true),
                    if_unreachable: Some("run".into()),
                },
            )]
            .into(),
            retention: Some(RawRetention {
                days: Some(1),
                job_log_bytes: Some(RawSize::Text("1MiB".into())),
                job_logs_total_bytes: Some(RawSize::Bytes(1 << 30)),
            }),
            schedule: vec![RawSchedule {
                name: "s".into(),
                when: "daily".into(),
                job: RawJob {
                    kind: "k".into(),
                    attrs: [("a".to_string(), "b".to_string())].into(),
                    priority: Some(1),
                    node: Some("n".into()),
                    node_selector: Some("".into()),
                    executor: Some("agent".into()),
                    cost: [("threads".to_string(), 1)].into(),
                    two_stage: Some(true),
                    max_wait: Some("1s".into()),
                    max_run: Some("1s".into()),
                },
                duplicates: Some("skip".into()),
                misfire: Some("skip".into()),
                max_start_delay: Some("1s".into()),
                jitter: Some("1s".into()),
                retry: retry(),
                after: Some("t".into()),
            }],
            blocks: Some(RawBlocks {
                exec_template: Some(vec!["x".into()]),
                volume_group_label: Some("l".into()),
                data_upload_selector: Some("".into()),
                restore_wait_image: Some("i".into()),
                input_roots: Some(vec!["/srv".into()]),
                max_file_bytes: Some(RawSize::Text("1MiB".into())),
                max_total_bytes: Some(RawSize::Bytes(1)),
                max_items: Some(1),
                max_entries: Some(1),
                rule: vec![RawBlockRule::default()],
            }),
            quotas: Some(RawQuotas {
                max_attrs: Some(1),
                max_attr_value_bytes: Some(1),
                max_message_bytes: Some(1),
                max_queued_per_owner: Some(1),
            }),
            maintenance: vec![RawMaintenance {
                name: "m".into(),
                when: "sun 02:00-04:00".into(),
                r#match: Some("".into()),
            }],
            rpo: vec![RawRpo {
                name: Some("r".into()),
                r#match: Some("kind=backup".into()),
                per: vec!["group".into()],
                max_age: "26h".into(),
            }],
            notify: vec![RawNotify {
                name: "n".into(),
                url: Some("https://h".into()),
                smtp: Some("smtp://h:25".into()),
                to: vec!["a@h".into()],
                from: Some("b@h".into()),
                starttls: Some(false),
                secret_file: Some("/s".into()),
                secret_env: Some("S".into()),
                r#match: Some("".into()),
                timeout: Some("1s".into()),
                retries: Some(1),
            }],
            forecast: Some(RawForecast {
                key: Some(vec!["group".into()]),
                default_run: Some("30m".into()),
                default_prepare: Some("1m".into()),
                samples: Some(20),
            }),
            deadline: vec![RawDeadline {
                name: "nightly".into(),
                r#match: Some("kind=backup".into()),
                by: "06:00".into(),
            }],
        };
        all_described(ROOT, &serde_json::to_value(&doc).unwrap(), "");
    }
}
