//! Forecasts (docs/forecasts.md): learned durations, the estimate in a queued job's
//! explain, `GET /v1/forecast`, and the `[[deadline]]` metrics.
//!
//! The loop keeps the learned [`Durations`] (loaded at start from the store's newest
//! successful jobs, then fed by every `finished` event) and a cached forecast. When jobs
//! change, the forecast is marked stale; at most once per debounce interval the loop copies
//! its engine, the durations and the planned schedule runs, and a plain thread plays them
//! forward ([`lockgate_sim::forecast::forward`]) at p50 and p90 and publishes the result
//! on a `watch` channel. `snapshot.rs` holds that computation, `ops.rs` the loop side,
//! `routes.rs` the handler.
//!
//! # Invariants
//! - **Admission is never slowed by a forward run**: the loop only copies (O(n) in live
//!   jobs, as an explain is); the forward runs happen on their own thread, one at a time,
//!   each bounded by [`FORWARD_BUDGET`] of wall time. The debounce interval grows with the
//!   copy's cost ([`COPY_SHARE`]), so copies never take more than a tenth of the loop.
//! - An estimate is only ever read from a published snapshot: explain says when the
//!   forecast it quotes was computed (`computed_at`). A queued job the snapshot does not
//!   know yet makes the next refresh immediate; its explain waits for it (bounded).

mod ops;
mod routes;
pub(crate) mod snapshot;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::protocol::Reply;
use lockgate_api::ForecastQuery;
use lockgate_core::durations::Durations;
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

/// Forecast operations of the loop.
#[derive(Debug)]
pub enum ForecastOp {
    /// `GET /v1/forecast`: copies of the loop's state, planned up to `until`, for the
    /// handler to play forward off the loop.
    Get(ForecastQuery, Reply<Box<snapshot::Input>>),
    /// A receiver of published forecasts, after asking for an immediate refresh.
    Subscribe(Reply<watch::Receiver<Published>>),
}

/// The latest published forecast (`None` before the first).
pub type Published = Option<Arc<Snapshot>>;

/// The loop's forecast state.
pub(crate) struct ForecastState {
    /// What jobs take (learned from the history).
    pub durations: Durations,
    tx: Arc<watch::Sender<Published>>,
    rx: watch::Receiver<Published>,
    running: Arc<AtomicBool>,
    /// The history was read from the store (under the current `[forecast]`).
    loaded: bool,
    /// Jobs changed since the last copy.
    stale: bool,
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
}
