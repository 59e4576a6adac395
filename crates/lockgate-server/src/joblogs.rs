//! Job logs: `POST /v1/jobs/{id}/logs` (the holder sends its command's output) and
//! `GET /v1/jobs/{id}/logs` (read a page, or long-poll for the next lines), and
//! `log_tail` for the failure notification.
//!
//! `routes.rs` holds the handlers; [`LogOp`] the loop operations, applied in `ops.rs`; the
//! lines live in the store (`lockgate-store`'s `sqlite/joblogs.rs`, bounded per job and in
//! total by `[retention]`).
//!
//! # Invariants
//! - Only the job's holder writes its log: the caller must be allowed to act on the job
//!   (its owner, an admin, or the agent of its node: `may_act`) **and** give the lease token
//!   the job holds now. A job that ended, or whose lease moved on, takes no more lines, so
//!   a stale holder cannot write into the next attempt's log.
//! - Whoever may see the job may read its log (`may_see`): a submitter reads only its own.
//! - Lines are written in the loop's group commit (no extra transaction, no extra fsync)
//!   and acknowledged after it; a long-poll is answered after the commit that stored the
//!   lines it waits for, or that ended the job, with a fresh read: never with lines the
//!   store could lose.

mod ops;
mod routes;

pub(crate) use ops::LogWaiter;
pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::protocol::Reply;
use lockgate_api::{LogAccepted, LogBatch, LogPage};
use lockgate_core::job::JobId;
use lockgate_store::Store;

/// Most lines one page of `GET /v1/jobs/{id}/logs` holds.
pub const PAGE_LINES: usize = 1000;

/// About this many bytes of text in one page (at least one line).
pub const PAGE_BYTES: usize = 1 << 20;

/// Job log operations of the loop.
#[derive(Debug)]
pub enum LogOp {
    /// `POST /v1/jobs/{id}/logs`.
    Append(JobId, LogBatch, Reply<LogAccepted>),
    /// `GET /v1/jobs/{id}/logs`: the lines after `after`; with `wait`, answered once
    /// there is one or the job has ended.
    Read {
        /// Job.
        id: JobId,
        /// The last line number the caller has.
        after: u64,
        /// At most this many lines.
        limit: usize,
        /// Long-poll: wait for a line or the job's end.
        wait: bool,
        /// The page.
        reply: Reply<LogPage>,
    },
}

/// The last `n` lines of a job's output, oldest first, as text (markers included); empty
/// when it has none or the store cannot be read (a notification is sent without them).
pub(crate) fn log_tail(store: &mut dyn Store, job: JobId, n: usize) -> Vec<String> {
    match store.job_log_tail(job, n) {
        Ok(lines) => lines.into_iter().map(|l| l.text).collect(),
        Err(e) => {
            tracing::warn!("job {job}: reading the last lines of its log: {e}");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_tail;
    use lockgate_api::LogStream;
    use lockgate_core::Timestamp;
    use lockgate_store::{Batch, LogAppend, SqliteStore, Store, StoredLogLine};

    #[test]
    fn log_tail_gives_the_last_lines_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let lines = (1..=5)
            .map(|i| StoredLogLine {
                seq: 0,
                at: Timestamp(i),
                stream: LogStream::Stderr,
                text: format!("line {i}"),
            })
            .collect();
        store
            .commit(&Batch {
                job_logs: vec![LogAppend {
                    job: 3,
                    at: Timestamp(9),
                    dropped: 0,
                    lines,
                }],
                ..Batch::default()
            })
            .unwrap();
        assert_eq!(log_tail(&mut store, 3, 2), ["line 4", "line 5"]);
        assert!(log_tail(&mut store, 4, 2).is_empty());
    }
}
