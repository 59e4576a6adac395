//! Learning of a cancel at once: a thread that long-polls the held job with
//! `GET /v1/jobs/{id}/wait?cancel=true` and hands over the job as soon as its cancellation
//! (or preemption) is requested, so [`crate::hold()`] stops the child within a fraction
//! of a second of the request reaching the server, not at the next renewal (TTL/3 later).
//!
//! The watch only ever speeds a stop up: renewals still carry `cancel_requested`, so a
//! server that refuses the poll (one older than `cancel`), a poll quota, or a server that
//! cannot be reached leaves the holder exactly as safe as before, only slower to cancel.

use crate::{Backoff, Client};
use lockgate_api::JobView;
use lockgate_core::JobState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;

/// How long one poll waits on the server (the thread ends within this after the hold).
const POLL_S: u64 = 10;

/// The watch of one held job; dropping it lets its thread end after its current poll.
#[derive(Debug)]
pub(crate) struct CancelWatch {
    requested: Receiver<JobView>,
    done: Arc<AtomicBool>,
}

impl CancelWatch {
    /// Starts watching job `id` (admitted: `preparing` or `running`).
    pub(crate) fn start(client: Client, id: u64) -> CancelWatch {
        let (tx, requested) = channel();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let watch = move || {
            let mut from = JobState::Running;
            let mut backoff = Backoff::new();
            while !stop.load(Ordering::Relaxed) {
                match client.wait_or_cancel(id, from, POLL_S) {
                    Ok(job) if job.cancel_requested => {
                        let _ = tx.send(job);
                        return;
                    }
                    Ok(job) if job.state.is_admitted() => {
                        from = job.state;
                        backoff = Backoff::new();
                    }
                    // Ended, or queued again: nothing left to watch.
                    Ok(_) => return,
                    Err(e) if e.is_temporary() => std::thread::sleep(backoff.next_pause()),
                    // Refused (an older server, the job gone): renewals still tell.
                    Err(_) => return,
                }
            }
        };
        // Without a thread the renewals still carry the cancel.
        let _ = std::thread::Builder::new()
            .name(format!("cancel-watch-{id}"))
            .spawn(watch);
        CancelWatch { requested, done }
    }

    /// The job, once its cancellation was requested (each request is handed over once).
    pub(crate) fn requested(&self) -> Option<JobView> {
        self.requested.try_recv().ok()
    }
}

impl Drop for CancelWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}
