-- A lockgate SQLite store as schema version 9 wrote it (crate::golden_stores).
CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        node TEXT,
        idempotency_key TEXT,
        live INTEGER NOT NULL,
        finished_at INTEGER,
        body TEXT NOT NULL
    );
    CREATE INDEX jobs_live ON jobs(live) WHERE live = 1;
    CREATE INDEX jobs_key ON jobs(owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_finished ON jobs(finished_at) WHERE live = 0;
    CREATE TABLE nodes (name TEXT PRIMARY KEY, body TEXT NOT NULL);
    CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        node TEXT,
        hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE events (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE INDEX events_at ON events(at);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);;
CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        spec TEXT,
        last_planned INTEGER NOT NULL,
        last_job INTEGER,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE schedule_runs (
        schedule TEXT NOT NULL,
        planned INTEGER NOT NULL,
        job INTEGER,
        note TEXT,
        at INTEGER NOT NULL,
        PRIMARY KEY (schedule, planned)
    );
    CREATE INDEX schedule_runs_at ON schedule_runs(at);;
CREATE TABLE backups (
        name TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );;
CREATE TABLE pauses (id INTEGER PRIMARY KEY, body TEXT NOT NULL);;
CREATE TABLE rpo_values (
    rule TEXT NOT NULL,
    value TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    last_job INTEGER,
    last_state TEXT,
    last_success INTEGER,
    last_success_job INTEGER,
    alerting INTEGER NOT NULL,
    PRIMARY KEY (rule, value)
);;
CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        request TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        principal TEXT,
        role TEXT,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        summary TEXT NOT NULL,
        outcome TEXT NOT NULL,
        error TEXT
    );
    CREATE INDEX audit_at ON audit(at);
    CREATE INDEX audit_principal ON audit(principal, seq);;
CREATE TABLE job_logs (
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
    );;
CREATE TABLE outbox (
        seq INTEGER NOT NULL,
        target TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        done_at INTEGER,
        last_error TEXT,
        PRIMARY KEY (seq, target)
    );
    CREATE INDEX outbox_pending ON outbox(next_at) WHERE state = 'pending';
    CREATE INDEX outbox_done ON outbox(done_at) WHERE state <> 'pending';;
ALTER TABLE events ADD COLUMN job INTEGER;
    UPDATE events SET
        job = json_extract(data, '$.job.id'),
        data = json_patch('{}', json_remove(data,
            '$.job.id', '$.job.kind', '$.job.attrs', '$.job.owner', '$.job.executor',
            '$.job.submitted_at', '$.job.node_selector', '$.job.pinned', '$.job.two_stage',
            '$.job.cost', '$.job.not_before', '$.job.max_wait_s', '$.job.max_run_s',
            '$.job.idempotency_key', '$.job.after', '$.job.after_ok'))
    WHERE json_valid(data)
        AND json_extract(data, '$.type') = 'job'
        AND json_type(data, '$.job.id') = 'integer'
        AND json_extract(data, '$.job.id') IN (SELECT id FROM jobs);;
INSERT INTO jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('1', 'alice', 'backup', 'cancelled', NULL, 'a', '0', '6000', '{"id":1,"kind":"backup","attrs":{"group":"vm/100"},"owner":"alice","priority":3,"executor":"client","state":"cancelled","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":true,"submitted_at":1000,"queued_at":1000,"prepare_started_at":null,"prepared_at":null,"started_at":1000,"finished_at":6000,"outcome":"cancelled","message":"asked","not_before":null,"max_wait_ms":3600000,"max_run_ms":60500,"idempotency_key":"a","retry_at":null,"retry":null,"cancel_reason":"cancel"}');
INSERT INTO jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('2', 'alice', 'backup', 'failed', NULL, 'b', '0', '7000', '{"id":2,"kind":"backup","attrs":{"group":"vm/100"},"owner":"alice","priority":9,"executor":"client","state":"failed","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":false,"submitted_at":2000,"queued_at":2000,"prepare_started_at":null,"prepared_at":null,"started_at":6000,"finished_at":7000,"outcome":"failed","message":"exit 2","not_before":null,"max_wait_ms":3600000,"max_run_ms":60500,"idempotency_key":"b","retry_at":null,"retry":null,"after":[1]}');
INSERT INTO jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('50', 'ops', 'prune', 'queued', NULL, 'prune/2026-12-01', '1', NULL, '{"id":50,"kind":"prune","attrs":{},"owner":"ops","priority":0,"executor":"client","state":"queued","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":false,"submitted_at":1700000000000,"queued_at":1700000000000,"prepare_started_at":null,"prepared_at":null,"started_at":null,"finished_at":null,"outcome":null,"message":null,"not_before":null,"max_wait_ms":null,"max_run_ms":null,"idempotency_key":"prune/2026-12-01","retry_at":null,"retry":null}');
INSERT INTO tokens (name, role, node, hash, created_at) VALUES ('admin', 'admin', NULL, '0000000000000000000000000000000000000000000000000000000000009aab', '1700000000000');
INSERT INTO tokens (name, role, node, hash, created_at) VALUES ('agent-n1', 'agent', 'n1', '000000000000000000000000000000000000000000000000000000000000f778', '1700000000000');
INSERT INTO meta (key, value) VALUES ('max_job_id', '50');
INSERT INTO meta (key, value) VALUES ('max_token', '2');
INSERT INTO meta (key, value) VALUES ('policy', '[global]
max_running = 2
');
INSERT INTO schedules (name, source, spec, last_planned, last_job, created_at) VALUES ('nightly', 'api', '{"cron":"0 1 * * *","job":{"kind":"backup"}}', '1700000000000', '1', '1699000000000');
INSERT INTO schedule_runs (schedule, planned, job, note, at) VALUES ('nightly', '1700000000000', '1', NULL, '1700000000100');
INSERT INTO events (seq, at, data) VALUES ('1', '1000', '{"change":"submitted","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('2', '2000', '{"change":"started","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:31Z","token":1,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"running","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('3', '3000', '{"change":"submitted","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('4', '4000', '{"change":"edited","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('5', '5000', '{"change":"cancel_requested","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_reason":"cancel","cancel_requested":true,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:34Z","token":1,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"running","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('6', '6000', '{"change":"finished","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_reason":"cancel","cancel_requested":true,"cost":{},"executor":"client","finished_at":"1970-01-01T00:00:06Z","id":1,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":"asked","node":null,"node_selector":null,"not_before":null,"outcome":"cancelled","owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"cancelled","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('7', '7000', '{"change":"started","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:36Z","token":2,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":"1970-01-01T00:00:06Z","state":"running","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('8', '8000', '{"change":"finished","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":"1970-01-01T00:00:07Z","id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":"exit 2","node":null,"node_selector":null,"not_before":null,"outcome":"failed","owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":"1970-01-01T00:00:06Z","state":"failed","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('9', '9000', '{"change":"submitted","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":99,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO events (seq, at, data) VALUES ('10', '10000', '{"node":"n1","type":"node_lost"}');
INSERT INTO meta (key, value) VALUES ('event_seq', '10') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
PRAGMA user_version = 9;
