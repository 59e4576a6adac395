//! The RPO tracker: every value of every `[[rpo]]` rule, and the deadlines at which one
//! becomes overdue. Pure: it is given `now` and never reads a clock, so its tests run in
//! virtual time (hours in microseconds).
//!
//! # Invariants
//! - **Deadlines in a min-heap.** A value's deadline is its last success (or, without one,
//!   its first job) plus its rule's `max_age`. Every change of a deadline pushes the new one;
//!   an entry whose time is no longer its value's deadline is stale and dropped when it
//!   comes to the top. [`Tracker::due`] therefore costs the entries that are due, never a
//!   scan of every value; the heap is rebuilt when stale entries outnumber the values.
//! - **One alert per crossing.** `alerting` is set by the transition that raises
//!   `rpo_alert` and cleared by the one that raises `rpo_cleared` (a success, or a new
//!   `max_age` that puts the deadline back in the future); it is stored with the value, so a
//!   restart raises nothing twice.
//! - **Values outlive their rule's edits.** Values are kept by rule name; a value whose rule
//!   is gone from the policy (or whose `per` keys changed) is kept but neither listed, nor
//!   checked, nor exported until a rule with that name and those keys is back.

use lockgate_core::job::{Job, JobState};
use lockgate_core::policy::RpoRule;
use lockgate_core::Timestamp;
use lockgate_store::RpoRecord;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// A value of a rule: its `per` keys with their values, in `per` order.
pub(crate) type Value = Vec<(String, String)>;

/// A crossing of a value's deadline, to be recorded as a server event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transition {
    /// The value became overdue (`rpo_alert`).
    Alert(RpoRecord),
    /// It is no longer overdue (`rpo_cleared`); the last success before the one that
    /// cleared it, if any.
    Cleared(RpoRecord, Option<Timestamp>),
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    rules: Vec<RpoRule>,
    values: BTreeMap<String, BTreeMap<Value, RpoRecord>>,
    heap: BinaryHeap<Reverse<(Timestamp, String, Value)>>,
}

/// When `r` becomes overdue under `rule`.
pub(crate) fn deadline(r: &RpoRecord, rule: &RpoRule) -> Timestamp {
    r.last_success
        .map_or(r.first_seen, |(t, _)| t)
        .plus(rule.max_age)
}

/// Whether `value` has the keys `rule` partitions by, in its order.
fn fits(rule: &RpoRule, value: &Value) -> bool {
    value.len() == rule.per.len() && value.iter().zip(&rule.per).all(|((k, _), p)| k == p.name())
}

/// The values comma-joined (the metrics' `value` label).
pub(crate) fn label(value: &Value) -> String {
    value
        .iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

impl Tracker {
    /// A tracker with the stored values (rules follow with [`Tracker::sync`]).
    pub(crate) fn load(records: Vec<RpoRecord>) -> Tracker {
        let mut t = Tracker::default();
        for r in records {
            t.values
                .entry(r.rule.clone())
                .or_default()
                .insert(r.value.clone(), r);
        }
        t
    }

    /// The rules of the active policy, with the values of each that fit it.
    pub(crate) fn rules(&self) -> impl Iterator<Item = (&RpoRule, Vec<&RpoRecord>)> {
        self.rules.iter().map(|rule| {
            let values = self
                .values
                .get(&rule.name)
                .into_iter()
                .flat_map(|m| m.values())
                .filter(|r| fits(rule, &r.value))
                .collect();
            (rule, values)
        })
    }

    fn rule(&self, name: &str) -> Option<&RpoRule> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// Whether `rules` are the ones it tracks.
    pub(crate) fn same_rules(&self, rules: &[RpoRule]) -> bool {
        self.rules == rules
    }

    /// Takes the policy's rules when they changed: rebuilds the heap, and clears the
    /// alerts a longer `max_age` (or a removed rule) ended. Cheap when nothing changed.
    pub(crate) fn sync(&mut self, rules: &[RpoRule], now: Timestamp) -> Vec<Transition> {
        if self.rules == rules {
            return Vec::new();
        }
        self.rules = rules.to_vec();
        let mut out = Vec::new();
        for rule in &self.rules {
            for r in self
                .values
                .get_mut(&rule.name)
                .into_iter()
                .flat_map(|m| m.values_mut())
            {
                if r.alerting && fits(rule, &r.value) && now < deadline(r, rule) {
                    r.alerting = false;
                    out.push(Transition::Cleared(r.clone(), r.last_success.map(|s| s.0)));
                }
            }
        }
        self.rebuild_heap();
        out
    }

    fn rebuild_heap(&mut self) {
        let mut heap = BinaryHeap::new();
        for rule in &self.rules {
            for r in self
                .values
                .get(&rule.name)
                .into_iter()
                .flat_map(|m| m.values())
            {
                if fits(rule, &r.value) && !r.alerting {
                    heap.push(Reverse((
                        deadline(r, rule),
                        rule.name.clone(),
                        r.value.clone(),
                    )));
                }
            }
        }
        self.heap = heap;
    }

    /// Counts a job event: a submitted or ended job makes its values known (first seen)
    /// and seen; a success moves their deadline and clears their alert. Gives the records
    /// that changed (to store) and the transitions (to record as events).
    pub(crate) fn observe(
        &mut self,
        job: &Job,
        now: Timestamp,
    ) -> (Vec<RpoRecord>, Vec<Transition>) {
        let (mut changed, mut out) = (Vec::new(), Vec::new());
        for rule in &self.rules {
            let Some(value) = rule.value_of(job) else {
                continue;
            };
            let r = self
                .values
                .entry(rule.name.clone())
                .or_default()
                .entry(value.clone())
                .or_insert_with(|| RpoRecord {
                    rule: rule.name.clone(),
                    value: value.clone(),
                    first_seen: now,
                    last_seen: now,
                    last_job: None,
                    last_success: None,
                    alerting: false,
                });
            let fresh = r.last_job.is_none();
            r.last_seen = now;
            r.last_job = Some((job.id, job.state));
            if job.state == JobState::Succeeded {
                let before = r.last_success.map(|s| s.0);
                r.last_success = Some((
                    job.finished_at
                        .unwrap_or(now)
                        .max(before.unwrap_or_default()),
                    job.id,
                ));
                if r.alerting {
                    r.alerting = false;
                    out.push(Transition::Cleared(r.clone(), before));
                }
            }
            if fresh || job.state == JobState::Succeeded {
                self.heap
                    .push(Reverse((deadline(r, rule), rule.name.clone(), value)));
            }
            changed.push(r.clone());
        }
        (changed, out)
    }

    /// The earliest deadline (possibly a stale one: waking for it finds nothing due).
    pub(crate) fn next_deadline(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The values that became overdue by `now`, each once (their alert is now raised).
    pub(crate) fn due(&mut self, now: Timestamp) -> Vec<Transition> {
        let mut out = Vec::new();
        while let Some(Reverse((at, _, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, name, value))) = self.heap.pop() else {
                break;
            };
            let Some(rule) = self.rule(&name).cloned() else {
                continue;
            };
            let Some(r) = self.values.get_mut(&name).and_then(|m| m.get_mut(&value)) else {
                continue;
            };
            if r.alerting || !fits(&rule, &r.value) || deadline(r, &rule) != at {
                continue;
            }
            r.alerting = true;
            out.push(Transition::Alert(r.clone()));
        }
        let live: usize = self.values.values().map(BTreeMap::len).sum();
        if self.heap.len() > 2 * live + 64 {
            self.rebuild_heap();
        }
        out
    }

    /// Retires the values of rule `name` whose label is `label`; gives them.
    pub(crate) fn forget(&mut self, name: &str, label_text: &str) -> Vec<RpoRecord> {
        let Some(m) = self.values.get_mut(name) else {
            return Vec::new();
        };
        let gone: Vec<Value> = m
            .keys()
            .filter(|v| label(v) == label_text)
            .cloned()
            .collect();
        let out = gone.iter().filter_map(|v| m.remove(v)).collect();
        if m.is_empty() {
            self.values.remove(name);
        }
        out
    }

    /// The rule `name` of the active policy.
    pub(crate) fn active_rule(&self, name: &str) -> Option<&RpoRule> {
        self.rule(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_core::engine::{Engine, Mode};
    use lockgate_core::job::JobSpec;
    use lockgate_core::Policy;

    const HOUR: u64 = 3_600_000;

    fn policy(max_age: &str) -> Policy {
        Policy::from_toml(
            &format!("[[rpo]]\nname = \"vms\"\nmatch = \"kind=backup\"\nper = [\"group\"]\nmax_age = \"{max_age}\"\n"),
            None,
        )
        .unwrap()
    }

    /// A job of `group` in `state`, as the engine makes it (ended at `now`).
    fn job(e: &mut Engine, group: &str, state: JobState, now: u64) -> Job {
        let spec = JobSpec {
            kind: "backup".into(),
            attrs: [("group".to_string(), group.to_string())].into(),
            owner: "alice".into(),
            ..JobSpec::default()
        };
        let mut j = e.submit(spec, Timestamp(now)).unwrap().job.clone();
        j.state = state;
        j.finished_at = state.is_terminal().then_some(Timestamp(now));
        j
    }

    fn kinds(t: &[Transition]) -> Vec<(&'static str, String)> {
        t.iter()
            .map(|t| match t {
                Transition::Alert(r) => ("alert", label(&r.value)),
                Transition::Cleared(r, _) => ("cleared", label(&r.value)),
            })
            .collect()
    }

    #[test]
    fn a_group_whose_backups_stop_succeeding_alerts_once_past_max_age_and_clears_on_success() {
        let p = policy("26h");
        let mut e = Engine::new(p.clone(), Mode::Indexed);
        let mut t = Tracker::default();
        assert!(t.sync(&p.rpo, Timestamp(0)).is_empty());
        // Day 1: both groups back up.
        for g in ["vm/100", "vm/101"] {
            let j = job(&mut e, g, JobState::Succeeded, HOUR);
            t.observe(&j, Timestamp(HOUR));
        }
        assert_eq!(t.next_deadline(), Some(Timestamp(27 * HOUR)));
        // Day 2: vm/101 fails, vm/100 succeeds.
        let (changed, tr) = t.observe(
            &job(&mut e, "vm/101", JobState::Failed, 25 * HOUR),
            Timestamp(25 * HOUR),
        );
        assert!(tr.is_empty() && changed[0].last_job.unwrap().1 == JobState::Failed);
        t.observe(
            &job(&mut e, "vm/100", JobState::Succeeded, 25 * HOUR),
            Timestamp(25 * HOUR),
        );
        assert!(
            t.due(Timestamp(27 * HOUR - 1)).is_empty(),
            "not yet 26h old"
        );
        assert_eq!(
            kinds(&t.due(Timestamp(27 * HOUR))),
            [("alert", "vm/101".to_string())]
        );
        assert!(
            t.due(Timestamp(40 * HOUR)).is_empty(),
            "one alert per crossing"
        );
        // The stale entry of vm/100's first success was dropped; its next is at 51h.
        assert_eq!(t.next_deadline(), Some(Timestamp(51 * HOUR)));
        let (_, tr) = t.observe(
            &job(&mut e, "vm/101", JobState::Succeeded, 41 * HOUR),
            Timestamp(41 * HOUR),
        );
        match &tr[..] {
            [Transition::Cleared(r, before)] => {
                assert_eq!(label(&r.value), "vm/101");
                assert_eq!(
                    *before,
                    Some(Timestamp(HOUR)),
                    "the success it was overdue after"
                );
                assert!(!r.alerting);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            kinds(&t.due(Timestamp(67 * HOUR))),
            [
                ("alert", "vm/100".to_string()),
                ("alert", "vm/101".to_string())
            ]
        );
    }

    #[test]
    fn a_value_that_never_succeeds_alerts_max_age_after_its_first_job() {
        let p = policy("2h");
        let mut e = Engine::new(p.clone(), Mode::Indexed);
        let mut t = Tracker::default();
        t.sync(&p.rpo, Timestamp(0));
        t.observe(&job(&mut e, "vm/7", JobState::Queued, 0), Timestamp(0));
        t.observe(
            &job(&mut e, "vm/7", JobState::Failed, HOUR),
            Timestamp(HOUR),
        );
        assert!(t.due(Timestamp(2 * HOUR - 1)).is_empty());
        assert_eq!(
            kinds(&t.due(Timestamp(2 * HOUR))),
            [("alert", "vm/7".to_string())]
        );
        let other = JobSpec {
            kind: "prune".into(),
            ..JobSpec::default()
        };
        let mut prune = e.submit(other, Timestamp(0)).unwrap().job.clone();
        prune.state = JobState::Succeeded;
        assert!(
            t.observe(&prune, Timestamp(3 * HOUR)).0.is_empty(),
            "not matched"
        );
    }

    #[test]
    fn a_longer_max_age_clears_and_a_restart_keeps_ages_and_alerts() {
        let p = policy("2h");
        let mut e = Engine::new(p.clone(), Mode::Indexed);
        let mut t = Tracker::default();
        t.sync(&p.rpo, Timestamp(0));
        let (stored, _) = t.observe(&job(&mut e, "vm/1", JobState::Succeeded, 0), Timestamp(0));
        t.due(Timestamp(3 * HOUR));
        // A restart from the stored rows: the alert is not raised again, the age is kept.
        let mut rows: Vec<RpoRecord> = stored;
        rows[0].alerting = true;
        let mut t2 = Tracker::load(rows.clone());
        t2.sync(&p.rpo, Timestamp(4 * HOUR));
        assert!(
            t2.due(Timestamp(5 * HOUR)).is_empty(),
            "already alerted before the restart"
        );
        let (rule, values) = t2.rules().next().unwrap();
        assert_eq!(
            (rule.name.as_str(), values[0].last_success),
            ("vms", Some((Timestamp(0), rows[0].last_job.unwrap().0)))
        );
        // A reload with max_age 10h: not overdue any more.
        let longer = policy("10h");
        assert_eq!(
            kinds(&t2.sync(&longer.rpo, Timestamp(5 * HOUR))),
            [("cleared", "vm/1".to_string())]
        );
        assert_eq!(t2.next_deadline(), Some(Timestamp(10 * HOUR)));
        // Forget retires it: nothing is due any more.
        assert_eq!(t2.forget("vms", "vm/1").len(), 1);
        assert!(t2.due(Timestamp(11 * HOUR)).is_empty());
        assert!(t2.rules().next().unwrap().1.is_empty());
    }
}
