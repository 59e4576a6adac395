//! Schedules in the event loop (design `schedules.md`): planning runs at their planned
//! times, their history, and `GET/POST /v1/schedules`, `GET/DELETE /v1/schedules/{name}`.
//!
//! Planning is [`Runner::plan`] (pure, in `lockgate-core`); this module owns the clock, the
//! store and the engine around it.
//!
//! # Invariants
//! - **Exact wake-ups.** Every active schedule caches its next planned time;
//!   [`Loop::schedule_deadline`] is the earliest, and the loop sleeps until
//!   `min(engine deadline, housekeeping, schedule deadline)`: no polling tick.
//! - **No run is submitted twice.** A schedule's `last_planned` only grows, and it is
//!   written in the same store batch as the jobs its runs submitted (one transaction), so a
//!   crash loses both or neither. Runs carry the idempotency key `<name>/<planned time>`
//!   under the owner `schedule:<name>`; before submitting, the key is looked up in the
//!   engine and the store, so even a lost `last_planned` cannot produce a second job.
//! - **Misfires.** Times that passed while the server was down (before it came up, or more
//!   than a minute late) are misfires: `run-once` submits one catch-up run, `skip` none;
//!   every one of them is recorded in the history.
//! - **Names are unique across the policy and the API** (see `crate::schedules`).

use super::{json, ok, Answer, Loop, Reply};
use crate::auth::Principal;
use crate::error::ApiError;
use axum::http::StatusCode;
use lockgate_api::{ScheduleList, ScheduleRequest, ScheduleRunView, ScheduleView};
use lockgate_core::engine::SubmitError;
use lockgate_core::job::JobId;
use lockgate_core::policy::{PolicyError, ScheduleSpec};
use lockgate_core::schedule::{Action, Runner};
use lockgate_core::{Policy, Timestamp};
use lockgate_store::{ScheduleRecord, ScheduleRun};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Default number of history entries `GET /v1/schedules/{name}` shows.
const DEFAULT_HISTORY: usize = 50;
/// At most this many history entries in one answer.
const MAX_HISTORY: usize = 1000;

/// A schedule operation of the API.
#[derive(Debug)]
pub enum ScheduleOp {
    /// `POST /v1/schedules`.
    Create(Box<ScheduleRequest>),
    /// `GET /v1/schedules`.
    List,
    /// `GET /v1/schedules/{name}?limit=N`.
    Get(String, Option<usize>),
    /// `DELETE /v1/schedules/{name}`.
    Delete(String),
}

/// Where a schedule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Policy,
    Api,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Policy => "policy",
            Source::Api => "api",
        }
    }
}

/// One schedule and its state.
#[derive(Debug)]
struct Sched {
    source: Source,
    /// The creation request (API schedules).
    request: Option<ScheduleRequest>,
    /// `None` while suspended (see `error`).
    runner: Option<Runner>,
    /// Why it is suspended: it does not validate under the active policy.
    error: Option<String>,
    created_at: Timestamp,
    last_planned: Timestamp,
    last_job: Option<JobId>,
    last_run: Option<ScheduleRun>,
    /// Cached `runner.next_after(last_planned)`.
    next: Option<Timestamp>,
    /// Times at or before this passed while the server was down.
    down_until: Timestamp,
}

impl Sched {
    fn new(source: Source, runner: Option<Runner>, now: Timestamp) -> Sched {
        Sched {
            source,
            request: None,
            runner,
            error: None,
            created_at: now,
            last_planned: now,
            last_job: None,
            last_run: None,
            next: None,
            down_until: Timestamp(0),
        }
    }

    fn refresh_next(&mut self) {
        self.next = self
            .runner
            .as_ref()
            .and_then(|r| r.next_after(self.last_planned));
    }

    fn record(&self, name: &str) -> ScheduleRecord {
        ScheduleRecord {
            name: name.to_string(),
            source: self.source.as_str().into(),
            spec: self
                .request
                .as_ref()
                .map(|r| serde_json::to_string(r).expect("requests serialize")),
            last_planned: self.last_planned,
            last_job: self.last_job,
            created_at: self.created_at,
        }
    }
}

/// The loop's schedules.
#[derive(Debug, Default)]
pub struct Schedules {
    /// The zone of times without one.
    zone: String,
    by_name: BTreeMap<String, Sched>,
    /// The policy digest the policy schedules were last taken from.
    synced_digest: String,
    /// Planned times submitted / skipped since start, by schedule (metrics).
    submitted: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
}

/// A name the new policy takes from an API-created schedule, as a policy error.
fn taken_names(policy: &Policy, by_name: &BTreeMap<String, Sched>) -> Option<(usize, String)> {
    policy.schedules.iter().enumerate().find_map(|(i, s)| {
        by_name
            .get(&s.name)
            .filter(|x| x.source == Source::Api)
            .map(|_| (i, s.name.clone()))
    })
}

fn taken_message(name: &str) -> String {
    format!(
        "{name:?} is already the name of a schedule created through the API; rename this one, or remove the other first (lockgate schedule rm {name})"
    )
}

impl Loop {
    /// Takes the stored schedule state at start (after the engine was restored), follows
    /// the policy's schedules and handles the times that passed while the server was down.
    ///
    /// # Errors
    /// The policy names a schedule that was created through the API: nothing is started.
    pub fn load_schedules(
        &mut self,
        records: Vec<ScheduleRecord>,
        zone: String,
    ) -> Result<(), PolicyError> {
        let now = self.now();
        self.schedules.zone = zone;
        let mut policy_state = BTreeMap::new();
        for rec in records {
            let last_run = match self.store.schedule_runs(&rec.name, 1) {
                Ok(mut r) => r.pop(),
                Err(e) => {
                    tracing::warn!("schedule {:?}: cannot read its history: {e}", rec.name);
                    None
                }
            };
            let mut s = Sched::new(Source::Policy, None, now);
            s.created_at = rec.created_at;
            s.last_planned = rec.last_planned;
            s.last_job = rec.last_job;
            s.last_run = last_run;
            s.down_until = now;
            if rec.source == "api" {
                s.source = Source::Api;
                match rec
                    .spec
                    .as_deref()
                    .map(serde_json::from_str::<ScheduleRequest>)
                {
                    Some(Ok(req)) => s.request = Some(req),
                    other => {
                        tracing::error!(
                            "schedule {:?}: its stored definition cannot be read ({other:?}); it stays suspended",
                            rec.name
                        );
                        s.error = Some("its stored definition cannot be read".into());
                    }
                }
                self.schedules.by_name.insert(rec.name, s);
            } else {
                policy_state.insert(rec.name, s);
            }
        }
        if let Some((i, name)) = taken_names(self.engine.policy(), &self.schedules.by_name) {
            return Err(PolicyError {
                file: match &self.source {
                    super::PolicySource::File(p) => Some(p.display().to_string()),
                    super::PolicySource::Store => Some("<stored policy>".into()),
                },
                line: None,
                field: format!("schedule[{i}].name"),
                message: taken_message(&name),
            });
        }
        self.sync_schedules(policy_state, now);
        self.run_schedules(now);
        Ok(())
    }

    /// 409 when `policy` would take the name of an API-created schedule (`PUT /v1/policy`,
    /// SIGHUP).
    pub(crate) fn check_schedule_names(&self, policy: &Policy) -> Result<(), ApiError> {
        match taken_names(policy, &self.schedules.by_name) {
            Some((i, name)) => Err(ApiError::conflict("schedule_exists", taken_message(&name))
                .field(format!("schedule[{i}].name"))),
            None => Ok(()),
        }
    }

    /// The earliest next planned time of any active schedule.
    pub(crate) fn schedule_deadline(&self) -> Option<Timestamp> {
        self.schedules.by_name.values().filter_map(|s| s.next).min()
    }

    /// Follows a policy change, then plans every schedule whose next time has come. Called
    /// by the loop once per batch, before the commit.
    pub(crate) fn schedules_tick(&mut self, now: Timestamp) {
        if self.schedules.synced_digest != self.digest {
            self.sync_schedules(BTreeMap::new(), now);
        }
        self.run_schedules(now);
    }

    /// Makes the schedules follow the active policy: policy schedules added, changed (their
    /// state kept) or removed; API schedules checked again (a policy change may suspend or
    /// resume them). `stored` holds the stored state of policy schedules (at start).
    fn sync_schedules(&mut self, mut stored: BTreeMap<String, Sched>, now: Timestamp) {
        self.schedules.synced_digest = self.digest.clone();
        let policy = self.engine.policy().clone();
        let zone = self.schedules.zone.clone();
        let wanted: BTreeMap<&str, &ScheduleSpec> = policy
            .schedules
            .iter()
            .map(|s| (s.name.as_str(), s))
            .collect();
        let gone: Vec<String> = self
            .schedules
            .by_name
            .iter()
            .filter(|(n, s)| s.source == Source::Policy && !wanted.contains_key(n.as_str()))
            .map(|(n, _)| n.clone())
            .chain(
                stored
                    .keys()
                    .filter(|n| !wanted.contains_key(n.as_str()))
                    .cloned(),
            )
            .collect();
        for name in gone {
            self.schedules.by_name.remove(&name);
            stored.remove(&name);
            tracing::info!("schedule {name:?} left the policy");
            self.batch.removed_schedules.push(name);
        }
        for (name, spec) in wanted {
            let runner = match Runner::new(spec.clone(), &zone) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("schedule {name:?}: {e}");
                    continue;
                }
            };
            let s = match self.schedules.by_name.get_mut(name) {
                Some(s) if s.source == Source::Policy => s,
                Some(_) => continue, // an API schedule: refused before the policy applied
                None => {
                    let s = stored
                        .remove(name)
                        .unwrap_or_else(|| Sched::new(Source::Policy, None, now));
                    self.schedules.by_name.entry(name.to_string()).or_insert(s)
                }
            };
            if s.runner.as_ref().map(Runner::spec) != Some(spec) {
                if s.runner.is_some() {
                    // Changed: plan from now on; a new expression must not look like a
                    // downtime and catch up on times the old one never had.
                    s.last_planned = s.last_planned.max(now);
                }
                s.runner = Some(runner);
                s.refresh_next();
                self.batch.schedules.push(s.record(name));
            }
        }
        for (name, s) in self.schedules.by_name.iter_mut() {
            let Some(req) = s.request.as_ref().filter(|_| s.source == Source::Api) else {
                continue;
            };
            match crate::schedules::validate(req, &policy)
                .map_err(|e| e.message)
                .and_then(|spec| Runner::new(spec, &zone).map_err(|e| e.to_string()))
            {
                Ok(runner) => {
                    if s.runner.is_none() && s.error.is_some() {
                        // Resumed: plan from now, no catch-up for the suspended time.
                        tracing::info!("schedule {name:?} resumed");
                        s.last_planned = s.last_planned.max(now);
                        self.batch.schedules.push(s.record(name));
                    }
                    s.error = None;
                    s.runner = Some(runner);
                }
                Err(message) => {
                    if s.error.is_none() {
                        tracing::warn!("schedule {name:?} suspended: {message}");
                    }
                    s.error = Some(format!("suspended under the active policy: {message}"));
                    s.runner = None;
                }
            }
            s.refresh_next();
        }
    }

    /// Plans and applies every schedule whose next time is at or before `now`.
    fn run_schedules(&mut self, now: Timestamp) {
        let due: Vec<String> = self
            .schedules
            .by_name
            .iter()
            .filter(|(_, s)| s.next.is_some_and(|n| n <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            self.run_schedule(&name, now);
        }
        self.drain_events(now);
    }

    fn run_schedule(&mut self, name: &str, now: Timestamp) {
        let Some(s) = self.schedules.by_name.get(name) else {
            return;
        };
        let Some(runner) = s.runner.clone() else {
            return;
        };
        let previous = s
            .last_job
            .and_then(|id| self.engine.job(id))
            .map(|j| (j.id, j.state));
        let (last, down_until) = (s.last_planned, s.down_until);
        let owner = runner.owner();
        let mut last_job = s.last_job;
        let mut last_planned = last;
        let mut last_run = None;
        for p in runner.plan(last, now, down_until, previous) {
            let (job, note) = match p.action {
                Action::Skip { reason } => {
                    tracing::info!(
                        "schedule {name:?}: {} skipped: {reason}",
                        lockgate_api::time::format(p.planned)
                    );
                    (None, Some(reason))
                }
                Action::Submit { spec, cancel } => {
                    let mut note = None;
                    if let Some(id) = cancel {
                        if self.engine.cancel(id, false, now).is_ok() {
                            note = Some(format!("cancelled the previous run (job {id})"));
                        }
                    }
                    match self.submit_run(&owner, *spec, now) {
                        Ok((id, existing)) => {
                            if existing {
                                note = Some(format!("already submitted as job {id}"));
                            }
                            last_job = Some(id);
                            (Some(id), note)
                        }
                        Err(message) => {
                            tracing::error!("schedule {name:?}: run not submitted: {message}");
                            (None, Some(format!("could not submit: {message}")))
                        }
                    }
                }
            };
            let counter = if job.is_some() {
                &mut self.schedules.submitted
            } else {
                &mut self.schedules.skipped
            };
            *counter.entry(name.to_string()).or_default() += 1;
            let run = ScheduleRun {
                schedule: name.to_string(),
                planned: p.planned,
                job,
                note,
                at: now,
            };
            self.batch.schedule_runs.push(run.clone());
            last_planned = last_planned.max(p.planned);
            last_run = Some(run);
        }
        let s = self.schedules.by_name.get_mut(name).expect("still there");
        s.last_job = last_job;
        s.last_planned = last_planned;
        if last_run.is_some() {
            s.last_run = last_run;
        }
        s.refresh_next();
        self.batch.schedules.push(s.record(name));
    }

    /// Submits a run unless its idempotency key already names a job (live or finished):
    /// the job's id and whether it existed.
    fn submit_run(
        &mut self,
        owner: &str,
        spec: lockgate_core::job::JobSpec,
        now: Timestamp,
    ) -> Result<(JobId, bool), String> {
        if let Some(key) = spec.idempotency_key.as_deref() {
            if let Some(id) = self.engine.idempotent_job(owner, key) {
                return Ok((id, true));
            }
            match self.store.job_by_key(owner, key) {
                Ok(Some(j)) => return Ok((j.id, true)),
                Ok(None) => {}
                Err(e) => return Err(format!("store lookup of the run's key failed: {e}")),
            }
        }
        match self.engine.submit(spec, now) {
            Ok(s) => Ok((s.job.id, s.existing)),
            Err(SubmitError::Invalid { field, message }) => Err(format!("{field}: {message}")),
        }
    }

    /// Runs an API operation.
    pub(crate) fn schedule_op(&mut self, p: &Principal, op: ScheduleOp, now: Timestamp) -> Reply {
        use lockgate_api::Role;
        match op {
            ScheduleOp::Create(req) => {
                p.require(&[Role::Admin], "create schedules")?;
                self.schedule_create(*req, now)
            }
            ScheduleOp::Delete(name) => {
                p.require(&[Role::Admin], "remove schedules")?;
                self.schedule_delete(&name)
            }
            ScheduleOp::List => {
                let names: Vec<String> = self.schedules.by_name.keys().cloned().collect();
                let schedules = names
                    .iter()
                    .map(|n| self.schedule_view(n, 0))
                    .collect::<Result<_, _>>()?;
                ok(json(&ScheduleList { schedules }))
            }
            ScheduleOp::Get(name, limit) => {
                let limit = limit.unwrap_or(DEFAULT_HISTORY).min(MAX_HISTORY);
                ok(json(&self.schedule_view(&name, limit)?))
            }
        }
    }

    fn schedule_create(&mut self, req: ScheduleRequest, now: Timestamp) -> Reply {
        let spec = crate::schedules::validate(&req, self.engine.policy())?;
        if let Some(s) = self.schedules.by_name.get(&req.name) {
            let from = match s.source {
                Source::Policy => "in the policy",
                Source::Api => "created through the API",
            };
            return Err(ApiError::conflict(
                "schedule_exists",
                format!(
                    "a schedule named {:?} exists ({from}); choose another name, or remove it first",
                    req.name
                ),
            )
            .field("name"));
        }
        let runner = Runner::new(spec, &self.schedules.zone)
            .map_err(|e| ApiError::invalid("when", format!("when: {e}")))?;
        let name = req.name.clone();
        let mut s = Sched::new(Source::Api, Some(runner), now);
        s.request = Some(req);
        s.refresh_next();
        self.batch.schedules.push(s.record(&name));
        self.schedules.by_name.insert(name.clone(), s);
        tracing::info!("schedule {name:?} created");
        let view = self.schedule_view(&name, 0)?;
        Ok(Answer::Json(StatusCode::CREATED, json(&view)))
    }

    fn schedule_delete(&mut self, name: &str) -> Reply {
        let Some(s) = self.schedules.by_name.get(name) else {
            return Err(ApiError::not_found(format!("no schedule named {name:?}")));
        };
        if s.source == Source::Policy {
            let how = match &self.source {
                super::PolicySource::File(path) => format!(
                    "remove its [[schedule]] from {} and reload (SIGHUP or lockgate policy apply)",
                    path.display()
                ),
                super::PolicySource::Store => {
                    "remove its [[schedule]] from the policy (lockgate policy apply)".into()
                }
            };
            return Err(ApiError::conflict(
                "policy_schedule",
                format!("schedule {name:?} is part of the policy and cannot be removed through the API: {how}"),
            ));
        }
        self.schedules.by_name.remove(name);
        self.batch.removed_schedules.push(name.to_string());
        tracing::info!("schedule {name:?} removed");
        ok(serde_json::json!({ "removed": name }))
    }

    fn run_view(&mut self, r: &ScheduleRun) -> ScheduleRunView {
        let state = r.job.and_then(|id| self.find(id).ok()).map(|j| j.state);
        ScheduleRunView {
            planned: lockgate_api::time::format(r.planned),
            job: r.job,
            state,
            skipped: r.job.is_none(),
            note: r.note.clone(),
            at: lockgate_api::time::format(r.at),
        }
    }

    fn schedule_view(&mut self, name: &str, history: usize) -> Result<ScheduleView, ApiError> {
        let Some(s) = self.schedules.by_name.get(name) else {
            return Err(ApiError::not_found(format!("no schedule named {name:?}")));
        };
        let req = match (&s.runner, &s.request) {
            (Some(r), _) => ScheduleRequest::from_spec(r.spec()),
            (None, Some(req)) => req.clone(),
            (None, None) => ScheduleRequest {
                name: name.to_string(),
                ..ScheduleRequest::default()
            },
        };
        let (source, created_at, last_planned, next, error, last_run) = (
            s.source,
            s.created_at,
            s.last_planned,
            s.next,
            s.error.clone(),
            s.last_run.clone(),
        );
        let last_run = last_run.map(|r| self.run_view(&r));
        let mut runs = Vec::new();
        if history > 0 {
            for r in self.store.schedule_runs(name, history)? {
                runs.push(self.run_view(&r));
            }
        }
        Ok(ScheduleView {
            name: name.to_string(),
            when: req.when,
            source: source.as_str().into(),
            zone: self.schedules.zone.clone(),
            job: req.job,
            duplicates: req.duplicates.unwrap_or_else(|| "skip".into()),
            misfire: req.misfire.unwrap_or_else(|| "run-once".into()),
            max_start_delay_s: req.max_start_delay_s,
            jitter_s: req.jitter_s,
            retry: req.retry,
            created_at: lockgate_api::time::format(created_at),
            last_planned: (last_run.is_some()).then(|| lockgate_api::time::format(last_planned)),
            last_run,
            next: next.map(lockgate_api::time::format),
            error,
            history: runs,
        })
    }

    /// Appends the schedule counters to the metrics text.
    pub(crate) fn render_schedule_metrics(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP lockgate_schedules Schedules, by source.\n# TYPE lockgate_schedules gauge"
        );
        for source in [Source::Policy, Source::Api] {
            let n = self
                .schedules
                .by_name
                .values()
                .filter(|s| s.source == source)
                .count();
            let _ = writeln!(
                out,
                "lockgate_schedules{{source=\"{}\"}} {n}",
                source.as_str()
            );
        }
        let _ = writeln!(
            out,
            "# HELP lockgate_schedule_runs_total Planned times of schedules since start, by what became of them.\n# TYPE lockgate_schedule_runs_total counter"
        );
        for (result, map) in [
            ("submitted", &self.schedules.submitted),
            ("skipped", &self.schedules.skipped),
        ] {
            for (name, n) in map {
                let name = name.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = writeln!(
                    out,
                    "lockgate_schedule_runs_total{{schedule=\"{name}\",result=\"{result}\"}} {n}"
                );
            }
        }
    }
}
