//! The fields a `[[notify]]` `match` selects on, for any event (engine or server).
//!
//! A target's `match` is a job selector (`kind=backup,outcome in (failed, expired)`) over
//! these names, looked up in this order:
//! - `type`: the event's type (`job`, `node_lost`, `rpo_alert`, ...);
//! - `severity`: the event's own `severity` if it has one, else derived ([`severity`]);
//! - `change`: a job event's change (`submitted`, `finished`, ...);
//! - `state`, `outcome`, `kind`, `owner`, `node`: the job's (job events only);
//! - `schedule`: the schedule that submitted the job (its owner `schedule:<name>`);
//! - any other name: the job's attribute of that name, else the event's top-level field of
//!   that name when it is a string (`rule`, `node`, ...).
//!
//! Invariant: a name absent from the event is absent to the selector (so `k!=v` holds).

use lockgate_core::selector::Selector;
use serde_json::{Map, Value};

fn text<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// The severity of an event: its own `severity` field, else `error` for a job that ended
/// `failed`, `lost` or `expired`, `warning` for a cancelled job or a lost node, else
/// `info`.
pub(crate) fn severity(data: &Map<String, Value>) -> &str {
    if let Some(s) = text(data, "severity") {
        return s;
    }
    let job = data.get("job").and_then(Value::as_object);
    match (text(data, "type"), text(data, "change"), job) {
        (Some("job"), Some("finished"), Some(job)) => match text(job, "state") {
            Some("failed" | "lost" | "expired") => "error",
            Some("cancelled") => "warning",
            _ => "info",
        },
        (Some("node_lost"), _, _) => "warning",
        _ => "info",
    }
}

/// Whether `selector` selects the event `data` (the `data` of an `EventView`).
pub(crate) fn matches(selector: &Selector, data: &Map<String, Value>) -> bool {
    let job = data.get("job").and_then(Value::as_object);
    let attrs = job.and_then(|j| j.get("attrs")).and_then(Value::as_object);
    let sev = severity(data);
    selector.matches(|key| match key {
        "type" | "change" => text(data, key),
        "severity" => Some(sev),
        "state" | "outcome" | "kind" | "owner" | "node" if job.is_some() => {
            job.and_then(|j| text(j, key))
        }
        "schedule" => job
            .and_then(|j| text(j, "owner"))
            .and_then(|o| o.strip_prefix("schedule:")),
        _ => attrs.and_then(|a| text(a, key)).or_else(|| text(data, key)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_match_selects_on_job_fields_attrs_and_any_events_type_and_severity() {
        let failed = data(json!({"type": "job", "change": "finished", "job": {
            "kind": "backup", "owner": "schedule:nightly", "state": "failed",
            "outcome": "failed", "node": null, "attrs": {"group": "vm/100"}}}));
        let rpo = data(json!({"type": "rpo_alert", "severity": "critical", "rule": "r0"}));
        let queued = data(json!({"type": "job", "change": "submitted", "job": {
            "kind": "backup", "owner": "alice", "state": "queued", "attrs": {}}}));
        for (sel, ev, want) in [
            ("outcome in (failed, lost, expired)", &failed, true),
            ("outcome in (failed, lost, expired)", &queued, false),
            ("outcome in (failed, lost, expired)", &rpo, false),
            ("severity!=info", &failed, true),
            ("severity!=info", &queued, false),
            ("severity!=info", &rpo, true),
            ("type=rpo_alert,severity=critical", &rpo, true),
            ("rule=r0", &rpo, true),
            ("schedule=nightly,group=vm/100,kind=backup", &failed, true),
            ("schedule=nightly", &queued, false),
            ("owner=alice,change=submitted", &queued, true),
            ("node", &failed, false),
            ("", &queued, true),
        ] {
            let s = Selector::parse_jobs(sel).unwrap();
            assert_eq!(matches(&s, ev), want, "{sel} on {ev:?}");
        }
    }
}
