//! The typed protocol between the HTTP side and the event loop.
//!
//! A request to the loop is a [`Msg`]: who asks and an [`Op`]. Every operation is a variant
//! of its feature's enum (`JobOp`, `NodeOp`, ...) and carries its own reply channel, a
//! [`Reply<T>`] with `T` the typed answer (a `lockgate-api` view such as `JobView`); the
//! loop never chooses an HTTP status and never builds JSON for its callers: the handlers
//! do both. [`LoopHandle::ask`] (async) and [`LoopHandle::ask_blocking`] (plain threads)
//! are the only ways to send one.
//!
//! # Invariant
//! A reply is sent only after the store committed the batch the operation was applied in
//! (see [`crate::event_loop`]); a dropped receiver does not undo the operation.

use crate::auth::Principal;
use crate::backups::BackupOp;
use crate::error::ApiError;
use crate::events::EventOp;
use crate::forecast::ForecastOp;
use crate::joblogs::LogOp;
use crate::jobs::JobOp;
use crate::nodes::NodeOp;
use crate::policy::PolicyOp;
use crate::queue::QueueOp;
use crate::restores::RestoreOp;
use crate::rpo::RpoOp;
use crate::schedules::ScheduleOp;
use crate::tokens::TokenOp;
use tokio::sync::{mpsc, oneshot};

/// Where the loop sends the answer of one operation.
pub type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

/// One request to the loop.
#[derive(Debug)]
pub struct Msg {
    /// Who asks (the loop checks what this principal may do).
    pub principal: Principal,
    /// What, with the channel for the answer.
    pub op: Op,
    /// The audited request this is part of ([`crate::audit`]); set by [`LoopHandle::ask`].
    pub audit: Option<std::sync::Arc<crate::audit::AuditTag>>,
}

/// The operations, by feature.
#[derive(Debug)]
pub enum Op {
    /// `/v1/jobs`.
    Jobs(JobOp),
    /// `/v1/nodes`.
    Nodes(NodeOp),
    /// `/v1/policy` and SIGHUP.
    Policy(PolicyOp),
    /// `/v1/tokens`.
    Tokens(TokenOp),
    /// `/v1/schedules`.
    Schedules(ScheduleOp),
    /// Item-block backups: records and their `resource-backup` jobs.
    Backups(BackupOp),
    /// Restores: records and their `resource-restore` jobs.
    Restores(RestoreOp),
    /// `/v1/events`.
    Events(EventOp),
    /// `GET /metrics`: the Prometheus text.
    Metrics(Reply<String>),
    /// Answer every waiter, flush the store, stop.
    Shutdown(Reply<()>),
    /// `/v1/pauses`.
    Queue(QueueOp),
    /// `/v1/rpo`.
    Rpo(RpoOp),
    /// `/v1/audit`, and the audit rows the HTTP side records.
    Audit(crate::audit::AuditOp),
    /// `/v1/jobs/{id}/logs`.
    Logs(LogOp),
    /// Notifications: the delivery task's reports, `/v1/notify`.
    Notify(crate::notify::NotifyOp),
    /// `/v1/forecast` and the explain estimate's refresh.
    Forecast(ForecastOp),
    /// The dashboard's overview and occupancy (`/v1/ui`).
    Ui(crate::ui::UiOp),
}

impl Op {
    /// It only reads: its answer may be sent while a commit that failed for a full disk
    /// is kept. Holders' requests (waits, heartbeats, assignment polls)
    /// are not here: what they are told must be committed first.
    pub fn observes(&self) -> bool {
        use crate::{
            events::EventOp, joblogs::LogOp, jobs::JobOp, nodes::NodeOp, policy::PolicyOp,
            queue::QueueOp, rpo::RpoOp,
        };
        matches!(
            self,
            Op::Jobs(JobOp::Get(..) | JobOp::List(..) | JobOp::Explain(..))
                | Op::Nodes(NodeOp::List(..) | NodeOp::Get(..))
                | Op::Policy(PolicyOp::Get(..))
                | Op::Events(EventOp::List { .. } | EventOp::LastSeq { .. })
                | Op::Ui(_)
                | Op::Forecast(_)
                | Op::Queue(QueueOp::List(..))
                | Op::Rpo(RpoOp::List(..))
                | Op::Logs(LogOp::Read { .. })
                | Op::Metrics(_)
        )
    }
}

macro_rules! op_from {
    ($($variant:ident($ty:ty)),*) => {
        $(impl From<$ty> for Op {
            fn from(op: $ty) -> Op {
                Op::$variant(op)
            }
        })*
    };
}

op_from!(
    Jobs(JobOp),
    Nodes(NodeOp),
    Policy(PolicyOp),
    Tokens(TokenOp),
    Schedules(ScheduleOp),
    Backups(BackupOp),
    Restores(RestoreOp),
    Events(EventOp),
    Queue(QueueOp),
    Rpo(RpoOp),
    Audit(crate::audit::AuditOp),
    Logs(LogOp),
    Notify(crate::notify::NotifyOp),
    Forecast(ForecastOp),
    Ui(crate::ui::UiOp)
);

/// The sending side of the loop's channel. Cheap to clone; clones share one slot, so a
/// replica can swap the loop behind every handle at once ([`LoopHandle::install`],
/// [`LoopHandle::clear`]): a standby has none, and every ask answers 503 `unavailable`.
#[derive(Debug, Clone)]
pub struct LoopHandle {
    tx: std::sync::Arc<std::sync::RwLock<Option<mpsc::Sender<Msg>>>>,
}

impl LoopHandle {
    /// A handle on the loop's channel.
    pub fn new(tx: mpsc::Sender<Msg>) -> LoopHandle {
        LoopHandle {
            tx: std::sync::Arc::new(std::sync::RwLock::new(Some(tx))),
        }
    }

    /// A handle with no loop behind it yet (a standby).
    pub fn detached() -> LoopHandle {
        LoopHandle {
            tx: std::sync::Arc::default(),
        }
    }

    /// Puts a new loop behind every clone of this handle.
    pub fn install(&self, tx: mpsc::Sender<Msg>) {
        *self.tx.write().expect("loop handle") = Some(tx);
    }

    /// Takes the loop away from every clone; asks answer 503 until the next install.
    pub fn clear(&self) {
        *self.tx.write().expect("loop handle") = None;
    }

    /// The current loop's sender (a read lock and a clone: the hot path stays cheap).
    fn sender(&self) -> Result<mpsc::Sender<Msg>, ApiError> {
        self.tx
            .read()
            .expect("loop handle")
            .clone()
            .ok_or_else(|| ApiError::unavailable("this replica does not lead now: ask again"))
    }

    /// Sends the operation `make` builds around a fresh reply channel and waits for its
    /// answer: `handle.ask(p, |r| JobOp::Get(id, r))`.
    ///
    /// # Errors
    /// The operation's own [`ApiError`], or 503 `unavailable` when the loop is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that matters here: once the message is sent (the first
    /// await returned), dropping this future does **not** withdraw the operation. The loop
    /// still applies it and commits it; only the answer is lost. A caller that times out
    /// (a long-poll) must therefore use only operations that change nothing (waits), or
    /// be ready for the change to have happened.
    pub async fn ask<T, O: Into<Op>>(
        &self,
        principal: Principal,
        make: impl FnOnce(Reply<T>) -> O,
    ) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        let op = make(reply).into();
        self.sender()?
            .send(Msg {
                principal,
                op,
                audit: crate::audit::current(),
            })
            .await
            .map_err(|_| ApiError::shutting_down())?;
        rx.await.map_err(|_| ApiError::shutting_down())?
    }

    /// [`LoopHandle::ask`] for plain threads (the item-block pool's workers): blocks.
    ///
    /// # Panics
    /// When called on a tokio worker thread (tokio's `blocking_send` refuses that).
    ///
    /// # Errors
    /// As [`LoopHandle::ask`].
    pub fn ask_blocking<T, O: Into<Op>>(
        &self,
        principal: Principal,
        make: impl FnOnce(Reply<T>) -> O,
    ) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        let op = make(reply).into();
        self.sender()?
            .blocking_send(Msg {
                principal,
                op,
                audit: None,
            })
            .map_err(|_| ApiError::shutting_down())?;
        rx.blocking_recv().map_err(|_| ApiError::shutting_down())?
    }
}
