//! Validation: a [`RawPolicy`] becomes a [`Policy`], or a [`PolicyError`] that names the
//! file, line, field, the value given and what was expected.
//!
//! Rules are checked section by section; the first problem is reported. A [`Policy`] is only
//! built when every rule holds, which is what gives it the invariants listed in
//! [`super`]. Serde errors (syntax, unknown key, wrong type) are translated into the same
//! form: their position in the text is mapped back to a field path through
//! [`raw::SpanTree`].

use super::raw::{
    FieldPath, RawBlocks, RawConflict, RawJob, RawKind, RawLimit, RawNodes, RawPolicy, RawQueue,
    RawRetry, RawSchedule, SpanTree,
};
use super::*;
use crate::selector::{validate_label_key, Selector};
use crate::time::parse_duration;
use std::collections::BTreeSet;

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
        let raw: RawPolicy = toml::from_str(text).map_err(|e| toml_error(text, &e, file))?;
        validate(&raw).map(|p| p.with_raw(raw)).map_err(|problem| {
            let line = SpanTree::parse(text).and_then(|t| t.line(&problem.path));
            PolicyError {
                file: file.map(str::to_string),
                line,
                field: problem.path.to_string(),
                message: problem.message,
            }
        })
    }

    /// Parses and validates the same document as JSON.
    ///
    /// # Errors
    /// As [`Policy::from_toml`]; lines are given for syntax and type errors only.
    pub fn from_json(text: &str) -> Result<Policy, PolicyError> {
        match serde_json::from_str::<RawPolicy>(text) {
            Ok(raw) => Policy::from_raw(raw),
            Err(e) => Err(json_error(text, &e)),
        }
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
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(&self.raw).expect("a raw policy always serializes to JSON")
    }

    /// Human-readable differences from `self` to `new`, one per line (`limit
    /// "per-datastore": max 2 -> 3`, `+ limit "restores": max = 4`, `nodes.rule[1]:
    /// removed`); empty when the documents are equal.
    pub fn diff(&self, new: &Policy) -> Vec<String> {
        self.raw.diff(&new.raw)
    }

    fn with_raw(mut self, raw: RawPolicy) -> Policy {
        self.raw = raw;
        self
    }
}

// ---------------------------------------------------------------------------------------
// Serde errors, translated.

fn toml_error(text: &str, e: &toml::de::Error, file: Option<&str>) -> PolicyError {
    let Some(tree) = SpanTree::parse(text) else {
        // Not even TOML: a syntax error.
        let line = e.span().map(|s| raw::line_of(text, s.start));
        let message = e.message().trim().replace('\n', ": ");
        return PolicyError {
            file: file.map(str::to_string),
            line,
            field: String::new(),
            message: format!("invalid TOML: {message}"),
        };
    };
    let offset = e.span().map(|s| s.start);
    let (path, message) = locate(&tree, offset, e.message());
    PolicyError {
        file: file.map(str::to_string),
        line: offset.map(|o| tree.line_of_offset(o)),
        field: path.to_string(),
        message,
    }
}

fn json_error(text: &str, e: &serde_json::Error) -> PolicyError {
    let line = (e.line() > 0).then_some(e.line());
    let plain = e.to_string();
    let plain = plain
        .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
        .unwrap_or(&plain)
        .to_string();
    if !e.is_data() {
        return PolicyError {
            file: None,
            line,
            field: String::new(),
            message: format!("invalid JSON: {plain}"),
        };
    }
    // serde_json does not say where in the document the error is: find the field by
    // reading the same document as TOML, whose errors carry positions.
    let located = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(json_to_toml)
        .and_then(|doc| {
            let text = toml::to_string(&doc).ok()?;
            let err = toml::from_str::<RawPolicy>(&text).err()?;
            let tree = SpanTree::parse(&text)?;
            Some(locate(&tree, err.span().map(|s| s.start), err.message()))
        });
    match located {
        Some((path, message)) => PolicyError {
            file: None,
            line,
            field: path.to_string(),
            message,
        },
        None => PolicyError {
            file: None,
            line,
            field: String::new(),
            message: plain,
        },
    }
}

/// JSON -> TOML, dropping nulls (an absent optional key); `None` if not representable.
fn json_to_toml(v: serde_json::Value) -> Option<toml::Value> {
    use serde_json::Value as J;
    Some(match v {
        J::Null => return None,
        J::Bool(b) => toml::Value::Boolean(b),
        J::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        J::String(s) => toml::Value::String(s),
        J::Array(a) => toml::Value::Array(a.into_iter().map(json_to_toml).collect::<Option<_>>()?),
        J::Object(o) => toml::Value::Table(
            o.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| Some((k, json_to_toml(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// Turns a serde message into "expected .., got ..", and its position into the path of
/// the offending field.
fn locate(tree: &SpanTree<'_>, offset: Option<usize>, message: &str) -> (FieldPath, String) {
    let ticked = |s: &str| s.split('`').nth(1).map(str::to_string);
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let key = ticked(rest).unwrap_or_default();
        let expected = rest.split_once(", expected ").map(|(_, e)| e);
        let message = match expected {
            Some(e) => format!("unknown key, expected {e}"),
            None => "unknown key, this table takes no keys".to_string(),
        };
        let path = match offset {
            Some(o) => tree.key_path_at(o, &key),
            None => FieldPath::root().key(&key),
        };
        return (path, message);
    }
    let path = offset.map(|o| tree.path_at(o)).unwrap_or_default();
    if let Some(rest) = message.strip_prefix("missing field ") {
        let key = ticked(rest).unwrap_or_default();
        return (path.key(&key), "missing, this key is required".to_string());
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((got, expected)) = rest.rsplit_once(", expected ") {
                let message = format!(
                    "expected {}, got {}",
                    expected_name(expected),
                    got_name(got)
                );
                return (path, message);
            }
        }
    }
    if message.contains("too large") {
        return (
            path,
            "expected a whole number, got a number too large".to_string(),
        );
    }
    (path, message.trim().replace('\n', ": "))
}

fn expected_name(e: &str) -> String {
    match e {
        "i64" | "u64" | "u32" | "i32" | "usize" => "a whole number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        other => other.into(),
    }
}

fn got_name(g: &str) -> String {
    if let Some(v) = g.split('`').nth(1) {
        return v.to_string();
    }
    if let Some(s) = g.strip_prefix("string ") {
        return s.to_string();
    }
    match g {
        "sequence" => "an array".into(),
        "map" => "a table".into(),
        other => other.into(),
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
            if !self.global.contains_key(pool) && !self.node.contains_key(pool) {
                let declared: Vec<&str> = self
                    .global
                    .keys()
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
    let resources = pools(&raw.resources, &root.key("resources"))?;
    let nodes = match &raw.nodes {
        None => NodesPolicy::default(),
        Some(n) => nodes_policy(n, &resources, &root.key("nodes"))?,
    };
    let pools = Pools {
        global: &resources,
        node: &nodes.resources,
    };
    Ok(Policy {
        global: global_policy(raw, &root.key("global"))?,
        limits: limits(&raw.limit, &root.key("limit"))?,
        conflicts: raw
            .conflict
            .iter()
            .enumerate()
            .map(|(i, c)| conflict(c, &root.key("conflict").at(i)))
            .collect::<Checked<_>>()?,
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
        schedules: schedules(&raw.schedule, &pools, &root.key("schedule"))?,
        blocks: match &raw.blocks {
            None => BlocksPolicy::default(),
            Some(b) => blocks_policy(b, &root.key("blocks"))?,
        },
        nodes,
        resources,
        raw: RawPolicy::default(),
    })
}

fn global_policy(raw: &RawPolicy, p: &FieldPath) -> Checked<GlobalPolicy> {
    let Some(g) = &raw.global else {
        return Ok(GlobalPolicy::default());
    };
    Ok(GlobalPolicy {
        max_running: opt_count(g.max_running, &p.key("max_running"))?,
        prepare_queue: opt_count(g.prepare_queue, &p.key("prepare_queue"))?,
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
        let max_priority = o.max_priority;
        out.insert(
            owner.clone(),
            OwnerPolicy {
                weight,
                max_priority,
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
    match raw.retention.as_ref().and_then(|r| r.days) {
        None => Ok(RetentionPolicy::default()),
        Some(days) => match u32::try_from(days) {
            Ok(days) if days >= 1 => Ok(RetentionPolicy { days }),
            _ => bad(
                &p.key("days"),
                format!("expected a whole number of days >= 1, got {days}"),
            ),
        },
    }
}

fn schedules(raw: &[RawSchedule], pools: &Pools<'_>, p: &FieldPath) -> Checked<Vec<ScheduleSpec>> {
    let mut out = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, s) in raw.iter().enumerate() {
        let sp = p.at(i);
        if let Some(first) = seen.insert(s.name.as_str(), i) {
            let message = format!(
                "schedule name {:?} is already used by schedule[{first}], expected unique names",
                s.name
            );
            return bad(&sp.key("name"), message);
        }
        out.push(schedule(s, pools, &sp)?);
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
    let max = opt_count(l.max, &p.key("max"))?;
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
        values,
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

fn nodes_policy(
    n: &RawNodes,
    global_pools: &BTreeMap<String, u64>,
    p: &FieldPath,
) -> Checked<NodesPolicy> {
    let mut rules = Vec::new();
    for (i, r) in n.rule.iter().enumerate() {
        let rp = p.key("rule").at(i);
        rules.push(NodeRule {
            selector: label_selector(&r.selector, &rp.key("selector"))?,
            max_running: count(r.max_running, &rp.key("max_running"))?,
        });
    }
    let resources = pools(&n.resources, &p.key("resources"))?;
    if let Some(pool) = resources.keys().find(|k| global_pools.contains_key(*k)) {
        return bad(
            &p.key("resources").key(pool),
            format!("pool {pool:?} is already declared in [resources], expected each pool either global ([resources]) or per node ([nodes.resources])"),
        );
    }
    Ok(NodesPolicy {
        max_running: opt_count(n.max_running, &p.key("max_running"))?,
        prepare_queue: opt_count(n.prepare_queue, &p.key("prepare_queue"))?.unwrap_or(0),
        ttl: positive_duration(&n.ttl, &p.key("ttl"))?.unwrap_or(DEFAULT_NODE_TTL),
        rules,
        resources,
    })
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
    Ok(Conflict {
        keys,
        overlap: c.overlap.clone(),
        matcher,
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
    Ok(QueuePolicy {
        aging: positive_duration(&q.aging, &p.key("aging"))?,
        strict: q.strict.unwrap_or(false),
        reserve_after: opt_duration(&q.reserve_after, &p.key("reserve_after"))?
            .unwrap_or(DEFAULT_RESERVE_AFTER),
        fair_share,
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
        priority: k.priority,
        cost: pools.cost(&k.cost, &p.key("cost"))?,
        two_stage: k.two_stage,
        prepare_timeout: positive_duration(&k.prepare_timeout, &p.key("prepare_timeout"))?,
        retry: k
            .retry
            .as_ref()
            .map(|r| retry(r, &p.key("retry")))
            .transpose()?,
        coordinator: k.coordinator,
    })
}

fn schedule(s: &RawSchedule, pools: &Pools<'_>, p: &FieldPath) -> Checked<ScheduleSpec> {
    name(&s.name, &p.key("name"), "schedule")?;
    if s.when.trim().is_empty() {
        return bad(
            &p.key("when"),
            "expected a calendar event or cron expression (such as \"mon..fri 02:00\" or \"30 2 * * 1-5\"), got an empty string",
        );
    }
    if let Err(e) = crate::calendar::validate_expression(s.when.trim()) {
        return bad(
            &p.key("when"),
            format!("invalid schedule {:?}: {e}", s.when.trim()),
        );
    }
    let duplicates = match s.duplicates.as_deref() {
        None | Some("skip") => Duplicates::Skip,
        Some("queue") => Duplicates::Queue,
        Some("cancel-queued") => Duplicates::CancelQueued,
        Some("cancel-running") => Duplicates::CancelRunning,
        Some(other) => {
            return bad(
                &p.key("duplicates"),
                format!("expected one of \"skip\", \"queue\", \"cancel-queued\", \"cancel-running\", got {other:?}"),
            )
        }
    };
    let misfire = match s.misfire.as_deref() {
        None | Some("run-once") => Misfire::RunOnce,
        Some("skip") => Misfire::Skip,
        Some(other) => {
            return bad(
                &p.key("misfire"),
                format!("expected \"run-once\" or \"skip\", got {other:?}"),
            )
        }
    };
    Ok(ScheduleSpec {
        name: s.name.clone(),
        when: s.when.trim().to_string(),
        job: job_template(&s.job, pools, &p.key("job"))?,
        duplicates,
        misfire,
        max_start_delay: positive_duration(&s.max_start_delay, &p.key("max_start_delay"))?,
        jitter: opt_duration(&s.jitter, &p.key("jitter"))?,
        retry: s
            .retry
            .as_ref()
            .map(|r| retry(r, &p.key("retry")))
            .transpose()?,
    })
}

fn job_template(j: &RawJob, pools: &Pools<'_>, p: &FieldPath) -> Checked<JobTemplate> {
    // Kind, attributes and placement are checked by the one job check the engine uses (the
    // cost and durations, still raw here, below).
    let spec = crate::job::JobSpec {
        kind: j.kind.clone(),
        attrs: j.attrs.clone(),
        node: j.node.clone(),
        node_selector: j.node_selector.clone(),
        ..Default::default()
    };
    if let Err(crate::job::SubmitError::Invalid { field, message }) =
        spec.check(&Policy::unlimited())
    {
        let path = match field.split_once('.') {
            Some((head, rest)) => p.key(head).key(rest),
            None => p.key(&field),
        };
        return bad(&path, message);
    }
    let executor = match j.executor.as_deref() {
        None => None,
        Some("client") => Some(Executor::Client),
        Some("agent") => Some(Executor::Agent),
        Some(other) => {
            return bad(
                &p.key("executor"),
                format!("expected \"client\" or \"agent\", got {other:?}"),
            )
        }
    };
    Ok(JobTemplate {
        kind: j.kind.clone(),
        attrs: j.attrs.clone(),
        priority: j.priority,
        node: j.node.clone(),
        node_selector: j.node_selector.clone(),
        executor,
        cost: pools.cost(&j.cost, &p.key("cost"))?,
        two_stage: j.two_stage,
        max_wait: positive_duration(&j.max_wait, &p.key("max_wait"))?,
        max_run: positive_duration(&j.max_run, &p.key("max_run"))?,
    })
}

fn blocks_policy(b: &RawBlocks, p: &FieldPath) -> Checked<BlocksPolicy> {
    let mut out = BlocksPolicy::default();
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
    use super::*;
    use rstest::rstest;

    /// Every example TOML block of design `policy.md`, `schedules.md` and `item-blocks.md`,
    /// in one document.
    const DESIGN_EXAMPLES: &str = r#"
[global]
max_running = 8                 # at most 8 jobs hold slots at once

[[limit]]                       # Bacula "Maximum Concurrent Jobs" per Storage
name = "per-datastore"
per = ["datastore"]             # one counter per distinct value of attrs.datastore
max = 2
values = { ds-fast = 4 }        # optional per-value override

[[limit]]                       # PBS RFC: per job type
name = "per-kind"
per = ["kind"]
values = { backup = 6, sync = 1, verify = 2, prune = 1, gc = 1 }

[[limit]]                       # PBS RFC: per user / API token
name = "per-owner"
per = ["owner"]
max = 3

[[limit]]                       # a limit can apply to some jobs only
name = "restores"
match = "kind in (restore, data-download)"
max = 4

[nodes]
max_running = 2                 # every node, unless a rule says otherwise (Velero "globalConfig")
prepare_queue = 1               # per node: how many jobs may hold prepared resources beyond max_running
ttl = "30s"                     # a node whose agent is silent this long is lost

[[nodes.rule]]
selector = "beta.kubernetes.io/instance-type=Standard_B4ms"
max_running = 3
[[nodes.rule]]
selector = "kubernetes.io/hostname in (node-1, node-2), !gpu"
max_running = 5
[[nodes.rule]]
selector = "role=database"
max_running = 0                 # no data movement on database nodes

[resources]
threads = 10
memory_gib = 64

[kinds.tape-backup]
cost = { threads = 4, memory_gib = 8 }
[kinds.backup]
cost = { threads = 1 }

[[conflict]]
keys = ["datastore", "group"]   # two jobs with equal values for all keys never hold slots together
[[conflict]]
match = "kind=backup"
overlap = "namespaces"          # list-valued attr ("a,b"; "*" = all): overlapping sets conflict

[leases]
ttl = "30s"                     # an admitted job's holder must renew within this
[kinds.data-upload]
retry = { times = 3, interval = "30s" }   # default: times = 0

[[schedule]]
name = "verify-ds1"
when = "sat 03:00"
job = { kind = "verify", attrs = { datastore = "ds1" }, priority = -1 }
duplicates = "skip"          # skip | queue | cancel-queued | cancel-running  (Bacula: Allow/Cancel ... Duplicates)
misfire = "run-once"         # after downtime: run-once | skip
max_start_delay = "2h"       # Bacula Max Start Delay: give up if not admitted by then
jitter = "5m"                # spread many schedules that share a time

[[blocks.rule]]
match = "kind=Pod, app.kubernetes.io/managed-by=cass-operator"
group_by = ["label:cassandra.datastax.com/cluster"]   # all three Cassandra pods together
"#;

    /// Every other key the design names, each set once.
    const OTHER_KEYS: &str = r#"
[global]
max_running = 8
prepare_queue = 4

[nodes]
max_running = 3
[nodes.resources]
gpus = 1

[queue]
aging = "10m"
strict = true
reserve_after = "2m"
fair_share = "owner"

[owners.alice]
weight = 2
max_priority = 5

[kinds.resource-backup]
priority = 1
coordinator = true
two_stage = false
prepare_timeout = "10m"
cost = { gpus = 1 }

[retention]
days = 30

[[schedule]]
name = "nightly"
when = "mon..fri 02:00"
job = { kind = "data-upload", node_selector = "zone=eu-1", executor = "agent", cost = { gpus = 1 }, two_stage = true, max_wait = "1h", max_run = "6h" }
duplicates = "cancel-queued"
misfire = "skip"
retry = { times = 3, interval = "30m" }

[blocks]
exec_template = ["kubectl", "exec", "{pod}", "--", "{command}"]
volume_group_label = "example.com/group"
data_upload_selector = "zone=eu-1"
"#;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_design_example_parses() {
        let p = Policy::from_toml(DESIGN_EXAMPLES, Some("design.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.global.max_running, Some(8));
        let names: Vec<&str> = p.limits.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["per-datastore", "per-kind", "per-owner", "restores"]
        );
        let ds = &p.limits[0];
        assert_eq!(ds.per, [PerKey::Attr("datastore".into())]);
        assert_eq!(ds.limit_for(&["ds-fast".into()]), Some(4));
        assert_eq!(ds.limit_for(&["ds1".into()]), Some(2));
        assert_eq!(p.limits[1].limit_for(&["sync".into()]), Some(1));
        assert_eq!(p.limits[1].limit_for(&["restore".into()]), None);
        assert_eq!(p.limits[2].per, [PerKey::Owner]);
        assert!(p.limits[3]
            .matcher
            .as_ref()
            .unwrap()
            .names_value("kind", "data-download"));
        assert_eq!((p.nodes.max_running, p.nodes.prepare_queue), (Some(2), 1));
        assert_eq!(p.nodes.rules.len(), 3);
        assert_eq!(
            p.kind_cost("tape-backup"),
            BTreeMap::from([("memory_gib".into(), 8), ("threads".into(), 4)])
        );
        assert_eq!(
            p.conflicts[0].keys,
            [
                PerKey::Attr("datastore".into()),
                PerKey::Attr("group".into())
            ]
        );
        assert_eq!(p.conflicts[1].overlap.as_deref(), Some("namespaces"));
        assert_eq!(
            p.retry("data-upload"),
            Retry {
                times: 3,
                interval: Duration::from_secs(30)
            }
        );
        let s = &p.schedules[0];
        assert_eq!((s.when.as_str(), s.job.priority), ("sat 03:00", Some(-1)));
        assert_eq!(s.max_start_delay, Some(Duration::from_secs(7200)));
        assert_eq!(
            p.blocks.rules[0].group_by,
            ["label:cassandra.datastax.com/cluster"]
        );
        assert_eq!(p.blocks.volume_group_label, "lockgate.io/volume-group");
    }

    #[test]
    fn every_other_key_parses() {
        let p = Policy::from_toml(OTHER_KEYS, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.global.prepare_queue, Some(4));
        assert_eq!(p.nodes.resources, BTreeMap::from([("gpus".into(), 1)]));
        assert_eq!(
            p.queue,
            QueuePolicy {
                aging: Some(Duration::from_secs(600)),
                strict: true,
                reserve_after: Duration::from_secs(120),
                fair_share: true
            }
        );
        assert_eq!(p.owner_weight("alice"), 2);
        assert_eq!(p.owners["alice"].max_priority, Some(5));
        assert!(p.is_coordinator("resource-backup"));
        assert_eq!(
            p.prepare_timeout("resource-backup"),
            Duration::from_secs(600)
        );
        assert_eq!(p.retention.days, 30);
        let job = &p.schedules[0].job;
        assert_eq!(job.executor, Some(Executor::Agent));
        assert_eq!(job.node_selector.as_deref(), Some("zone=eu-1"));
        assert_eq!(job.max_run, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(p.schedules[0].duplicates, Duplicates::CancelQueued);
        assert_eq!(p.schedules[0].misfire, Misfire::Skip);
        assert_eq!(p.blocks.exec_template.len(), 5);
        assert_eq!(p.blocks.data_upload_selector, "zone=eu-1");
    }

    #[test]
    fn the_empty_document_is_unlimited() {
        let p = Policy::from_toml("", None).unwrap();
        assert_eq!(p, Policy::from_json("{}").unwrap());
        assert_eq!(p, Policy::from_raw(RawPolicy::default()).unwrap());
        assert!(p.limits.is_empty() && p.nodes.rules.is_empty());
        assert_eq!(p.global, GlobalPolicy::default());
        assert_eq!(p.nodes, NodesPolicy::default());
        assert_eq!(p.leases.ttl, DEFAULT_LEASE_TTL);
        assert_eq!(p.queue, QueuePolicy::default());
        assert_eq!(p.retention.days, DEFAULT_RETENTION_DAYS);
        assert_eq!(p.blocks, BlocksPolicy::default());
        assert!(p.is_coordinator(RESOURCE_BACKUP_KIND) && !p.is_coordinator("backup"));
        assert_eq!(p.node_number(&labels(&[("a", "b")])), (None, None));
        assert_eq!(p.to_toml_string(), "");
        assert_eq!(p.to_json_value(), serde_json::json!({}));
    }

    #[rstest]
    #[case(DESIGN_EXAMPLES)]
    #[case(OTHER_KEYS)]
    fn round_trips_through_toml_and_json(#[case] text: &str) {
        let p = Policy::from_toml(text, None).unwrap();
        let toml = p.to_toml_string();
        assert_eq!(
            Policy::from_toml(&toml, None).unwrap_or_else(|e| panic!("{e}\n{toml}")),
            p,
            "{toml}"
        );
        let json = p.to_json_value().to_string();
        assert_eq!(
            Policy::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}")),
            p
        );
        assert!(p.diff(&p.clone()).is_empty());
    }

    #[test]
    fn pbs_rfc_threads_10_tape_costs_4() {
        let p = Policy::from_toml(
            "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost = { threads = 4 }\n[kinds.backup]\ncost = { threads = 1 }\n",
            None,
        )
        .unwrap();
        assert_eq!(p.resources["threads"], 10);
        assert_eq!(p.kind_cost("tape-backup")["threads"], 4);
        assert_eq!(p.kind_cost("backup")["threads"], 1);
        assert!(p.kind_cost("verify").is_empty());
    }

    #[rstest]
    #[case(&[("kubernetes.io/hostname", "node-1")], (Some(3), None))]
    #[case(&[("kubernetes.io/hostname", "node-2")], (Some(5), Some(0)))]
    #[case(&[("kubernetes.io/hostname", "node-3")], (Some(3), None))]
    fn velero_global_3_node_2_gets_5(
        #[case] node: &[(&str, &str)],
        #[case] want: (Option<u32>, Option<usize>),
    ) {
        let p = Policy::from_toml(
            "[nodes]\nmax_running = 3\n[[nodes.rule]]\nselector = \"kubernetes.io/hostname=node-2\"\nmax_running = 5\n",
            None,
        )
        .unwrap();
        assert_eq!(p.node_number(&labels(node)), want);
    }

    #[rstest]
    #[case(&[("zone", "eu"), ("size", "big")], (Some(4), Some(1)))]
    #[case(&[("size", "big")], (Some(6), Some(0)))]
    #[case(&[("zone", "eu"), ("size", "big"), ("role", "database")], (Some(0), Some(2)))]
    #[case(&[("role", "database")], (Some(0), Some(2)))]
    #[case(&[("zone", "us")], (Some(2), None))]
    fn smallest_matching_rule_wins(
        #[case] node: &[(&str, &str)],
        #[case] want: (Option<u32>, Option<usize>),
    ) {
        let p = Policy::from_toml(
            r#"
[nodes]
max_running = 2
[[nodes.rule]]
selector = "size=big"
max_running = 6
[[nodes.rule]]
selector = "zone in (eu, ap)"
max_running = 4
[[nodes.rule]]
selector = "role=database"
max_running = 0
"#,
            None,
        )
        .unwrap();
        assert_eq!(p.node_number(&labels(node)), want);
    }

    const SCHEDULE: &str = "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\n";

    #[rstest]
    #[case::negative_max(
        "[[limit]]\nname = \"a\"\nmax = 2\n\n[[limit]]\nname = \"b\"\nmax = -1\n",
        7,
        "limit[1].max",
        "expected a whole number >= 0, got -1"
    )]
    #[case::non_integer(
        "[global]\nmax_running = 2.5\n",
        2,
        "global.max_running",
        "expected a whole number, got 2.5"
    )]
    #[case::string_number(
        "[global]\n\nprepare_queue = \"8\"\n",
        3,
        "global.prepare_queue",
        "expected a whole number, got \"8\""
    )]
    #[case::huge_number(
        "[global]\nmax_running = 99999999999\n",
        2,
        "global.max_running",
        "expected a whole number <= 4294967295"
    )]
    #[case::negative_cost(
        "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost.threads = -4\n",
        4,
        "kinds.tape-backup.cost.threads",
        "expected a whole number >= 0, got -4"
    )]
    #[case::negative_capacity(
        "[resources]\nthreads = -1\n",
        2,
        "resources.threads",
        ">= 0, got -1"
    )]
    #[case::duplicate_limit(
        "[[limit]]\nname = \"a\"\n[[limit]]\nname = \"a\"\n",
        4,
        "limit[1].name",
        "already used by limit[0]"
    )]
    #[case::empty_limit_name(
        "[[limit]]\nname = \"\"\n",
        2,
        "limit[0].name",
        "expected a limit name"
    )]
    #[case::values_without_per(
        "[[limit]]\nname = \"a\"\nvalues = { x = 1 }\n",
        3,
        "limit[0].values",
        "`values` needs `per`"
    )]
    #[case::values_parts(
        "[[limit]]\nname = \"a\"\nper = [\"datastore\", \"kind\"]\nvalues = { \"ds1\" = 2 }\n",
        4,
        "limit[0].values.ds1",
        "has 1 comma-separated part(s), expected 2 (one value per `per` key: datastore, kind)"
    )]
    #[case::values_empty_part(
        "[[limit]]\nname = \"a\"\nper = [\"datastore\", \"kind\"]\nvalues = { \"ds1,\" = 2 }\n",
        4,
        "limit[0].values.ds1,",
        "empty part"
    )]
    #[case::negative_value(
        "[[limit]]\nname = \"a\"\nper = [\"kind\"]\nvalues = { backup = -2 }\n",
        4,
        "limit[0].values.backup",
        "got -2"
    )]
    #[case::per_node(
        "[[limit]]\nname = \"a\"\nper = [\"kind\", \"node\"]\n",
        3,
        "limit[0].per[1]",
        "node numbers are set in [nodes]"
    )]
    #[case::per_empty(
        "[[limit]]\nname = \"a\"\nper = [\"\"]\n",
        3,
        "limit[0].per[0]",
        "got an empty string"
    )]
    #[case::per_twice(
        "[[limit]]\nname = \"a\"\nper = [\"kind\", \"kind\"]\n",
        3,
        "limit[0].per[1]",
        "listed twice"
    )]
    #[case::bad_match(
        "[[limit]]\nname = \"a\"\nmatch = \"kind in ()\"\n",
        3,
        "limit[0].match",
        "invalid job selector \"kind in ()\": column 10: empty list"
    )]
    #[case::bad_rule_selector(
        "[nodes]\n[[nodes.rule]]\nselector = \"zone=eu 1\"\nmax_running = 1\n",
        3,
        "nodes.rule[0].selector",
        "invalid label selector \"zone=eu 1\": column 9"
    )]
    #[case::label_syntax_in_rule(
        "[[nodes.rule]]\nselector = \"group=vm/100\"\nmax_running = 1\n",
        2,
        "nodes.rule[0].selector",
        "holds '/'"
    )]
    #[case::rule_without_selector(
        "[[nodes.rule]]\nmax_running = 1\n",
        1,
        "nodes.rule[0].selector",
        "missing, this key is required"
    )]
    #[case::undeclared_pool("[resources]\nthreads = 10\n[kinds.tape-backup]\ncost = { threads = 4, gpus = 1 }\n", 4, "kinds.tape-backup.cost.gpus", "pool \"gpus\" is not declared, expected a pool declared in [resources] or [nodes.resources]: threads")]
    #[case::no_pools(
        "[kinds.backup]\ncost = { threads = 1 }\n",
        2,
        "kinds.backup.cost.threads",
        "none are declared"
    )]
    #[case::pool_twice(
        "[resources]\nthreads = 10\n[nodes.resources]\nthreads = 2\n",
        4,
        "nodes.resources.threads",
        "already declared in [resources]"
    )]
    #[case::weight_zero(
        "[owners.alice]\nweight = 0\n",
        2,
        "owners.alice.weight",
        "expected a whole number >= 1, got 0"
    )]
    #[case::fair_share(
        "[queue]\nfair_share = \"user\"\n",
        2,
        "queue.fair_share",
        "expected \"owner\" (the only fair-share mode), got \"user\""
    )]
    #[case::bad_duration(
        "[leases]\nttl = \"30 seconds\"\n",
        2,
        "leases.ttl",
        "invalid duration \"30 seconds\": expected a whole number followed by ms, s, m, h or d"
    )]
    #[case::zero_ttl(
        "[nodes]\nttl = \"0s\"\n",
        2,
        "nodes.ttl",
        "expected a duration greater than zero, got \"0s\""
    )]
    #[case::zero_lease_ttl("[leases]\nttl = \"0ms\"\n", 2, "leases.ttl", "greater than zero")]
    #[case::zero_aging("[queue]\naging = \"0m\"\n", 2, "queue.aging", "greater than zero")]
    #[case::bad_reserve_after(
        "[queue]\nreserve_after = \"5 min\"\n",
        2,
        "queue.reserve_after",
        "invalid duration"
    )]
    #[case::bad_prepare_timeout(
        "[kinds.x]\nprepare_timeout = \"soon\"\n",
        2,
        "kinds.x.prepare_timeout",
        "invalid duration"
    )]
    #[case::retry_without_interval(
        "[kinds.data-upload]\nretry = { times = 3 }\n",
        2,
        "kinds.data-upload.retry.interval",
        "missing, expected a duration such as \"30s\" when times = 3"
    )]
    #[case::retention_zero("[retention]\ndays = 0\n", 2, "retention.days", "got 0")]
    #[case::duplicates(&format!("{SCHEDULE}job = {{ kind = \"verify\" }}\nduplicates = \"cancel\"\n"), 5, "schedule[0].duplicates", "expected one of \"skip\", \"queue\", \"cancel-queued\", \"cancel-running\", got \"cancel\"")]
    #[case::misfire(&format!("{SCHEDULE}job = {{ kind = \"verify\" }}\nmisfire = \"later\"\n"), 5, "schedule[0].misfire", "expected \"run-once\" or \"skip\", got \"later\"")]
    #[case::executor(&format!("{SCHEDULE}job = {{ kind = \"verify\", executor = \"robot\" }}\n"), 4, "schedule[0].job.executor", "expected \"client\" or \"agent\", got \"robot\"")]
    #[case::duplicate_schedule(&format!("{SCHEDULE}job = {{ kind = \"a\" }}\n{SCHEDULE}job = {{ kind = \"b\" }}\n"), 6, "schedule[1].name", "already used by schedule[0]")]
    #[case::empty_when(
        "[[schedule]]\nname = \"s\"\nwhen = \" \"\njob = { kind = \"verify\" }\n",
        3,
        "schedule[0].when",
        "expected a calendar event or cron expression"
    )]
    #[case::bad_weekday_range(
        "[[schedule]]\nname = \"s\"\nwhen = \"mon..xyz 02:00\"\njob = { kind = \"verify\" }\n",
        3,
        "schedule[0].when",
        "xyz"
    )]
    #[case::bad_hour(
        "[[schedule]]\nname = \"s\"\nwhen = \"25:00\"\njob = { kind = \"verify\" }\n",
        3,
        "schedule[0].when",
        "25"
    )]
    #[case::bad_zone(
        "[[schedule]]\nname = \"s\"\nwhen = \"daily Mars/Olympus\"\njob = { kind = \"verify\" }\n",
        3,
        "schedule[0].when",
        "Mars/Olympus"
    )]
    #[case::reserved_kind(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ kind = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.kind", "`kind` is reserved")]
    #[case::reserved_owner(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ owner = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.owner", "`owner` is reserved")]
    #[case::reserved_node(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ node = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.node", "`node` is reserved")]
    #[case::empty_kind(&format!("{SCHEDULE}job = {{ kind = \"\" }}\n"), 4, "schedule[0].job.kind", "expected a job kind")]
    #[case::pinned_and_movable(&format!("{SCHEDULE}job = {{ kind = \"a\", node = \"n1\", node_selector = \"\" }}\n"), 4, "schedule[0].job.node_selector", "either pinned")]
    #[case::bad_node_selector(&format!("{SCHEDULE}job = {{ kind = \"a\", node_selector = \"zone in eu\" }}\n"), 4, "schedule[0].job.node_selector", "invalid label selector")]
    #[case::job_cost(&format!("{SCHEDULE}job = {{ kind = \"a\", cost = {{ tape = 1 }} }}\n"), 4, "schedule[0].job.cost.tape", "not declared")]
    #[case::job_missing(SCHEDULE, 1, "schedule[0].job", "missing")]
    #[case::conflict_without_keys(
        "[global]\n\n[[conflict]]\nmatch = \"kind=backup\"\n",
        3,
        "conflict[0]",
        "expected `keys = [..]`, `overlap = \"<attribute>\"` or both"
    )]
    #[case::conflict_empty_key(
        "[[conflict]]\nkeys = [\"datastore\", \"\"]\n",
        2,
        "conflict[0].keys[1]",
        "empty string"
    )]
    #[case::conflict_node(
        "[[conflict]]\nkeys = [\"node\"]\n",
        2,
        "conflict[0].keys[0]",
        "not allowed"
    )]
    #[case::conflict_bad_match(
        "[[conflict]]\nkeys = [\"a\"]\nmatch = \"kind=\"\n",
        3,
        "conflict[0].match",
        "expected a value"
    )]
    #[case::conflict_overlap_reserved(
        "[[conflict]]\noverlap = \"kind\"\n",
        2,
        "conflict[0].overlap",
        "list-valued attribute"
    )]
    #[case::group_by(
        "[[blocks.rule]]\nmatch = \"kind=Pod\"\ngroup_by = [\"label:a\", \"app\"]\n",
        3,
        "blocks.rule[0].group_by[1]",
        "expected `label:<name>` or `field:<dotted.path>`, got \"app\""
    )]
    #[case::group_by_empty(
        "[[blocks.rule]]\nmatch = \"kind=Pod\"\ngroup_by = []\n",
        3,
        "blocks.rule[0].group_by",
        "at least one"
    )]
    #[case::block_match(
        "[[blocks.rule]]\nmatch = \"kind==\"\ngroup_by = [\"field:spec.x\"]\n",
        2,
        "blocks.rule[0].match",
        "invalid job selector"
    )]
    #[case::exec_template(
        "[blocks]\nexec_template = []\n",
        2,
        "blocks.exec_template",
        "expected a non-empty argv"
    )]
    #[case::volume_group_label(
        "[blocks]\nvolume_group_label = \"-bad\"\n",
        2,
        "blocks.volume_group_label",
        "expected a Kubernetes label key"
    )]
    #[case::data_upload_selector(
        "[blocks]\ndata_upload_selector = \"a=(b)\"\n",
        2,
        "blocks.data_upload_selector",
        "invalid label selector"
    )]
    #[case::unknown_key(
        "[global]\nmax_running = 1\nmax_runing = 2\n",
        3,
        "global.max_runing",
        "unknown key, expected `max_running` or `prepare_queue`"
    )]
    #[case::unknown_section(
        "[global]\n[bogus]\nx = 1\n",
        2,
        "bogus",
        "unknown key, expected one of `global`, `limit`"
    )]
    #[case::unknown_header(
        "[global]\n[global.bogus]\nx = 1\n",
        2,
        "global.bogus",
        "unknown key, expected `max_running` or `prepare_queue`"
    )]
    #[case::unknown_array_header("[[bogus]]\nx = 1\n", 1, "bogus", "unknown key")]
    #[case::unknown_same_name("[global]\nglobal = 1\n", 2, "global.global", "unknown key")]
    #[case::unknown_dotted(
        "[kinds.backup]\ncost.threads = 1\nretry.count = 1\n",
        3,
        "kinds.backup.retry.count",
        "unknown key, expected `times` or `interval`"
    )]
    #[case::unknown_nested(
        "[[limit]]\nname = \"a\"\n\n[[limit]]\nname = \"b\"\nmaximum = 3\n",
        6,
        "limit[1].maximum",
        "unknown key"
    )]
    #[case::unknown_inline(&format!("{SCHEDULE}job = {{ kind = \"a\", nodes = \"x\" }}\n"), 4, "schedule[0].job.nodes", "unknown key")]
    #[case::section_type("global = 3\n", 1, "global", "expected a table, got 3")]
    #[case::array_type(
        "[[limit]]\nname = \"a\"\nper = \"kind\"\n",
        3,
        "limit[0].per",
        "expected an array, got \"kind\""
    )]
    #[case::bool_type(
        "[queue]\nstrict = \"yes\"\n",
        2,
        "queue.strict",
        "expected true or false, got \"yes\""
    )]
    #[case::limit_not_array("limit = 1\n", 1, "limit", "expected an array, got 1")]
    #[case::syntax("[global]\nmax_running = 1\n[limit\n", 3, "", "invalid TOML")]
    #[case::duplicate_table("[global]\n[global]\n", 2, "", "duplicate key")]
    fn rejects(#[case] text: &str, #[case] line: usize, #[case] field: &str, #[case] needle: &str) {
        let e = Policy::from_toml(text, Some("lockgate.toml")).expect_err(text);
        assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
        assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
        assert_eq!(e.file.as_deref(), Some("lockgate.toml"));
    }

    #[test]
    fn displays_file_line_field_and_message() {
        let e = Policy::from_toml(
            "[[limit]]\nname = \"a\"\n[[limit]]\nname = \"b\"\n\n\n\n\n\n\n\nmax = -1\n",
            Some("lockgate.toml"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lockgate.toml:12: limit[1].max: expected a whole number >= 0, got -1"
        );
        let e = Policy::from_toml("[global]\nmax_running = -1\n", None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: global.max_running: expected a whole number >= 0, got -1"
        );
        let mut raw = RawPolicy::default();
        raw.limit.push(raw::RawLimit {
            name: "a".into(),
            max: Some(-1),
            ..Default::default()
        });
        let e = Policy::from_raw(raw).unwrap_err();
        assert_eq!(
            e.to_string(),
            "limit[0].max: expected a whole number >= 0, got -1"
        );
        let e = PolicyError {
            file: Some("p.toml".into()),
            line: None,
            field: String::new(),
            message: "m".into(),
        };
        assert_eq!(e.to_string(), "p.toml: m");
    }

    #[rstest]
    #[case::syntax(
        "{\n  \"global\": {\n    \"max_running\": 1,\n  }\n}",
        Some(4),
        "",
        "invalid JSON"
    )]
    #[case::unknown(
        "{\n  \"global\": {\n    \"max_runing\": 1\n  }\n}",
        Some(3),
        "global.max_runing",
        "unknown key"
    )]
    #[case::wrong_type(
        "{\"limit\": [{\"name\": \"a\"},\n {\"name\": \"b\", \"max\": 1.5}]}",
        Some(2),
        "limit[1].max",
        "expected a whole number, got 1.5"
    )]
    #[case::missing(
        "{\"nodes\": {\"rule\": [{\"max_running\": 1}]}}",
        Some(1),
        "nodes.rule[0].selector",
        "missing"
    )]
    #[case::semantic(
        "{\"limit\": [{\"name\": \"a\", \"max\": -1}]}",
        None,
        "limit[0].max",
        "got -1"
    )]
    #[case::not_an_object("[1]", Some(1), "", "expected a table")]
    fn rejects_json(
        #[case] text: &str,
        #[case] line: Option<usize>,
        #[case] field: &str,
        #[case] needle: &str,
    ) {
        let e = Policy::from_json(text).expect_err(text);
        assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
        assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
    }

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
}
