//! Several replicas on one PostgreSQL database: which one leads (docs/postgresql.md,
//! "Several servers").
//!
//! [`spawn`] starts the replica's leadership loop (`cluster/lease.rs`) on its own thread with its
//! own database connection, so neither the event loop nor the HTTP workers can delay a
//! renewal. It reports every change of role as a [`Change`] on a channel and keeps the
//! shared [`Leadership`] that handlers, the gate and `/metrics` read.
//!
//! # Invariants
//! - **The lease is the database's**: it is taken and renewed by one `UPDATE` of the one
//!   `lockgate_leader` row on the database's clock (`now()`), and a new holder always
//!   raises `term`. No replica's wall clock takes part.
//! - **A replica counts itself leader only on its monotonic clock**:
//!   [`Leadership::leading`] is true only before (the instant the last successful renewal
//!   was *sent*) + lease − margin. The database set the expiry when it *ran* the
//!   statement, which is later, so while `leading` is true no other replica can have taken
//!   the row (up to clock-rate drift, which the margin covers). The check is made by the
//!   reader at the moment it asks, so a paused or starved lease thread cannot stretch it.
//! - **Every step down is reported**: the loop sends [`Change::Lost`] when a renewal finds
//!   the row taken, or the validity passes before a renewal got through; readers never
//!   wait for that report, since [`Leadership::leading`] is already false.

mod lease;
mod routes;
#[cfg(test)]
mod tests;

pub use routes::gate;
pub(crate) use routes::{routes, ApiDoc};

use lockgate_api::{ClusterView, LeaderView, ReplicaView};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How one replica takes part.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The database (`postgres://...`).
    pub database_url: String,
    /// This replica's id in `lockgate_leader.holder` and `lockgate_replicas` (unique per
    /// replica: the default is `hostname:port`).
    pub holder: String,
    /// The URL clients reach this replica on (`--advertise-url`); standbys name it.
    pub url: String,
    /// The leadership lease; see [`lease_for_ttl`].
    pub lease: Duration,
}

/// The leadership lease for a policy's lease TTL: TTL/6, renewed every lease/3.
///
/// A holder renews every TTL/3 and stops its command a sixth of the TTL before its lease
/// can run out, so failover must finish within TTL/3 of the leader's death. A standby takes
/// the row at most one lease after the leader's last renewal plus one renewal interval
/// (lease/3) before it tries, so takeover starts by 4/3 × TTL/6 = 2/9 of the TTL; the
/// rebuild from the database must fit in the remaining TTL/9.
pub fn lease_for_ttl(ttl: Duration) -> Duration {
    (ttl / 6).max(Duration::from_millis(300))
}

/// A change of this replica's role, in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// This replica took the lead under `term`: rebuild, fence the store with the term,
    /// then admit.
    Won {
        /// The new term.
        term: i64,
    },
    /// This replica no longer leads under `term` (already true for every reader).
    Lost {
        /// The term it led under.
        term: i64,
        /// Why, for the log.
        why: String,
    },
}

/// The shared view of leadership; clones share it.
#[derive(Debug, Clone)]
pub struct Leadership(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    holder: String,
    url: String,
    database: String,
    lease: Duration,
    state: Mutex<State>,
    changes: AtomicU64,
    /// Set by [`Leadership::resign`]: the loop releases the row and ends.
    resigned: std::sync::atomic::AtomicBool,
    /// Set by the loop when it has ended (after a resignation's release).
    ended: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// While this replica leads: its term and the end of its validity (monotonic).
    leading: Option<(i64, Instant)>,
    /// The leader row as last read (a live lease only).
    leader: Option<LeaderView>,
    /// The highest term seen.
    term: i64,
    replicas: Vec<ReplicaView>,
    last_ms: Option<f64>,
    /// The term whose event loop is installed and admitting ([`Leadership::serve`]); a
    /// replica that won the lease but is still loading has `leading` and not this.
    serving: Option<i64>,
    /// Why the last lease step failed (the database did not answer, ...); `None` once a
    /// step got through.
    db_error: Option<String>,
    /// A term whose takeover failed: the loop releases the row and becomes a standby
    /// ([`Leadership::step_down`]).
    step_down: Option<i64>,
}

impl Leadership {
    /// A replica that leads nothing yet.
    fn new(config: &ClusterConfig) -> Leadership {
        Leadership(Arc::new(Shared {
            holder: config.holder.clone(),
            url: config.url.clone(),
            database: lockgate_store::postgres::redact(&config.database_url),
            lease: config.lease,
            state: Mutex::new(State::default()),
            changes: AtomicU64::new(0),
            resigned: std::sync::atomic::AtomicBool::new(false),
            ended: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().expect("leadership state")
    }

    /// The term this replica leads under, checked now on the monotonic clock; `None` on a
    /// standby or once the lease may have passed.
    pub fn leading(&self) -> Option<i64> {
        if self.resigned() {
            return None;
        }
        let s = self.state();
        s.leading
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(t, _)| t)
    }

    /// The term this replica leads *and serves* under: it leads ([`Leadership::leading`])
    /// and that term's event loop is installed. Between winning the lease and the end of
    /// the rebuild a replica leads but does not serve: its tokens and engine are not there
    /// yet, so the gate answers 503 `unavailable` rather than let a handler answer 401.
    pub fn serving(&self) -> Option<i64> {
        let term = self.leading()?;
        (self.state().serving == Some(term)).then_some(term)
    }

    /// Why this replica's last lease step could not reach the database, while it cannot.
    pub fn database_error(&self) -> Option<String> {
        self.state().db_error.clone()
    }

    /// Marks `term`'s event loop as installed: the gate lets requests through.
    pub(crate) fn serve(&self, term: i64) {
        self.state().serving = Some(term);
    }

    /// Marks that no event loop serves (its term ended, or it is being stopped).
    pub(crate) fn stop_serving(&self) {
        self.state().serving = None;
    }

    /// A takeover under `term` failed (the rebuild from the database did not load): the
    /// loop releases the row at once, so another replica need not wait out the lease, and
    /// this one becomes a standby that stays out of the next two lease rounds.
    pub(crate) fn step_down(&self, term: i64) {
        self.state().step_down = Some(term);
    }

    /// Whether this replica may still act under `term`.
    pub fn still_leads(&self, term: i64) -> bool {
        self.leading() == Some(term)
    }

    /// The leader's advertised URL, when another replica holds a live lease (`None` when
    /// this one leads or none is known).
    pub fn leader_url(&self) -> Option<String> {
        let s = self.state();
        s.leader
            .as_ref()
            .filter(|l| l.holder != self.0.holder)
            .map(|l| l.url.clone())
    }

    /// Ends this replica's part at a graceful stop: leading stops now, and the loop
    /// releases the row (so a standby need not wait a lease) and ends.
    pub fn resign(&self) {
        self.0.resigned.store(true, Ordering::Release);
    }

    fn resigned(&self) -> bool {
        self.0.resigned.load(Ordering::Acquire)
    }

    /// [`Leadership::resign`], then waits (at most `within`) until the loop has released
    /// the row and ended: for a process about to exit, which would else leave the row
    /// held until its lease runs out.
    pub fn resign_and_wait(&self, within: Duration) {
        self.resign();
        let deadline = Instant::now() + within;
        while !self.0.ended.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// This replica's id.
    pub fn holder(&self) -> &str {
        &self.0.holder
    }

    /// This replica's advertised URL.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// `GET /v1/cluster`.
    pub fn view(&self) -> ClusterView {
        let role = match (self.leading(), self.serving()) {
            (Some(_), Some(_)) => "leader",
            (Some(_), None) => "taking_over",
            (None, _) => "standby",
        };
        let s = self.state();
        let leader = s.leader.clone();
        let lead_holder = leader.as_ref().map(|l| l.holder.clone());
        ClusterView {
            me: self.0.holder.clone(),
            role: role.into(),
            leader,
            term: s.term,
            leader_changes: self.0.changes.load(Ordering::Relaxed),
            lease_s: self.0.lease.as_secs_f64(),
            database: self.0.database.clone(),
            last_commit_ms: s.last_ms,
            replicas: s
                .replicas
                .iter()
                .map(|r| ReplicaView {
                    leader: Some(&r.holder) == lead_holder.as_ref(),
                    ..r.clone()
                })
                .collect(),
        }
    }

    /// The leadership metrics in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let leads = u8::from(self.leading().is_some());
        let term = self.state().term;
        let changes = self.0.changes.load(Ordering::Relaxed);
        format!(
            "# HELP lockgate_cluster_leader 1 while this replica leads.\n\
             # TYPE lockgate_cluster_leader gauge\n\
             lockgate_cluster_leader {leads}\n\
             # HELP lockgate_cluster_term The highest leadership term this replica has seen.\n\
             # TYPE lockgate_cluster_term gauge\n\
             lockgate_cluster_term {term}\n\
             # HELP lockgate_cluster_leader_changes_total Changes of this replica's role (took or lost the lead).\n\
             # TYPE lockgate_cluster_leader_changes_total counter\n\
             lockgate_cluster_leader_changes_total {changes}\n"
        )
    }
}

/// Starts the leadership loop of one replica; changes of role arrive on `changes`.
pub fn spawn(config: ClusterConfig, changes: std::sync::mpsc::Sender<Change>) -> Leadership {
    let leadership = Leadership::new(&config);
    let l = leadership.clone();
    std::thread::Builder::new()
        .name("lockgate-lease".into())
        .spawn(move || lease::run(l, config, changes))
        .expect("spawn the leadership thread");
    leadership
}

/// Who leads, as `GET /v1/cluster` answers it.
#[derive(Debug, Clone)]
pub enum Membership {
    /// A server on SQLite: it leads alone (term 0, no database).
    Single(Arc<ClusterView>),
    /// A replica on a database.
    Replica(Leadership),
}

impl Membership {
    /// A single server listening on `addr`.
    pub fn single(addr: std::net::SocketAddr) -> Membership {
        let me = addr.to_string();
        let url = format!("http://{addr}");
        let since =
            lockgate_api::time::format(lockgate_core::Timestamp(crate::event_loop::wall_ms()));
        Membership::Single(Arc::new(ClusterView {
            me: me.clone(),
            role: "leader".into(),
            leader: Some(LeaderView {
                holder: me.clone(),
                url: url.clone(),
                term: 0,
                since: since.clone(),
                expires_at: String::new(),
            }),
            term: 0,
            leader_changes: 0,
            lease_s: 0.0,
            database: String::new(),
            last_commit_ms: None,
            replicas: vec![ReplicaView {
                holder: me,
                url,
                started_at: since.clone(),
                seen_at: since,
                version: Some(env!("CARGO_PKG_VERSION").into()),
                leader: true,
            }],
        }))
    }

    /// Whether this server admits: a single server always, a replica while it leads and
    /// its term's loop is installed (`/readyz`).
    pub fn serves(&self) -> bool {
        match self {
            Membership::Single(_) => true,
            Membership::Replica(l) => l.serving().is_some(),
        }
    }

    /// The answer of `GET /v1/cluster`.
    pub fn view(&self) -> ClusterView {
        match self {
            Membership::Single(v) => (**v).clone(),
            Membership::Replica(l) => l.view(),
        }
    }
}
