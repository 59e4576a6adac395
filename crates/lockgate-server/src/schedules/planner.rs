//! Schedules in the event loop (design `schedules.md`): planning runs at their planned
//! times, their history and their state (the API operations are in `ops.rs`).
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

use super::{taken_message, taken_names};
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::policy::PolicySource;
use lockgate_api::ScheduleRequest;
use lockgate_core::engine::SubmitError;
use lockgate_core::job::JobId;
use lockgate_core::policy::{PolicyError, ScheduleSpec};
use lockgate_core::schedule::{Action, Runner};
use lockgate_core::{Policy, Timestamp};
use lockgate_store::{ScheduleRecord, ScheduleRun, ScheduleSource as Source};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One schedule and its state.
#[derive(Debug)]
pub(crate) struct Sched {
    pub(super) source: Source,
    /// The creation request (API schedules).
    pub(super) request: Option<ScheduleRequest>,
    /// `None` while suspended (see `error`).
    pub(super) runner: Option<Runner>,
    /// Why it is suspended: it does not validate under the active policy.
    pub(super) error: Option<String>,
    pub(super) created_at: Timestamp,
    pub(super) last_planned: Timestamp,
    pub(super) last_job: Option<JobId>,
    pub(super) last_run: Option<ScheduleRun>,
    /// Cached `runner.next_after(last_planned)`.
    pub(super) next: Option<Timestamp>,
    /// Times at or before this passed while the server was down.
    pub(super) down_until: Timestamp,
}

impl Sched {
    pub(super) fn new(source: Source, runner: Option<Runner>, now: Timestamp) -> Sched {
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

    pub(super) fn refresh_next(&mut self) {
        self.next = self
            .runner
            .as_ref()
            .and_then(|r| r.next_after(self.last_planned));
    }

    pub(super) fn record(&self, name: &str) -> ScheduleRecord {
        ScheduleRecord {
            name: name.to_string(),
            source: self.source,
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
    pub(super) zone: String,
    pub(super) by_name: BTreeMap<String, Sched>,
    /// The policy digest the policy schedules were last taken from.
    pub(super) synced_digest: String,
    /// Planned times submitted / skipped since start, by schedule (metrics).
    pub(super) submitted: BTreeMap<String, u64>,
    pub(super) skipped: BTreeMap<String, u64>,
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
            if rec.source == Source::Api {
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
                    PolicySource::File(p) => Some(p.display().to_string()),
                    PolicySource::Store | PolicySource::Database { .. } => {
                        Some("<stored policy>".into())
                    }
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
            Some((i, name)) => Err(ApiError::new(
                lockgate_api::ErrorCode::ScheduleExists,
                taken_message(&name),
            )
            .field(format!("schedule[{i}].name"))),
            None => Ok(()),
        }
    }

    /// The earliest next planned time of any active schedule.
    /// Every planned run of the active schedules in `(now, until]` (at most `max`, earliest
    /// first): what a forecast submits as it plays time forward. A suspended schedule plans
    /// nothing.
    pub(crate) fn planned_runs(
        &self,
        now: Timestamp,
        until: Timestamp,
        max: usize,
    ) -> Vec<(String, Timestamp, lockgate_core::JobSpec)> {
        let mut out = Vec::new();
        for (name, s) in &self.schedules.by_name {
            let Some(runner) = &s.runner else { continue };
            let mut at = now;
            while let Some(t) = runner.next_after(at).filter(|t| *t <= until) {
                if out.len() >= max {
                    break;
                }
                let spec = runner.job_spec(t);
                out.push((name.clone(), spec.not_before.unwrap_or(t), spec));
                at = t;
            }
        }
        out.sort_by_key(|(_, t, _)| *t);
        out.truncate(max);
        out
    }

    /// The zone of times without one (schedules, deadlines).
    pub(crate) fn local_zone(&self) -> &str {
        &self.schedules.zone
    }

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
        self.drop_gone_schedules(&wanted, &mut stored);
        self.follow_policy_schedules(&wanted, &mut stored, &zone, now);
        self.recheck_api_schedules(&policy, &zone, now);
    }

    /// Removes the policy schedules (loaded or stored) the policy no longer has.
    fn drop_gone_schedules(
        &mut self,
        wanted: &BTreeMap<&str, &ScheduleSpec>,
        stored: &mut BTreeMap<String, Sched>,
    ) {
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
    }

    /// Adds the policy's new schedules (with their stored state, if any) and gives changed
    /// ones their new expression; an unchanged schedule is left as it is.
    fn follow_policy_schedules(
        &mut self,
        wanted: &BTreeMap<&str, &ScheduleSpec>,
        stored: &mut BTreeMap<String, Sched>,
        zone: &str,
        now: Timestamp,
    ) {
        for (&name, &spec) in wanted {
            let runner = match Runner::new(spec.clone(), zone) {
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
    }

    /// Validates every API schedule again under `policy`: suspends those that no longer
    /// validate, resumes those that do again (planning from now, no catch-up).
    fn recheck_api_schedules(&mut self, policy: &Policy, zone: &str, now: Timestamp) {
        for (name, s) in self.schedules.by_name.iter_mut() {
            let Some(req) = s.request.as_ref().filter(|_| s.source == Source::Api) else {
                continue;
            };
            match crate::schedules::validate(req, policy)
                .map_err(|e| e.message)
                .and_then(|spec| Runner::new(spec, zone).map_err(|e| e.to_string()))
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
        for name in self.in_after_order(due) {
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
                    let (job, note) =
                        self.submit_planned(name, &runner, *spec, cancel, p.planned, now);
                    last_job = job.or(last_job);
                    (job, note)
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

    /// Submits the run of `runner` planned at `planned`: cancels the previous run first
    /// when `duplicates` says so, and waits for its `after` schedule's run. The job, and the
    /// history note.
    fn submit_planned(
        &mut self,
        name: &str,
        runner: &Runner,
        mut spec: lockgate_core::job::JobSpec,
        cancel: Option<JobId>,
        planned: Timestamp,
        now: Timestamp,
    ) -> (Option<JobId>, Option<String>) {
        let mut notes = Vec::new();
        if let Some(id) = cancel {
            if self.engine.cancel(id, false, now).is_ok() {
                notes.push(format!("cancelled the previous run (job {id})"));
            }
        }
        if let Some(target) = runner.spec().after.as_deref() {
            match self.after_job(target, planned) {
                Ok(dep) => {
                    spec.after.push(dep);
                    notes.push(format!("after {target}: waits for job {dep}"));
                }
                Err(why) => notes.push(why),
            }
        }
        match self.submit_run(&runner.owner(), spec, now) {
            Ok((id, existing)) => {
                if existing {
                    notes = vec![format!("already submitted as job {id}")];
                }
                (Some(id), (!notes.is_empty()).then(|| notes.join("; ")))
            }
            Err(message) => {
                tracing::error!("schedule {name:?}: run not submitted: {message}");
                (None, Some(format!("could not submit: {message}")))
            }
        }
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
