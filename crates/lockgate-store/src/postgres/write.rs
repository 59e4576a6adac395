//! Writing a [`Batch`] inside its transaction: one multi-row statement per part.
//!
//! # Invariants
//! - The parts are written in the SQLite store's order: removed schedules first, then
//!   every insert and replace, then the removals of nodes, tokens, pauses and RPO values,
//!   then the outbox reports, then the job logs with their bounds.
//! - Rows with one key in one part are merged before the statement (`last`), because
//!   `INSERT .. ON CONFLICT DO UPDATE` may not touch a row twice: the last write wins, as
//!   `INSERT OR REPLACE` one row after the other does. Audit entries of one request keep
//!   the first write's `seq`, time and principal and the last write's outcome (as the
//!   SQLite upsert does).

use super::conn::{Conn, PgError, R};
use super::{joblogs, ms, read, Fence};
use crate::{AuditRecord, BackupRecord, Batch, OutboxOutcome, StoreError};
use lockgate_api::Role;
use std::collections::HashMap;
use std::hash::Hash;

/// The rows of `rows` with distinct keys, each the last one written under its key, in the
/// order their keys first appear.
fn last<T, K: Eq + Hash>(rows: &[T], key: impl Fn(&T) -> K) -> Vec<&T> {
    let mut at: HashMap<K, usize> = HashMap::with_capacity(rows.len());
    let mut out: Vec<&T> = Vec::with_capacity(rows.len());
    for r in rows {
        match at.get(&key(r)) {
            Some(&i) => out[i] = r,
            None => {
                at.insert(key(r), out.len());
                out.push(r);
            }
        }
    }
    out
}

/// Fails with [`StoreError::Fenced`] unless `lockgate_leader` still names the fence's
/// holder and term; the row stays locked `FOR KEY SHARE` until the commit. That lock
/// holds off a takeover (its `SELECT ... FOR UPDATE`) and lets the leader's own renewal
/// (a plain `UPDATE` of `expires_at`, a `FOR NO KEY UPDATE` lock) through: a slow
/// commit must never make the leader miss its renewal.
pub(super) async fn check_fence(c: &mut Conn, f: &Fence) -> R<()> {
    let row = c
        .opt(
            "SELECT 1 FROM lockgate_leader WHERE id = 1 AND holder = $1 AND term = $2 FOR KEY SHARE",
            &[&f.holder, &f.term],
        )
        .await?;
    match row {
        Some(_) => Ok(()),
        None => Err(PgError::Store(StoreError::Fenced { term: f.term })),
    }
}

/// Raises counters in `lockgate_meta` (never lowers them).
pub(super) async fn bump(c: &mut Conn, values: &[(&str, i64)]) -> R<()> {
    if values.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = values.iter().map(|v| v.0).collect();
    let vals: Vec<i64> = values.iter().map(|v| v.1).collect();
    c.exec(
        "INSERT INTO lockgate_meta (key, value)
         SELECT k, v::text FROM UNNEST($1::text[], $2::bigint[]) AS u(k, v)
         ON CONFLICT (key) DO UPDATE
         SET value = greatest(lockgate_meta.value::bigint, excluded.value::bigint)::text",
        &[&keys, &vals],
    )
    .await?;
    Ok(())
}

/// Writes every part of `batch` (the caller holds the transaction).
pub(super) async fn batch(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.removed_schedules.is_empty() {
        c.exec(
            "DELETE FROM lockgate_schedules WHERE name = ANY($1)",
            &[&b.removed_schedules],
        )
        .await?;
        c.exec(
            "DELETE FROM lockgate_schedule_runs WHERE schedule = ANY($1)",
            &[&b.removed_schedules],
        )
        .await?;
    }
    // The counters the parts raise, written in one statement at the end (one round trip).
    let mut counters: Vec<(&str, i64)> = Vec::new();
    jobs(c, b, &mut counters).await?;
    events(c, b, &mut counters).await?;
    nodes(c, b).await?;
    tokens(c, b).await?;
    meta(c, b, &mut counters).await?;
    schedules(c, b).await?;
    records(c, &read::BACKUPS, &b.backups).await?;
    records(c, &read::RESTORES, &b.restores).await?;
    pauses(c, b, &mut counters).await?;
    rpo(c, b).await?;
    audit(c, &b.audit).await?;
    outbox(c, b).await?;
    joblogs::write(c, &b.job_logs, b.log_limits).await?;
    bump(c, &counters).await
}

async fn jobs(c: &mut Conn, b: &Batch, counters: &mut Vec<(&str, i64)>) -> R<()> {
    if b.jobs.is_empty() {
        return Ok(());
    }
    let rows = last(&b.jobs, |(j, _)| j.id);
    let id: Vec<i64> = rows.iter().map(|(j, _)| j.id as i64).collect();
    let owner: Vec<&str> = rows.iter().map(|(j, _)| j.owner.as_str()).collect();
    let kind: Vec<&str> = rows.iter().map(|(j, _)| j.kind.as_str()).collect();
    let state: Vec<&str> = rows.iter().map(|(j, _)| j.state.as_str()).collect();
    let node: Vec<Option<&str>> = rows.iter().map(|(j, _)| j.node()).collect();
    let key: Vec<Option<&str>> = rows
        .iter()
        .map(|(j, _)| j.idempotency_key.as_deref())
        .collect();
    let live: Vec<bool> = rows.iter().map(|(_, l)| *l).collect();
    let finished: Vec<Option<i64>> = rows.iter().map(|(j, _)| j.finished_at.map(ms)).collect();
    let body: Vec<String> = rows
        .iter()
        .map(|(j, _)| serde_json::to_string(j).expect("jobs serialize"))
        .collect();
    c.exec(
        "INSERT INTO lockgate_jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body)
         SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                              $6::text[], $7::bool[], $8::bigint[], $9::text[])
         ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, kind = excluded.kind,
            state = excluded.state, node = excluded.node,
            idempotency_key = excluded.idempotency_key, live = excluded.live,
            finished_at = excluded.finished_at, body = excluded.body",
        &[&id, &owner, &kind, &state, &node, &key, &live, &finished, &body],
    )
    .await?;
    let max = id.iter().copied().max().unwrap_or(0);
    if max > 0 {
        counters.push(("max_job_id", max));
    }
    Ok(())
}

async fn events(c: &mut Conn, b: &Batch, counters: &mut Vec<(&str, i64)>) -> R<()> {
    let Some(last_seq) = b.events.last().map(|e| e.seq) else {
        return Ok(());
    };
    let seq: Vec<i64> = b.events.iter().map(|e| e.seq as i64).collect();
    let at: Vec<i64> = b.events.iter().map(|e| ms(e.at)).collect();
    let data: Vec<&str> = b.events.iter().map(|e| e.data.as_str()).collect();
    let job: Vec<Option<i64>> = b.events.iter().map(|e| e.job.map(|j| j as i64)).collect();
    c.exec(
        "INSERT INTO lockgate_events (seq, at, data, job)
         SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[])",
        &[&seq, &at, &data, &job],
    )
    .await?;
    counters.push(("event_seq", last_seq as i64));
    Ok(())
}

async fn nodes(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.nodes.is_empty() {
        let rows = last(&b.nodes, |n| n.registration.name.clone());
        let name: Vec<&str> = rows.iter().map(|n| n.registration.name.as_str()).collect();
        let body: Vec<String> = rows
            .iter()
            .map(|n| serde_json::to_string(n).expect("nodes serialize"))
            .collect();
        c.exec(
            "INSERT INTO lockgate_nodes (name, body) SELECT * FROM UNNEST($1::text[], $2::text[])
             ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            &[&name, &body],
        )
        .await?;
    }
    if !b.removed_nodes.is_empty() {
        c.exec(
            "DELETE FROM lockgate_nodes WHERE name = ANY($1)",
            &[&b.removed_nodes],
        )
        .await?;
    }
    Ok(())
}

async fn tokens(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.tokens.is_empty() {
        let rows = last(&b.tokens, |t| t.name.clone());
        let name: Vec<&str> = rows.iter().map(|t| t.name.as_str()).collect();
        let role: Vec<&str> = rows.iter().map(|t| t.role.as_str()).collect();
        let node: Vec<Option<&str>> = rows.iter().map(|t| t.node.as_deref()).collect();
        let hash: Vec<&str> = rows.iter().map(|t| t.hash.as_str()).collect();
        let at: Vec<i64> = rows.iter().map(|t| ms(t.created_at)).collect();
        c.exec(
            "INSERT INTO lockgate_tokens (name, role, node, hash, created_at)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
             ON CONFLICT (name) DO UPDATE SET role = excluded.role, node = excluded.node,
                hash = excluded.hash, created_at = excluded.created_at",
            &[&name, &role, &node, &hash, &at],
        )
        .await?;
    }
    if !b.revoked_tokens.is_empty() {
        c.exec(
            "DELETE FROM lockgate_tokens WHERE name = ANY($1)",
            &[&b.revoked_tokens],
        )
        .await?;
    }
    Ok(())
}

async fn meta(c: &mut Conn, b: &Batch, counters: &mut Vec<(&str, i64)>) -> R<()> {
    for (key, text) in [("policy", &b.policy), ("learned", &b.learned)] {
        if let Some(text) = text {
            c.exec(
                "INSERT INTO lockgate_meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, text],
            )
            .await?;
        }
    }
    if let Some(t) = b.max_token {
        counters.push(("max_token", t as i64));
    }
    Ok(())
}

async fn schedules(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.schedules.is_empty() {
        let rows = last(&b.schedules, |s| s.name.clone());
        let name: Vec<&str> = rows.iter().map(|s| s.name.as_str()).collect();
        let source: Vec<&str> = rows.iter().map(|s| s.source.as_str()).collect();
        let spec: Vec<Option<&str>> = rows.iter().map(|s| s.spec.as_deref()).collect();
        let planned: Vec<i64> = rows.iter().map(|s| ms(s.last_planned)).collect();
        let job: Vec<Option<i64>> = rows.iter().map(|s| s.last_job.map(|j| j as i64)).collect();
        let at: Vec<i64> = rows.iter().map(|s| ms(s.created_at)).collect();
        c.exec(
            "INSERT INTO lockgate_schedules (name, source, spec, last_planned, last_job, created_at)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                                  $6::bigint[])
             ON CONFLICT (name) DO UPDATE SET source = excluded.source, spec = excluded.spec,
                last_planned = excluded.last_planned, last_job = excluded.last_job,
                created_at = excluded.created_at",
            &[&name, &source, &spec, &planned, &job, &at],
        )
        .await?;
    }
    if !b.schedule_runs.is_empty() {
        let rows = last(&b.schedule_runs, |r| (r.schedule.clone(), r.planned));
        let name: Vec<&str> = rows.iter().map(|r| r.schedule.as_str()).collect();
        let planned: Vec<i64> = rows.iter().map(|r| ms(r.planned)).collect();
        let job: Vec<Option<i64>> = rows.iter().map(|r| r.job.map(|j| j as i64)).collect();
        let note: Vec<Option<&str>> = rows.iter().map(|r| r.note.as_deref()).collect();
        let at: Vec<i64> = rows.iter().map(|r| ms(r.at)).collect();
        c.exec(
            "INSERT INTO lockgate_schedule_runs (schedule, planned, job, note, at)
             SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[])
             ON CONFLICT (schedule, planned) DO UPDATE SET job = excluded.job,
                note = excluded.note, at = excluded.at",
            &[&name, &planned, &job, &note, &at],
        )
        .await?;
    }
    Ok(())
}

/// The backup or restore records of a batch.
async fn records(c: &mut Conn, table: &read::RecordTable, records: &[BackupRecord]) -> R<()> {
    if records.is_empty() {
        return Ok(());
    }
    let rows = last(records, |r| r.name.clone());
    let name: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let state: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    let at: Vec<i64> = rows.iter().map(|r| ms(r.created_at)).collect();
    let body: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    c.exec(table.insert, &[&name, &state, &at, &body]).await?;
    Ok(())
}

async fn pauses(c: &mut Conn, b: &Batch, counters: &mut Vec<(&str, i64)>) -> R<()> {
    if !b.pauses.is_empty() {
        let rows = last(&b.pauses, |p| p.id);
        let id: Vec<i64> = rows.iter().map(|p| p.id as i64).collect();
        let body: Vec<String> = rows
            .iter()
            .map(|p| serde_json::to_string(p).expect("pauses serialize"))
            .collect();
        c.exec(
            "INSERT INTO lockgate_pauses (id, body) SELECT * FROM UNNEST($1::bigint[], $2::text[])
             ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            &[&id, &body],
        )
        .await?;
    }
    if !b.removed_pauses.is_empty() {
        let ids: Vec<i64> = b.removed_pauses.iter().map(|&i| i as i64).collect();
        c.exec("DELETE FROM lockgate_pauses WHERE id = ANY($1)", &[&ids])
            .await?;
    }
    if let Some(max) = b.pauses.iter().map(|p| p.id).max().filter(|&m| m > 0) {
        counters.push(("max_pause_id", max as i64));
    }
    Ok(())
}

fn value_text(value: &[(String, String)]) -> String {
    serde_json::to_string(value).expect("pairs serialize")
}

async fn rpo(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.rpo.is_empty() {
        let rows = last(&b.rpo, |r| (r.rule.clone(), r.value.clone()));
        let rule: Vec<&str> = rows.iter().map(|r| r.rule.as_str()).collect();
        let value: Vec<String> = rows.iter().map(|r| value_text(&r.value)).collect();
        let first: Vec<i64> = rows.iter().map(|r| ms(r.first_seen)).collect();
        let seen: Vec<i64> = rows.iter().map(|r| ms(r.last_seen)).collect();
        let job: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.last_job.map(|(j, _)| j as i64))
            .collect();
        let state: Vec<Option<&str>> = rows
            .iter()
            .map(|r| r.last_job.map(|(_, s)| s.as_str()))
            .collect();
        let ok: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.last_success.map(|(t, _)| ms(t)))
            .collect();
        let ok_job: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.last_success.map(|(_, j)| j as i64))
            .collect();
        let alerting: Vec<bool> = rows.iter().map(|r| r.alerting).collect();
        c.exec(
            "INSERT INTO lockgate_rpo_values (rule, value, first_seen, last_seen, last_job,
                last_state, last_success, last_success_job, alerting)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[],
                                  $6::text[], $7::bigint[], $8::bigint[], $9::bool[])
             ON CONFLICT (rule, value) DO UPDATE SET first_seen = excluded.first_seen,
                last_seen = excluded.last_seen, last_job = excluded.last_job,
                last_state = excluded.last_state, last_success = excluded.last_success,
                last_success_job = excluded.last_success_job, alerting = excluded.alerting",
            &[
                &rule, &value, &first, &seen, &job, &state, &ok, &ok_job, &alerting,
            ],
        )
        .await?;
    }
    if !b.removed_rpo.is_empty() {
        let rule: Vec<&str> = b.removed_rpo.iter().map(|(r, _)| r.as_str()).collect();
        let value: Vec<String> = b.removed_rpo.iter().map(|(_, v)| value_text(v)).collect();
        c.exec(
            "DELETE FROM lockgate_rpo_values WHERE (rule, value) IN
                (SELECT * FROM UNNEST($1::text[], $2::text[]))",
            &[&rule, &value],
        )
        .await?;
    }
    Ok(())
}

/// Entries of one request merged: the first write's row with the last write's outcome.
fn merged_audit(rows: &[AuditRecord]) -> Vec<AuditRecord> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<AuditRecord> = Vec::with_capacity(rows.len());
    for r in rows {
        match at.get(r.request.as_str()) {
            Some(&i) => {
                out[i].summary = r.summary.clone();
                out[i].outcome = r.outcome;
                out[i].error = r.error.clone();
            }
            None => {
                at.insert(&r.request, out.len());
                out.push(r.clone());
            }
        }
    }
    out
}

async fn audit(c: &mut Conn, rows: &[AuditRecord]) -> R<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let rows = merged_audit(rows);
    let request: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
    let at: Vec<i64> = rows.iter().map(|r| ms(r.at)).collect();
    let who: Vec<Option<&str>> = rows.iter().map(|r| r.principal.as_deref()).collect();
    let role: Vec<Option<&str>> = rows.iter().map(|r| r.role.map(Role::as_str)).collect();
    let method: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
    let path: Vec<&str> = rows.iter().map(|r| r.path.as_str()).collect();
    let summary: Vec<&str> = rows.iter().map(|r| r.summary.as_str()).collect();
    let outcome: Vec<&str> = rows.iter().map(|r| r.outcome.as_str()).collect();
    let error: Vec<Option<&str>> = rows.iter().map(|r| r.error.as_deref()).collect();
    c.exec(
        "INSERT INTO lockgate_audit (request, at, principal, role, method, path, summary, outcome, error)
         SELECT r, a, p, ro, m, pa, s, o, e
         FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[], $8::text[], $9::text[])
              WITH ORDINALITY AS u(r, a, p, ro, m, pa, s, o, e, n)
         ORDER BY n
         ON CONFLICT (request) DO UPDATE SET summary = excluded.summary,
            outcome = excluded.outcome, error = excluded.error",
        &[
            &request, &at, &who, &role, &method, &path, &summary, &outcome, &error,
        ],
    )
    .await?;
    Ok(())
}

async fn outbox(c: &mut Conn, b: &Batch) -> R<()> {
    if !b.outbox.is_empty() {
        let r = &b.outbox;
        let seq: Vec<i64> = r.iter().map(|r| r.seq as i64).collect();
        let target: Vec<&str> = r.iter().map(|r| r.target.as_str()).collect();
        let body: Vec<&str> = r.iter().map(|r| r.body.as_str()).collect();
        let at: Vec<i64> = r.iter().map(|r| ms(r.created_at)).collect();
        let attempts: Vec<i32> = r.iter().map(|r| r.attempts as i32).collect();
        let next: Vec<i64> = r.iter().map(|r| ms(r.next_at)).collect();
        c.exec(
            "INSERT INTO lockgate_outbox (seq, target, body, created_at, attempts, next_at, state)
             SELECT *, 'pending' FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::bigint[],
                                             $5::int[], $6::bigint[])
             ON CONFLICT (seq, target) DO NOTHING",
            &[&seq, &target, &body, &at, &attempts, &next],
        )
        .await?;
    }
    if b.outbox_updates.is_empty() {
        return Ok(());
    }
    let rows = last(&b.outbox_updates, |u| (u.seq, u.target.clone()));
    let seq: Vec<i64> = rows.iter().map(|u| u.seq as i64).collect();
    let target: Vec<&str> = rows.iter().map(|u| u.target.as_str()).collect();
    let attempts: Vec<i32> = rows.iter().map(|u| u.attempts as i32).collect();
    let mut state = Vec::with_capacity(rows.len());
    let mut next = Vec::with_capacity(rows.len());
    let mut done = Vec::with_capacity(rows.len());
    let mut error = Vec::with_capacity(rows.len());
    for u in &rows {
        let (s, n, d, e): (&str, Option<i64>, Option<i64>, Option<&str>) = match &u.outcome {
            OutboxOutcome::Delivered { at } => ("delivered", None, Some(ms(*at)), None),
            OutboxOutcome::Retry { next_at, error } => {
                ("pending", Some(ms(*next_at)), None, Some(error))
            }
            OutboxOutcome::GaveUp { at, error } => ("failed", None, Some(ms(*at)), Some(error)),
        };
        state.push(s);
        next.push(n);
        done.push(d);
        error.push(e);
    }
    c.exec(
        "UPDATE lockgate_outbox o SET state = u.state, attempts = u.attempts,
            next_at = coalesce(u.next_at, o.next_at), done_at = u.done_at,
            last_error = coalesce(u.error, o.last_error)
         FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
                     $7::text[]) AS u(seq, target, state, attempts, next_at, done_at, error)
         WHERE o.seq = u.seq AND o.target = u.target AND o.state = 'pending'",
        &[&seq, &target, &state, &attempts, &next, &done, &error],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::last;

    #[test]
    fn the_last_write_of_a_key_wins_in_the_order_keys_first_appear() {
        let rows = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)];
        let kept: Vec<_> = last(&rows, |r| r.0).into_iter().copied().collect();
        assert_eq!(kept, [("a", 3), ("b", 5), ("c", 4)]);
    }
}
