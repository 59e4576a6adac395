//! The rules of job logs that do not depend on the store: what a line costs against the
//! bounds, the marker lines, and how a read fills a page. The SQLite store
//! (`sqlite/joblogs.rs`) and the PostgreSQL store (`postgres/joblogs.rs`) both call these,
//! so a log reads the same on either.

use crate::StoredLogLine;

/// What a line costs beyond its text's bytes (its number, time and stream), so a log of
/// empty lines is bounded too.
pub const LINE_OVERHEAD: u64 = 32;

/// The marker line for `n` lines a holder dropped before sending.
pub(crate) fn holder_dropped_text(n: u64) -> String {
    format!("{n} lines dropped by the holder (its buffer was full or the server did not answer)")
}

/// The marker line for `n` lines the bounds removed.
pub(crate) fn bound_dropped_text(n: u64) -> String {
    format!(
        "{n} lines dropped (the server keeps the last [retention].job_log_bytes of a job's output, and job_logs_total_bytes of all jobs)"
    )
}

/// What a line counts against the bounds: its text and the per-line overhead.
pub(crate) fn cost(text: &str) -> u64 {
    text.len() as u64 + LINE_OVERHEAD
}

/// Appends to `out` the lines of one read that fit `max_bytes` of text (at least one, so
/// a reader always moves on), then cuts `out` to `limit` (at least one).
pub(crate) fn fill_page(
    out: &mut Vec<StoredLogLine>,
    mut lines: Vec<StoredLogLine>,
    limit: usize,
    max_bytes: usize,
) {
    let mut bytes = 0;
    let keep = lines
        .iter()
        .position(|l| {
            bytes += l.text.len();
            bytes > max_bytes
        })
        .map_or(lines.len(), |i| i.max(1));
    lines.truncate(keep);
    out.extend(lines);
    out.truncate(limit.max(1));
}
