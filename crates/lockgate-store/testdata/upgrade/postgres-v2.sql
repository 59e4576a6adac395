-- A lockgate PostgreSQL store as schema version 2 wrote it (crate::golden_stores).
CREATE TABLE IF NOT EXISTS lockgate_schema (
        id int PRIMARY KEY CHECK (id = 1),
        version int NOT NULL
    );
    INSERT INTO lockgate_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
CREATE TABLE lockgate_jobs (
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
    );;
ALTER TABLE lockgate_events ADD COLUMN job bigint;
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
                    WHERE j.id = (e.data::jsonb #>> '{job,id}')::bigint);;
UPDATE lockgate_schema SET version = 2;
INSERT INTO lockgate_jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('1', 'alice', 'backup', 'cancelled', NULL, 'a', '0', '6000', '{"id":1,"kind":"backup","attrs":{"group":"vm/100"},"owner":"alice","priority":3,"executor":"client","state":"cancelled","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":true,"submitted_at":1000,"queued_at":1000,"prepare_started_at":null,"prepared_at":null,"started_at":1000,"finished_at":6000,"outcome":"cancelled","message":"asked","not_before":null,"max_wait_ms":3600000,"max_run_ms":60500,"idempotency_key":"a","retry_at":null,"retry":null,"cancel_reason":"cancel"}');
INSERT INTO lockgate_jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('2', 'alice', 'backup', 'failed', NULL, 'b', '0', '7000', '{"id":2,"kind":"backup","attrs":{"group":"vm/100"},"owner":"alice","priority":9,"executor":"client","state":"failed","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":false,"submitted_at":2000,"queued_at":2000,"prepare_started_at":null,"prepared_at":null,"started_at":6000,"finished_at":7000,"outcome":"failed","message":"exit 2","not_before":null,"max_wait_ms":3600000,"max_run_ms":60500,"idempotency_key":"b","retry_at":null,"retry":null,"after":[1]}');
INSERT INTO lockgate_jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body) VALUES ('50', 'ops', 'prune', 'queued', NULL, 'prune/2026-12-01', '1', NULL, '{"id":50,"kind":"prune","attrs":{},"owner":"ops","priority":0,"executor":"client","state":"queued","node":null,"pinned":false,"node_selector":null,"cost":{},"two_stage":false,"attempt":1,"lease":null,"cancel_requested":false,"submitted_at":1700000000000,"queued_at":1700000000000,"prepare_started_at":null,"prepared_at":null,"started_at":null,"finished_at":null,"outcome":null,"message":null,"not_before":null,"max_wait_ms":null,"max_run_ms":null,"idempotency_key":"prune/2026-12-01","retry_at":null,"retry":null}');
INSERT INTO lockgate_tokens (name, role, node, hash, created_at) VALUES ('admin', 'admin', NULL, '0000000000000000000000000000000000000000000000000000000000009aab', '1700000000000');
INSERT INTO lockgate_tokens (name, role, node, hash, created_at) VALUES ('agent-n1', 'agent', 'n1', '000000000000000000000000000000000000000000000000000000000000f778', '1700000000000');
INSERT INTO lockgate_meta (key, value) VALUES ('max_job_id', '50');
INSERT INTO lockgate_meta (key, value) VALUES ('max_token', '2');
INSERT INTO lockgate_meta (key, value) VALUES ('policy', '[global]
max_running = 2
');
INSERT INTO lockgate_schedules (name, source, spec, last_planned, last_job, created_at) VALUES ('nightly', 'api', '{"cron":"0 1 * * *","job":{"kind":"backup"}}', '1700000000000', '1', '1699000000000');
INSERT INTO lockgate_schedule_runs (schedule, planned, job, note, at) VALUES ('nightly', '1700000000000', '1', NULL, '1700000000100');
INSERT INTO lockgate_events (seq, at, data) VALUES ('1', '1000', '{"change":"submitted","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('2', '2000', '{"change":"started","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:31Z","token":1,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"running","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('3', '3000', '{"change":"submitted","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('4', '4000', '{"change":"edited","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('5', '5000', '{"change":"cancel_requested","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_reason":"cancel","cancel_requested":true,"cost":{},"executor":"client","finished_at":null,"id":1,"idempotency_key":"a","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:34Z","token":1,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"running","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('6', '6000', '{"change":"finished","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_reason":"cancel","cancel_requested":true,"cost":{},"executor":"client","finished_at":"1970-01-01T00:00:06Z","id":1,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":"asked","node":null,"node_selector":null,"not_before":null,"outcome":"cancelled","owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":"1970-01-01T00:00:01Z","state":"cancelled","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('7', '7000', '{"change":"started","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":2,"idempotency_key":"b","kind":"backup","lease":{"expires_at":"1970-01-01T00:00:36Z","token":2,"ttl_s":30.0},"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":"1970-01-01T00:00:06Z","state":"running","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('8', '8000', '{"change":"finished","job":{"after":[1],"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":"1970-01-01T00:00:07Z","id":2,"idempotency_key":"b","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":"exit 2","node":null,"node_selector":null,"not_before":null,"outcome":"failed","owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":9,"queued_at":"1970-01-01T00:00:02Z","retry_at":null,"started_at":"1970-01-01T00:00:06Z","state":"failed","submitted_at":"1970-01-01T00:00:02Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('9', '9000', '{"change":"submitted","job":{"attempt":1,"attrs":{"group":"vm/100"},"cancel_requested":false,"cost":{},"executor":"client","finished_at":null,"id":99,"idempotency_key":"a","kind":"backup","lease":null,"log":true,"max_run_s":60.5,"max_wait_s":3600.0,"message":null,"node":null,"node_selector":null,"not_before":null,"outcome":null,"owner":"alice","pinned":false,"prepare_started_at":null,"prepared_at":null,"priority":3,"queued_at":"1970-01-01T00:00:01Z","retry_at":null,"started_at":null,"state":"queued","submitted_at":"1970-01-01T00:00:01Z","two_stage":false},"type":"job"}');
INSERT INTO lockgate_events (seq, at, data) VALUES ('10', '10000', '{"node":"n1","type":"node_lost"}');
INSERT INTO lockgate_meta (key, value) VALUES ('event_seq', '10') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
