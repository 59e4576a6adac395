//! The PostgreSQL schema: every table is prefixed `lockgate_`, in the connection's current
//! schema (`search_path`; `public` unless the role or the URL's `options` say otherwise).
//!
//! # Invariants
//! - [`MIGRATIONS`]`[i]` takes the schema from version `i` to `i + 1`; the version is the
//!   one row of `lockgate_schema`. Each migration runs in its own transaction under a
//!   transaction-level advisory lock ([`MIGRATION_LOCK`]), and the version is read again
//!   inside it, so several servers starting at once on one database migrate it once.
//! - The columns mirror the SQLite store's (`crate::sqlite`): times are `bigint`
//!   milliseconds since the Unix epoch, jobs, nodes and pauses are the engine's JSON. The
//!   leadership tables (`lockgate_leader`, `lockgate_replicas`) use `timestamptz`, because
//!   their lease runs on the database's clock (`now()`), never a replica's.

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The advisory lock key a migration holds (`pg_advisory_xact_lock`): "lockgate" in ASCII.
pub(super) const MIGRATION_LOCK: i64 = 0x6c6f_636b_6761_7465;

/// Creates the version table when missing (outside the versioned migrations).
pub(crate) const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS lockgate_schema (
        id int PRIMARY KEY CHECK (id = 1),
        version int NOT NULL
    );
    INSERT INTO lockgate_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;";

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: everything SQLite schema version 8 holds, and the leadership tables.
    "CREATE TABLE lockgate_jobs (
        id bigint PRIMARY KEY,
        owner text NOT NULL,
        kind text NOT NULL,
        state text NOT NULL,
        node text,
        idempotency_key text,
        live boolean NOT NULL,
        finished_at bigint,
        body text NOT NULL
    );
    CREATE INDEX lockgate_jobs_live ON lockgate_jobs(id) WHERE live;
    CREATE INDEX lockgate_jobs_key ON lockgate_jobs(owner, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX lockgate_jobs_finished ON lockgate_jobs(finished_at) WHERE NOT live;
    CREATE TABLE lockgate_nodes (name text PRIMARY KEY, body text NOT NULL);
    CREATE TABLE lockgate_tokens (
        name text PRIMARY KEY,
        role text NOT NULL,
        node text,
        hash text NOT NULL UNIQUE,
        created_at bigint NOT NULL
    );
    CREATE TABLE lockgate_events (seq bigint PRIMARY KEY, at bigint NOT NULL, data text NOT NULL);
    CREATE INDEX lockgate_events_at ON lockgate_events(at);
    CREATE TABLE lockgate_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE lockgate_schedules (
        name text PRIMARY KEY,
        source text NOT NULL,
        spec text,
        last_planned bigint NOT NULL,
        last_job bigint,
        created_at bigint NOT NULL
    );
    CREATE TABLE lockgate_schedule_runs (
        schedule text NOT NULL,
        planned bigint NOT NULL,
        job bigint,
        note text,
        at bigint NOT NULL,
        PRIMARY KEY (schedule, planned)
    );
    CREATE INDEX lockgate_schedule_runs_at ON lockgate_schedule_runs(at);
    CREATE TABLE lockgate_backups (
        name text PRIMARY KEY,
        state text NOT NULL,
        created_at bigint NOT NULL,
        body text NOT NULL
    );
    CREATE TABLE lockgate_pauses (id bigint PRIMARY KEY, body text NOT NULL);
    CREATE TABLE lockgate_rpo_values (
        rule text NOT NULL,
        value text NOT NULL,
        first_seen bigint NOT NULL,
        last_seen bigint NOT NULL,
        last_job bigint,
        last_state text,
        last_success bigint,
        last_success_job bigint,
        alerting boolean NOT NULL,
        PRIMARY KEY (rule, value)
    );
    CREATE TABLE lockgate_audit (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        request text NOT NULL UNIQUE,
        at bigint NOT NULL,
        principal text,
        role text,
        method text NOT NULL,
        path text NOT NULL,
        summary text NOT NULL,
        outcome text NOT NULL,
        error text
    );
    CREATE INDEX lockgate_audit_at ON lockgate_audit(at);
    CREATE INDEX lockgate_audit_principal ON lockgate_audit(principal, seq);
    CREATE TABLE lockgate_job_logs (
        job bigint NOT NULL,
        seq bigint NOT NULL,
        at bigint NOT NULL,
        stream text NOT NULL,
        text text NOT NULL,
        PRIMARY KEY (job, seq)
    );
    CREATE TABLE lockgate_job_log_meta (
        job bigint PRIMARY KEY,
        next_seq bigint NOT NULL,
        bytes bigint NOT NULL,
        first_seq bigint NOT NULL,
        dropped bigint NOT NULL,
        dropped_at bigint NOT NULL
    );
    CREATE TABLE lockgate_outbox (
        seq bigint NOT NULL,
        target text NOT NULL,
        body text NOT NULL,
        created_at bigint NOT NULL,
        attempts int NOT NULL,
        next_at bigint NOT NULL,
        state text NOT NULL,
        done_at bigint,
        last_error text,
        PRIMARY KEY (seq, target)
    );
    CREATE INDEX lockgate_outbox_pending ON lockgate_outbox(next_at) WHERE state = 'pending';
    CREATE INDEX lockgate_outbox_done ON lockgate_outbox(done_at) WHERE state <> 'pending';
    CREATE TABLE IF NOT EXISTS lockgate_leader (
        id int PRIMARY KEY CHECK (id = 1),
        holder text,
        url text,
        term bigint NOT NULL DEFAULT 0,
        acquired_at timestamptz,
        expires_at timestamptz
    );
    INSERT INTO lockgate_leader (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
    CREATE TABLE IF NOT EXISTS lockgate_replicas (
        holder text PRIMARY KEY,
        url text NOT NULL,
        started_at timestamptz NOT NULL,
        seen_at timestamptz NOT NULL,
        version text
    );",
    // 1 -> 2: a `job` event names its job and holds only what changes over the job's life
    // (`crate::event_row`), as SQLite schema version 9: existing `job` events whose job
    // row is there are rewritten so (their fixed fields and null ones left out); one whose
    // job row is gone keeps its whole text. Every row is JSON lockgate wrote; one that is not
    // would fail the migration, which then changes nothing (PostgreSQL 15 has no `IS JSON`).
    "ALTER TABLE lockgate_events ADD COLUMN job bigint;
    UPDATE lockgate_events e SET
        job = (e.data::jsonb #>> '{job,id}')::bigint,
        data = jsonb_strip_nulls(e.data::jsonb
            #- '{job,id}' #- '{job,kind}' #- '{job,attrs}' #- '{job,owner}'
            #- '{job,executor}' #- '{job,submitted_at}' #- '{job,node_selector}'
            #- '{job,pinned}' #- '{job,two_stage}' #- '{job,cost}' #- '{job,not_before}'
            #- '{job,max_wait_s}' #- '{job,max_run_s}' #- '{job,idempotency_key}'
            #- '{job,after}' #- '{job,after_ok}')::text
    WHERE e.data::jsonb ->> 'type' = 'job'
        AND jsonb_typeof(e.data::jsonb #> '{job,id}') = 'number'
        AND EXISTS (SELECT 1 FROM lockgate_jobs j
                    WHERE j.id = (e.data::jsonb #>> '{job,id}')::bigint);",
    // 2 -> 3: restore records, as SQLite schema version 10.
    "CREATE TABLE lockgate_restores (
        name text PRIMARY KEY,
        state text NOT NULL,
        created_at bigint NOT NULL,
        body text NOT NULL
    );",
];

#[cfg(test)]
mod tests;
