//! The leadership loop of one replica: take or renew the lease in `lockgate_leader`,
//! heartbeat into `lockgate_replicas`, read both for the view.
//!
//! # Implementation details
//! One thread, one current-thread runtime, one connection of its own (opened again after
//! any error). Every `lease / 3` it runs, in this order:
//! 1. while leading: step down when the validity already passed (a pause, a stall);
//! 2. renew (leading) or try to acquire (standby), the instant *before* sending taken as
//!    the start of the new validity: `sent + lease − margin`, margin = lease / 10;
//! 3. read the leader row and the replicas; heartbeat.
//!
//! Every statement runs under a timeout that ends, while leading, at the validity's end,
//! so a database that stops answering cannot keep the loop from stepping down; the loop
//! also wakes at that moment.

use super::{Change, ClusterConfig, Leadership};
use lockgate_api::{LeaderView, ReplicaView};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

/// Acquire: only a free row (never held, or its lease ran out on the database's clock).
/// A free row is locked `FOR UPDATE` first, which waits for every commit in flight (each
/// holds it `FOR KEY SHARE`, the fence); the `UPDATE` alone would not (its lock is `FOR NO
/// KEY UPDATE`, which is what lets the leader's renewal pass its own commits). A live row
/// is not locked at all (the condition is in the locking `SELECT`): a standby's try never
/// queues in front of the leader's renewal.
const ACQUIRE: &str = "WITH free AS (SELECT id FROM lockgate_leader \
     WHERE id = 1 AND (expires_at IS NULL OR expires_at < now()) FOR UPDATE) \
     UPDATE lockgate_leader SET holder = $1, url = $2, term = term + 1, \
     acquired_at = now(), expires_at = now() + make_interval(secs => $3) \
     WHERE id IN (SELECT id FROM free) AND (expires_at IS NULL OR expires_at < now()) \
     RETURNING term";
/// Renew: only our own row under our own term.
const RENEW: &str = "UPDATE lockgate_leader SET expires_at = now() + make_interval(secs => $3) \
     WHERE id = 1 AND holder = $1 AND term = $2";
/// Release at a graceful stop: our own row under our own term expires now.
const RELEASE: &str = "UPDATE lockgate_leader SET expires_at = now() \
     WHERE id = 1 AND holder = $1 AND term = $2";
const TIME: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

fn leader_query() -> String {
    format!(
        "SELECT holder, url, term, to_char(acquired_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(expires_at AT TIME ZONE 'UTC', {TIME}), expires_at > now() \
         FROM lockgate_leader WHERE id = 1"
    )
}

fn replicas_query() -> String {
    format!(
        "SELECT holder, url, to_char(started_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(seen_at AT TIME ZONE 'UTC', {TIME}), version FROM lockgate_replicas \
         ORDER BY holder"
    )
}

const HEARTBEAT: &str =
    "INSERT INTO lockgate_replicas (holder, url, started_at, seen_at, version) \
     VALUES ($1, $2, now(), now(), $3) ON CONFLICT (holder) DO UPDATE SET url = EXCLUDED.url, \
     seen_at = now(), version = EXCLUDED.version, \
     started_at = CASE WHEN $4 THEN now() ELSE lockgate_replicas.started_at END";

/// Runs the loop for the life of the process.
pub(super) fn run(l: Leadership, config: ClusterConfig, changes: Sender<Change>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("leadership runtime");
    rt.block_on(async move {
        let mut lp = LeaseLoop {
            l,
            config,
            changes,
            db: None,
            first_heartbeat: true,
            hold_off: None,
        };
        loop {
            if lp.l.resigned() {
                lp.release().await;
                lp.l.0
                    .ended
                    .store(true, std::sync::atomic::Ordering::Release);
                return;
            }
            lp.step_down_if_asked().await;
            let tick = Instant::now();
            lp.step().await;
            let mut wake = tick + lp.config.lease / 3;
            if let Some((_, until)) = lp.l.state().leading {
                wake = wake.min(until);
            }
            // Wakes early for a resignation or a step-down (checked at the top).
            let resign = async {
                while !lp.l.resigned() && lp.l.state().step_down.is_none() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {}
                () = resign => {}
            }
        }
    });
}

struct LeaseLoop {
    l: Leadership,
    config: ClusterConfig,
    changes: Sender<Change>,
    db: Option<Client>,
    first_heartbeat: bool,
    /// After a failed takeover: no acquire before this instant (two lease rounds), so
    /// another replica gets the row first.
    hold_off: Option<Instant>,
}

/// Why a statement failed: the database's error with its causes (tokio-postgres says
/// only "db error" at the top).
fn failed(e: tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

impl LeaseLoop {
    fn margin(&self) -> Duration {
        self.config.lease / 10
    }

    /// How long a statement may take: until the validity ends while leading, else a
    /// renewal interval.
    fn budget(&self) -> Duration {
        let interval = self.config.lease / 3;
        match self.l.state().leading {
            Some((_, until)) => until
                .saturating_duration_since(Instant::now())
                .min(interval),
            None => interval,
        }
        .max(Duration::from_millis(1))
    }

    async fn step(&mut self) {
        self.expire_if_due();
        if let Err(e) = self.lease().await {
            tracing::warn!("leadership: {e}");
            self.l.state().db_error = Some(e);
            self.expire_if_due();
            return;
        }
        self.l.state().db_error = None;
        if let Err(e) = self.observe().await {
            tracing::warn!("leadership: reading the cluster: {e}");
        }
    }

    /// Steps down when the validity already passed.
    fn expire_if_due(&mut self) {
        let due = matches!(self.l.state().leading, Some((_, until)) if Instant::now() >= until);
        if due {
            self.lose("no renewal of the leadership lease got through in time".into());
        }
    }

    fn lose(&mut self, why: String) {
        let term = {
            let mut s = self.l.state();
            let Some((t, _)) = s.leading.take() else {
                return;
            };
            // The row as last read names this replica: no longer true.
            if s.leader
                .as_ref()
                .is_some_and(|l| l.holder == self.config.holder)
            {
                s.leader = None;
            }
            t
        };
        self.l
            .0
            .changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!("leadership: lost term {term}: {why}");
        let _ = self.changes.send(Change::Lost { term, why });
    }

    /// The connection, opened when there is none; the caller puts it back after a success
    /// (a failed statement drops it, and the next step connects again).
    async fn client(&mut self) -> Result<Client, String> {
        if self.db.is_none() {
            let budget = self.budget();
            let connect = tokio_postgres::connect(&self.config.database_url, NoTls);
            let (client, conn) = tokio::time::timeout(budget, connect)
                .await
                .map_err(|_| "connecting to the database timed out".to_string())?
                .map_err(failed)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            // The server gives up a lock wait itself rather than leave a statement this
            // loop has stopped waiting for queued on the session.
            let ms = (self.config.lease / 3).as_millis().max(1);
            tokio::time::timeout(
                budget,
                client.batch_execute(&format!("SET lock_timeout = {ms}")),
            )
            .await
            .map_err(|_| "setting lock_timeout timed out".to_string())?
            .map_err(failed)?;
            self.db = Some(client);
        }
        Ok(self.db.take().expect("connected"))
    }

    /// Renews (leading) or tries to acquire (standby).
    async fn lease(&mut self) -> Result<(), String> {
        let budget = self.budget();
        let secs = self.config.lease.as_secs_f64();
        let leading = self.l.state().leading.map(|(t, _)| t);
        let (holder, url) = (self.config.holder.clone(), self.config.url.clone());
        let db = self.client().await?;
        let sent = Instant::now();
        let valid_until = sent + self.config.lease - self.margin();
        let timed = |what: &'static str| move |_| format!("{what} timed out");
        match leading {
            Some(term) => {
                let n = tokio::time::timeout(budget, db.execute(RENEW, &[&holder, &term, &secs]))
                    .await
                    .map_err(timed("renewing the leadership lease"))?
                    .map_err(failed)?;
                self.db = Some(db);
                self.record(sent);
                if n == 1 {
                    if let Some((_, until)) = self.l.state().leading.as_mut() {
                        *until = valid_until;
                    }
                } else {
                    self.lose("another replica holds the leadership row".into());
                }
            }
            None if self.hold_off.is_some_and(|t| Instant::now() < t) => self.db = Some(db),
            None => {
                self.hold_off = None;
                let row =
                    tokio::time::timeout(budget, db.query_opt(ACQUIRE, &[&holder, &url, &secs]))
                        .await
                        .map_err(timed("acquiring the leadership lease"))?
                        .map_err(failed)?;
                self.db = Some(db);
                self.record(sent);
                if let Some(row) = row {
                    let term: i64 = row.get(0);
                    {
                        let mut s = self.l.state();
                        s.leading = Some((term, valid_until));
                        s.term = s.term.max(term);
                    }
                    self.l
                        .0
                        .changes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!("leadership: took the lead, term {term}");
                    let _ = self.changes.send(Change::Won { term });
                }
            }
        }
        Ok(())
    }

    /// After a failed takeover ([`Leadership::step_down`]): releases the row, reports the
    /// loss and holds off acquiring for two lease rounds.
    async fn step_down_if_asked(&mut self) {
        let Some(term) = self.l.state().step_down.take() else {
            return;
        };
        if self.l.state().leading.is_some_and(|(t, _)| t == term) {
            self.release().await;
            self.l
                .0
                .changes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let why = "the takeover failed; the row is released".to_string();
            let _ = self.changes.send(Change::Lost { term, why });
        }
        self.hold_off = Some(Instant::now() + self.config.lease * 2 / 3);
    }

    /// At a graceful stop or a failed takeover: gives the row up (its expiry now), when
    /// this replica holds it.
    async fn release(&mut self) {
        let Some((term, _)) = self.l.state().leading.take() else {
            return;
        };
        let holder = self.config.holder.clone();
        let Ok(db) = self.client().await else {
            return;
        };
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&holder, &term];
        let done = tokio::time::timeout(self.config.lease, db.execute(RELEASE, &params));
        match done.await {
            Ok(Ok(_)) => tracing::info!("leadership: released term {term}"),
            _ => tracing::warn!("leadership: could not release term {term}; it runs out by itself"),
        }
    }

    fn record(&self, sent: Instant) {
        self.l.state().last_ms = Some(sent.elapsed().as_secs_f64() * 1000.0);
    }

    /// Reads the leader row and the replicas for the view, and heartbeats.
    async fn observe(&mut self) -> Result<(), String> {
        let budget = self.budget();
        let version = env!("CARGO_PKG_VERSION").to_string();
        let (holder, url, first) = (
            self.config.holder.clone(),
            self.config.url.clone(),
            self.first_heartbeat,
        );
        let db = self.client().await?;
        let work = async {
            db.execute(HEARTBEAT, &[&holder, &url, &version, &first])
                .await?;
            let leader = db.query_one(&leader_query(), &[]).await?;
            let replicas = db.query(&replicas_query(), &[]).await?;
            Ok::<_, tokio_postgres::Error>((leader, replicas))
        };
        let (leader, replicas) = tokio::time::timeout(budget, work)
            .await
            .map_err(|_| "reading the cluster timed out".to_string())?
            .map_err(failed)?;
        self.db = Some(db);
        self.first_heartbeat = false;
        let live: Option<bool> = leader.get(5);
        let term: i64 = leader.get(2);
        let view = match (live, leader.get::<_, Option<String>>(0)) {
            (Some(true), Some(holder)) => Some(LeaderView {
                holder,
                url: leader.get::<_, Option<String>>(1).unwrap_or_default(),
                term,
                since: leader.get::<_, Option<String>>(3).unwrap_or_default(),
                expires_at: leader.get::<_, Option<String>>(4).unwrap_or_default(),
            }),
            _ => None,
        };
        let replicas = replicas
            .iter()
            .map(|r| ReplicaView {
                holder: r.get(0),
                url: r.get(1),
                started_at: r.get::<_, Option<String>>(2).unwrap_or_default(),
                seen_at: r.get::<_, Option<String>>(3).unwrap_or_default(),
                version: r.get(4),
                leader: false,
            })
            .collect();
        let mut s = self.l.state();
        s.term = s.term.max(term);
        s.leader = view;
        s.replicas = replicas;
        Ok(())
    }
}
