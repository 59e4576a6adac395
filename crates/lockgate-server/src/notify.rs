//! Notifications: every recorded event that a `[[notify]]` target's `match` selects is sent
//! to that target (a webhook, or e-mail over SMTP), at least once, also across a restart.
//! `POST /v1/notify/{name}/test` sends a test message now.
//!
//! The parts: `matcher.rs` (the fields a `match` selects on, for any event), `ops.rs` (the
//! loop's side: outbox rows and reports), `deliver.rs` (the delivery task), `send.rs` (one
//! attempt: webhook or SMTP), `routes.rs` (the test endpoint).
//!
//! # Invariants
//! - **Durable with the event.** `Loop::record_event` (every engine and server event passes
//!   through it) adds an outbox row per matching target to the same store batch as the
//!   event, so an acknowledged event's notification survives a kill -9.
//! - **The event loop never waits for a target.** After a commit it only wakes the
//!   delivery task (`tokio::sync::Notify`, which never blocks). The task reads the outbox
//!   with its own read-only connection and reports outcomes back as a loop operation, so
//!   the loop stays the store's one writer.
//! - **At least once.** A row stays `pending` until the loop commits its `delivered` (or
//!   given-up) report; a restart resumes every pending row, so a row sent just before a
//!   crash may be sent again. Receivers dedupe by `seq`.
//! - A row is tried again with exponential back-off (0.5 s doubling to at most 5 min) up
//!   to the target's `retries`, each attempt under its `timeout`.

mod deliver;
mod matcher;
mod ops;
mod routes;
mod send;

pub(crate) use deliver::spawn;
pub(crate) use matcher::matches;
pub(crate) use routes::{routes, ApiDoc};

use crate::protocol::Reply;
use lockgate_core::policy::NotifyTarget;
use lockgate_store::OutboxUpdate;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// Notification operations of the loop.
#[derive(Debug)]
pub enum NotifyOp {
    /// The delivery task's outcomes, written in the next batch; answered after its commit.
    Report(Vec<OutboxUpdate>, Reply<()>),
    /// `POST /v1/notify/{name}/test`: the target, for the handler to send through (admin).
    Target(String, Reply<NotifyTarget>),
}

/// What the loop keeps for notifications.
#[derive(Debug)]
pub struct LoopSide {
    /// Wakes the delivery task after a commit that added rows.
    wake: Arc<Notify>,
    /// Rows were added in this batch.
    kick: bool,
    /// The targets the delivery task sends through (published when the policy changes).
    targets: watch::Sender<Arc<Vec<NotifyTarget>>>,
    /// The policy digest the published targets came from.
    published: String,
    /// Pending rows (the backlog gauge).
    pub(crate) backlog: u64,
    /// Sent notifications per target.
    pub(crate) sent: BTreeMap<String, u64>,
    /// Failed attempts per target.
    pub(crate) failed: BTreeMap<String, u64>,
}

impl LoopSide {
    /// The loop's side, publishing `targets` (of the policy whose digest is `digest`).
    pub fn new(targets: &[NotifyTarget], digest: &str) -> LoopSide {
        LoopSide {
            wake: Arc::new(Notify::new()),
            kick: false,
            targets: watch::channel(Arc::new(targets.to_vec())).0,
            published: digest.to_string(),
            backlog: 0,
            sent: BTreeMap::new(),
            failed: BTreeMap::new(),
        }
    }

    /// What the delivery task needs from the loop: its wake-up and the targets.
    pub(crate) fn task_side(&self) -> (Arc<Notify>, watch::Receiver<Arc<Vec<NotifyTarget>>>) {
        (self.wake.clone(), self.targets.subscribe())
    }
}
