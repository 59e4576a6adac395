//! Recovery after a lost holder (policy.md, "Recovery after a lost holder").
//!
//! A tool that locks its repository (restic, borg) leaves its lock behind when its holder
//! is killed or its host vanishes; the next exclusive command then fails on that stale
//! lock. The engine is the one party that knows exactly when a holder was lost and who
//! else holds the key, so a `[[conflict]]` with `recover = "KIND"` has it submit, the moment
//! a job holding one of its keys is lost (lease expired, node lost), a job of `KIND` for
//! that key: owner [`RECOVER_OWNER`], the top priority, movable to any node whose agent
//! has a handler for the kind, with the lost job's key values (and the `k=v` attributes of the conflict's
//! `match`) as its attributes.
//!
//! # Invariants
//! - **It runs alone on the key, before the next job**: validation makes the recovery kind
//!   one the conflict's `exclusive` makes run alone, so it waits for every live holder of
//!   the key and never runs beside one; ranked first, it is the exclusive job waiting
//!   ahead, so no job queued for the key passes it (`engine/exclusive.rs`).
//! - **One live recovery per key**: its idempotency key names the conflict and the key
//!   values; a second loss while one waits adds nothing.
//! - A lost recovery job does not start another (no loop).
//! - Noted while a loss is handled and submitted at the start of the next admission pass
//!   ([`Engine::submit_recoveries`]), never in the middle of a timer's work.

use super::Engine;
use crate::event::JobChange;
use crate::job::{JobId, JobSpec};
use crate::policy::Executor;
use std::sync::Arc;

/// The owner of every recovery job.
pub const RECOVER_OWNER: &str = "lockgate:recover";

/// A recovery to submit: the job, and why (its message).
#[derive(Debug, Clone)]
pub(crate) struct Recovery {
    spec: JobSpec,
    why: String,
}

impl Engine {
    /// The admitted job `id` lost its holder: notes the recovery of every key with
    /// `recover` it held.
    pub(crate) fn note_lost_holder(&mut self, id: JobId) {
        let Some(e) = self.entries.find(id) else {
            return;
        };
        let job = e.job.clone();
        for (i, c) in self.policy.conflicts.iter().enumerate() {
            let Some(kind) = &c.recover else { continue };
            if job.kind == *kind
                || c.matcher
                    .as_ref()
                    .is_some_and(|m| !m.matches(|k| job.key_value(k)))
            {
                continue;
            }
            let Some(parts) = c
                .keys
                .iter()
                .map(|k| job.key_value(k.name()).map(|v| (k.name(), v)))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let mut attrs = c
                .matcher
                .as_ref()
                .map(crate::policy::lint::equal_attrs)
                .unwrap_or_default();
            for (k, v) in &parts {
                if !matches!(*k, "kind" | "owner" | "node") {
                    attrs.insert(k.to_string(), v.to_string());
                }
            }
            let key: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let key = key.join(",");
            self.recoveries.push(Recovery {
                spec: JobSpec {
                    kind: kind.clone(),
                    attrs,
                    owner: RECOVER_OWNER.to_string(),
                    priority: Some(*crate::limits::PRIORITY.end()),
                    executor: Some(Executor::Agent),
                    // Movable to any node whose agent has a handler for the kind.
                    node_selector: Some(String::new()),
                    idempotency_key: Some(format!("recover:{}:{key}", i + 1)),
                    ..JobSpec::default()
                },
                why: format!(
                    "recovers {key} ([[conflict]] {}) after job {id} lost its holder",
                    i + 1
                ),
            });
        }
    }

    /// Submits the recoveries noted since the last pass (one live recovery per key).
    pub(crate) fn submit_recoveries(&mut self, now: crate::Timestamp) {
        for r in std::mem::take(&mut self.recoveries) {
            let key = r.spec.idempotency_key.as_deref().unwrap_or_default();
            if self.entries.idempotent(RECOVER_OWNER, key).is_some() {
                continue;
            }
            // Validation took the kind; a spec the policy still refuses has nothing to run.
            let Ok(mut job) = self.job_from_spec(r.spec, now) else {
                continue;
            };
            job.message = Some(r.why);
            let id = job.id;
            self.insert_entry(Arc::new(job), now);
            self.emit(JobChange::Submitted, id);
        }
    }
}
