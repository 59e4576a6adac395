//! The event log's rows: a `job` event refers to its job's row instead of repeating it.
//!
//! A `job` event (`{"type": "job", "change": ..., "job": JobView}`) is written with the
//! job's id in the row's `job` column and, in `data`, only the fields of the view that
//! change over a job's life ([`JOB_FIXED_FIELDS`] and null fields left out). A read fills
//! the fixed fields back from the job's row ([`Expander`]): the job row of the same batch
//! always exists, because the server writes every job its events report in the batch of
//! those events, and the fixed fields are the same in every version of a job's row.
//!
//! # Invariants
//! - What an event says about its moment is in its own row: state, node, attempt, lease,
//!   times, outcome, message, priority (`set` changes it), cancel request and reason,
//!   preemptions, the `log` flag (policy-dependent). Only fields that no operation changes
//!   after submit are taken from the job row (a test runs a job through its life and checks
//!   them).
//! - A read gives back the event as it was written: the fixed fields merged in, and null
//!   every field of the view that the row lacks and that the view does not leave out when
//!   empty (`JOB_OMITTED_WHEN_EMPTY`; a test runs every event of a job's life through
//!   and compares).
//! - An event whose job row is gone (retention deleted it) reads as its row holds it, with
//!   the job's `id`: retention deletes a job's row and its events by the same cutoff, and a
//!   job's events are no newer than its end, so a reader sees this only for an event that
//!   the next prune deletes too (docs/operations.md). A job row that does not decode is
//!   treated the same way rather than failing the whole page.

use crate::StoredEvent;
use lockgate_api::JobView;
use lockgate_core::job::{Job, JobId};
use lockgate_core::Timestamp;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The fields of a job event's `job` (the API's `JobView`) that are fixed when the job is
/// submitted, so the job's row holds them for every event of the job.
pub const JOB_FIXED_FIELDS: &[&str] = &[
    "id",
    "kind",
    "attrs",
    "owner",
    "executor",
    "submitted_at",
    "node_selector",
    "pinned",
    "two_stage",
    "cost",
    "not_before",
    "max_wait_s",
    "max_run_s",
    "idempotency_key",
    "after",
    "after_ok",
];

impl StoredEvent {
    /// The row of an event as the API serves it (`data`: `{"type": ..., ...}`). A `job`
    /// event refers to its job (`job`) and keeps only what changes over the job's life
    /// (see the module docs); any other event is kept whole.
    pub fn new(seq: u64, at: Timestamp, data: &Map<String, Value>) -> StoredEvent {
        let job = job_id(data);
        let text = match job {
            Some(_) => serde_json::to_string(&CompactEvent(data)),
            None => serde_json::to_string(data),
        };
        StoredEvent {
            seq,
            at,
            data: text.expect("events serialize"),
            job,
        }
    }
}

/// The job a `job` event reports, when `data` is one.
fn job_id(data: &Map<String, Value>) -> Option<JobId> {
    if data.get("type").and_then(Value::as_str) != Some("job") {
        return None;
    }
    data.get("job")?.get("id")?.as_u64()
}

/// Serializes an event with its `job` object compacted ([`CompactJob`]).
struct CompactEvent<'a>(&'a Map<String, Value>);

impl Serialize for CompactEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            match v {
                Value::Object(job) if k == "job" => m.serialize_entry(k, &CompactJob(job))?,
                _ => m.serialize_entry(k, v)?,
            }
        }
        m.end()
    }
}

/// Serializes a job view without its fixed fields and its null ones.
struct CompactJob<'a>(&'a Map<String, Value>);

impl Serialize for CompactJob<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kept = self
            .0
            .iter()
            .filter(|(k, v)| !v.is_null() && !JOB_FIXED_FIELDS.contains(&k.as_str()));
        let mut m = s.serialize_map(None)?;
        for (k, v) in kept {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// The fields of the job view that its JSON leaves out when empty
/// (`skip_serializing_if`): one a row lacks stays out of the whole event; any other field
/// a row lacks was null (the row leaves nulls out).
const JOB_OMITTED_WHEN_EMPTY: &[&str] = &[
    "after",
    "after_ok",
    "cancel_reason",
    "preemptions",
    "expected",
    "log",
];

/// What a job's row gives each of its events.
struct FromRow {
    /// The fixed fields, as the view shows them.
    fixed: Map<String, Value>,
    /// The view's other fields that are null when absent.
    nullable: Vec<String>,
}

/// Rebuilds whole events from their rows, for one page of a read: each job row is
/// decoded once however many of the page's events report that job.
#[derive(Default)]
pub(crate) struct Expander {
    rows: HashMap<JobId, Option<FromRow>>,
}

impl Expander {
    /// The whole event of a row: `data` as stored, `job` the row's job column, `body` the
    /// job's row (`None` when it is gone).
    pub(crate) fn expand(
        &mut self,
        data: String,
        job: Option<JobId>,
        body: Option<&str>,
    ) -> String {
        let Some(id) = job else {
            return data;
        };
        let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(&data) else {
            return data;
        };
        let from_row = self
            .rows
            .entry(id)
            .or_insert_with(|| body.and_then(from_row));
        let Some(Value::Object(view)) = event.get_mut("job") else {
            return data;
        };
        match from_row {
            Some(r) => {
                view.extend(r.fixed.iter().map(|(k, v)| (k.clone(), v.clone())));
                for k in &r.nullable {
                    view.entry(k.as_str()).or_insert(Value::Null);
                }
            }
            None => {
                view.insert("id".into(), id.into());
            }
        }
        serde_json::to_string(&event).expect("events serialize")
    }
}

/// What a job row gives its events; `None` when the row does not decode.
fn from_row(body: &str) -> Option<FromRow> {
    let job: Job = serde_json::from_str(body).ok()?;
    let view = JobView::from_job(&job, std::time::Duration::ZERO);
    let Ok(Value::Object(mut fixed)) = serde_json::to_value(view) else {
        return None;
    };
    let nullable = fixed
        .keys()
        .filter(|k| !JOB_FIXED_FIELDS.contains(&k.as_str()))
        .filter(|k| !JOB_OMITTED_WHEN_EMPTY.contains(&k.as_str()))
        .cloned()
        .collect();
    fixed.retain(|k, _| JOB_FIXED_FIELDS.contains(&k.as_str()));
    Some(FromRow { fixed, nullable })
}

#[cfg(test)]
pub(crate) mod tests;
