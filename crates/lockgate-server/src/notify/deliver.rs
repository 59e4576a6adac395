//! The delivery task: reads due outbox rows with its own connection, sends each through its
//! target (each send its own task, so a black-hole target holds up only its own rows), and
//! reports outcomes to the loop, which writes them in its next batch.
//!
//! It sleeps until the loop wakes it (new rows), a retry is due, or a send ends. A row it is
//! sending, or whose outcome the loop has not committed yet, is `in_flight` and not read
//! again; after a restart nothing is in flight, so every pending row is sent again.

use crate::auth::Principal;
use crate::event_loop::wall_ms;
use crate::protocol::LoopHandle;
use lockgate_core::policy::NotifyTarget;
use lockgate_core::Timestamp;
use lockgate_store::{OutboxOutcome, OutboxReader, OutboxRow, OutboxUpdate};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};

/// Rows read (and in flight) at once.
const MAX_IN_FLIGHT: usize = 256;
/// The first retry waits this long; each next one twice as long, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// When the outbox cannot be read, try again after this long.
const READ_RETRY: Duration = Duration::from_secs(1);

/// The wait before attempt `attempts + 1`, after `attempts` failed ones.
pub(crate) fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(20);
    FIRST_BACKOFF.saturating_mul(1 << shift).min(MAX_BACKOFF)
}

/// Starts the delivery task on the store at `db` (its own connection); a replica that
/// steps down aborts it through the handle.
pub(crate) fn spawn(
    lp: LoopHandle,
    db: lockgate_store::StoreLocation,
    wake: Arc<Notify>,
    targets: watch::Receiver<Arc<Vec<NotifyTarget>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let opened = tokio::task::spawn_blocking(move || db.open_reader()).await;
        let reader = match opened.map_err(|e| lockgate_store::StoreError::Io {
            operation: "open the outbox reader",
            message: e.to_string(),
        }) {
            Ok(Ok(r)) => Arc::new(Mutex::new(r)),
            Ok(Err(e)) | Err(e) => {
                tracing::error!("notifications are not sent: {e}");
                return;
            }
        };
        Task {
            lp,
            reader,
            wake,
            targets,
            in_flight: HashSet::new(),
        }
        .run()
        .await;
    })
}

struct Task {
    lp: LoopHandle,
    reader: Arc<Mutex<OutboxReader>>,
    wake: Arc<Notify>,
    targets: watch::Receiver<Arc<Vec<NotifyTarget>>>,
    in_flight: HashSet<(u64, String)>,
}

/// What a read of the outbox found.
type Read = (Vec<OutboxRow>, Option<Timestamp>);

impl Task {
    async fn run(mut self) {
        let (done_tx, mut done_rx) = mpsc::channel::<OutboxUpdate>(MAX_IN_FLIGHT);
        loop {
            let now = Timestamp(wall_ms());
            let next = match self.read(now).await {
                Ok((rows, next)) => {
                    self.start(rows, &done_tx);
                    next.map(|t| Duration::from_millis(t.since(now)))
                }
                Err(e) => {
                    tracing::warn!("notifications: cannot read the outbox (will retry): {e}");
                    Some(READ_RETRY)
                }
            };
            let sleep = next.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(sleep) => {}
                first = done_rx.recv() => {
                    let Some(first) = first else { return };
                    let mut updates = vec![first];
                    while let Ok(u) = done_rx.try_recv() {
                        updates.push(u);
                    }
                    if !self.report(updates).await {
                        return;
                    }
                }
            }
        }
    }

    /// Due rows not in flight, and the next `next_at` after `now`.
    async fn read(&self, now: Timestamp) -> Result<Read, String> {
        // Rows in flight are due too: read past them.
        let full = self.in_flight.len() >= MAX_IN_FLIGHT;
        let limit = MAX_IN_FLIGHT + self.in_flight.len();
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
            let rows = if full { Vec::new() } else { r.due(now, limit)? };
            Ok::<_, lockgate_store::StoreError>((rows, r.next_due_after(now)?))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
    }

    fn start(&mut self, rows: Vec<OutboxRow>, done: &mpsc::Sender<OutboxUpdate>) {
        let targets = self.targets.borrow().clone();
        for row in rows {
            let key = (row.seq, row.target.clone());
            if self.in_flight.len() >= MAX_IN_FLIGHT || !self.in_flight.insert(key) {
                continue;
            }
            let target = targets.iter().find(|t| t.name == row.target).cloned();
            let done = done.clone();
            tokio::spawn(async move {
                let _ = done.send(attempt(target, row).await).await;
            });
        }
    }

    /// Hands outcomes to the loop and waits for their commit; false when the loop is gone.
    async fn report(&mut self, updates: Vec<OutboxUpdate>) -> bool {
        let keys: Vec<_> = updates.iter().map(|u| (u.seq, u.target.clone())).collect();
        let r = self
            .lp
            .ask(Principal::system(), |reply| {
                super::NotifyOp::Report(updates, reply)
            })
            .await;
        for k in keys {
            self.in_flight.remove(&k);
        }
        r.is_ok()
    }
}

/// One attempt at one row, and what became of it.
async fn attempt(target: Option<NotifyTarget>, row: OutboxRow) -> OutboxUpdate {
    let attempts = row.attempts.saturating_add(1);
    let outcome = match &target {
        None => OutboxOutcome::GaveUp {
            at: Timestamp(wall_ms()),
            error: format!("the target {:?} is no longer in the policy", row.target),
        },
        Some(t) => match super::send::send(t, &row.body).await {
            Ok(detail) => {
                tracing::debug!("notification {} to {:?}: {detail}", row.seq, t.name);
                OutboxOutcome::Delivered {
                    at: Timestamp(wall_ms()),
                }
            }
            Err(error) if attempts > t.retries => {
                tracing::warn!(
                    "notification of event {} to {:?} given up after {attempts} attempts: {error}",
                    row.seq,
                    t.name
                );
                OutboxOutcome::GaveUp {
                    at: Timestamp(wall_ms()),
                    error,
                }
            }
            Err(error) => {
                tracing::info!(
                    "notification of event {} to {:?} failed (attempt {attempts}, will retry): {error}",
                    row.seq,
                    t.name
                );
                OutboxOutcome::Retry {
                    next_at: Timestamp(wall_ms()).plus(backoff(attempts)),
                    error,
                }
            }
        },
    };
    OutboxUpdate {
        seq: row.seq,
        target: row.target,
        attempts,
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_from_half_a_second_to_five_minutes() {
        let ms = |a| backoff(a).as_millis();
        assert_eq!([ms(1), ms(2), ms(3), ms(4)], [500, 1000, 2000, 4000]);
        assert_eq!(backoff(11), Duration::from_secs(300));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
    }
}
