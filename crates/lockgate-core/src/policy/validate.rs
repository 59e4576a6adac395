//! Validation: a [`RawPolicy`] becomes a [`Policy`], or a [`PolicyError`] that names the
//! file, line, field, the value given and what was expected.
//!
//! Rules are checked section by section; the first problem is reported. A [`Policy`] is only
//! built when every rule holds, which is what gives it the invariants listed in
//! [`super`]. Serde errors (syntax, unknown key, wrong type) are translated into the same
//! form by [`locate`], which also finds the line of a field path.

mod blocks;

use super::locate::{self, FieldPath, Lines};
use super::raw::{
    RawConflict, RawJob, RawKind, RawLimit, RawPolicy, RawQueue, RawRetry, RawSchedule,
};
use super::*;
use crate::selector::Selector;
use crate::time::parse_duration;
use std::collections::BTreeSet;

mod auto;
mod nodes;
use nodes::nodes_policy;
mod forecast;
mod notify;
mod quotas;
mod rpo;
mod schedules;
use auto::{guard, limit_max};
mod windows;

/// Why a policy document was rejected. Displays as `lockgate.toml:12: limit[1].max:
/// expected a whole number >= 0, got -1` (missing parts are left out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.file, .line, .field, .message))]
pub struct PolicyError {
    /// The file the document came from, when known.
    pub file: Option<String>,
    /// 1-based line in the document (TOML, and JSON syntax or type errors).
    pub line: Option<usize>,
    /// The field path, such as `limit[1].max` or `nodes.rule[0].selector`; empty for a
    /// syntax error.
    pub field: String,
    /// The value given and what was expected.
    pub message: String,
}

fn render(file: &Option<String>, line: &Option<usize>, field: &str, message: &str) -> String {
    let mut out = match (file, line) {
        (Some(f), Some(l)) => format!("{f}:{l}: "),
        (Some(f), None) => format!("{f}: "),
        (None, Some(l)) => format!("line {l}: "),
        (None, None) => String::new(),
    };
    if !field.is_empty() {
        out.push_str(field);
        out.push_str(": ");
    }
    out.push_str(message);
    out
}

/// A rule that does not hold, before it is located in the text.
#[derive(Debug)]
struct Problem {
    path: FieldPath,
    message: String,
}

type Checked<T> = Result<T, Problem>;

fn bad<T>(path: &FieldPath, message: impl Into<String>) -> Checked<T> {
    Err(Problem {
        path: path.clone(),
        message: message.into(),
    })
}

impl Policy {
    /// Parses and validates a TOML policy document. `file` is only used in errors.
    ///
    /// # Errors
    /// The first problem found: a syntax error, an unknown key, a value of the wrong type or
    /// a rule of design `policy.md` that does not hold, with its line and field.
    pub fn from_toml(text: &str, file: Option<&str>) -> Result<Policy, PolicyError> {
        let raw = locate::read_toml(text, file)?;
        validate(&raw).map(|p| p.with_raw(raw)).map_err(|problem| {
            let line = Lines::parse(text).ok().and_then(|l| l.line(&problem.path));
            PolicyError {
                file: file.map(str::to_string),
                line,
                field: problem.path.to_string(),
                message: problem.message,
            }
        })
    }

    /// Parses and validates a policy written over several TOML documents, `parts` as (file
    /// name, text) in the order they merge (a `conf.d` directory's `*.toml` in name
    /// order): tables merge key by key, arrays of tables append, a key set twice is
    /// refused (`policy/parts.rs`). Returns the policy and the merged document's text.
    ///
    /// # Errors
    /// As [`Policy::from_toml`], naming the file and line the problem comes from.
    pub fn from_toml_parts(parts: &[(String, String)]) -> Result<(Policy, String), PolicyError> {
        let merged = super::parts::merge(parts)?;
        let raw = locate::read_toml(&merged.text, None)?;
        match validate(&raw) {
            Ok(policy) => Ok((policy.with_raw(raw), merged.text)),
            Err(problem) => {
                let (file, line, local) = merged.locate(&problem.path, parts);
                Err(PolicyError {
                    file: Some(file),
                    line,
                    field: local.to_string(),
                    message: problem.message,
                })
            }
        }
    }

    /// Parses and validates the same document as JSON.
    ///
    /// # Errors
    /// As [`Policy::from_toml`]; lines are given for syntax and type errors only.
    pub fn from_json(text: &str) -> Result<Policy, PolicyError> {
        Policy::from_raw(locate::read_json(text)?)
    }

    /// Validates a document already in memory (no line numbers in errors).
    ///
    /// # Errors
    /// The first rule that does not hold, with its field.
    pub fn from_raw(raw: RawPolicy) -> Result<Policy, PolicyError> {
        validate(&raw)
            .map(|p| p.with_raw(raw))
            .map_err(|problem| PolicyError {
                file: None,
                line: None,
                field: problem.path.to_string(),
                message: problem.message,
            })
    }

    /// The document as TOML (what its author wrote, durations as strings), in the style of
    /// design `policy.md`.
    pub fn to_toml_string(&self) -> String {
        self.raw.to_toml_string()
    }

    /// The document as JSON (what its author wrote, durations as strings).
    /// A URL's password is shown as `***` ([`Policy::redacted`]).
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(self.redacted()).expect("a raw policy always serializes to JSON")
    }

    /// Human-readable differences from `self` to `new`, one per line (`limit
    /// "per-datastore": max 2 -> 3`, `+ limit "restores": max = 4`, `nodes.rule[1]:
    /// removed`); empty when the documents are equal.
    ///
    /// A URL's password is shown as `***` on both sides ([`Policy::redacted`]).
    pub fn diff(&self, new: &Policy) -> Vec<String> {
        let mut lines = self.redacted().diff(&new.redacted());
        for n in &new.raw.notify {
            let Some(o) = self.raw.notify.iter().find(|o| o.name == n.name) else {
                continue;
            };
            if (o.url != n.url || o.smtp != n.smtp)
                && (
                    o.url.as_deref().map(redact_url),
                    o.smtp.as_deref().map(redact_url),
                ) == (
                    n.url.as_deref().map(redact_url),
                    n.smtp.as_deref().map(redact_url),
                )
            {
                lines.push(format!("notify {:?}: the URL's password changed", n.name));
            }
        }
        lines
    }

    fn with_raw(mut self, raw: RawPolicy) -> Policy {
        self.raw = raw;
        self
    }
}

// ---------------------------------------------------------------------------------------
// The rules.

fn count(v: i64, path: &FieldPath) -> Checked<u32> {
    u32::try_from(v).or_else(|_| {
        if v < 0 {
            bad(path, format!("expected a whole number >= 0, got {v}"))
        } else {
            bad(
                path,
                format!("expected a whole number <= {}, got {v}", u32::MAX),
            )
        }
    })
}

fn opt_count(v: Option<i64>, path: &FieldPath) -> Checked<Option<u32>> {
    v.map(|v| count(v, path)).transpose()
}

fn capacity(v: i64, path: &FieldPath) -> Checked<u64> {
    u64::try_from(v).or_else(|_| bad(path, format!("expected a whole number >= 0, got {v}")))
}

fn duration(text: &str, path: &FieldPath) -> Checked<Duration> {
    parse_duration(text).map_err(|message| Problem {
        path: path.clone(),
        message,
    })
}

fn positive_duration(text: &Option<String>, path: &FieldPath) -> Checked<Option<Duration>> {
    let Some(text) = text else { return Ok(None) };
    let d = duration(text, path)?;
    if d.is_zero() {
        return bad(
            path,
            format!("expected a duration greater than zero, got {text:?}"),
        );
    }
    Ok(Some(d))
}

/// A written limit of [`crate::limits`], reported at `path`.
fn within(r: Result<(), crate::limits::LimitError>, path: &FieldPath) -> Checked<()> {
    r.or_else(|e| bad(path, e.message))
}

/// An optional priority within [`crate::limits::PRIORITY`].
fn opt_priority(v: Option<i64>, path: &FieldPath) -> Checked<Option<i64>> {
    if let Some(v) = v {
        within(crate::limits::priority("priority", v), path)?;
    }
    Ok(v)
}

fn opt_duration(text: &Option<String>, path: &FieldPath) -> Checked<Option<Duration>> {
    text.as_ref().map(|t| duration(t, path)).transpose()
}

/// A name used in scopes and owners: non-empty, no whitespace, no brackets.
fn name(text: &str, path: &FieldPath, what: &str) -> Checked<()> {
    if text.is_empty() {
        return bad(path, format!("expected a {what} name, got an empty string"));
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, '[' | ']'))
    {
        return bad(
            path,
            format!("{what} name {text:?} holds {c:?}, expected no whitespace or brackets"),
        );
    }
    Ok(())
}

fn job_selector(text: &str, path: &FieldPath) -> Checked<Selector> {
    Selector::parse_jobs(text).or_else(|e| bad(path, format!("invalid job selector {text:?}: {e}")))
}

fn label_selector(text: &str, path: &FieldPath) -> Checked<Selector> {
    Selector::parse_labels(text)
        .or_else(|e| bad(path, format!("invalid label selector {text:?}: {e}")))
}

/// A `per` or `keys` entry.
fn key_of(text: &str, path: &FieldPath, section: &str) -> Checked<PerKey> {
    match text {
        "" => bad(path, "expected a key name (kind, owner or an attribute name), got an empty string"),
        "node" => bad(
            path,
            format!(
                "\"node\" is not allowed in {section}: node numbers are set in [nodes] (max_running and [[nodes.rule]]), expected kind, owner or an attribute name"
            ),
        ),
        "kind" => Ok(PerKey::Kind),
        "owner" => Ok(PerKey::Owner),
        attr => Ok(PerKey::Attr(attr.to_string())),
    }
}

fn keys(list: &[String], path: &FieldPath, section: &str) -> Checked<Vec<PerKey>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, k) in list.iter().enumerate() {
        let p = path.at(i);
        let key = key_of(k, &p, section)?;
        if !seen.insert(k.as_str()) {
            return bad(&p, format!("{k:?} is listed twice, expected each key once"));
        }
        out.push(key);
    }
    Ok(out)
}

/// The pools jobs may cost, for the "not declared" check.
struct Pools<'a> {
    global: &'a BTreeMap<String, u64>,
    node: &'a BTreeMap<String, u64>,
    values: &'a BTreeMap<String, ValuePool>,
}

impl Pools<'_> {
    fn cost(
        &self,
        cost: &BTreeMap<String, i64>,
        path: &FieldPath,
    ) -> Checked<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for (pool, &units) in cost {
            let p = path.key(pool);
            if !self.global.contains_key(pool)
                && !self.node.contains_key(pool)
                && !self.values.contains_key(pool)
            {
                let declared: Vec<&str> = self
                    .global
                    .keys()
                    .chain(self.values.keys())
                    .chain(self.node.keys())
                    .map(String::as_str)
                    .collect();
                let expected = if declared.is_empty() {
                    "expected a pool declared in [resources] (global) or [nodes.resources] (per node); none are declared".to_string()
                } else {
                    format!(
                        "expected a pool declared in [resources] or [nodes.resources]: {}",
                        declared.join(", ")
                    )
                };
                return bad(&p, format!("pool {pool:?} is not declared, {expected}"));
            }
            out.insert(pool.clone(), capacity(units, &p)?);
        }
        Ok(out)
    }
}

fn validate(raw: &RawPolicy) -> Checked<Policy> {
    let root = FieldPath::root();
    let windows::Resources {
        plain: resources,
        per_value: value_pools,
        reserves: pool_reserves,
    } = windows::resources(&raw.resources, &root.key("resources"))?;
    let declared: BTreeMap<String, u64> = resources
        .iter()
        .map(|(k, &v)| (k.clone(), v))
        .chain(value_pools.keys().map(|k| (k.clone(), 0)))
        .collect();
    let nodes = match &raw.nodes {
        None => NodesPolicy::default(),
        Some(n) => nodes_policy(n, &declared, &root.key("nodes"))?,
    };
    let pools = Pools {
        global: &resources,
        node: &nodes.resources,
        values: &value_pools,
    };
    Ok(Policy {
        global: global_policy(raw, &root.key("global"))?,
        limits: limits(&raw.limit, &root.key("limit"))?,
        conflicts: conflicts(raw, &root.key("conflict"))?,
        leases: match raw.leases.as_ref().and_then(|l| l.ttl.clone()) {
            None => LeasesPolicy::default(),
            ttl => LeasesPolicy {
                ttl: positive_duration(&ttl, &root.key("leases").key("ttl"))?
                    .unwrap_or(DEFAULT_LEASE_TTL),
            },
        },
        queue: match &raw.queue {
            None => QueuePolicy::default(),
            Some(q) => queue_policy(q, &root.key("queue"))?,
        },
        owners: owners(raw, &root.key("owners"))?,
        kinds: kinds(raw, &pools, &root.key("kinds"))?,
        retention: retention(raw, &root.key("retention"))?,
        schedules: schedules::schedules(&raw.schedule, &pools, &root.key("schedule"))?,
        blocks: match &raw.blocks {
            None => BlocksPolicy::default(),
            Some(b) => blocks::blocks_policy(b, &root.key("blocks"))?,
        },
        quotas: match &raw.quotas {
            None => QuotasPolicy::default(),
            Some(q) => quotas::quotas_policy(q, &root.key("quotas"))?,
        },
        maintenance: windows::maintenance(&raw.maintenance, &root.key("maintenance"))?,
        forecast: forecast::forecast(raw.forecast.as_ref(), &root.key("forecast"))?,
        deadlines: forecast::deadlines(&raw.deadline, &root.key("deadline"))?,
        nodes,
        resources,
        value_pools,
        pool_reserves,
        rpo: rpo::rules(&raw.rpo, &root.key("rpo"))?,
        raw: RawPolicy::default(),
        notify: notify::targets(&raw.notify, &root.key("notify"))?,
    })
}

fn global_policy(raw: &RawPolicy, p: &FieldPath) -> Checked<GlobalPolicy> {
    let Some(g) = &raw.global else {
        return Ok(GlobalPolicy::default());
    };
    Ok(GlobalPolicy {
        max_running: opt_count(g.max_running, &p.key("max_running"))?,
        prepare_queue: opt_count(g.prepare_queue, &p.key("prepare_queue"))?,
        windows: windows::windows(&g.windows, &p.key("windows"))?,
    })
}

fn limits(raw: &[RawLimit], p: &FieldPath) -> Checked<Vec<Limit>> {
    let mut out = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, l) in raw.iter().enumerate() {
        let lp = p.at(i);
        if let Some(first) = seen.insert(l.name.as_str(), i) {
            let message = format!(
                "limit name {:?} is already used by limit[{first}], expected unique names",
                l.name
            );
            return bad(&lp.key("name"), message);
        }
        out.push(limit(l, &lp)?);
    }
    Ok(out)
}

fn owners(raw: &RawPolicy, p: &FieldPath) -> Checked<BTreeMap<String, OwnerPolicy>> {
    let mut out = BTreeMap::new();
    for (owner, o) in &raw.owners {
        let op = p.key(owner);
        if owner.is_empty() {
            return bad(&op, "expected an owner name, got an empty string");
        }
        let weight = match o.weight {
            None => 1,
            Some(w) => match u32::try_from(w) {
                Ok(w) if w >= 1 => w,
                _ => {
                    let message = format!("expected a whole number >= 1, got {w}");
                    return bad(&op.key("weight"), message);
                }
            },
        };
        let max_priority = opt_priority(o.max_priority, &op.key("max_priority"))?;
        let (allow_hooks, backup_namespaces) = blocks::owner_backups(o, &op)?;
        out.insert(
            owner.clone(),
            OwnerPolicy {
                weight,
                max_priority,
                allow_hooks,
                backup_namespaces,
            },
        );
    }
    Ok(out)
}

fn kinds(
    raw: &RawPolicy,
    pools: &Pools<'_>,
    p: &FieldPath,
) -> Checked<BTreeMap<String, KindPolicy>> {
    let mut out = BTreeMap::new();
    for (kind, k) in &raw.kinds {
        let kp = p.key(kind);
        if kind.is_empty() {
            return bad(&kp, "expected a kind name, got an empty string");
        }
        out.insert(kind.clone(), kind_policy(k, pools, &kp)?);
    }
    Ok(out)
}

fn retention(raw: &RawPolicy, p: &FieldPath) -> Checked<RetentionPolicy> {
    let mut out = RetentionPolicy::default();
    let Some(r) = raw.retention.as_ref() else {
        return Ok(out);
    };
    if let Some(days) = r.days {
        out.days = match u32::try_from(days) {
            Ok(days) if days >= 1 => days,
            _ => {
                return bad(
                    &p.key("days"),
                    format!("expected a whole number of days >= 1, got {days}"),
                )
            }
        };
    }
    if let Some(s) = &r.job_log_bytes {
        out.job_log_bytes = blocks::size(s, &p.key("job_log_bytes"))?;
    }
    if let Some(s) = &r.job_logs_total_bytes {
        out.job_logs_total_bytes = blocks::size(s, &p.key("job_logs_total_bytes"))?;
    }
    if out.job_logs_total_bytes < out.job_log_bytes {
        return bad(
            &p.key("job_logs_total_bytes"),
            format!(
                "expected at least job_log_bytes ({}), got {}",
                out.job_log_bytes, out.job_logs_total_bytes
            ),
        );
    }
    Ok(out)
}

fn limit(l: &RawLimit, p: &FieldPath) -> Checked<Limit> {
    name(&l.name, &p.key("name"), "limit")?;
    let per = keys(&l.per, &p.key("per"), "a limit's `per`")?;
    let matcher = l
        .r#match
        .as_ref()
        .map(|m| job_selector(m, &p.key("match")))
        .transpose()?;
    let (max, auto, auto_interval) = limit_max(l.max.as_ref(), &p.key("max"))?;
    if !l.values.is_empty() && per.is_empty() {
        return bad(
            &p.key("values"),
            "`values` needs `per`: expected `per = [..]` naming the keys the values are for (a limit without `per` has one counter; set `max` instead)",
        );
    }
    let mut values = BTreeMap::new();
    for (key, &n) in &l.values {
        let vp = p.key("values").key(key);
        let parts: Vec<String> = key.split(',').map(|s| s.trim().to_string()).collect();
        if parts.len() != per.len() {
            let names: Vec<&str> = per.iter().map(PerKey::name).collect();
            return bad(
                &vp,
                format!(
                    "{key:?} has {} comma-separated part(s), expected {} (one value per `per` key: {})",
                    parts.len(),
                    per.len(),
                    names.join(", ")
                ),
            );
        }
        if parts.iter().any(String::is_empty) {
            return bad(
                &vp,
                format!(
                    "{key:?} holds an empty part, expected a non-empty value for every `per` key"
                ),
            );
        }
        values.insert(parts, count(n, &vp)?);
    }
    Ok(Limit {
        name: l.name.clone(),
        per,
        matcher,
        max,
        auto,
        auto_interval,
        values,
        reserve: reserve(&l.reserve_after, l.strict, p)?,
        windows: windows::windows(&l.windows, &p.key("windows"))?,
    })
}

fn pools(raw: &BTreeMap<String, i64>, p: &FieldPath) -> Checked<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (pool, &cap) in raw {
        let pp = p.key(pool);
        if pool.is_empty() {
            return bad(&pp, "expected a pool name, got an empty string");
        }
        out.insert(pool.clone(), capacity(cap, &pp)?);
    }
    Ok(out)
}

/// `[[conflict]]` in document order, then [`Conflict::restores`] of each attribute
/// unless one of them already keeps restores apart on it.
fn conflicts(raw: &RawPolicy, p: &FieldPath) -> Checked<Vec<Conflict>> {
    let mut out = raw
        .conflict
        .iter()
        .enumerate()
        .map(|(i, c)| conflict(c, &p.at(i)))
        .collect::<Checked<Vec<_>>>()?;
    for attr in RESTORE_OVERLAPS {
        if !out.iter().any(|c| c.keeps_restores_apart(attr)) {
            out.push(Conflict::restores(attr));
        }
    }
    Ok(out)
}

fn conflict(c: &RawConflict, p: &FieldPath) -> Checked<Conflict> {
    let keys = keys(&c.keys, &p.key("keys"), "a conflict's `keys`")?;
    if keys.is_empty() && c.overlap.is_none() {
        return bad(
            p,
            "expected `keys = [..]`, `overlap = \"<attribute>\"` or both: a conflict with neither never applies",
        );
    }
    if let Some(o) = &c.overlap {
        if o.is_empty() || matches!(o.as_str(), "kind" | "owner" | "node") {
            return bad(
                &p.key("overlap"),
                format!("expected the name of a list-valued attribute (such as \"namespaces\"), got {o:?}"),
            );
        }
    }
    let matcher = c
        .r#match
        .as_ref()
        .map(|m| job_selector(m, &p.key("match")))
        .transpose()?;
    let exclusive = c
        .exclusive
        .as_ref()
        .map(|m| job_selector(m, &p.key("exclusive")))
        .transpose()?;
    let delay_path = p.key("exclusive_delay");
    if c.exclusive_delay.is_some() && exclusive.is_none() {
        return bad(
            &delay_path,
            "`exclusive_delay` needs `exclusive`: expected `exclusive = \"<match expression>\"` naming the jobs that need the key alone (without it every job needs it alone and nobody shares)",
        );
    }
    let recover = c
        .recover
        .as_ref()
        .map(|k| {
            recover_kind(
                k,
                &keys,
                matcher.as_ref(),
                exclusive.as_ref(),
                &p.key("recover"),
            )
        })
        .transpose()?;
    Ok(Conflict {
        keys,
        overlap: c.overlap.clone(),
        matcher,
        exclusive,
        exclusive_delay: opt_duration(&c.exclusive_delay, &delay_path)?.unwrap_or_default(),
        reserve: reserve(&c.reserve_after, c.strict, p)?,
        recover,
        built_in: false,
    })
}

/// A conflict's `recover` kind: a kind name, on a conflict with `keys` (the recovery job
/// takes the lost job's key values), that the conflict's `match` takes and its `exclusive`
/// makes run alone (a recovery beside a live holder would break that holder's lock).
fn recover_kind(
    kind: &str,
    keys: &[PerKey],
    matcher: Option<&Selector>,
    exclusive: Option<&Selector>,
    p: &FieldPath,
) -> Checked<String> {
    if let Err(e) = crate::limits::text("recover", kind, crate::limits::MAX_NAME_BYTES) {
        return bad(p, e.to_string());
    }
    let name_chars = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if kind.is_empty() || !kind.chars().all(name_chars) {
        return bad(p, format!("expected a job kind name, got {kind:?}"));
    }
    if keys.is_empty() {
        return bad(
            p,
            "`recover` needs `keys`: the recovery job is submitted for the key values of the lost job",
        );
    }
    let job = super::lint::SeenJob {
        kind: kind.to_string(),
        attrs: matcher.map(super::lint::equal_attrs).unwrap_or_default(),
        ..Default::default()
    };
    let lookup = |k: &str| match k {
        "kind" => Some(job.kind.as_str()),
        "owner" | "node" => None,
        a => job.attrs.get(a).map(String::as_str),
    };
    if matcher.is_some_and(|m| !m.matches(lookup)) {
        return bad(
            p,
            format!("the recovery kind {kind:?} is outside this conflict's `match`: expected `match` to take it (only `k=v` requirements are given to the recovery job)"),
        );
    }
    if exclusive.is_some_and(|x| !x.matches(lookup)) {
        return bad(
            p,
            format!("the recovery kind {kind:?} must run alone on the key: add it to `exclusive` (`kind in (prune, check, {kind})`)"),
        );
    }
    Ok(kind.to_string())
}

/// `reserve_after` and `strict` of a `[[limit]]`, `[[conflict]]` or `[resources.<name>]`.
fn reserve(after: &Option<String>, strict: Option<bool>, p: &FieldPath) -> Checked<Reserve> {
    Ok(Reserve {
        after: opt_duration(after, &p.key("reserve_after"))?,
        strict: strict.unwrap_or(false),
    })
}

fn queue_policy(q: &RawQueue, p: &FieldPath) -> Checked<QueuePolicy> {
    let fair_share = match q.fair_share.as_deref() {
        None => false,
        Some("owner") => true,
        Some(other) => {
            return bad(
                &p.key("fair_share"),
                format!("expected \"owner\" (the only fair-share mode), got {other:?}"),
            )
        }
    };
    let order = match q.order.as_deref() {
        None | Some("fifo") => QueueOrder::Fifo,
        Some("window") => QueueOrder::Window,
        Some(other) => {
            return bad(
                &p.key("order"),
                format!("expected \"fifo\" or \"window\", got {other:?}"),
            )
        }
    };
    Ok(QueuePolicy {
        aging: positive_duration(&q.aging, &p.key("aging"))?,
        strict: q.strict.unwrap_or(false),
        reserve_after: opt_duration(&q.reserve_after, &p.key("reserve_after"))?
            .unwrap_or(DEFAULT_RESERVE_AFTER),
        fair_share,
        order,
        window_horizon: opt_duration(&q.window_horizon, &p.key("window_horizon"))?
            .unwrap_or(DEFAULT_WINDOW_HORIZON),
    })
}

fn retry(r: &RawRetry, p: &FieldPath) -> Checked<Retry> {
    let times = opt_count(r.times, &p.key("times"))?.unwrap_or(0);
    let interval = opt_duration(&r.interval, &p.key("interval"))?;
    if times > 0 && interval.is_none() {
        return bad(
            &p.key("interval"),
            format!("missing, expected a duration such as \"30s\" when times = {times}"),
        );
    }
    Ok(Retry {
        times,
        interval: interval.unwrap_or_default(),
    })
}

fn kind_policy(k: &RawKind, pools: &Pools<'_>, p: &FieldPath) -> Checked<KindPolicy> {
    Ok(KindPolicy {
        priority: opt_priority(k.priority, &p.key("priority"))?,
        cost: pools.cost(&k.cost, &p.key("cost"))?,
        two_stage: k.two_stage,
        prepare_timeout: positive_duration(&k.prepare_timeout, &p.key("prepare_timeout"))?,
        retry: k
            .retry
            .as_ref()
            .map(|r| retry(r, &p.key("retry")))
            .transpose()?,
        coordinator: k.coordinator,
        preempt: k.preempt,
        preemptible: k.preemptible,
        log: k.log,
        run_if_unreachable: match k.if_unreachable.as_deref() {
            None | Some("fail") => false,
            Some("run") => true,
            Some(other) => {
                return bad(
                    &p.key("if_unreachable"),
                    format!("expected \"run\" or \"fail\", got {other:?}"),
                )
            }
        },
    })
}
