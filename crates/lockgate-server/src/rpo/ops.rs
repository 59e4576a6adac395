//! The RPO tracker inside the loop: job events in, `rpo_alert` / `rpo_cleared` events and
//! store rows out; the list, forget and metrics.

use super::tracker::{deadline, label, Tracker, Transition};
use super::RpoOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{time, Role, RpoForgotten, RpoList, RpoRuleView, RpoStatus, RpoValueView};
use lockgate_core::event::{Event, JobChange};
use lockgate_core::policy::RpoRule;
use lockgate_core::Timestamp;
use lockgate_store::RpoRecord;
use serde_json::{json, Value};
use std::fmt::Write;

/// A value as the API shows it, at `now`.
fn view(r: &RpoRecord, rule: &RpoRule, now: Timestamp) -> RpoValueView {
    let since = r.last_success.map_or(r.first_seen, |(t, _)| t);
    let status = if now >= deadline(r, rule) {
        RpoStatus::Overdue
    } else if r.last_success.is_none() {
        RpoStatus::New
    } else {
        RpoStatus::Ok
    };
    RpoValueView {
        rule: rule.name.clone(),
        value: r.value.iter().cloned().collect(),
        label: label(&r.value),
        first_seen: time::format(r.first_seen),
        last_seen: time::format(r.last_seen),
        last_job: r.last_job.map(|(id, _)| id),
        last_state: r.last_job.map(|(_, s)| s.as_str().to_string()),
        last_success: r.last_success.map(|(t, _)| time::format(t)),
        last_success_job: r.last_success.map(|(_, id)| id),
        age_s: now.since(since) / 1000,
        max_age_s: rule.max_age.as_secs(),
        status,
    }
}

use crate::metrics::esc;

impl Loop {
    /// The stored values, before the first commit.
    pub(crate) fn load_rpo(&mut self, records: Vec<RpoRecord>) {
        self.rpo = Tracker::load(records);
    }

    /// When the next value may become overdue.
    pub(crate) fn rpo_deadline(&self) -> Option<Timestamp> {
        self.rpo.next_deadline()
    }

    /// Takes a changed policy's rules (a cheap comparison when nothing changed).
    fn rpo_sync(&mut self, now: Timestamp) {
        if self.rpo.same_rules(&self.engine.policy().rpo) {
            return;
        }
        let rules = self.engine.policy().rpo.clone();
        let t = self.rpo.sync(&rules, now);
        self.rpo_record(t, now);
    }

    /// A job event: a submitted or ended job of a rule's values updates them, in the
    /// batch that commits the event.
    pub(crate) fn track_rpo(&mut self, ev: &Event, now: Timestamp) {
        let Event::Job { change, job } = ev else {
            return;
        };
        if self.engine.policy().rpo.is_empty() && self.rpo.next_deadline().is_none() {
            return;
        }
        if *change != JobChange::Submitted && !job.state.is_terminal() {
            return;
        }
        self.rpo_sync(now);
        let (changed, transitions) = self.rpo.observe(job, now);
        self.batch.rpo.extend(changed);
        self.rpo_record(transitions, now);
    }

    /// Raises the alerts that are due (and takes a changed policy's rules).
    pub(crate) fn rpo_tick(&mut self, now: Timestamp) {
        self.rpo_sync(now);
        let due = self.rpo.due(now);
        self.rpo_record(due, now);
    }

    /// Each transition as a server event, and its value's row (its alert state).
    fn rpo_record(&mut self, transitions: Vec<Transition>, now: Timestamp) {
        for t in transitions {
            let (r, kind, severity, before) = match t {
                Transition::Alert(r) => (r, "rpo_alert", "warning", None),
                Transition::Cleared(r, before) => (r, "rpo_cleared", "info", Some(before)),
            };
            let Some(rule) = self.rpo.active_rule(&r.rule) else {
                continue;
            };
            let v = view(&r, rule, now);
            let mut data = json!({
                "type": kind,
                "severity": severity,
                "rule": v.rule,
                "value": v.value,
                "label": v.label,
                "last_success": v.last_success,
                "last_job": v.last_job,
                "last_state": v.last_state,
                "age_s": v.age_s,
                "max_age_s": v.max_age_s,
            });
            if let Some(before) = before {
                data["previous_success"] = json!(before.map(time::format));
            }
            log_rpo(kind, &v);
            let Value::Object(data) = data else {
                unreachable!("an object")
            };
            self.record_event(data, now);
            self.batch.rpo.push(r);
        }
    }

    /// Applies one RPO operation.
    pub(crate) fn rpo_op(&mut self, p: &Principal, op: RpoOp, now: Timestamp) {
        self.rpo_sync(now);
        match op {
            RpoOp::List(reply) => {
                let rules = self
                    .rpo
                    .rules()
                    .map(|(rule, values)| RpoRuleView {
                        name: rule.name.clone(),
                        selector: rule.matcher.as_ref().map(|m| m.to_string()),
                        per: rule.per.iter().map(|k| k.name().to_string()).collect(),
                        max_age_s: rule.max_age.as_secs(),
                        values: values.into_iter().map(|r| view(r, rule, now)).collect(),
                    })
                    .collect();
                self.answer(reply, Ok(RpoList { rules }));
            }
            RpoOp::Forget(rule, value, reply) => {
                let r = self.rpo_forget(p, &rule, value.as_deref(), now);
                self.answer(reply, r);
            }
        }
    }

    fn rpo_forget(
        &mut self,
        p: &Principal,
        name: &str,
        value: Option<&str>,
        now: Timestamp,
    ) -> Result<RpoForgotten, ApiError> {
        p.require(&[Role::Admin], "forget rpo values")?;
        let Some(rule) = self.rpo.active_rule(name).cloned() else {
            let known: Vec<String> = self
                .engine
                .policy()
                .rpo
                .iter()
                .map(|r| r.name.clone())
                .collect();
            return Err(ApiError::not_found(format!(
                "no rpo rule {name:?} in the policy (rules: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        let label_text = match (value, rule.per.is_empty()) {
            (Some(v), _) => v.to_string(),
            (None, true) => String::new(),
            (None, false) => {
                let keys: Vec<&str> = rule.per.iter().map(|k| k.name()).collect();
                return Err(ApiError::invalid(
                    "value",
                    format!(
                        "rpo rule {name:?} has a value per {}: name the value (its values comma-joined)",
                        keys.join(", ")
                    ),
                ));
            }
        };
        let gone = self.rpo.forget(name, &label_text);
        if gone.is_empty() {
            return Err(ApiError::not_found(format!(
                "rpo rule {name:?} tracks no value {label_text:?} (lockgate rpo lists them)"
            )));
        }
        let forgotten = gone.iter().map(|r| view(r, &rule, now)).collect();
        for r in gone {
            let data = json!({
                "type": "rpo_forgotten",
                "severity": "info",
                "rule": r.rule,
                "value": r.value.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                "label": label(&r.value),
                "by": p.name,
            });
            let Value::Object(data) = data else {
                unreachable!("an object")
            };
            self.record_event(data, now);
            self.batch.removed_rpo.push((r.rule, r.value));
        }
        Ok(RpoForgotten { forgotten })
    }

    /// The `lockgate_rpo_*` families: per rule (values, violations, max age), per value
    /// (age, last success). A value's series has labels `rule` and `value` (see
    /// docs/monitoring.md for the cardinality).
    pub(crate) fn render_rpo_metrics(&self, out: &mut String, now: Timestamp) {
        let families = [
            ("lockgate_rpo_values", "Values an RPO rule tracks."),
            ("lockgate_rpo_violations", "Values of an RPO rule whose last success is max_age old or older."),
            ("lockgate_rpo_max_age_seconds", "An RPO rule's max_age."),
            ("lockgate_rpo_age_seconds", "Seconds since a value's last successful job (since its first job, without one)."),
            ("lockgate_rpo_last_success_timestamp_seconds", "When a value's last successful job ended (Unix seconds); absent before its first success."),
        ];
        let rules: Vec<_> = self.rpo.rules().collect();
        for (i, (name, help)) in families.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (rule, values) in &rules {
                let rn = esc(&rule.name);
                let views: Vec<RpoValueView> = values.iter().map(|r| view(r, rule, now)).collect();
                match i {
                    0 => {
                        let _ = writeln!(out, "{name}{{rule=\"{rn}\"}} {}", views.len());
                    }
                    1 => {
                        let n = views
                            .iter()
                            .filter(|v| v.status == RpoStatus::Overdue)
                            .count();
                        let _ = writeln!(out, "{name}{{rule=\"{rn}\"}} {n}");
                    }
                    2 => {
                        let _ = writeln!(out, "{name}{{rule=\"{rn}\"}} {}", rule.max_age.as_secs());
                    }
                    3 => {
                        for v in &views {
                            let _ = writeln!(
                                out,
                                "{name}{{rule=\"{rn}\",value=\"{}\"}} {}",
                                esc(&v.label),
                                v.age_s
                            );
                        }
                    }
                    _ => {
                        for r in values.iter() {
                            if let Some((t, _)) = r.last_success {
                                let _ = writeln!(
                                    out,
                                    "{name}{{rule=\"{rn}\",value=\"{}\"}} {}",
                                    esc(&label(&r.value)),
                                    t.0 / 1000
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The log line of an RPO transition.
fn log_rpo(kind: &str, v: &RpoValueView) {
    if kind == "rpo_alert" {
        tracing::warn!(
            "rpo: {} {:?} has had no successful job for {}s (max_age {}s)",
            v.rule,
            v.label,
            v.age_s,
            v.max_age_s
        );
    } else {
        tracing::info!("rpo: {} {:?} is within max_age again", v.rule, v.label);
    }
}
