//! Forecasts (docs/forecasts.md): learned durations, the estimate in a queued job's
//! explain, `GET /v1/forecast`, and the `[[deadline]]` metrics.
//!
//! The loop keeps the learned [`Durations`] (loaded at start from the store's newest
//! successful jobs, then fed by every `finished` event) and a cached forecast. When the
//! engine reports a change, the forecast is marked stale; at most once per debounce
//! interval the loop takes the engine's shared state ([`lockgate_core::Engine::share`]:
//! its job records by reference, no job copied), the durations and the planned schedule
//! runs, and a plain thread rebuilds an engine from them, plays it forward
//! ([`lockgate_sim::forecast::forward`]) at p50 and p90 and publishes the result on a
//! `watch` channel. `snapshot.rs` holds that computation, `ops.rs` the loop side,
//! `routes.rs` the handler.
//!
//! # Invariants
//! - **Admission is never slowed by a forecast**: the loop only takes the `snapshot::Input`
//!   (no job copied, O(c log n) for the c jobs changed since the last one: about 0.1 ms
//!   at 100k queued jobs, docs/benchmarks.md "Forecasts"); the rebuild and the forward runs happen on their own thread, one at a time,
//!   each run bounded by [`FORWARD_BUDGET`] of wall time. The debounce interval grows with
//!   the copy's cost ([`COPY_SHARE`]), so copies never take more than a tenth of the loop.
//! - An estimate is only ever read from a published snapshot: explain and
//!   `GET /v1/forecast` say when the forecast they quote was computed (`computed_at`). A
//!   queued job the snapshot does not know yet makes the next refresh immediate; its
//!   explain waits for it (bounded). `GET /v1/forecast` waits (bounded) for a snapshot
//!   taken after the engine's last change, then answers from it; another `until` replays
//!   that snapshot's state off the loop: no request takes a copy of its own.

mod gantt;
mod ops;
mod routes;
pub(crate) mod snapshot;
#[cfg(test)]
mod tests;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::protocol::Reply;
use lockgate_api::ForecastQuery;
use lockgate_core::durations::Durations;
use lockgate_core::Timestamp;
use snapshot::Snapshot;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Each forward run (p50, p90) stops after this much wall time; a forecast cut short says
/// `complete: false`, and the jobs it did not reach have no estimate.
pub const FORWARD_BUDGET: Duration = Duration::from_secs(10);

/// An explain waits at most this long for a forecast that knows its job.
pub const ON_DEMAND_WAIT: Duration = Duration::from_secs(5);

/// A stale forecast is refreshed at most this often.
pub const DEBOUNCE: Duration = Duration::from_secs(1);

/// The loop spends at most one part in this many on copies for forecasts.
pub const COPY_SHARE: u32 = 10;

/// Finished jobs read from the store at start to learn from (newest first).
pub const HISTORY_LOAD: usize = 20_000;

/// Scheduled runs a forecast plans at most.
pub const MAX_ARRIVALS: usize = 10_000;

/// How far ahead a forecast plans the schedules' runs when not told (`--until`).
pub const DEFAULT_AHEAD: Duration = Duration::from_secs(86_400);

/// `GET /v1/forecast` waits at most this long for a snapshot of the current state (then
/// answers from the latest one, which says when it was computed).
pub const GET_WAIT: Duration = Duration::from_secs(30);

/// Forecast operations of the loop.
#[derive(Debug)]
pub enum ForecastOp {
    /// `GET /v1/forecast`: the query checked, and which published snapshot answers it.
    Get(ForecastQuery, Reply<Cached>),
    /// The schedules' runs planned from a snapshot's time up to another `until` (a
    /// `GET /v1/forecast?until=`, replayed off the loop from the cached state).
    Plan(
        Timestamp,
        Timestamp,
        Reply<Vec<lockgate_sim::forecast::Arrival>>,
    ),
    /// A receiver of published forecasts, after asking for an immediate refresh.
    Subscribe(Reply<watch::Receiver<Published>>),
}

/// The latest published forecast (`None` before the first).
pub type Published = Option<Arc<Snapshot>>;

/// The loop's answer to [`ForecastOp::Get`].
#[derive(Debug)]
pub struct Cached {
    /// Published forecasts.
    pub rx: watch::Receiver<Published>,
    /// The first generation that reflects the engine as it was when asked.
    pub generation: u64,
    /// The `until` asked for (`None`: the cached forecast's own).
    pub until: Option<Timestamp>,
}

/// The loop's forecast state.
pub(crate) struct ForecastState {
    /// What jobs take (learned from the history).
    pub durations: Durations,
    tx: Arc<watch::Sender<Published>>,
    rx: watch::Receiver<Published>,
    running: Arc<AtomicBool>,
    /// The history was read from the store (under the current `[forecast]`).
    loaded: bool,
    /// The engine changed since the last copy.
    stale: bool,
    /// Inputs taken so far ([`snapshot::Input::generation`] of the last).
    generation: u64,
    /// Refresh without waiting for the debounce (a job explain does not find).
    urgent: bool,
    not_before: Instant,
    /// Every queued job was given its expected hold under `order = "window"` (since the
    /// history was read and the order set).
    window_hinted: bool,
}

impl Default for ForecastState {
    fn default() -> Self {
        let (tx, rx) = watch::channel(None);
        ForecastState {
            durations: Durations::default(),
            tx: Arc::new(tx),
            rx,
            running: Arc::new(AtomicBool::new(false)),
            loaded: false,
            stale: true,
            generation: 0,
            urgent: false,
            not_before: Instant::now(),
            window_hinted: false,
        }
    }
}

impl std::fmt::Debug for ForecastState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForecastState")
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

impl ForecastState {
    /// The latest published forecast.
    pub(crate) fn latest(&self) -> Published {
        self.rx.borrow().clone()
    }

    /// The engine changed (any engine event): the cached forecast no longer reflects it.
    pub(crate) fn touch(&mut self) {
        self.stale = true;
    }
}
