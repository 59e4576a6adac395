//! One table of store operations, run on [`SqliteStore`] and on [`PgStore`]: both must
//! keep and answer the same. Each case writes through [`Store::commit`], reopens the store
//! (a restart) and reads back.
//!
//! The PostgreSQL half needs `initdb`/`pg_ctl` (see `postgres::testdb`); without them it
//! is skipped with a message, unless `LOCKGATE_TEST_STORE=postgres` asks for it (then it
//! fails).

use crate::postgres::testdb;
use crate::*;
use lockgate_core::engine::Pause;

/// Opens the store under test again (same file or database).
type Open<'a> = &'a dyn Fn() -> AnyStore;

fn job(id: u64, state: JobState, finished: Option<u64>, key: Option<&str>) -> Job {
    let mut j = lockgate_core::job::JobSpec {
        kind: "backup".into(),
        owner: "o".into(),
        idempotency_key: key.map(str::to_string),
        ..Default::default()
    }
    .check(&lockgate_core::Policy::unlimited())
    .unwrap()
    .into_job(id, Timestamp(1));
    j.state = state;
    j.finished_at = finished.map(Timestamp);
    j
}

fn jobs_events_tokens_and_counters(open: Open) {
    let mut s = open();
    let tok = |name: &str, role| TokenRecord {
        name: name.into(),
        role,
        node: None,
        hash: format!("hash-{name}"),
        created_at: Timestamp(5),
    };
    s.commit(&Batch {
        jobs: vec![
            (job(1, JobState::Queued, None, Some("k")), true),
            (job(2, JobState::Succeeded, Some(10), None), false),
            (job(2, JobState::Succeeded, Some(20), None), false),
            (job(3, JobState::Running, None, None), true),
        ],
        events: (1..=3)
            .map(|seq| StoredEvent {
                seq,
                at: Timestamp(seq * 10),
                data: format!("{{\"n\":{seq}}}"),
                job: None,
            })
            .collect(),
        tokens: vec![tok("a", Role::Admin), tok("b", Role::Viewer)],
        max_token: Some(9),
        policy: Some("[global]\n".into()),
        learned: Some("{\"auto\":{}}".into()),
        ..Batch::default()
    })
    .unwrap();
    s.commit(&Batch {
        learned: Some("{\"auto\":{\"a\":3}}".into()),
        ..Batch::default()
    })
    .unwrap();
    s.commit(&Batch {
        revoked_tokens: vec!["b".into()],
        ..Batch::default()
    })
    .unwrap();
    drop(s);
    let mut s = open();
    let l = s.load().unwrap();
    assert_eq!(l.live_jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1, 3]);
    assert_eq!((l.max_job_id, l.max_token, l.last_event_seq), (3, 9, 3));
    assert_eq!(l.policy.as_deref(), Some("[global]\n"));
    assert_eq!(
        l.learned.as_deref(),
        Some("{\"auto\":{\"a\":3}}"),
        "the last one written"
    );
    assert_eq!(l.tokens, vec![tok("a", Role::Admin)]);
    assert_eq!(s.job(2).unwrap().unwrap().finished_at, Some(Timestamp(20)));
    assert_eq!(s.job_by_key("o", "k").unwrap().unwrap().id, 1);
    let active = JobFilter {
        active: true,
        newest_first: true,
        limit: 10,
        ..JobFilter::default()
    };
    let ids = |f: &JobFilter, s: &mut AnyStore| {
        s.jobs(f).unwrap().iter().map(|j| j.id).collect::<Vec<_>>()
    };
    assert_eq!(ids(&active, &mut s), [3, 1]);
    let page = JobFilter {
        after: Some(1),
        limit: 1,
        ..JobFilter::default()
    };
    assert_eq!(ids(&page, &mut s), [2]);
    let ev = s.events_after(1, 10).unwrap();
    assert_eq!(ev.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(ev[0].data, "{\"n\":2}");
    s.raise_counters(7, 2).unwrap();
    let l = s.load().unwrap();
    assert_eq!(
        (l.max_job_id, l.last_event_seq),
        (7, 3),
        "counters only rise"
    );
    assert_eq!(s.identity().unwrap(), None);
    assert_eq!(s.claim_identity("x").unwrap(), "x");
    assert_eq!(s.claim_identity("y").unwrap(), "x");
    let p = s.prune(Timestamp(15)).unwrap();
    assert_eq!((p.jobs, p.events), (0, 1), "job 2 finished at 20");
    assert_eq!(s.prune(Timestamp(25)).unwrap().jobs, 1);
}

/// A `job` event's row refers to its job: read back (after a restart) it is whole again,
/// in order with the other events; one whose job row is gone reads with what its row holds.
fn job_events_refer_to_their_jobs(open: Open) {
    let (served, last) = crate::event_row::tests::a_life();
    let mut s = open();
    let rows: Vec<StoredEvent> = served
        .iter()
        .enumerate()
        .map(|(i, d)| StoredEvent::new(i as u64 + 1, Timestamp(i as u64 + 1), d))
        .collect();
    let (first, rest) = rows.split_at(3);
    let mut jobs: Vec<(Job, bool)> = last.into_values().map(|j| (j, false)).collect();
    jobs.sort_by_key(|(j, _)| j.id);
    s.commit(&Batch {
        jobs: jobs.clone(),
        events: first.to_vec(),
        ..Batch::default()
    })
    .unwrap();
    let mut orphan = served[0].clone();
    orphan["job"]["id"] = serde_json::json!(42);
    let mut tail = rest.to_vec();
    tail.push(StoredEvent::new(
        rows.len() as u64 + 1,
        Timestamp(99),
        &orphan,
    ));
    s.commit(&Batch {
        jobs,
        events: tail,
        ..Batch::default()
    })
    .unwrap();
    drop(s);
    let mut s = open();
    let read = s.events_after(0, 100).unwrap();
    assert_eq!(read.len(), served.len() + 1);
    for (i, want) in served.iter().enumerate() {
        let got: serde_json::Value = serde_json::from_str(&read[i].data).unwrap();
        assert_eq!(
            got,
            serde_json::Value::Object(want.clone()),
            "event {}",
            i + 1
        );
        assert_eq!(read[i].job, want["job"]["id"].as_u64());
    }
    let gone: serde_json::Value = serde_json::from_str(&read[served.len()].data).unwrap();
    assert_eq!(
        (
            &gone["job"]["id"],
            &gone["job"]["state"],
            gone["job"].get("owner")
        ),
        (&serde_json::json!(42), &served[0]["job"]["state"], None)
    );
    assert_eq!(s.events_after(2, 1).unwrap()[0].seq, 3);
}

fn schedules_backups_restores_pauses_and_rpo(open: Open) {
    let mut s = open();
    let rec = ScheduleRecord {
        name: "nightly".into(),
        source: ScheduleSource::Api,
        spec: Some("{}".into()),
        last_planned: Timestamp(2_000),
        last_job: Some(4),
        created_at: Timestamp(1_000),
    };
    let run = |planned, job, at| ScheduleRun {
        schedule: "nightly".into(),
        planned: Timestamp(planned),
        job,
        note: job.is_none().then(|| "skipped".to_string()),
        at: Timestamp(at),
    };
    let backup = |name: &str, state, at| BackupRecord {
        name: name.into(),
        state,
        created_at: Timestamp(at),
        body: format!("{{\"name\":\"{name}\"}}"),
    };
    let pause = |id| Pause {
        id,
        selector: Some("repo=main".into()),
        reason: "fsck".into(),
        by: "admin".into(),
        created_at: Timestamp(1_000),
        until: None,
    };
    let value = |g: &str| vec![("group".to_string(), g.to_string())];
    let rpo = |g: &str, ok: Option<u64>| RpoRecord {
        rule: "vms".into(),
        value: value(g),
        first_seen: Timestamp(1_000),
        last_seen: Timestamp(5_000),
        last_job: Some((7, JobState::Failed)),
        last_success: ok.map(|t| (Timestamp(t), 6)),
        alerting: ok.is_none(),
    };
    use lockgate_api::BackupState::{Finished, Queued, Running};
    s.commit(&Batch {
        schedules: vec![rec.clone()],
        schedule_runs: vec![run(1_000, Some(3), 1_000), run(2_000, None, 50_000)],
        backups: vec![backup("b", Running, 2_000), backup("a", Queued, 1_000)],
        // A restore may share a backup's name: the tables are apart.
        restores: vec![backup("a", Running, 3_000)],
        pauses: vec![pause(1), pause(2)],
        rpo: vec![rpo("vm/100", Some(4_000)), rpo("vm/101", None)],
        ..Batch::default()
    })
    .unwrap();
    s.commit(&Batch {
        backups: vec![backup("b", Finished, 2_000)],
        restores: vec![backup("r", Queued, 2_500), backup("a", Finished, 3_000)],
        removed_pauses: vec![2],
        rpo: vec![rpo("vm/100", Some(4_500))],
        removed_rpo: vec![("vms".into(), value("vm/101"))],
        ..Batch::default()
    })
    .unwrap();
    drop(s);
    let mut s = open();
    let l = s.load().unwrap();
    assert_eq!(l.schedules, vec![rec]);
    assert_eq!((l.pauses, l.max_pause_id), (vec![pause(1)], 2));
    assert_eq!(l.rpo, vec![rpo("vm/100", Some(4_500))]);
    let runs = s.schedule_runs("nightly", 10).unwrap();
    assert_eq!(
        runs,
        vec![run(2_000, None, 50_000), run(1_000, Some(3), 1_000)]
    );
    assert_eq!(
        s.backups().unwrap(),
        vec![backup("a", Queued, 1_000), backup("b", Finished, 2_000)]
    );
    assert_eq!(s.backup("c").unwrap(), None);
    assert_eq!(
        s.restores().unwrap(),
        vec![backup("r", Queued, 2_500), backup("a", Finished, 3_000)]
    );
    assert_eq!(s.restore("a").unwrap(), Some(backup("a", Finished, 3_000)));
    assert_eq!(s.restore("b").unwrap(), None);
    assert_eq!(s.prune(Timestamp(10_000)).unwrap().schedule_runs, 1);
    assert_eq!(s.backups().unwrap().len(), 2, "retention keeps backups");
    assert_eq!(s.restores().unwrap().len(), 2, "retention keeps restores");
    s.commit(&Batch {
        removed_schedules: vec!["nightly".into()],
        ..Batch::default()
    })
    .unwrap();
    assert!(s.load().unwrap().schedules.is_empty());
    assert!(s.schedule_runs("nightly", 10).unwrap().is_empty());
}

fn audit_entries(open: Open) {
    let mut s = open();
    let rec = |request: &str, at: u64, who: &str, outcome| AuditRecord {
        seq: 0,
        request: request.into(),
        at: Timestamp(at),
        principal: Some(who.into()),
        role: Some(Role::Admin),
        method: "POST".into(),
        path: "/v1/tokens".into(),
        summary: "name=\"ci\"".into(),
        outcome,
        error: None,
    };
    let all = AuditFilter {
        limit: 100,
        ..AuditFilter::default()
    };
    let mut again = rec("a", 9_000, "someone", AuditOutcome::Invalid);
    again.error = Some("not_found: no such job".into());
    s.commit(&Batch {
        audit: vec![
            rec("a", 1_000, "root", AuditOutcome::Ok),
            rec("b", 2_000, "ci", AuditOutcome::Refused),
            again.clone(),
        ],
        ..Batch::default()
    })
    .unwrap();
    s.commit(&Batch {
        audit: vec![again],
        ..Batch::default()
    })
    .unwrap();
    drop(s);
    let mut s = open();
    let rows = s.audit(&all).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0].request.as_str(),
            rows[0].at,
            rows[0].principal.as_deref()
        ),
        ("a", Timestamp(1_000), Some("root")),
        "a replacing write keeps seq, time and principal"
    );
    assert_eq!(rows[0].outcome, AuditOutcome::Invalid);
    assert_eq!(rows[0].error.as_deref(), Some("not_found: no such job"));
    assert!(rows[0].seq < rows[1].seq);
    let ci = AuditFilter {
        principal: Some("ci".into()),
        ..all.clone()
    };
    assert_eq!(s.audit(&ci).unwrap()[0].request, "b");
    let last = rows[1].seq;
    assert_eq!(s.prune(Timestamp(5_000)).unwrap().audit, 2);
    s.commit(&Batch {
        audit: vec![rec("c", 10_000, "root", AuditOutcome::Ok)],
        ..Batch::default()
    })
    .unwrap();
    assert!(
        s.audit(&all).unwrap()[0].seq > last,
        "pruned numbers are not reused"
    );
}

fn lines(from: usize, n: usize) -> Vec<StoredLogLine> {
    (from..from + n)
        .map(|i| StoredLogLine {
            seq: 0,
            at: Timestamp(1_000 + i as u64),
            stream: if i % 2 == 0 {
                LogStream::Stdout
            } else {
                LogStream::Stderr
            },
            text: format!("{i:08}"),
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

fn job_logs_and_their_bounds(open: Open) {
    let mut s = open();
    let per_line = 8 + LOG_LINE_OVERHEAD;
    let limits = LogLimits {
        per_job: 100 * per_line,
        total: 150 * per_line,
    };
    s.commit(&append(9, 0, lines(0, 3), limits)).unwrap();
    s.commit(&append(9, 2, lines(3, 2), limits)).unwrap();
    drop(s);
    let mut s = open();
    let all = s.job_log(9, 0, 100, 1 << 20).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[3].stream, LogStream::Lockgate);
    assert!(all[3].text.starts_with("2 lines dropped by the holder"));
    assert_eq!(
        all.iter().map(|l| l.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(s.job_log_tail(9, 2).unwrap()[1].text, "00000004");
    for round in 0..4 {
        s.commit(&append(1, 0, lines(round * 50, 50), limits))
            .unwrap();
    }
    let one = s.job_log(1, 0, 1000, 1 << 20).unwrap();
    assert_eq!(one.len(), 101, "the marker and the last 100 lines");
    assert!(
        one[0].text.starts_with("100 lines dropped"),
        "{}",
        one[0].text
    );
    assert_eq!((one[1].seq, one[1].text.as_str()), (101, "00000100"));
    assert!(s.job_log(1, u64::MAX, 10, 1 << 20).unwrap().is_empty());
    // Over the total: job 1 (the oldest with a log) goes whole, then job 9 is next.
    s.commit(&append(2, 0, lines(0, 80), limits)).unwrap();
    assert!(s.job_log_bytes().unwrap() <= limits.total);
    let one = s.job_log(1, 0, 1000, 1 << 20).unwrap();
    assert_eq!(one.len(), 1, "only the marker: {one:?}");
    assert_eq!(s.job_log(2, 0, 1000, 1 << 20).unwrap().len(), 80);
    s.commit(&Batch {
        jobs: vec![(job(2, JobState::Succeeded, Some(10), None), false)],
        ..Batch::default()
    })
    .unwrap();
    assert_eq!(s.prune(Timestamp(1_000)).unwrap().log_lines, 80);
    assert!(s.job_log(2, 0, 1000, 1 << 20).unwrap().is_empty());
}

fn outbox_rows(open: Open, reader: &dyn Fn() -> OutboxReader) {
    let mut s = open();
    let row = |seq: u64, target: &str| OutboxRow {
        seq,
        target: target.into(),
        body: format!("{{\"seq\":{seq}}}"),
        created_at: Timestamp(1_000),
        attempts: 0,
        next_at: Timestamp(1_000),
    };
    s.commit(&Batch {
        outbox: vec![row(1, "a"), row(1, "b"), row(2, "a"), row(2, "a")],
        ..Batch::default()
    })
    .unwrap();
    let mut r = reader();
    assert_eq!(r.due(Timestamp(1_000), 10).unwrap().len(), 3);
    let update = |seq, target: &str, outcome| OutboxUpdate {
        seq,
        target: target.into(),
        attempts: 1,
        outcome,
    };
    s.commit(&Batch {
        outbox_updates: vec![
            update(
                1,
                "a",
                OutboxOutcome::Delivered {
                    at: Timestamp(1_100),
                },
            ),
            update(
                1,
                "b",
                OutboxOutcome::Retry {
                    next_at: Timestamp(5_000),
                    error: "refused".into(),
                },
            ),
            update(
                2,
                "a",
                OutboxOutcome::GaveUp {
                    at: Timestamp(1_100),
                    error: "gone".into(),
                },
            ),
        ],
        ..Batch::default()
    })
    .unwrap();
    drop(s);
    let mut s = open();
    assert_eq!(s.load().unwrap().outbox_pending, 1);
    assert!(r.due(Timestamp(4_999), 10).unwrap().is_empty());
    assert_eq!(
        r.next_due_after(Timestamp(1_000)).unwrap(),
        Some(Timestamp(5_000))
    );
    let due = r.due(Timestamp(5_000), 10).unwrap();
    assert_eq!(
        (due[0].seq, due[0].target.as_str(), due[0].attempts),
        (1, "b", 1)
    );
    s.prune(Timestamp(2_000)).unwrap();
    assert_eq!(
        r.due(Timestamp(5_000), 10).unwrap().len(),
        1,
        "pending rows are never pruned"
    );
}

/// Every case, on one kind of store: `location` makes a new empty one.
fn run_all(location: &dyn Fn() -> StoreLocation) {
    for case in [
        jobs_events_tokens_and_counters as fn(Open),
        job_events_refer_to_their_jobs,
        schedules_backups_restores_pauses_and_rpo,
        audit_entries,
        job_logs_and_their_bounds,
    ] {
        let loc = location();
        case(&|| loc.open().unwrap());
    }
    let loc = location();
    outbox_rows(&|| loc.open().unwrap(), &|| loc.open_reader().unwrap());
}

#[test]
fn the_sqlite_store_passes_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicU32::new(0);
    run_all(&|| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        StoreLocation::Sqlite(dir.path().join(format!("s{i}.db")))
    });
}

/// Whether the PostgreSQL tests run here (see the module docs); says why not.
pub(crate) fn postgres_available() -> bool {
    let required = std::env::var("LOCKGATE_TEST_STORE").as_deref() == Ok("postgres");
    if required || testdb::bindir().is_some() {
        return true;
    }
    eprintln!("SKIPPED: no PostgreSQL binaries (initdb, pg_ctl) found; set LOCKGATE_PG_BINDIR or install PostgreSQL 15 (LOCKGATE_TEST_STORE=postgres makes this a failure)");
    false
}

#[test]
fn the_postgres_store_passes_the_table() {
    if !postgres_available() {
        return;
    }
    run_all(&|| StoreLocation::Postgres(testdb::fresh_database()));
}

#[test]
fn the_postgres_store_migrates_once_refuses_a_newer_schema_and_fences_commits() {
    if !postgres_available() {
        return;
    }
    let url = testdb::fresh_database();
    let mut s = PgStore::open(&url).unwrap();
    assert_eq!(s.schema_version().unwrap(), PG_SCHEMA_VERSION);
    drop(PgStore::open(&url).unwrap());
    // Fencing: a commit under a term the leader row does not hold writes nothing.
    let batch = Batch {
        max_token: Some(5),
        ..Batch::default()
    };
    s.with_client("set leader", async |c| {
        c.execute(
            "UPDATE lockgate_leader SET holder = 'a', term = 3 WHERE id = 1",
            &[],
        )
        .await
    })
    .unwrap();
    s.set_fence(Some(Fence {
        holder: "a".into(),
        term: 2,
    }));
    assert_eq!(s.commit(&batch), Err(StoreError::Fenced { term: 2 }));
    assert_eq!(s.load().unwrap().max_token, 0);
    s.set_fence(Some(Fence {
        holder: "a".into(),
        term: 3,
    }));
    s.commit(&batch).unwrap();
    assert_eq!(s.load().unwrap().max_token, 5);
    s.with_client("newer", async |c| {
        c.execute("UPDATE lockgate_schema SET version = version + 1", &[])
            .await
    })
    .unwrap();
    let err = PgStore::open(&url).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found, .. } if found == PG_SCHEMA_VERSION + 1),
        "{err}"
    );
}

#[test]
fn a_database_that_is_down_is_named_without_its_password() {
    // Nothing listens on port 1.
    let err = PgStore::open("postgres://lg:s3cret@127.0.0.1:1/lockgate").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(
        text.contains("postgres://lg:***@127.0.0.1:1/lockgate"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}
