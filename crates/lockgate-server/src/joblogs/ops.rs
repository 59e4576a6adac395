//! The job log operations inside the loop: append (by the holder), read and long-poll.

use super::{LogOp, PAGE_BYTES, PAGE_LINES};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::jobs::{may_act, may_see};
use crate::protocol::Reply;
use lockgate_api::{
    ErrorCode, LogAccepted, LogBatch, LogLineView, LogPage, LogStream, MAX_LOG_BATCH_LINES,
    MAX_LOG_LINE_BYTES,
};
use lockgate_core::job::JobId;
use lockgate_core::Timestamp;
use lockgate_store::{LogAppend, LogLimits, StoredLogLine};

/// A long-poll on a job's log: answered when a line after `after` is committed or the
/// job ends.
#[derive(Debug)]
pub(crate) struct LogWaiter {
    after: u64,
    limit: usize,
    reply: Reply<LogPage>,
}

/// `text` cut to [`MAX_LOG_LINE_BYTES`] on a character boundary, with `...`.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_LOG_LINE_BYTES {
        let mut cut = MAX_LOG_LINE_BYTES - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

impl Loop {
    /// Applies one job log operation.
    pub(crate) fn log_op(&mut self, p: &Principal, op: LogOp, now: Timestamp) {
        match op {
            LogOp::Append(id, batch, reply) => {
                let r = self.append_log(p, id, batch, now);
                self.answer(reply, r);
            }
            LogOp::Read {
                id,
                after,
                limit,
                wait,
                reply,
            } => self.read_log(p, id, after, limit, wait, reply),
        }
    }

    /// The store's bounds, from the policy's `[retention]`.
    fn log_limits(&self) -> LogLimits {
        let r = &self.engine.policy().retention;
        LogLimits {
            per_job: r.job_log_bytes,
            total: r.job_logs_total_bytes,
        }
    }

    fn append_log(
        &mut self,
        p: &Principal,
        id: JobId,
        batch: LogBatch,
        now: Timestamp,
    ) -> Result<LogAccepted, ApiError> {
        let job = self.find(id)?;
        may_act(p, &job)?;
        let held = self.engine.job(id).and_then(|j| j.lease.as_ref());
        if held.map(|l| l.token) != Some(batch.token) {
            let why = match (job.state.is_terminal(), held) {
                (true, _) => format!("job {id} already ended ({})", job.state),
                (false, None) => format!("job {id} is {} and holds no lease", job.state),
                (false, Some(_)) => format!("job {id}: the lease token is stale"),
            };
            return Err(ApiError::new(
                ErrorCode::LeaseLost,
                format!("{why}; only the job's current holder writes its log"),
            ));
        }
        if batch.lines.len() > MAX_LOG_BATCH_LINES {
            return Err(ApiError::invalid(
                "lines",
                format!(
                    "{} lines in one request, expected at most {MAX_LOG_BATCH_LINES}",
                    batch.lines.len()
                ),
            ));
        }
        let mut lines = Vec::with_capacity(batch.lines.len());
        for (i, l) in batch.lines.into_iter().enumerate() {
            if l.stream == LogStream::Lockgate {
                return Err(ApiError::invalid(
                    format!("lines[{i}].stream"),
                    "expected stdout or stderr (lockgate markers are the server's)",
                ));
            }
            let at = lockgate_api::time::parse(&l.at)
                .map_err(|e| ApiError::invalid(format!("lines[{i}].at"), e))?;
            lines.push(StoredLogLine {
                seq: 0,
                at,
                stream: l.stream,
                text: bounded(l.text),
            });
        }
        let accepted = lines.len() + usize::from(batch.dropped > 0);
        if accepted > 0 {
            self.batch.job_logs.push(LogAppend {
                job: id,
                at: now,
                dropped: batch.dropped,
                lines,
            });
            self.batch.log_limits = self.log_limits();
        }
        Ok(LogAccepted { accepted })
    }

    /// A page of the log after `after` (`ended`: the job has ended and left the engine).
    fn log_page(&mut self, id: JobId, after: u64, limit: usize) -> Result<LogPage, ApiError> {
        let ended = self.find(id)?.state.is_terminal() && self.engine.job(id).is_none();
        let lines = self
            .store
            .job_log(id, after, limit.clamp(1, PAGE_LINES), PAGE_BYTES)?;
        let next = lines.last().map_or(after, |l| l.seq.max(after));
        Ok(LogPage {
            lines: lines
                .into_iter()
                .map(|l| LogLineView {
                    seq: l.seq,
                    at: lockgate_api::time::format(l.at),
                    stream: l.stream,
                    text: l.text,
                })
                .collect(),
            next,
            ended,
        })
    }

    fn read_log(
        &mut self,
        p: &Principal,
        id: JobId,
        after: u64,
        limit: usize,
        wait: bool,
        reply: Reply<LogPage>,
    ) {
        let page = self
            .find(id)
            .and_then(|j| may_see(p, &j))
            .and_then(|()| self.log_page(id, after, limit));
        match page {
            Ok(page) if wait && page.lines.is_empty() && !page.ended => {
                let ws = self.log_waiters.entry(id).or_default();
                ws.retain(|w| !w.reply.is_closed());
                ws.push(LogWaiter {
                    after,
                    limit,
                    reply,
                });
            }
            r => self.answer(reply, r),
        }
    }

    /// After a commit: answers the log long-polls whose job got lines in it, or ended.
    pub(crate) fn wake_log_waiters(&mut self, touched: &[JobId]) {
        if self.log_waiters.is_empty() {
            return;
        }
        let due: Vec<JobId> = self
            .log_waiters
            .keys()
            .copied()
            .filter(|id| touched.contains(id) || self.engine.job(*id).is_none())
            .collect();
        for id in due {
            let Some(ws) = self.log_waiters.remove(&id) else {
                continue;
            };
            for w in ws {
                if w.reply.is_closed() {
                    continue;
                }
                let page = self.log_page(id, w.after, w.limit);
                self.answer(w.reply, page);
            }
        }
    }
}
