//! A server on a database is a replica (docs/cluster.md): it leads and runs the engine, or
//! it is a standby that serves HTTP and sends clients to the leader.
//!
//! # Invariants
//! - **One loop per term, built from the database**: on [`Change::Won`] the store is
//!   opened fenced with (holder, term) and the engine rebuilt by `load_loop` (lib.rs), the
//!   path of a start (every lease gets a fresh TTL); only then is the loop put behind the
//!   shared [`LoopHandle`], so nothing is admitted before the rebuild.
//! - **A term's loop ends with the term**: on [`Change::Lost`] the handle is cleared
//!   first (new asks answer 503), the notification task is aborted, and the loop is told to
//!   stop; what it answers meanwhile passes the gate's second check, which replaces it
//!   with 503. A commit the store fenced off stops the loop by itself (`event_loop`).
//! - Background duties (schedules, retention, RPO) live in the loop, and notification
//!   delivery in a task of the term, so a standby runs none of them.

use crate::auth::{Principal, Tokens};
use crate::cluster::{self, Change, ClusterConfig, Leadership};
use crate::event_loop::Loop;
use crate::protocol::{LoopHandle, Op};
use crate::{load_loop, notify, spawn_loop, startup_policy, Config, ServerError};
use lockgate_store::postgres::Fence;
use lockgate_store::{AnyStore, Store, StoreLocation};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};

/// `--advertise-url` and `--replica-id` of `lockgate server`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The URL clients reach this replica on; default `http://<bound address>`.
    pub advertise_url: Option<String>,
    /// This replica's id; default `hostname:port`.
    pub replica_id: Option<String>,
}

/// A replica's part of the server between `open` and `run`.
pub(crate) struct Replica {
    pub(crate) leadership: Leadership,
    /// The term it won at `open` (its loop is the one `open` loaded), if any.
    pub(crate) won: Option<i64>,
    changes: std::sync::mpsc::Receiver<Change>,
    config: Config,
}

type Events = broadcast::Sender<Arc<lockgate_api::EventView>>;

/// What `open` gives a replica: the loop when it took the lead at once, the new admin token,
/// the replica.
pub(crate) type Started = (Option<Loop>, Option<String>, Replica);

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Starts the leadership loop and waits for its first step: a replica that wins at once is
/// loaded here (as a single server is), else it starts as a standby.
pub(crate) fn start(
    config: &Config,
    options: &Options,
    database_url: String,
    addr: SocketAddr,
    mut store: AnyStore,
    tokens: &Tokens,
    events: &Events,
) -> Result<Started, ServerError> {
    let stored = store.load()?.policy;
    let (policy, _, _) = startup_policy(config, stored.as_deref())?;
    let lease = cluster::lease_for_ttl(policy.leases.ttl);
    let holder = options
        .replica_id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", hostname(), addr.port()));
    let url = options
        .advertise_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let (tx, changes) = std::sync::mpsc::channel();
    let leadership = cluster::spawn(
        ClusterConfig {
            database_url,
            holder: holder.clone(),
            url,
            lease,
        },
        tx,
    );
    let won = first_step(&leadership, &changes, lease);
    let replica = Replica {
        leadership,
        won,
        changes,
        config: config.clone(),
    };
    let Some(term) = won else {
        tracing::info!("replica {holder}: standby (another replica leads)");
        return Ok((None, None, replica));
    };
    let fence = Fence { holder, term };
    match load_loop(config, store, Some(fence), tokens, events) {
        Ok((looper, admin)) => Ok((Some(looper), admin, replica)),
        Err(e) => {
            // The process exits: give the row up rather than hold it for a lease.
            replica.leadership.resign_and_wait(lease);
            Err(e)
        }
    }
}

/// Waits until the leadership loop's first step is done (it took the lead, or it read
/// the cluster), at most one lease.
fn first_step(
    l: &Leadership,
    changes: &std::sync::mpsc::Receiver<Change>,
    lease: Duration,
) -> Option<i64> {
    let deadline = Instant::now() + lease;
    while Instant::now() < deadline {
        match changes.recv_timeout(Duration::from_millis(20)) {
            Ok(Change::Won { term }) => return Some(term),
            Ok(Change::Lost { .. }) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if !l.view().replicas.is_empty() {
                    return None;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
    None
}

/// One term's loop: its thread, its notification task and its own handle.
pub(crate) struct Running {
    thread: std::thread::JoinHandle<()>,
    notify: tokio::task::JoinHandle<()>,
    own: LoopHandle,
    /// A replica's leadership and the term this loop serves.
    lead: Option<(Leadership, i64)>,
}

/// The loop of this term, if any, shared by the follower and the shutdown.
pub(crate) type Current = Arc<tokio::sync::Mutex<Option<Running>>>;

/// Starts `looper` and puts it behind `lp`; on a replica (`lead`), only then marks the
/// term as served, which opens the gate ([`Leadership::serving`]).
pub(crate) fn start_term(
    looper: Loop,
    lp: &LoopHandle,
    store: StoreLocation,
    lead: Option<(Leadership, i64)>,
) -> Running {
    let (tx, rx) = mpsc::channel(8192);
    let (wake, targets) = looper.notify.task_side();
    let thread = spawn_loop(looper, rx);
    let own = LoopHandle::new(tx.clone());
    let notify = notify::spawn(own.clone(), store, wake, targets);
    lp.install(tx);
    if let Some((l, term)) = &lead {
        l.serve(*term);
    }
    Running {
        thread,
        notify,
        own,
        lead,
    }
}

/// Stops a term's loop: the gate and the shared handle first, then the notification
/// task, then the loop (which answers its waiters and ends), joined.
///
/// # Cancel safety
/// Not cancel safe: once it has cleared the handle, dropping it leaves the term's loop
/// thread running without a gate in front of it. It is awaited to its end by `follow`.
pub(crate) async fn stop_term(running: Running, lp: &LoopHandle) {
    if let Some((l, _)) = &running.lead {
        l.stop_serving();
    }
    lp.clear();
    running.notify.abort();
    let _ = running.own.ask(Principal::system(), Op::Shutdown).await;
    drop(running.own);
    let thread = running.thread;
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
}

/// Follows the leadership loop's changes for the life of the server: builds a term's
/// loop on `Won`, stops it on `Lost`. Ends at shutdown.
///
/// # Cancel safety
/// Not cancel safe: it owns the term's loop; dropping it mid-takeover leaves a loop
/// loading or running with nothing to stop it. It is spawned once and ends with `stop`.
pub(crate) async fn follow(
    replica: Replica,
    lp: LoopHandle,
    current: Current,
    tokens: Tokens,
    events: Events,
    stop: watch::Receiver<bool>,
) {
    let Replica {
        leadership,
        changes,
        config,
        ..
    } = replica;
    let (tx, mut rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("lockgate-changes".into())
        .spawn(move || {
            while let Ok(c) = changes.recv() {
                if tx.send(c).is_err() {
                    return;
                }
            }
        })
        .expect("spawn the leadership bridge");
    while let Some(change) = rx.recv().await {
        if *stop.borrow() {
            return;
        }
        if let Some(running) = current.lock().await.take() {
            stop_term(running, &lp).await;
            tracing::warn!("replica: stepped down, now a standby");
        }
        let Change::Won { term } = change else {
            continue;
        };
        let fence = Fence {
            holder: leadership.holder().to_string(),
            term,
        };
        let (cfg, t, e) = (config.clone(), tokens.clone(), events.clone());
        let loaded = tokio::task::spawn_blocking(move || {
            let store = cfg.store_location().open()?;
            load_loop(&cfg, store, Some(fence), &t, &e)
        })
        .await;
        match loaded {
            Ok(Ok((looper, admin))) => {
                if admin.is_some() {
                    eprintln!(
                        "lockgate: wrote a new admin token to {}",
                        config.data_dir.join("admin.token").display()
                    );
                }
                if !leadership.still_leads(term) || *stop.borrow() {
                    continue;
                }
                let lead = Some((leadership.clone(), term));
                let running = start_term(looper, &lp, config.store_location(), lead);
                *current.lock().await = Some(running);
                tracing::info!("replica: leader under term {term}, admitting");
            }
            Ok(Err(e)) => {
                tracing::error!(
                    "replica: cannot take over under term {term}: {e}; releasing the lead"
                );
                leadership.step_down(term);
            }
            Err(e) => {
                tracing::error!("replica: the takeover failed: {e}; releasing the lead");
                leadership.step_down(term);
            }
        }
    }
}
