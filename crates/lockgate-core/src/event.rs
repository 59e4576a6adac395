//! Effects the engine reports: every state change, as a value (`Engine::poll_event`).

use crate::job::Job;
use serde::Serialize;
use std::sync::Arc;

/// What changed about a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobChange {
    /// Accepted into the queue.
    Submitted,
    /// Admitted to prepare (two-stage).
    AdmittedPrepare,
    /// Reported its prepare step done.
    Prepared,
    /// Admitted to run.
    Started,
    /// The holder was asked to stop (cancel or `max_run`).
    CancelRequested,
    /// Ended: succeeded, failed, cancelled, lost or expired.
    Finished,
    /// Queued again by a retry.
    Requeued,
    /// A queued job was changed (`job set`: its priority).
    Edited,
}

/// One effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A job changed; `job` is its state after the change.
    Job {
        /// What happened.
        change: JobChange,
        /// The job after the change: the engine's own record, shared (the engine copies it
        /// before its next change while the event is held).
        job: Arc<Job>,
    },
    /// A node registered, changed, was cordoned or uncordoned, or recovered.
    NodeChanged {
        /// Node name.
        node: String,
        /// `ready`, `cordoned` or `lost`.
        state: String,
    },
    /// A node was lost (silent past the node TTL).
    NodeLost {
        /// Node name.
        node: String,
    },
    /// A node was removed.
    NodeRemoved {
        /// Node name.
        node: String,
    },
    /// A new policy took effect.
    PolicyApplied {
        /// Scopes whose count now exceeds their limit (they drain).
        over_limit: Vec<String>,
    },
    /// An admin paused admission of the jobs a match expression selects.
    Paused {
        /// The new pause.
        pause: crate::engine::Pause,
    },
    /// A pause ended: resumed, or its `until` passed.
    Resumed {
        /// The pause that ended.
        pause: crate::engine::Pause,
    },
}
