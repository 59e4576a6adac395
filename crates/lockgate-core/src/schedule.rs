//! Periodic schedules (design `schedules.md`): which runs are due, and what each becomes.
//!
//! Pure planning; the server owns the clock, the store and the engine. A schedule's run is
//! an ordinary job owned by `schedule:<name>` with the idempotency key
//! `<name>/<planned time>`, so a run is never submitted twice, across restarts and replicas.
//!
//! Invariants:
//! - every planned time in `(last, now]` yields exactly one [`Planned`] (a submit or a
//!   recorded skip), except that under `misfire = "run-once"` the times missed while the
//!   server was down collapse into one catch-up run for the latest of them (a time is
//!   missed when it lies before the server came up, [`Runner::plan`], or is more than
//!   [`MISFIRE_GRACE_MS`] old);
//! - several runs decided in one call are checked against each other as against a live
//!   previous run, so `duplicates` holds even when the caller was late;
//! - jitter is a deterministic function of the schedule's name and the planned time, so
//!   every replica computes the same start.

use crate::calendar::{CalendarError, Schedule as Expr};
use crate::explain::rfc3339;
use crate::job::{JobId, JobSpec, JobState, RetrySpec};
use crate::policy::{Duplicates, Misfire, ScheduleSpec};
use crate::time::Timestamp;

/// A planned time counts as missed (a misfire) when it is this much older than `now`.
pub const MISFIRE_GRACE_MS: u64 = 60_000;

/// At most this many planned times are looked at in one call (a very frequent schedule
/// after a long downtime is summarised, not replayed).
const MAX_DUE: usize = 10_000;

/// What to do for one planned time.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Submit this job; cancel `cancel` first (duplicates = cancel-queued/cancel-running).
    Submit {
        /// The run's job.
        spec: Box<JobSpec>,
        /// The previous run to cancel.
        cancel: Option<JobId>,
    },
    /// Record the planned time as skipped.
    Skip {
        /// Why, in words.
        reason: String,
    },
}

/// One planned time and what happens to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The planned time.
    pub planned: Timestamp,
    /// What to do.
    pub action: Action,
}

/// A schedule with its parsed expression.
#[derive(Debug, Clone)]
pub struct Runner {
    spec: ScheduleSpec,
    expr: Expr,
    zone: String,
}

impl Runner {
    /// Prepares a validated schedule; `zone` is the server's local zone for expressions
    /// without their own.
    ///
    /// # Errors
    /// The expression does not parse (a validated policy never gets here with one).
    pub fn new(spec: ScheduleSpec, zone: &str) -> Result<Runner, CalendarError> {
        let expr = Expr::parse(&spec.when)?;
        Ok(Runner {
            spec,
            expr,
            zone: zone.to_string(),
        })
    }

    /// The schedule.
    pub fn spec(&self) -> &ScheduleSpec {
        &self.spec
    }

    /// The owner of its runs.
    pub fn owner(&self) -> String {
        format!("schedule:{}", self.spec.name)
    }

    /// The next planned time strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        self.expr
            .next_after(after.0, &self.zone)
            .ok()
            .flatten()
            .map(Timestamp)
    }

    /// The idempotency key of the run planned at `planned`.
    pub fn run_key(&self, planned: Timestamp) -> String {
        format!("{}/{}", self.spec.name, rfc3339(planned))
    }

    /// Deterministic jitter for a planned time, in `[0, jitter)`.
    pub fn jitter_ms(&self, planned: Timestamp) -> u64 {
        let span = self.spec.jitter.map_or(0, |j| j.as_millis() as u64);
        if span == 0 {
            return 0;
        }
        // FNV-1a over the name and the planned time.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.spec.name.bytes().chain(planned.0.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h % span
    }

    /// The job a run planned at `planned` submits. It is an `agent` job (a validated
    /// schedule has no other executor: nobody would hold a client job the server
    /// submitted), on its pinned node, on the nodes its selector matches, or else on any
    /// node (`node_selector = ""`) whose agent has a handler for its kind.
    pub fn job_spec(&self, planned: Timestamp) -> JobSpec {
        let t = &self.spec.job;
        let jitter = self.jitter_ms(planned);
        let any_node = (t.node.is_none() && t.node_selector.is_none()).then(String::new);
        JobSpec {
            kind: t.kind.clone(),
            attrs: t.attrs.clone(),
            owner: self.owner(),
            priority: t.priority,
            node: t.node.clone(),
            node_selector: t.node_selector.clone().or(any_node),
            executor: Some(crate::policy::Executor::Agent),
            cost: (!t.cost.is_empty()).then(|| t.cost.clone()),
            two_stage: t.two_stage,
            not_before: (jitter > 0).then_some(Timestamp(planned.0 + jitter)),
            max_wait_ms: self
                .spec
                .max_start_delay
                .or(t.max_wait)
                .map(|d| d.as_millis() as u64 + jitter),
            max_run_ms: t.max_run.map(|d| d.as_millis() as u64),
            idempotency_key: Some(self.run_key(planned)),
            retry: self.spec.retry.map(|r| RetrySpec {
                times: r.times,
                interval_ms: r.interval.as_millis() as u64,
            }),
            ..JobSpec::default()
        }
    }

    /// The runs planned in `(last, now]`. `previous` is the last run's job and its state
    /// while it is still queued or admitted. A planned time counts as missed (a misfire)
    /// when it is more than [`MISFIRE_GRACE_MS`] older than `now`.
    pub fn due(
        &self,
        last: Timestamp,
        now: Timestamp,
        previous: Option<(JobId, JobState)>,
    ) -> Vec<Planned> {
        self.plan(last, now, Timestamp(0), previous)
    }

    /// As [`Runner::due`], except that every planned time at or before `down_until` counts
    /// as missed whatever its age: the server passes the instant it came up, so the times
    /// that passed while it was down are misfires even after a downtime of seconds.
    ///
    /// When several runs fall in one call, each is decided against the one submitted before
    /// it: under `skip` the later ones are skipped, under `cancel-queued` and
    /// `cancel-running` the earlier one is superseded (recorded as skipped, never
    /// submitted), under `queue` all are submitted.
    pub fn plan(
        &self,
        last: Timestamp,
        now: Timestamp,
        down_until: Timestamp,
        previous: Option<(JobId, JobState)>,
    ) -> Vec<Planned> {
        let mut times = Vec::new();
        let mut t = last;
        while let Some(next) = self.next_after(t).filter(|&n| n <= now) {
            times.push(next);
            t = next;
            if times.len() >= MAX_DUE {
                break;
            }
        }
        let (missed, on_time): (Vec<Timestamp>, Vec<Timestamp>) = times
            .into_iter()
            .partition(|p| *p <= down_until || now.since(*p) > MISFIRE_GRACE_MS);
        let mut out = Vec::new();
        let mut runs: Vec<Timestamp> = Vec::new();
        match self.spec.misfire {
            Misfire::RunOnce => {
                let catch_up = if on_time.is_empty() {
                    missed.last().copied()
                } else {
                    None
                };
                for &p in &missed {
                    if Some(p) != catch_up {
                        out.push(Planned {
                            planned: p,
                            action: Action::Skip {
                                reason:
                                    "missed while the server was down; one catch-up run covers it"
                                        .into(),
                            },
                        });
                    }
                }
                runs.extend(catch_up);
            }
            Misfire::Skip => {
                for &p in &missed {
                    out.push(Planned {
                        planned: p,
                        action: Action::Skip {
                            reason: "missed while the server was down (misfire = skip)".into(),
                        },
                    });
                }
            }
        }
        runs.extend(on_time);
        // The run submitted earlier in this call, by its index in `out`.
        let mut submitted: Option<usize> = None;
        for p in runs {
            let action = match submitted {
                None => self.decide(p, previous),
                Some(i) => self.decide_after(p, &mut out[i]),
            };
            if let Action::Submit { .. } = action {
                submitted = Some(out.len());
            }
            out.push(Planned { planned: p, action });
        }
        out.sort_by_key(|p| p.planned);
        out
    }

    /// Decides a run when an earlier run of the same call was submitted (and so is still
    /// queued); may turn that earlier run into a skip.
    fn decide_after(&self, planned: Timestamp, earlier: &mut Planned) -> Action {
        let word = duplicates_name(self.spec.duplicates);
        match self.spec.duplicates {
            Duplicates::Queue => Action::Submit {
                spec: Box::new(self.job_spec(planned)),
                cancel: None,
            },
            Duplicates::Skip => Action::Skip {
                reason: format!(
                    "previous run (planned at {}) is still queued (duplicates = {word})",
                    rfc3339(earlier.planned)
                ),
            },
            Duplicates::CancelQueued | Duplicates::CancelRunning => {
                let superseded = Action::Skip {
                    reason: format!(
                        "superseded by the run planned at {} before it was submitted (duplicates = {word})",
                        rfc3339(planned)
                    ),
                };
                let cancel = match std::mem::replace(&mut earlier.action, superseded) {
                    Action::Submit { cancel, .. } => cancel,
                    Action::Skip { .. } => None,
                };
                Action::Submit {
                    spec: Box::new(self.job_spec(planned)),
                    cancel,
                }
            }
        }
    }

    fn decide(&self, planned: Timestamp, previous: Option<(JobId, JobState)>) -> Action {
        let submit = |cancel| Action::Submit {
            spec: Box::new(self.job_spec(planned)),
            cancel,
        };
        let Some((id, state)) = previous.filter(|(_, s)| *s == JobState::Queued || s.is_admitted())
        else {
            return submit(None);
        };
        let word = if state == JobState::Queued {
            "queued"
        } else {
            "running"
        };
        match self.spec.duplicates {
            Duplicates::Queue => submit(None),
            Duplicates::CancelRunning => submit(Some(id)),
            Duplicates::CancelQueued if state == JobState::Queued => submit(Some(id)),
            Duplicates::Skip | Duplicates::CancelQueued => Action::Skip {
                reason: format!(
                    "previous run (job {id}) is still {word} (duplicates = {})",
                    duplicates_name(self.spec.duplicates)
                ),
            },
        }
    }
}

/// Why a schedule's `after` cannot stand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AfterError {
    /// It names no schedule.
    #[error("no schedule is named {0:?}, expected the name of another schedule{1}")]
    Unknown(String, &'static str),
    /// It names the schedule itself.
    #[error("schedule {0:?} cannot wait for its own runs, expected the name of another schedule")]
    Itself(String),
    /// Following `after` from the schedule comes back to it: the names, in order, the first
    /// repeated at the end.
    #[error("schedules {} wait for each other in a cycle, so none could ever run; expected a chain of `after` that ends", cycle_text(.0))]
    Cycle(Vec<String>),
}

fn cycle_text(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    quoted.join(" -> ")
}

/// Checks the `after` of schedule `name` among schedules where `after_of(s)` is `Some(
/// Some(t))` when `s` exists and names `t`, `Some(None)` when it exists and names none, and
/// `None` when there is no schedule `s`. `scope` ends the unknown-name message (`" in this
/// policy"`).
///
/// The one rule for a schedule's name, a policy's `[[schedule]]` and an API schedule alike,
/// in words for errors. A name is a path segment (`/v1/schedules/{name}`) and the first
/// part of its runs' idempotency keys (`<name>/<planned time>`), so it holds no `/`.
pub const NAME_RULE: &str = "1 to 64 letters, digits or . _ : @ -";

/// Whether `name` may name a schedule ([`NAME_RULE`]).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@-".contains(c))
}

/// Each schedule names at most one other, so the schedules form chains; following the one
/// from `name` either ends, runs into a cycle that does not hold `name` (that cycle is the
/// error of its own members), or comes back to `name`: at most one step per schedule.
///
/// # Errors
/// The name it gives is unknown or its own, or its chain comes back to it.
pub fn check_after<'a>(
    name: &'a str,
    after_of: impl Fn(&str) -> Option<Option<&'a str>>,
    count: usize,
    scope: &'static str,
) -> Result<(), AfterError> {
    let Some(Some(first)) = after_of(name) else {
        return Ok(());
    };
    if first == name {
        return Err(AfterError::Itself(name.to_string()));
    }
    if after_of(first).is_none() {
        return Err(AfterError::Unknown(first.to_string(), scope));
    }
    let mut chain = vec![name.to_string()];
    let mut at = first;
    for _ in 0..count {
        chain.push(at.to_string());
        if at == name {
            return Err(AfterError::Cycle(chain));
        }
        match after_of(at) {
            Some(Some(next)) => at = next,
            _ => return Ok(()),
        }
    }
    Ok(())
}

fn duplicates_name(d: Duplicates) -> &'static str {
    match d {
        Duplicates::Skip => "skip",
        Duplicates::Queue => "queue",
        Duplicates::CancelQueued => "cancel-queued",
        Duplicates::CancelRunning => "cancel-running",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use std::collections::BTreeMap;

    fn runner(extra: &str) -> Runner {
        runner_when("*:0/15", extra)
    }

    fn runner_when(when: &str, extra: &str) -> Runner {
        let text = format!("[[schedule]]\nname = \"verify-ds1\"\nwhen = \"{when}\"\njob = {{ kind = \"verify\", attrs = {{ datastore = \"ds1\" }} }}\n{extra}");
        let policy = Policy::from_toml(&text, None).unwrap();
        Runner::new(policy.schedules[0].clone(), "UTC").unwrap()
    }

    const T0: u64 = 1_796_083_200_000; // 2026-12-01T00:00:00Z

    #[test]
    fn a_schedule_name_is_a_path_segment() {
        assert!(valid_name("verify-ds1") && valid_name("a.b_c:d@e-f"));
        assert!(!valid_name("a/b") && !valid_name("") && !valid_name("a b"));
        assert!(valid_name(&"x".repeat(64)) && !valid_name(&"x".repeat(65)));
    }

    #[test]
    fn a_run_is_an_agent_job_on_any_node_unless_it_names_its_placement() {
        use crate::policy::Executor;
        let placement = |job: &str| {
            let text = format!("[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = {job}\n");
            let policy = Policy::from_toml(&text, None).unwrap();
            let spec = Runner::new(policy.schedules[0].clone(), "UTC")
                .unwrap()
                .job_spec(Timestamp(T0));
            (spec.executor, spec.node, spec.node_selector)
        };
        let agent = Some(Executor::Agent);
        assert_eq!(
            placement("{ kind = \"backup\" }"),
            (agent, None, Some(String::new()))
        );
        assert_eq!(
            placement("{ kind = \"backup\", node = \"db-1\" }"),
            (agent, Some("db-1".into()), None)
        );
        assert_eq!(
            placement("{ kind = \"backup\", node_selector = \"zone=eu\", executor = \"agent\" }"),
            (agent, None, Some("zone=eu".into()))
        );
    }

    #[test]
    fn runs_are_keyed_by_schedule_and_planned_time() {
        let r = runner("");
        let due = r.due(Timestamp(T0), Timestamp(T0 + 15 * 60_000), None);
        assert_eq!(due.len(), 1);
        let Action::Submit { spec, .. } = &due[0].action else {
            panic!("{due:?}")
        };
        assert_eq!(
            spec.idempotency_key.as_deref(),
            Some("verify-ds1/2026-12-01T00:15:00Z")
        );
        assert_eq!(spec.owner, "schedule:verify-ds1");
        assert_eq!(
            r.next_after(Timestamp(T0)),
            Some(Timestamp(T0 + 15 * 60_000))
        );
    }

    #[test]
    fn duplicates_decide_what_happens_to_a_live_previous_run() {
        let at = Timestamp(T0 + 15 * 60_000);
        let kinds = |extra: &str, state| {
            let due = runner(extra).due(Timestamp(T0), at, Some((7, state)));
            match &due[0].action {
                Action::Skip { .. } => "skip".to_string(),
                Action::Submit { cancel, .. } => format!("submit cancel={cancel:?}"),
            }
        };
        assert_eq!(kinds("", JobState::Running), "skip");
        assert_eq!(
            kinds("duplicates = \"queue\"", JobState::Running),
            "submit cancel=None"
        );
        assert_eq!(
            kinds("duplicates = \"cancel-queued\"", JobState::Queued),
            "submit cancel=Some(7)"
        );
        assert_eq!(
            kinds("duplicates = \"cancel-queued\"", JobState::Running),
            "skip"
        );
        assert_eq!(
            kinds("duplicates = \"cancel-running\"", JobState::Running),
            "submit cancel=Some(7)"
        );
        assert_eq!(kinds("", JobState::Succeeded), "submit cancel=None");
    }

    #[test]
    fn misfire_run_once_submits_one_catch_up_and_skip_none() {
        let down_until = Timestamp(T0 + 50 * 60_000); // three planned times missed
        let once = runner("").due(Timestamp(T0), down_until, None);
        let submits: Vec<_> = once
            .iter()
            .filter(|p| matches!(p.action, Action::Submit { .. }))
            .collect();
        assert_eq!((once.len(), submits.len()), (3, 1));
        assert_eq!(submits[0].planned, Timestamp(T0 + 45 * 60_000));
        let skip = runner("misfire = \"skip\"").due(Timestamp(T0), down_until, None);
        assert!(skip.iter().all(|p| matches!(p.action, Action::Skip { .. })));
        assert_eq!(skip.len(), 3);
    }

    #[test]
    fn times_before_the_restart_are_misfires_whatever_their_age() {
        // Down from T0 to T0 + 31 min: the times at :15 and :30 passed while it was down.
        let up = Timestamp(T0 + 31 * 60_000);
        let once = runner("").plan(Timestamp(T0), up, up, None);
        let kinds: Vec<_> = once
            .iter()
            .map(|p| matches!(p.action, Action::Submit { .. }))
            .collect();
        assert_eq!(
            kinds,
            [false, true],
            "one catch-up run, for the latest time"
        );
        let skip = runner("misfire = \"skip\"").plan(Timestamp(T0), up, up, None);
        assert_eq!(skip.len(), 2);
        assert!(skip.iter().all(|p| matches!(p.action, Action::Skip { .. })));
        // Times within the grace, with no restart: both on time.
        let late = runner_when("*:*:0/20", "duplicates = \"queue\"").due(
            Timestamp(T0),
            Timestamp(T0 + 40_001),
            None,
        );
        assert_eq!(late.len(), 2);
        assert!(late
            .iter()
            .all(|p| matches!(p.action, Action::Submit { .. })));
    }

    #[test]
    fn several_runs_in_one_call_respect_duplicates_among_themselves() {
        let now = Timestamp(T0 + 40_001); // :20 and :40 both on time
        let decide = |extra: &str| -> Vec<String> {
            runner_when("*:*:0/20", extra)
                .due(Timestamp(T0), now, Some((7, JobState::Queued)))
                .iter()
                .map(|p| match &p.action {
                    Action::Skip { reason } => format!("skip: {reason}"),
                    Action::Submit { cancel, .. } => format!("submit cancel={cancel:?}"),
                })
                .collect()
        };
        let skip = decide("");
        assert!(skip.iter().all(|a| a.starts_with("skip")), "{skip:?}");
        let queue = decide("duplicates = \"queue\"");
        assert_eq!(queue, ["submit cancel=None", "submit cancel=None"]);
        let cancel = decide("duplicates = \"cancel-queued\"");
        assert!(
            cancel[0].starts_with("skip: superseded by the run planned at 2026-12-01T00:00:40Z"),
            "{cancel:?}"
        );
        assert_eq!(cancel[1], "submit cancel=Some(7)");
        // Without a live previous run, the first is submitted and the second skipped.
        let fresh = runner_when("*:*:0/20", "").due(Timestamp(T0), now, None);
        assert!(matches!(fresh[0].action, Action::Submit { .. }));
        let Action::Skip { reason } = &fresh[1].action else {
            panic!("{fresh:?}")
        };
        assert!(
            reason.contains("planned at 2026-12-01T00:00:20Z"),
            "{reason}"
        );
    }

    #[test]
    fn after_refuses_unknown_names_itself_and_cycles() {
        let graph: BTreeMap<&str, Option<&str>> = [
            ("backup", None),
            ("verify", Some("backup")),
            ("a", Some("b")),
            ("b", Some("c")),
            ("c", Some("a")),
            ("d", Some("a")),
            ("self", Some("self")),
            ("typo", Some("bakup")),
        ]
        .into();
        let check = |n| check_after(n, |s| graph.get(s).copied(), graph.len(), "");
        assert_eq!(check("verify"), Ok(()));
        assert_eq!(check("backup"), Ok(()));
        assert_eq!(check("d"), Ok(()), "the cycle is a's, b's and c's error");
        assert_eq!(check("self"), Err(AfterError::Itself("self".into())));
        assert_eq!(check("typo"), Err(AfterError::Unknown("bakup".into(), "")));
        let Err(e) = check("a") else { panic!() };
        assert_eq!(
            e.to_string(),
            "schedules \"a\" -> \"b\" -> \"c\" -> \"a\" wait for each other in a cycle, so none could ever run; expected a chain of `after` that ends"
        );
    }

    #[test]
    fn jitter_and_start_delay_shape_the_job() {
        let r = runner(
            "jitter = \"5m\"\nmax_start_delay = \"2h\"\nretry = { times = 3, interval = \"30m\" }",
        );
        let p = Timestamp(T0 + 15 * 60_000);
        let spec = r.job_spec(p);
        let j = r.jitter_ms(p);
        assert!(j < 300_000);
        assert_eq!(j, r.jitter_ms(p), "deterministic");
        assert_eq!(spec.not_before, (j > 0).then_some(Timestamp(p.0 + j)));
        assert_eq!(spec.max_wait_ms, Some(7_200_000 + j));
        assert_eq!(
            spec.retry,
            Some(RetrySpec {
                times: 3,
                interval_ms: 1_800_000
            })
        );
    }
}
