//! Job logs in SQLite (schema version 7): the output lines of the command a job ran.
//!
//! `job_logs` holds one row per line, keyed by (job, seq); `job_log_meta` one row per job
//! with a log: the next line number, the bytes kept, the first line kept and how many lines
//! the bounds removed. `meta.job_log_bytes` is the sum of every job's `bytes`, so the total
//! bound costs one row read per commit, not a scan.
//!
//! # Invariants
//! - **Line numbers never repeat within a job**: `next_seq` only grows, also when lines are
//!   dropped; a reader's `after` stays valid across trims.
//! - **Bounded per job**: after a commit a job keeps at most `per_job` bytes (a line counts
//!   its text's bytes plus [`crate::LOG_LINE_OVERHEAD`]); the oldest lines go first and the reader is
//!   given one marker line "N lines dropped" in their place ([`read`]).
//! - **Bounded in total**: after a commit the sum stays at most `total`: the logs of the
//!   oldest jobs (lowest id) are dropped whole first.
//! - Written in the batch's transaction: a log line is durable with the batch that
//!   accepted it, and costs the event loop no extra fsync.

use super::io;
use crate::log_bounds::{bound_dropped_text, cost, fill_page, holder_dropped_text, LINE_OVERHEAD};
use crate::{LogAppend, LogLimits, StoreError, StoredLogLine};
use lockgate_api::LogStream;
use lockgate_core::job::JobId;
use lockgate_core::Timestamp;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

/// Migration 6 -> 7.
pub(super) const MIGRATION: &str = "CREATE TABLE job_logs (
        job INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        stream TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (job, seq)
    ) WITHOUT ROWID;
    CREATE TABLE job_log_meta (
        job INTEGER PRIMARY KEY,
        next_seq INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        first_seq INTEGER NOT NULL,
        dropped INTEGER NOT NULL,
        dropped_at INTEGER NOT NULL
    );";

/// One job's log bookkeeping (a `job_log_meta` row).
#[derive(Debug, Clone, Copy)]
struct Meta {
    next_seq: u64,
    bytes: u64,
    first_seq: u64,
    dropped: u64,
    dropped_at: u64,
}

impl Meta {
    const EMPTY: Meta = Meta {
        next_seq: 1,
        bytes: 0,
        first_seq: 1,
        dropped: 0,
        dropped_at: 0,
    };
}

fn meta(conn: &Connection, job: JobId) -> Result<Option<Meta>, rusqlite::Error> {
    conn.prepare_cached(
        "SELECT next_seq, bytes, first_seq, dropped, dropped_at FROM job_log_meta WHERE job = ?1",
    )?
    .query_row([job as i64], |r| {
        Ok(Meta {
            next_seq: r.get::<_, i64>(0)? as u64,
            bytes: r.get::<_, i64>(1)? as u64,
            first_seq: r.get::<_, i64>(2)? as u64,
            dropped: r.get::<_, i64>(3)? as u64,
            dropped_at: r.get::<_, i64>(4)? as u64,
        })
    })
    .optional()
}

fn put_meta(tx: &Transaction<'_>, job: JobId, m: &Meta) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO job_log_meta (job, next_seq, bytes, first_seq, dropped, dropped_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        job as i64,
        m.next_seq as i64,
        m.bytes as i64,
        m.first_seq as i64,
        m.dropped as i64,
        m.dropped_at as i64
    ])?;
    Ok(())
}

fn total(conn: &Connection) -> Result<u64, rusqlite::Error> {
    let v: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'job_log_bytes'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    Ok(v.and_then(|v| v.parse().ok()).unwrap_or(0))
}

fn set_total(tx: &Transaction<'_>, bytes: u64) -> Result<(), rusqlite::Error> {
    tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES ('job_log_bytes', ?1)")?
        .execute([bytes.to_string()])?;
    Ok(())
}

/// Writes the log part of a batch: every append, then the per-job and total bounds.
pub(super) fn write(
    tx: &Transaction<'_>,
    appends: &[LogAppend],
    limits: LogLimits,
) -> Result<(), rusqlite::Error> {
    if appends.is_empty() {
        return Ok(());
    }
    let mut sum = total(tx)?;
    let mut put = tx.prepare_cached(
        "INSERT INTO job_logs (job, seq, at, stream, text) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for a in appends {
        let mut m = meta(tx, a.job)?.unwrap_or(Meta::EMPTY);
        let before = m.bytes;
        let marker = (a.dropped > 0).then(|| StoredLogLine {
            seq: 0,
            at: a.at,
            stream: LogStream::Lockgate,
            text: holder_dropped_text(a.dropped),
        });
        for line in marker.iter().chain(&a.lines) {
            put.execute(params![
                a.job as i64,
                m.next_seq as i64,
                line.at.0 as i64,
                line.stream.as_str(),
                line.text
            ])?;
            m.next_seq += 1;
            m.bytes += cost(&line.text);
        }
        trim(tx, a.job, &mut m, limits.per_job, a.at)?;
        put_meta(tx, a.job, &m)?;
        sum = (sum + m.bytes).saturating_sub(before);
    }
    drop(put);
    if sum > limits.total {
        sum = drop_oldest(tx, sum, limits.total, appends[0].at)?;
    }
    set_total(tx, sum)
}

/// Drops the oldest lines of one job until it keeps at most `max` bytes.
fn trim(
    tx: &Transaction<'_>,
    job: JobId,
    m: &mut Meta,
    max: u64,
    now: Timestamp,
) -> Result<(), rusqlite::Error> {
    if m.bytes <= max {
        return Ok(());
    }
    let mut oldest = tx.prepare_cached(
        "SELECT seq, length(CAST(text AS BLOB)) FROM job_logs WHERE job = ?1 AND seq >= ?2
         ORDER BY seq LIMIT 512",
    )?;
    let mut cut = m.first_seq;
    while m.bytes > max && cut < m.next_seq {
        let rows = oldest
            .query_map(params![job as i64, cut as i64], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        if rows.is_empty() {
            break;
        }
        for (seq, len) in rows {
            if m.bytes <= max {
                break;
            }
            m.bytes = m.bytes.saturating_sub(len + LINE_OVERHEAD);
            m.dropped += 1;
            cut = seq + 1;
        }
    }
    tx.prepare_cached("DELETE FROM job_logs WHERE job = ?1 AND seq < ?2")?
        .execute(params![job as i64, cut as i64])?;
    m.first_seq = cut;
    m.dropped_at = now.0;
    Ok(())
}

/// Drops whole logs, oldest job first, until the sum is at most `max`; returns the sum.
fn drop_oldest(
    tx: &Transaction<'_>,
    mut sum: u64,
    max: u64,
    now: Timestamp,
) -> Result<u64, rusqlite::Error> {
    let mut oldest =
        tx.prepare_cached("SELECT job FROM job_log_meta WHERE bytes > 0 ORDER BY job LIMIT 64")?;
    while sum > max {
        let jobs = oldest
            .query_map([], |r| r.get::<_, i64>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        if jobs.is_empty() {
            return Ok(0);
        }
        for job in jobs {
            if sum <= max {
                break;
            }
            let job = job as JobId;
            let mut m = meta(tx, job)?.unwrap_or(Meta::EMPTY);
            tx.prepare_cached("DELETE FROM job_logs WHERE job = ?1")?
                .execute([job as i64])?;
            sum = sum.saturating_sub(m.bytes);
            m.dropped += m.next_seq - m.first_seq;
            m.first_seq = m.next_seq;
            m.bytes = 0;
            m.dropped_at = now.0;
            put_meta(tx, job, &m)?;
        }
    }
    Ok(sum)
}

/// The marker a reader gets in place of the lines the bounds removed.
fn dropped_marker(m: &Meta) -> StoredLogLine {
    StoredLogLine {
        seq: m.first_seq.saturating_sub(1),
        at: Timestamp(m.dropped_at),
        stream: LogStream::Lockgate,
        text: bound_dropped_text(m.dropped),
    }
}

fn rows(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<StoredLogLine>, StoreError> {
    let err = io("read job logs");
    let mut stmt = conn.prepare_cached(sql).map_err(&err)?;
    let lines = stmt
        .query_map(args, |r| {
            Ok(StoredLogLine {
                seq: r.get::<_, i64>(0)? as u64,
                at: Timestamp(r.get::<_, i64>(1)? as u64),
                stream: LogStream::parse(&r.get::<_, String>(2)?).unwrap_or(LogStream::Lockgate),
                text: r.get(3)?,
            })
        })
        .map_err(&err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&err);
    lines
}

/// The lines of `job` after `after`, oldest first, at most `limit` (and about `max_bytes`);
/// a marker first when lines after `after` were dropped.
pub(super) fn read(
    conn: &Connection,
    job: JobId,
    after: u64,
    limit: usize,
    max_bytes: usize,
) -> Result<Vec<StoredLogLine>, StoreError> {
    let Some(m) = meta(conn, job).map_err(io("read job logs"))? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut from = after.min(i64::MAX as u64);
    if m.dropped > 0 && from.saturating_add(1) < m.first_seq {
        out.push(dropped_marker(&m));
        from = m.first_seq.saturating_sub(1);
    }
    let lines = rows(
        conn,
        "SELECT seq, at, stream, text FROM job_logs WHERE job = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        &[&(job as i64), &(from as i64), &(limit as i64)],
    )?;
    fill_page(&mut out, lines, limit, max_bytes);
    Ok(out)
}

/// The last `n` stored lines of `job`, oldest first.
pub(super) fn tail(
    conn: &Connection,
    job: JobId,
    n: usize,
) -> Result<Vec<StoredLogLine>, StoreError> {
    let mut lines = rows(
        conn,
        "SELECT seq, at, stream, text FROM job_logs WHERE job = ?1 ORDER BY seq DESC LIMIT ?2",
        &[&(job as i64), &(n as i64)],
    )?;
    lines.reverse();
    Ok(lines)
}

/// Deletes the logs of the finished jobs retention deletes (call before deleting them);
/// returns how many lines went.
pub(super) fn prune(tx: &Transaction<'_>, cutoff: i64) -> Result<usize, rusqlite::Error> {
    const GONE: &str = "SELECT id FROM jobs WHERE live = 0 AND finished_at < ?1";
    let freed: i64 = tx.query_row(
        &format!("SELECT coalesce(sum(bytes), 0) FROM job_log_meta WHERE job IN ({GONE})"),
        [cutoff],
        |r| r.get(0),
    )?;
    let lines = tx.execute(
        &format!("DELETE FROM job_logs WHERE job IN ({GONE})"),
        [cutoff],
    )?;
    tx.execute(
        &format!("DELETE FROM job_log_meta WHERE job IN ({GONE})"),
        [cutoff],
    )?;
    if freed > 0 {
        let sum = total(tx)?.saturating_sub(freed as u64);
        set_total(tx, sum)?;
    }
    Ok(lines)
}

/// The bytes every job's log keeps together (`meta.job_log_bytes`).
pub(super) fn total_bytes(conn: &Connection) -> Result<u64, StoreError> {
    total(conn).map_err(io("read job logs"))
}

#[cfg(test)]
mod tests {
    use crate::log_bounds::LINE_OVERHEAD;
    use crate::{Batch, LogAppend, LogLimits, SqliteStore, Store, StoredLogLine};
    use lockgate_api::LogStream;
    use lockgate_core::Timestamp;

    fn lines(from: usize, n: usize, width: usize) -> Vec<StoredLogLine> {
        (from..from + n)
            .map(|i| StoredLogLine {
                seq: 0,
                at: Timestamp(1_000 + i as u64),
                stream: if i % 2 == 0 {
                    LogStream::Stdout
                } else {
                    LogStream::Stderr
                },
                text: format!("{i:0width$}"),
            })
            .collect()
    }

    fn append(job: u64, dropped: u64, l: Vec<StoredLogLine>, limits: LogLimits) -> Batch {
        Batch {
            job_logs: vec![LogAppend {
                job,
                at: Timestamp(5_000),
                dropped,
                lines: l,
            }],
            log_limits: limits,
            ..Batch::default()
        }
    }

    fn texts(l: &[StoredLogLine]) -> Vec<String> {
        l.iter().map(|l| l.text.clone()).collect()
    }

    #[test]
    fn lines_keep_their_order_and_streams_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let big = LogLimits::default();
        s.commit(&append(7, 0, lines(0, 3, 1), big)).unwrap();
        s.commit(&append(7, 2, lines(3, 2, 1), big)).unwrap();
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let all = s.job_log(7, 0, 100, 1 << 20).unwrap();
        assert_eq!(
            texts(&all),
            [
                "0",
                "1",
                "2",
                "2 lines dropped by the holder (its buffer was full or the server did not answer)",
                "3",
                "4"
            ]
        );
        assert_eq!(
            all.iter().map(|l| l.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(all[1].stream, LogStream::Stderr);
        assert_eq!(all[3].stream, LogStream::Lockgate);
        assert_eq!(texts(&s.job_log(7, 4, 100, 1 << 20).unwrap()), ["3", "4"]);
        assert_eq!(texts(&s.job_log(7, 0, 2, 1 << 20).unwrap()), ["0", "1"]);
        assert_eq!(texts(&s.job_log_tail(7, 2).unwrap()), ["3", "4"]);
        assert!(s.job_log(8, 0, 100, 1 << 20).unwrap().is_empty());
    }

    #[test]
    fn a_job_keeps_at_most_its_bound_and_the_reader_is_told_how_many_lines_went() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let per_line = 8 + LINE_OVERHEAD;
        let limits = LogLimits {
            per_job: 100 * per_line,
            total: 1 << 30,
        };
        for round in 0..10 {
            s.commit(&append(1, 0, lines(round * 50, 50, 8), limits))
                .unwrap();
            assert!(s.job_log_bytes().unwrap() <= limits.per_job);
        }
        let all = s.job_log(1, 0, 1000, 1 << 20).unwrap();
        assert_eq!(all.len(), 101, "the marker and the last 100 lines");
        assert_eq!(all[0].stream, LogStream::Lockgate);
        assert!(
            all[0].text.starts_with("400 lines dropped"),
            "{}",
            all[0].text
        );
        assert_eq!(all[1].text, "00000400");
        assert_eq!(all[1].seq, 401);
        assert_eq!(all[100].text, "00000499");
        // A reader past the dropped lines gets no marker.
        assert_eq!(s.job_log(1, 450, 1000, 1 << 20).unwrap()[0].seq, 451);
        // A cursor past every line (even u64::MAX) reads nothing, and never overflows.
        assert!(s.job_log(1, u64::MAX, 1000, 1 << 20).unwrap().is_empty());
    }

    #[test]
    fn over_the_total_bound_the_oldest_jobs_logs_go_first_and_retention_takes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let per_line = 8 + LINE_OVERHEAD;
        let limits = LogLimits {
            per_job: 100 * per_line,
            total: 150 * per_line,
        };
        s.commit(&append(1, 0, lines(0, 80, 8), limits)).unwrap();
        s.commit(&append(2, 0, lines(0, 80, 8), limits)).unwrap();
        assert_eq!(s.job_log_bytes().unwrap(), 80 * per_line);
        let one = s.job_log(1, 0, 1000, 1 << 20).unwrap();
        assert_eq!(one.len(), 1);
        assert!(
            one[0].text.starts_with("80 lines dropped"),
            "{}",
            one[0].text
        );
        assert_eq!(s.job_log(2, 0, 1000, 1 << 20).unwrap().len(), 80);
        // Job 2 finished long ago: retention deletes it and its log.
        let mut job = lockgate_core::job::JobSpec {
            kind: "backup".into(),
            owner: "o".into(),
            ..Default::default()
        }
        .check(&lockgate_core::Policy::unlimited())
        .unwrap()
        .into_job(2, Timestamp(1));
        job.state = lockgate_core::JobState::Succeeded;
        job.finished_at = Some(Timestamp(10));
        s.commit(&Batch {
            jobs: vec![(job, false)],
            ..Batch::default()
        })
        .unwrap();
        assert_eq!(s.prune(Timestamp(1_000)).unwrap().log_lines, 80);
        assert_eq!(s.job_log_bytes().unwrap(), 0);
        assert!(s.job_log(2, 0, 1000, 1 << 20).unwrap().is_empty());
    }

    /// Not a benchmark (nothing is asserted about time): prints what a batch of log lines
    /// adds to a group commit, for the record in docs/operations.md.
    #[test]
    fn measure_the_commit_cost_of_log_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let limits = LogLimits::default();
        let t = std::time::Instant::now();
        for _ in 0..20 {
            s.commit(&Batch {
                max_token: Some(1),
                ..Batch::default()
            })
            .unwrap();
        }
        let empty = t.elapsed() / 20;
        let t = std::time::Instant::now();
        for i in 0..20 {
            let b = append(i % 4, 0, lines(0, 1000, 80), limits);
            s.commit(&b).unwrap();
        }
        let full = t.elapsed() / 20;
        eprintln!("commit without logs {empty:?}, with 1000 lines of 80 bytes {full:?}");
        assert_eq!(s.job_log(0, 0, 10_000, 1 << 30).unwrap().len(), 5000);
    }
}
