use super::{MIGRATIONS, VERSION_TABLE};
use crate::event_row::tests::{assert_reads_back, old_rows};
use crate::postgres::testdb;
use crate::{PgStore, Store, PG_SCHEMA_VERSION};

/// Runs `f` on a plain client of `url` (no store: the schema is what the test writes).
fn with_plain_client(url: &str, f: impl AsyncFnOnce(&tokio_postgres::Client)) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let task = tokio::spawn(conn);
        f(&client).await;
        drop(client);
        let _ = task.await;
    });
}

#[test]
fn a_version_1_database_is_migrated_and_reads_the_same_events_back() {
    if !crate::conformance::postgres_available() {
        return;
    }
    let url = testdb::fresh_database();
    let (jobs, events) = old_rows();
    with_plain_client(&url, async |c| {
        // As version 1 wrote them: every event whole, no `job` column.
        c.batch_execute(VERSION_TABLE).await.unwrap();
        c.batch_execute(MIGRATIONS[0]).await.unwrap();
        c.batch_execute("UPDATE lockgate_schema SET version = 1")
            .await
            .unwrap();
        for (j, live) in &jobs {
            c.execute(
                "INSERT INTO lockgate_jobs (id, owner, kind, state, node, idempotency_key, live, finished_at, body)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[&(j.id as i64), &j.owner, &j.kind, &j.state.as_str(), &j.node(),
                  &j.idempotency_key, live, &j.finished_at.map(|t| t.0 as i64),
                  &serde_json::to_string(j).unwrap()],
            )
            .await
            .unwrap();
        }
        for (seq, at, data) in &events {
            c.execute(
                "INSERT INTO lockgate_events (seq, at, data) VALUES ($1, $2, $3)",
                &[&(*seq as i64), &(*at as i64), data],
            )
            .await
            .unwrap();
        }
    });
    let mut s = PgStore::open(&url).unwrap();
    assert_eq!(s.schema_version().unwrap(), PG_SCHEMA_VERSION);
    assert_reads_back(&events, &s.events_after(0, 100).unwrap());
    let refs: i64 = s
        .with_client("count", async |c| {
            Ok(c.query_one("SELECT count(job) FROM lockgate_events", &[])
                .await?
                .get(0))
        })
        .unwrap();
    assert_eq!(
        refs as usize,
        events.len() - 2,
        "all but the orphan and the node event"
    );
    drop(s);
    let mut s = PgStore::open(&url).unwrap();
    assert_reads_back(&events[3..], &s.events_after(3, 100).unwrap());
}
