//! The loop's side of notifications: outbox rows for each recorded event, the delivery
//! task's reports, the targets it sends through, and the test endpoint's look-up.

use super::NotifyOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{EventView, Role};
use lockgate_core::Timestamp;
use lockgate_store::{OutboxOutcome, OutboxRow};
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::Arc;

impl Loop {
    /// Applies one notification operation.
    pub(crate) fn notify_op(&mut self, p: &Principal, op: NotifyOp) {
        match op {
            NotifyOp::Report(updates, reply) => {
                for u in &updates {
                    let counter = match u.outcome {
                        OutboxOutcome::Delivered { .. } => &mut self.notify.sent,
                        OutboxOutcome::Retry { .. } | OutboxOutcome::GaveUp { .. } => {
                            &mut self.notify.failed
                        }
                    };
                    *counter.entry(u.target.clone()).or_default() += 1;
                    if !matches!(u.outcome, OutboxOutcome::Retry { .. }) {
                        self.notify.backlog = self.notify.backlog.saturating_sub(1);
                    }
                }
                self.batch.outbox_updates.extend(updates);
                self.answer(reply, Ok(()));
            }
            NotifyOp::Target(name, reply) => {
                let r = p
                    .require(&[Role::Admin], "test a notification target")
                    .and_then(|()| {
                        self.engine
                            .policy()
                            .notify
                            .iter()
                            .find(|t| t.name == name)
                            .cloned()
                            .ok_or_else(|| {
                                ApiError::not_found(format!(
                                    "no [[notify]] target {name:?} in the policy"
                                ))
                            })
                    });
                self.answer(reply, r);
            }
        }
    }

    /// Adds an outbox row for each target whose `match` selects `view` (called by
    /// `record_event`, so the rows are in the event's batch).
    pub(crate) fn enqueue_notifications(&mut self, view: &EventView, now: Timestamp) {
        let targets: Vec<String> = self
            .engine
            .policy()
            .notify
            .iter()
            .filter(|t| super::matches(&t.matcher, &view.data))
            .map(|t| t.name.clone())
            .collect();
        if targets.is_empty() {
            return;
        }
        let body = self.notification_body(view);
        for target in targets {
            self.batch.outbox.push(OutboxRow {
                seq: view.seq,
                target,
                body: body.clone(),
                created_at: now,
                attempts: 0,
                next_at: now,
            });
            self.notify.backlog += 1;
            self.notify.kick = true;
        }
    }

    /// After a commit: publishes the targets when the policy changed, then wakes the
    /// delivery task when rows were added (in this order, so a row of a new target finds
    /// it). Neither waits.
    pub(crate) fn notify_after_commit(&mut self) {
        if self.notify.published != self.digest {
            self.notify.published = self.digest.clone();
            let targets = Arc::new(self.engine.policy().notify.clone());
            self.notify.targets.send_replace(targets);
        }
        if std::mem::take(&mut self.notify.kick) {
            self.notify.wake.notify_one();
        }
    }

    /// The notification metrics: sent and failed per configured target (0 until the
    /// first), and the backlog.
    pub(crate) fn render_notify_metrics(&self, out: &mut String) {
        let names: Vec<&str> = self
            .engine
            .policy()
            .notify
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        for (metric, help, counts) in [
            (
                "lockgate_notifications_sent_total",
                "Notifications delivered, per [[notify]] target.",
                &self.notify.sent,
            ),
            (
                "lockgate_notifications_failed_total",
                "Failed notification attempts (each retried one and each given up), per target.",
                &self.notify.failed,
            ),
        ] {
            crate::metrics::header(out, metric, "counter", help);
            let mut all: Vec<&str> = names.clone();
            all.extend(
                counts
                    .keys()
                    .map(String::as_str)
                    .filter(|n| !names.contains(n)),
            );
            for name in all {
                let n = counts.get(name).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "{metric}{{target=\"{}\"}} {n}",
                    crate::metrics::esc(name)
                );
            }
        }
        crate::metrics::header(
            out,
            "lockgate_notifications_backlog",
            "gauge",
            "Notifications in the outbox not yet delivered or given up.",
        );
        let _ = writeln!(
            out,
            "lockgate_notifications_backlog {}",
            self.notify.backlog
        );
    }
}

/// How many of a failed job's last output lines its notification carries.
const LOG_TAIL_LINES: usize = 20;

impl Loop {
    /// The body a notification of `view` carries: the event exactly as `/v1/events` serves
    /// it, and for a job that ended `failed` or `lost`, `log_tail`: the last
    /// [`LOG_TAIL_LINES`] lines of its output (docs/notifications.md), from the store and
    /// from the batch being written (a holder's last lines and its finish often share one).
    fn notification_body(&mut self, view: &EventView) -> String {
        let failed_job = view
            .data
            .get("job")
            .filter(|_| view.data.get("change").and_then(Value::as_str) == Some("finished"))
            .filter(|job| {
                matches!(
                    job.get("state").and_then(Value::as_str),
                    Some("failed" | "lost")
                )
            })
            .and_then(|job| job.get("id").and_then(Value::as_u64));
        let Some(id) = failed_job else {
            return serde_json::to_string(view).expect("events serialize");
        };
        let mut tail = crate::joblogs::log_tail(self.store.as_mut(), id, LOG_TAIL_LINES);
        for append in self.batch.job_logs.iter().filter(|a| a.job == id) {
            tail.extend(append.lines.iter().map(|l| l.text.clone()));
        }
        let skip = tail.len().saturating_sub(LOG_TAIL_LINES);
        let mut body = serde_json::to_value(view).expect("events serialize");
        if let Value::Object(map) = &mut body {
            map.insert("log_tail".into(), Value::from(tail.split_off(skip)));
        }
        serde_json::to_string(&body).expect("events serialize")
    }
}
