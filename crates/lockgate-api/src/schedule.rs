//! Schedules as JSON (design `schedules.md`): what `POST /v1/schedules` takes, what
//! `GET /v1/schedules[/{name}]` shows.
//!
//! A schedule in the API has the fields of a policy `[[schedule]]` table, with the API's
//! conventions: durations are numbers of seconds in fields ending `_s` (`max_start_delay_s`,
//! `jitter_s`, `retry.interval_s`, `job.max_wait_s`, `job.max_run_s`). [`ScheduleRequest::to_raw`]
//! turns one into the policy's raw form, so the server validates it with the same rules as
//! a policy file.

use crate::time;
use lockgate_core::job::JobState;
use lockgate_core::policy::raw::{RawJob, RawRetry, RawSchedule};
use lockgate_core::policy::{Duplicates, Executor, Misfire, ScheduleSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The job each run of a schedule submits (`job = { .. }` of a `[[schedule]]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleJob {
    /// Job kind (required).
    pub kind: String,
    /// Attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
    /// Priority; default from the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Pinned node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node selector (`""`: any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,
    /// `client` or `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schema::ExecutorSchema>))]
    pub executor: Option<Executor>,
    /// Pool costs; default from the kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost: BTreeMap<String, u64>,
    /// Two-stage job; default from the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_stage: Option<bool>,
    /// Give up (`expired`) after waiting this many seconds (`max_start_delay_s` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_s: Option<f64>,
    /// Request cancellation after running this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_s: Option<f64>,
}

/// `retry = { times, interval }` in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleRetry {
    /// How many times a failed run is queued again.
    pub times: u32,
    /// Seconds between the failure and the retry.
    pub interval_s: f64,
}

/// `POST /v1/schedules`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// Unique name: 1 to 64 letters, digits or `. _ : @ -`; runs are owned by
    /// `schedule:<name>`.
    pub name: String,
    /// Calendar event (`mon..fri 02:00`, `*:0/15`) or cron line (`30 2 * * 1-5`).
    pub when: String,
    /// The job each run submits.
    pub job: ScheduleJob,
    /// `skip` (default), `queue`, `cancel-queued` or `cancel-running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<String>,
    /// `run-once` (default) or `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// A run not admitted within this many seconds of its planned time ends `expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_start_delay_s: Option<f64>,
    /// Spread runs by up to this many seconds (deterministic per planned time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_s: Option<f64>,
    /// Retries of failed runs (never of cancelled ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<ScheduleRetry>,
    /// Another schedule's name (from the policy or the API): each run waits until that
    /// schedule's latest run planned at or before it has ended, in any state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A field of a [`ScheduleRequest`] that cannot be turned into the policy's form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScheduleFieldError {
    /// JSON path of the field (`jitter_s`, `retry.interval_s`).
    pub field: String,
    /// The value given and what was expected.
    pub message: String,
}

fn duration(field: &str, secs: Option<f64>) -> Result<Option<String>, ScheduleFieldError> {
    secs.map(|s| {
        time::millis(s)
            .map(|ms| format!("{ms}ms"))
            .map_err(|message| ScheduleFieldError {
                field: field.to_string(),
                message,
            })
    })
    .transpose()
}

fn secs(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

/// The name the policy writes for a `duplicates` value.
pub fn duplicates_name(d: Duplicates) -> &'static str {
    match d {
        Duplicates::Skip => "skip",
        Duplicates::Queue => "queue",
        Duplicates::CancelQueued => "cancel-queued",
        Duplicates::CancelRunning => "cancel-running",
    }
}

/// The name the policy writes for a `misfire` value.
pub fn misfire_name(m: Misfire) -> &'static str {
    match m {
        Misfire::RunOnce => "run-once",
        Misfire::Skip => "skip",
    }
}

impl ScheduleRequest {
    /// The policy's raw form of this schedule (durations as `"<ms>ms"` strings), to be
    /// validated like a `[[schedule]]` table.
    ///
    /// # Errors
    /// A negative or non-finite number of seconds, naming its field.
    pub fn to_raw(&self) -> Result<RawSchedule, ScheduleFieldError> {
        let j = &self.job;
        Ok(RawSchedule {
            name: self.name.clone(),
            when: self.when.clone(),
            job: RawJob {
                kind: j.kind.clone(),
                attrs: j.attrs.clone(),
                priority: j.priority,
                node: j.node.clone(),
                node_selector: j.node_selector.clone(),
                executor: j.executor.map(|e| {
                    match e {
                        Executor::Client => "client",
                        Executor::Agent => "agent",
                    }
                    .to_string()
                }),
                cost: j
                    .cost
                    .iter()
                    .map(|(k, &v)| (k.clone(), i64::try_from(v).unwrap_or(i64::MAX)))
                    .collect(),
                two_stage: j.two_stage,
                max_wait: duration("job.max_wait_s", j.max_wait_s)?,
                max_run: duration("job.max_run_s", j.max_run_s)?,
            },
            duplicates: self.duplicates.clone(),
            misfire: self.misfire.clone(),
            max_start_delay: duration("max_start_delay_s", self.max_start_delay_s)?,
            jitter: duration("jitter_s", self.jitter_s)?,
            retry: match self.retry {
                Some(r) => Some(RawRetry {
                    times: Some(i64::from(r.times)),
                    interval: duration("retry.interval_s", Some(r.interval_s))?,
                }),
                None => None,
            },
            after: self.after.clone(),
        })
    }

    /// The request that describes a validated schedule (how the API shows policy ones).
    pub fn from_spec(s: &ScheduleSpec) -> ScheduleRequest {
        let t = &s.job;
        ScheduleRequest {
            name: s.name.clone(),
            when: s.when.clone(),
            job: ScheduleJob {
                kind: t.kind.clone(),
                attrs: t.attrs.clone(),
                priority: t.priority,
                node: t.node.clone(),
                node_selector: t.node_selector.clone(),
                executor: t.executor,
                cost: t.cost.clone(),
                two_stage: t.two_stage,
                max_wait_s: secs(t.max_wait),
                max_run_s: secs(t.max_run),
            },
            duplicates: Some(duplicates_name(s.duplicates).into()),
            misfire: Some(misfire_name(s.misfire).into()),
            max_start_delay_s: secs(s.max_start_delay),
            jitter_s: secs(s.jitter),
            retry: s.retry.map(|r| ScheduleRetry {
                times: r.times,
                interval_s: r.interval.as_secs_f64(),
            }),
            after: s.after.clone(),
        }
    }
}

/// One planned time of a schedule and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleRunView {
    /// The planned time (RFC 3339).
    pub planned: String,
    /// The job submitted for it; `null` when the time was skipped.
    pub job: Option<u64>,
    /// The job's current state (`null` when skipped, or when retention deleted the job).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schema::JobStateSchema>))]
    pub state: Option<JobState>,
    /// Whether the planned time was skipped (no job).
    pub skipped: bool,
    /// Why it was skipped, or what else happened (a previous run cancelled).
    pub note: Option<String>,
    /// When it was decided (RFC 3339).
    pub at: String,
}

/// A schedule as `GET /v1/schedules[/{name}]` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleView {
    /// Name.
    pub name: String,
    /// Its expression.
    pub when: String,
    /// `policy` (from the policy document; change it there) or `api`.
    pub source: String,
    /// The zone of times without one in `when` (the server's local zone).
    pub zone: String,
    /// The job each run submits.
    pub job: ScheduleJob,
    /// `skip`, `queue`, `cancel-queued` or `cancel-running`.
    pub duplicates: String,
    /// `run-once` or `skip`.
    pub misfire: String,
    /// Start delay bound, seconds.
    pub max_start_delay_s: Option<f64>,
    /// Jitter, seconds.
    pub jitter_s: Option<f64>,
    /// Retries of failed runs.
    pub retry: Option<ScheduleRetry>,
    /// The schedule whose latest run planned at or before each run it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Created (or first seen in the policy).
    pub created_at: String,
    /// The latest planned time handled.
    pub last_planned: Option<String>,
    /// The latest run (submitted or skipped), with its job's state.
    pub last_run: Option<ScheduleRunView>,
    /// The next planned time; `null` when it never elapses again or is suspended.
    pub next: Option<String>,
    /// Why the schedule is suspended (plans no runs), when it is.
    pub error: Option<String>,
    /// Planned times, newest first (`GET /v1/schedules/{name}` only; `?limit=N`, default 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ScheduleRunView>,
}

/// `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleList {
    /// Every schedule, by name.
    pub schedules: Vec<ScheduleView>,
}

/// `lockgate schedule next -o json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NextTimes {
    /// The expression.
    pub expr: String,
    /// The next planned times, RFC 3339 UTC.
    pub next: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_becomes_the_policy_form_and_back() {
        let req: ScheduleRequest = serde_json::from_value(serde_json::json!({
            "name": "verify-ds1", "when": "sat 03:00",
            "job": {"kind": "verify", "attrs": {"datastore": "ds1"}, "priority": -1},
            "max_start_delay_s": 7200, "jitter_s": 0.5,
            "retry": {"times": 3, "interval_s": 1800}
        }))
        .unwrap();
        let raw = req.to_raw().unwrap();
        assert_eq!(raw.max_start_delay.as_deref(), Some("7200000ms"));
        assert_eq!(raw.jitter.as_deref(), Some("500ms"));
        let mut doc = lockgate_core::policy::raw::RawPolicy::default();
        doc.schedule.push(raw);
        let p = lockgate_core::Policy::from_raw(doc).unwrap();
        let back = ScheduleRequest::from_spec(&p.schedules[0]);
        assert_eq!(back.max_start_delay_s, Some(7200.0));
        assert_eq!(back.retry.unwrap().interval_s, 1800.0);
        assert_eq!(back.duplicates.as_deref(), Some("skip"));
        let bad = ScheduleRequest {
            jitter_s: Some(-1.0),
            ..req
        };
        assert_eq!(bad.to_raw().unwrap_err().field, "jitter_s");
    }
}
