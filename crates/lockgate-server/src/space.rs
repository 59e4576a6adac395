//! [`SpaceWatch`]: refuse new submits before the disk is full (etcd's space quota).
//!
//! # Invariants
//! - **Only new work is refused.** [`refuse_new_submits`] answers 507
//!   `insufficient_storage` to `POST /v1/jobs`, `POST /v1/schedules`, `POST /v1/backups` and
//!   `POST /v1/restores` while the data dir's filesystem has less than the free-space
//!   watermark free, or the store (`lockgate.db` and its WAL) is above the quota. Everything else (heartbeats,
//!   finishes, cancels, node calls, reads, token and policy calls) is served as usual, so
//!   holders keep their leases and finishing work frees slots. Their commits still need a
//!   little space: the watermark is what keeps it free.
//! - **A burst cannot outrun it.** The middleware reads a sampled flag, so the event loop
//!   also asks [`SpaceWatch::room_for`] for each new job, measured then, with the bytes
//!   that the jobs already in its batch will write.
//! - **A full disk never stops the server.** A commit that fails for space anyway (another
//!   process filled the disk) answers every request of its batch 507, unacknowledged, and
//!   is kept and committed once space returns ([`crate::event_loop`]).
//! - **It comes back by itself.** The state is re-measured every [`CHECK_EVERY`] by a
//!   timer task, and at once on every refused submit, so the first submit after space
//!   returns succeeds. The request path itself only reads an atomic flag (no `statvfs` per
//!   request).
//! - Schedules the server runs itself keep submitting their (bounded) runs: they are not
//!   new work a client can grow without bound.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lockgate_api::ErrorCode;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the timer re-measures.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// The default watermark's upper bound: 256 MiB.
pub const DEFAULT_MAX_WATERMARK: u64 = 256 << 20;

/// The default free-space watermark of a filesystem of `total` bytes: the smaller of 1%
/// and [`DEFAULT_MAX_WATERMARK`].
pub fn default_watermark(total: u64) -> u64 {
    (total / 100).min(DEFAULT_MAX_WATERMARK)
}

/// Watches the data dir's free space and the store's size. See the module docs.
#[derive(Debug)]
pub struct SpaceWatch {
    dir: PathBuf,
    min_free: Option<u64>,
    quota: Option<u64>,
    refusing: AtomicBool,
    /// Why submits are refused now (the 507 message).
    reason: Mutex<Option<String>>,
}

fn store_bytes(dir: &Path) -> u64 {
    let db = lockgate_host::data_dir::DB_FILE;
    [db.to_string(), format!("{db}-wal")]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

impl SpaceWatch {
    /// A watch over `dir` with the free-space watermark `min_free` (`None`: the default,
    /// [`default_watermark`]; `Some(0)`: off) and the store quota `quota` (`None`: none).
    /// Measures once before returning.
    pub fn new(dir: &Path, min_free: Option<u64>, quota: Option<u64>) -> Arc<SpaceWatch> {
        let w = Arc::new(SpaceWatch {
            dir: dir.to_path_buf(),
            min_free,
            quota,
            refusing: AtomicBool::new(false),
            reason: Mutex::new(None),
        });
        w.check();
        w
    }

    /// Measures now; returns why new submits are refused (`None`: they are not).
    pub fn check(&self) -> Option<String> {
        let reason = self.measure(0);
        if reason.is_some() != self.refusing.load(Ordering::Relaxed) {
            match &reason {
                Some(r) => tracing::warn!("refusing new submits: {r}"),
                None => tracing::info!("free space is back: accepting new submits again"),
            }
        }
        self.refusing.store(reason.is_some(), Ordering::Release);
        *self.reason.lock().expect("not poisoned") = reason.clone();
        reason
    }

    /// Why new submits are refused with `pending` bytes more to be written.
    fn measure(&self, pending: u64) -> Option<String> {
        let more = if pending > 0 {
            format!(" (counting the {pending} bytes of the submits being written)")
        } else {
            String::new()
        };
        match rustix::fs::statvfs(&self.dir) {
            Ok(st) => {
                let free = st.f_bavail.saturating_mul(st.f_frsize);
                let total = st.f_blocks.saturating_mul(st.f_frsize);
                let mark = self.min_free.unwrap_or_else(|| default_watermark(total));
                if mark > 0 && free.saturating_sub(pending) < mark {
                    return Some(format!(
                        "the data dir {} has {free} bytes free{more}, below the free-space watermark of {mark} bytes (--min-free-space); new submits are refused until space is freed, heartbeats, finishes, cancels and reads still work",
                        self.dir.display()
                    ));
                }
            }
            Err(e) => tracing::warn!("statvfs {}: {e}", self.dir.display()),
        }
        let quota = self.quota?;
        let size = store_bytes(&self.dir);
        (size.saturating_add(pending) > quota).then(|| format!(
            "the store in {} is {size} bytes{more}, above the store quota of {quota} bytes (--store-quota); new submits are refused until it shrinks (retention, or a higher quota), heartbeats, finishes, cancels and reads still work",
            self.dir.display()
        ))
    }

    /// Why a new submit that would add about `pending` bytes (with those of the batch it
    /// joins) is refused, measured now (a refusal also updates what the middleware reads):
    /// the free space less `pending` against the watermark, the store's size plus
    /// `pending` against the quota. The event loop asks this for each new job, so a burst
    /// cannot outrun the timer's sample.
    pub fn room_for(&self, pending: u64) -> Option<String> {
        let why = self.measure(pending)?;
        // Refused: whether it is the pending bytes or the disk itself, the middleware's
        // flag is brought up to date (one more measurement, on this rare path only).
        self.check();
        Some(why)
    }

    /// Why new submits are refused, re-measuring first when they are (so space that came
    /// back is seen at once). The fast path is one atomic load.
    pub fn refusal(&self) -> Option<String> {
        if !self.refusing.load(Ordering::Acquire) {
            return None;
        }
        self.check()
    }

    /// Re-measures every [`CHECK_EVERY`] until `stop` turns true.
    pub fn spawn_timer(self: Arc<SpaceWatch>, mut stop: tokio::sync::watch::Receiver<bool>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECK_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let w = self.clone();
                let _ = tokio::task::spawn_blocking(move || w.check()).await;
            }
        });
    }
}

fn is_new_submit(req: &Request) -> bool {
    req.method() == Method::POST
        && matches!(
            req.uri().path(),
            "/v1/jobs" | "/v1/schedules" | "/v1/backups" | "/v1/restores"
        )
}

/// Axum middleware: 507 `insufficient_storage` for new submits while the watch refuses
/// them (see the module docs); every other request passes through.
///
/// # Cancel safety
/// Cancel safe: it decides before it hands the request on, and changes nothing itself.
pub async fn refuse_new_submits(
    State(watch): State<Arc<SpaceWatch>>,
    req: Request,
    next: Next,
) -> Response {
    if is_new_submit(&req) {
        if let Some(message) = watch.refusal() {
            return ApiError::new(ErrorCode::InsufficientStorage, message).into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_watermark_is_one_percent_capped_at_256_mib() {
        assert_eq!(default_watermark(8 << 20), (8 << 20) / 100);
        assert_eq!(default_watermark(10 << 30), (10u64 << 30) / 100);
        assert_eq!(default_watermark(100 << 30), 256 << 20);
    }

    #[test]
    fn a_quota_below_the_store_size_refuses_and_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lockgate.db"), vec![0u8; 4096]).unwrap();
        let w = SpaceWatch::new(dir.path(), Some(0), Some(1000));
        let why = w.refusal().expect("refused");
        assert!(
            why.contains("4096 bytes") && why.contains("--store-quota"),
            "{why}"
        );
        assert_eq!(
            SpaceWatch::new(dir.path(), Some(0), Some(5000)).refusal(),
            None
        );
    }
}
