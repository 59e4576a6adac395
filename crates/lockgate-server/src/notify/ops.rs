//! The loop's side of notifications: outbox rows for each recorded event, the delivery
//! task's reports, the targets it sends through, and the test endpoint's look-up.

use super::NotifyOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{EventView, Role};
use lockgate_core::Timestamp;
use lockgate_store::{OutboxOutcome, OutboxRow};
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
        let mut body = None;
        for t in &self.engine.policy().notify {
            if !super::matches(&t.matcher, &view.data) {
                continue;
            }
            let body = body.get_or_insert_with(|| notification_body(view)).clone();
            self.batch.outbox.push(OutboxRow {
                seq: view.seq,
                target: t.name.clone(),
                body,
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
            let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
            let mut all: Vec<&str> = names.clone();
            all.extend(
                counts
                    .keys()
                    .map(String::as_str)
                    .filter(|n| !names.contains(n)),
            );
            for name in all {
                let n = counts.get(name).copied().unwrap_or(0);
                let _ = writeln!(out, "{metric}{{target=\"{}\"}} {n}", escape(name));
            }
        }
        let _ = writeln!(
            out,
            "# HELP lockgate_notifications_backlog Notifications in the outbox not yet delivered or given up.\n\
             # TYPE lockgate_notifications_backlog gauge\nlockgate_notifications_backlog {}",
            self.notify.backlog
        );
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The body a notification of `view` carries: the event exactly as `/v1/events` serves it.
///
/// This is the one place to add to a notification. The job-logs feature adds the last
/// lines of a failed job's output here (for example a top-level `"log_tail"` beside the
/// event's own fields, for a `job` event whose `change` is `finished` and whose job
/// `failed`; the loop's store can read them here).
fn notification_body(view: &EventView) -> String {
    serde_json::to_string(view).expect("events serialize")
}
