//! Job logs in PostgreSQL: the same bookkeeping and bounds as the SQLite store
//! (`crate::sqlite::joblogs`, whose header states the invariants): one row per line in
//! `lockgate_job_logs`, one per job in `lockgate_job_log_meta`, and the sum of every job's
//! bytes in `lockgate_meta.job_log_bytes`.
//!
//! # Implementation details
//! - The metas of every job of a batch are read in one statement, and each append's lines
//!   are one `UNNEST` insert; only a job over its bound costs more round trips (reading
//!   its oldest lines' sizes, 512 at a time, then one delete).

use super::conn::{Conn, R};
use super::{ms, ts};
use crate::log_bounds::{bound_dropped_text, cost, fill_page, holder_dropped_text, LINE_OVERHEAD};
use crate::{LogAppend, LogLimits, StoredLogLine};
use lockgate_api::LogStream;
use lockgate_core::job::JobId;
use lockgate_core::Timestamp;
use std::collections::HashMap;

/// One job's log bookkeeping (a `lockgate_job_log_meta` row).
#[derive(Debug, Clone, Copy)]
struct Meta {
    next_seq: u64,
    bytes: u64,
    first_seq: u64,
    dropped: u64,
    dropped_at: u64,
}

const EMPTY: Meta = Meta {
    next_seq: 1,
    bytes: 0,
    first_seq: 1,
    dropped: 0,
    dropped_at: 0,
};

fn meta_of(r: &tokio_postgres::Row) -> Meta {
    Meta {
        next_seq: r.get::<_, i64>(1) as u64,
        bytes: r.get::<_, i64>(2) as u64,
        first_seq: r.get::<_, i64>(3) as u64,
        dropped: r.get::<_, i64>(4) as u64,
        dropped_at: r.get::<_, i64>(5) as u64,
    }
}

async fn metas(c: &mut Conn, jobs: &[i64]) -> R<HashMap<JobId, Meta>> {
    let rows = c
        .query(
            "SELECT job, next_seq, bytes, first_seq, dropped, dropped_at
             FROM lockgate_job_log_meta WHERE job = ANY($1)",
            &[&jobs],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, i64>(0) as JobId, meta_of(r)))
        .collect())
}

async fn put_metas(c: &mut Conn, metas: &HashMap<JobId, Meta>) -> R<()> {
    if metas.is_empty() {
        return Ok(());
    }
    let job: Vec<i64> = metas.keys().map(|&j| j as i64).collect();
    let m: Vec<&Meta> = metas.values().collect();
    let col = |f: fn(&Meta) -> u64| m.iter().map(|m| f(m) as i64).collect::<Vec<i64>>();
    c.exec(
        "INSERT INTO lockgate_job_log_meta (job, next_seq, bytes, first_seq, dropped, dropped_at)
         SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[],
                              $5::bigint[], $6::bigint[])
         ON CONFLICT (job) DO UPDATE SET next_seq = excluded.next_seq, bytes = excluded.bytes,
            first_seq = excluded.first_seq, dropped = excluded.dropped,
            dropped_at = excluded.dropped_at",
        &[
            &job,
            &col(|m| m.next_seq),
            &col(|m| m.bytes),
            &col(|m| m.first_seq),
            &col(|m| m.dropped),
            &col(|m| m.dropped_at),
        ],
    )
    .await?;
    Ok(())
}

/// The sum of every job's bytes.
pub(super) async fn total(c: &mut Conn) -> R<u64> {
    let row = c
        .opt(
            "SELECT value FROM lockgate_meta WHERE key = 'job_log_bytes'",
            &[],
        )
        .await?;
    Ok(row
        .and_then(|r| r.get::<_, String>(0).parse().ok())
        .unwrap_or(0))
}

async fn set_total(c: &mut Conn, bytes: u64) -> R<()> {
    c.exec(
        "INSERT INTO lockgate_meta (key, value) VALUES ('job_log_bytes', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&bytes.to_string()],
    )
    .await?;
    Ok(())
}

/// Writes the log part of a batch: every append, then the per-job and total bounds.
pub(super) async fn write(c: &mut Conn, appends: &[LogAppend], limits: LogLimits) -> R<()> {
    if appends.is_empty() {
        return Ok(());
    }
    let mut sum = total(c).await?;
    let jobs: Vec<i64> = appends.iter().map(|a| a.job as i64).collect();
    let mut all = metas(c, &jobs).await?;
    for a in appends {
        let mut m = all.get(&a.job).copied().unwrap_or(EMPTY);
        let before = m.bytes;
        let marker = (a.dropped > 0).then(|| StoredLogLine {
            seq: 0,
            at: a.at,
            stream: LogStream::Lockgate,
            text: holder_dropped_text(a.dropped),
        });
        let (mut seq, mut at, mut stream, mut text) = (vec![], vec![], vec![], vec![]);
        for line in marker.iter().chain(&a.lines) {
            seq.push(m.next_seq as i64);
            at.push(ms(line.at));
            stream.push(line.stream.as_str());
            text.push(line.text.as_str());
            m.next_seq += 1;
            m.bytes += cost(&line.text);
        }
        if !seq.is_empty() {
            c.exec(
                "INSERT INTO lockgate_job_logs (job, seq, at, stream, text)
                 SELECT $1, * FROM UNNEST($2::bigint[], $3::bigint[], $4::text[], $5::text[])",
                &[&(a.job as i64), &seq, &at, &stream, &text],
            )
            .await?;
        }
        trim(c, a.job, &mut m, limits.per_job, a.at).await?;
        all.insert(a.job, m);
        sum = (sum + m.bytes).saturating_sub(before);
    }
    if sum > limits.total {
        sum = drop_oldest(c, &mut all, sum, limits.total, appends[0].at).await?;
    }
    put_metas(c, &all).await?;
    set_total(c, sum).await
}

/// Drops the oldest lines of one job until it keeps at most `max` bytes.
async fn trim(c: &mut Conn, job: JobId, m: &mut Meta, max: u64, now: Timestamp) -> R<()> {
    if m.bytes <= max {
        return Ok(());
    }
    let mut cut = m.first_seq;
    while m.bytes > max && cut < m.next_seq {
        let rows = c
            .query(
                "SELECT seq, octet_length(text) FROM lockgate_job_logs
                 WHERE job = $1 AND seq >= $2 ORDER BY seq LIMIT 512",
                &[&(job as i64), &(cut as i64)],
            )
            .await?;
        if rows.is_empty() {
            break;
        }
        for r in rows {
            if m.bytes <= max {
                break;
            }
            let len = r.get::<_, i32>(1) as u64;
            m.bytes = m.bytes.saturating_sub(len + LINE_OVERHEAD);
            m.dropped += 1;
            cut = r.get::<_, i64>(0) as u64 + 1;
        }
    }
    c.exec(
        "DELETE FROM lockgate_job_logs WHERE job = $1 AND seq < $2",
        &[&(job as i64), &(cut as i64)],
    )
    .await?;
    m.first_seq = cut;
    m.dropped_at = now.0;
    Ok(())
}

/// Drops whole logs, oldest job first, until the sum is at most `max`; returns the sum.
/// `all` holds this batch's metas (newer than the table's).
async fn drop_oldest(
    c: &mut Conn,
    all: &mut HashMap<JobId, Meta>,
    mut sum: u64,
    max: u64,
    now: Timestamp,
) -> R<u64> {
    // The table's metas are behind `all` for this batch's jobs: write them first.
    put_metas(c, all).await?;
    while sum > max {
        let rows = c
            .query(
                "SELECT job, next_seq, bytes, first_seq, dropped, dropped_at
                 FROM lockgate_job_log_meta WHERE bytes > 0 ORDER BY job LIMIT 64",
                &[],
            )
            .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let mut gone = Vec::new();
        for r in &rows {
            if sum <= max {
                break;
            }
            let job = r.get::<_, i64>(0) as JobId;
            let mut m = meta_of(r);
            sum = sum.saturating_sub(m.bytes);
            m.dropped += m.next_seq - m.first_seq;
            m.first_seq = m.next_seq;
            m.bytes = 0;
            m.dropped_at = now.0;
            all.insert(job, m);
            gone.push(job as i64);
        }
        c.exec(
            "DELETE FROM lockgate_job_logs WHERE job = ANY($1)",
            &[&gone],
        )
        .await?;
        put_metas(c, all).await?;
    }
    Ok(sum)
}

fn line_of(r: &tokio_postgres::Row) -> StoredLogLine {
    StoredLogLine {
        seq: r.get::<_, i64>(0) as u64,
        at: ts(r.get(1)),
        stream: LogStream::parse(r.get(2)).unwrap_or(LogStream::Lockgate),
        text: r.get(3),
    }
}

/// The lines of `job` after `after` (as [`crate::Store::job_log`]).
pub(super) async fn read(
    c: &mut Conn,
    job: JobId,
    after: u64,
    limit: usize,
    max_bytes: usize,
) -> R<Vec<StoredLogLine>> {
    let Some(m) = metas(c, &[job as i64]).await?.remove(&job) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut from = after.min(i64::MAX as u64);
    if m.dropped > 0 && from.saturating_add(1) < m.first_seq {
        out.push(StoredLogLine {
            seq: m.first_seq.saturating_sub(1),
            at: Timestamp(m.dropped_at),
            stream: LogStream::Lockgate,
            text: bound_dropped_text(m.dropped),
        });
        from = m.first_seq.saturating_sub(1);
    }
    let rows = c
        .query(
            "SELECT seq, at, stream, text FROM lockgate_job_logs
             WHERE job = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[
                &(job as i64),
                &(from as i64),
                &(limit.min(i64::MAX as usize) as i64),
            ],
        )
        .await?;
    fill_page(
        &mut out,
        rows.iter().map(line_of).collect(),
        limit,
        max_bytes,
    );
    Ok(out)
}

/// The last `n` stored lines of `job`, oldest first.
pub(super) async fn tail(c: &mut Conn, job: JobId, n: usize) -> R<Vec<StoredLogLine>> {
    let rows = c
        .query(
            "SELECT seq, at, stream, text FROM lockgate_job_logs
             WHERE job = $1 ORDER BY seq DESC LIMIT $2",
            &[&(job as i64), &(n.min(i64::MAX as usize) as i64)],
        )
        .await?;
    let mut lines: Vec<StoredLogLine> = rows.iter().map(line_of).collect();
    lines.reverse();
    Ok(lines)
}

/// Deletes the logs of the finished jobs retention deletes (before deleting them);
/// returns how many lines went.
pub(super) async fn prune(c: &mut Conn, cutoff: i64) -> R<u64> {
    let freed: i64 = c
        .query(
            "SELECT coalesce(sum(bytes), 0)::bigint FROM lockgate_job_log_meta WHERE job IN
                (SELECT id FROM lockgate_jobs WHERE NOT live AND finished_at < $1)",
            &[&cutoff],
        )
        .await?[0]
        .get(0);
    let lines = c
        .exec(
            "DELETE FROM lockgate_job_logs WHERE job IN
                (SELECT id FROM lockgate_jobs WHERE NOT live AND finished_at < $1)",
            &[&cutoff],
        )
        .await?;
    c.exec(
        "DELETE FROM lockgate_job_log_meta WHERE job IN
            (SELECT id FROM lockgate_jobs WHERE NOT live AND finished_at < $1)",
        &[&cutoff],
    )
    .await?;
    if freed > 0 {
        let sum = total(c).await?.saturating_sub(freed as u64);
        set_total(c, sum).await?;
    }
    Ok(lines)
}
