//! Reading the PostgreSQL store: the start state and the listings, with the SQLite store's
//! orders and filters (`crate::sqlite`).

use super::conn::{Conn, PgError, R};
use super::{decode, ms, ts};
use crate::*;
use tokio_postgres::Row;

/// The job listing, oldest first. `$8` is the active filter (the states that have not
/// ended, as the SQLite listing names them).
const JOBS_ASC: &str = "SELECT body FROM lockgate_jobs WHERE id > $1 AND id < $7
    AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR kind = $3)
    AND ($4::text IS NULL OR owner = $4) AND ($5::text IS NULL OR node = $5)
    AND (NOT $8 OR state IN ('queued', 'preparing', 'prepared', 'running'))
    ORDER BY id LIMIT $6";

/// The job listing, newest first (as [`JOBS_ASC`]).
const JOBS_DESC: &str = "SELECT body FROM lockgate_jobs WHERE id > $1 AND id < $7
    AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR kind = $3)
    AND ($4::text IS NULL OR owner = $4) AND ($5::text IS NULL OR node = $5)
    AND (NOT $8 OR state IN ('queued', 'preparing', 'prepared', 'running'))
    ORDER BY id DESC LIMIT $6";

fn bodies<T: serde::de::DeserializeOwned>(what: &'static str, rows: &[Row]) -> R<Vec<T>> {
    rows.iter()
        .map(|r| decode(what, r.get::<_, &str>(0)))
        .collect()
}

async fn meta(c: &mut Conn, key: &str) -> R<Option<String>> {
    let row = c
        .opt("SELECT value FROM lockgate_meta WHERE key = $1", &[&key])
        .await?;
    Ok(row.map(|r| r.get(0)))
}

async fn counter(c: &mut Conn, key: &str) -> R<u64> {
    Ok(meta(c, key)
        .await?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// The state to start from (as [`Store::load`]).
pub(super) async fn load(c: &mut Conn) -> R<Loaded> {
    let rows = c
        .query("SELECT body FROM lockgate_jobs WHERE live ORDER BY id", &[])
        .await?;
    let live_jobs = bodies("job", &rows)?;
    let rows = c
        .query("SELECT body FROM lockgate_nodes ORDER BY name", &[])
        .await?;
    let nodes = bodies("node", &rows)?;
    let tokens = tokens(c).await?;
    let policy = meta(c, "policy").await?;
    let learned = meta(c, "learned").await?;
    let max_id: Option<i64> = c.query("SELECT max(id) FROM lockgate_jobs", &[]).await?[0].get(0);
    let max_seq: Option<i64> =
        c.query("SELECT max(seq) FROM lockgate_events", &[]).await?[0].get(0);
    let rows = c
        .query("SELECT body FROM lockgate_pauses ORDER BY id", &[])
        .await?;
    let pauses = bodies("pause", &rows)?;
    let outbox_pending: i64 = c
        .query(
            "SELECT count(*) FROM lockgate_outbox WHERE state = 'pending'",
            &[],
        )
        .await?[0]
        .get(0);
    Ok(Loaded {
        live_jobs,
        nodes,
        tokens,
        policy,
        max_job_id: counter(c, "max_job_id")
            .await?
            .max(max_id.unwrap_or(0) as u64),
        max_token: counter(c, "max_token").await?,
        learned,
        last_event_seq: counter(c, "event_seq")
            .await?
            .max(max_seq.unwrap_or(0) as u64),
        schedules: schedules(c).await?,
        pauses,
        max_pause_id: counter(c, "max_pause_id").await?,
        rpo: rpo(c).await?,
        outbox_pending: outbox_pending as u64,
    })
}

/// Every token, by name.
pub(super) async fn tokens(c: &mut Conn) -> R<Vec<TokenRecord>> {
    let rows = c
        .query(
            "SELECT name, role, node, hash, created_at FROM lockgate_tokens ORDER BY name",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| TokenRecord {
            name: r.get(0),
            role: Role::parse(r.get(1)).unwrap_or(Role::Viewer),
            node: r.get(2),
            hash: r.get(3),
            created_at: ts(r.get(4)),
        })
        .collect())
}

async fn schedules(c: &mut Conn) -> R<Vec<ScheduleRecord>> {
    let rows = c
        .query(
            "SELECT name, source, spec, last_planned, last_job, created_at
             FROM lockgate_schedules ORDER BY name",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ScheduleRecord {
            name: r.get(0),
            // Anything but `api` was written as `policy` (the only other value).
            source: match r.get::<_, &str>(1) {
                "api" => ScheduleSource::Api,
                _ => ScheduleSource::Policy,
            },
            spec: r.get(2),
            last_planned: ts(r.get(3)),
            last_job: r.get::<_, Option<i64>>(4).map(|j| j as u64),
            created_at: ts(r.get(5)),
        })
        .collect())
}

async fn rpo(c: &mut Conn) -> R<Vec<RpoRecord>> {
    let rows = c
        .query(
            "SELECT rule, value, first_seen, last_seen, last_job, last_state, last_success,
                    last_success_job, alerting
             FROM lockgate_rpo_values ORDER BY rule, value",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let last_job = match (r.get::<_, Option<i64>>(4), r.get::<_, Option<&str>>(5)) {
                (Some(id), Some(s)) => Some((
                    id as u64,
                    JobState::parse(s).ok_or_else(|| {
                        PgError::Store(StoreError::Corrupt {
                            what: "rpo value",
                            message: format!("unknown job state {s:?}"),
                        })
                    })?,
                )),
                _ => None,
            };
            let success_job: Option<i64> = r.get(7);
            Ok(RpoRecord {
                rule: r.get(0),
                value: decode("rpo value", r.get(1))?,
                first_seen: ts(r.get(2)),
                last_seen: ts(r.get(3)),
                last_job,
                last_success: r
                    .get::<_, Option<i64>>(6)
                    .map(|t| (ts(t), success_job.unwrap_or(0) as u64)),
                alerting: r.get(8),
            })
        })
        .collect()
}

/// One job by id.
pub(super) async fn job(c: &mut Conn, id: JobId) -> R<Option<Job>> {
    let rows = c
        .query(
            "SELECT body FROM lockgate_jobs WHERE id = $1",
            &[&(id as i64)],
        )
        .await?;
    Ok(bodies("job", &rows)?.pop())
}

/// The latest job an owner submitted with `key`.
pub(super) async fn job_by_key(c: &mut Conn, owner: &str, key: &str) -> R<Option<Job>> {
    let rows = c
        .query(
            "SELECT body FROM lockgate_jobs WHERE owner = $1 AND idempotency_key = $2
             ORDER BY id DESC LIMIT 1",
            &[&owner, &key],
        )
        .await?;
    Ok(bodies("job", &rows)?.pop())
}

/// The jobs matching `f`.
pub(super) async fn jobs(c: &mut Conn, f: &JobFilter) -> R<Vec<Job>> {
    let after = f.after.unwrap_or(0).min(i64::MAX as u64) as i64;
    let before = f.before.map_or(i64::MAX, |b| b.min(i64::MAX as u64) as i64);
    let limit = f.limit.min(i64::MAX as usize) as i64;
    let state = f.state.map(JobState::as_str);
    let sql = if f.newest_first { JOBS_DESC } else { JOBS_ASC };
    let rows = c
        .query(
            sql,
            &[
                &after, &state, &f.kind, &f.owner, &f.node, &limit, &before, &f.active,
            ],
        )
        .await?;
    bodies("job", &rows)
}

/// Events after `after`, oldest first, whole: each `job` event joined to its job's row
/// (`crate::event_row`).
pub(super) async fn events_after(c: &mut Conn, after: u64, limit: usize) -> R<Vec<StoredEvent>> {
    let rows = c
        .query(
            "SELECT e.seq, e.at, e.data, e.job, j.body FROM lockgate_events e
             LEFT JOIN lockgate_jobs j ON j.id = e.job
             WHERE e.seq > $1 ORDER BY e.seq LIMIT $2",
            &[
                &(after.min(i64::MAX as u64) as i64),
                &(limit.min(i64::MAX as usize) as i64),
            ],
        )
        .await?;
    let mut x = crate::event_row::Expander::default();
    Ok(rows
        .iter()
        .map(|r| {
            let job = r.get::<_, Option<i64>>(3).map(|j| j as u64);
            StoredEvent {
                seq: r.get::<_, i64>(0) as u64,
                at: ts(r.get(1)),
                data: x.expand(r.get(2), job, r.get(4)),
                job,
            }
        })
        .collect())
}

/// A schedule's latest runs, newest first.
pub(super) async fn schedule_runs(c: &mut Conn, name: &str, limit: usize) -> R<Vec<ScheduleRun>> {
    let rows = c
        .query(
            "SELECT schedule, planned, job, note, at FROM lockgate_schedule_runs
             WHERE schedule = $1 ORDER BY planned DESC LIMIT $2",
            &[&name, &(limit.min(i64::MAX as usize) as i64)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ScheduleRun {
            schedule: r.get(0),
            planned: ts(r.get(1)),
            job: r.get::<_, Option<i64>>(2).map(|j| j as u64),
            note: r.get(3),
            at: ts(r.get(4)),
        })
        .collect())
}

/// A stored backup state name (as the SQLite store reads it: only `finished` ends one).
fn backup_state(name: &str) -> BackupState {
    match name {
        "finished" => BackupState::Finished,
        "queued" => BackupState::Queued,
        _ => BackupState::Running,
    }
}

/// The statements of a table of records (backups', restores'): one shape, two tables.
pub(super) struct RecordTable {
    pub(super) insert: &'static str,
    one: &'static str,
    all: &'static str,
}

macro_rules! record_table {
    ($table:literal) => {
        RecordTable {
            insert: concat!(
                "INSERT INTO ",
                $table,
                " (name, state, created_at, body)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[])
                 ON CONFLICT (name) DO UPDATE SET state = excluded.state,
                    created_at = excluded.created_at, body = excluded.body"
            ),
            one: concat!(
                "SELECT name, state, created_at, body FROM ",
                $table,
                " WHERE name = $1"
            ),
            all: concat!(
                "SELECT name, state, created_at, body FROM ",
                $table,
                " ORDER BY created_at, name"
            ),
        }
    };
}

/// `lockgate_backups`.
pub(super) const BACKUPS: RecordTable = record_table!("lockgate_backups");
/// `lockgate_restores`.
pub(super) const RESTORES: RecordTable = record_table!("lockgate_restores");

/// One backup (restore) by name, or every one oldest first.
pub(super) async fn records(
    c: &mut Conn,
    table: &RecordTable,
    name: Option<&str>,
) -> R<Vec<BackupRecord>> {
    let rows = match name {
        Some(n) => c.query(table.one, &[&n]).await?,
        None => c.query(table.all, &[]).await?,
    };
    Ok(rows
        .iter()
        .map(|r| BackupRecord {
            name: r.get(0),
            state: backup_state(r.get(1)),
            created_at: ts(r.get(2)),
            body: r.get(3),
        })
        .collect())
}

/// Audit entries matching `f`, oldest first.
pub(super) async fn audit(c: &mut Conn, f: &AuditFilter) -> R<Vec<AuditRecord>> {
    let since = f.since.map_or(0, ms);
    let rows = c
        .query(
            "SELECT seq, request, at, principal, role, method, path, summary, outcome, error
             FROM lockgate_audit WHERE seq > $1 AND at >= $2
                AND ($3::text IS NULL OR principal = $3)
             ORDER BY seq LIMIT $4",
            &[
                &(f.after.min(i64::MAX as u64) as i64),
                &since,
                &f.principal,
                &(f.limit.min(i64::MAX as usize) as i64),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let outcome: &str = r.get(8);
            Ok(AuditRecord {
                seq: r.get::<_, i64>(0) as u64,
                request: r.get(1),
                at: ts(r.get(2)),
                principal: r.get(3),
                role: r.get::<_, Option<&str>>(4).and_then(Role::parse),
                method: r.get(5),
                path: r.get(6),
                summary: r.get(7),
                outcome: AuditOutcome::parse(outcome).ok_or_else(|| {
                    PgError::Store(StoreError::Corrupt {
                        what: "audit",
                        message: format!("unknown outcome {outcome:?}"),
                    })
                })?,
                error: r.get(9),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{JOBS_ASC, JOBS_DESC};
    use lockgate_core::job::JobState;

    #[test]
    fn the_active_filter_names_every_state_that_has_not_ended() {
        let live: Vec<String> = JobState::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let list = format!("state IN ({})", live.join(", "));
        assert!(JOBS_ASC.contains(&list), "{list}");
        assert_eq!(
            JOBS_ASC.replace("ORDER BY id", "ORDER BY id DESC"),
            JOBS_DESC
        );
    }
}
