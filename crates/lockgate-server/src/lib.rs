//! lockgate-server: the event loop around the engine, the HTTP API, long-poll, SSE,
//! auth and metrics (design `README.md`, "Architecture"; `api.md`).
//!
//! ```text
//!  HTTP (axum) --Msg--> event loop (one thread, owns the Engine) --Batch--> Store (SQLite or PostgreSQL)
//!        ^                    |  typed answers after the commit (oneshot)
//!        +---- SSE <----------+  committed events (broadcast)
//! ```
//!
//! Main types: [`Config`], [`Server`] ([`Server::open`] rebuilds the engine from the
//! store and binds; [`Server::run`] serves until a shutdown future resolves), the loop in
//! [`event_loop`] and its typed protocol in [`protocol`] ([`protocol::LoopHandle::ask`]).
//!
//! The code is laid out by feature: [`jobs`], [`nodes`], [`policy`], [`tokens`],
//! [`schedules`], [`backups`], [`events`]. Each folder holds its routes (`routes.rs`) and
//! its loop operations (`ops.rs`, an `impl Loop` block behind one `FooOp` enum), so a new
//! endpoint touches one folder (plus one line in [`http::router`] for a new feature).
#![warn(missing_docs)]

pub mod alloc;
pub mod audit;
pub mod auth;
pub mod autolimits;
pub mod backups;
pub mod clock;
pub mod cluster;
pub mod error;
pub mod event_loop;
pub mod events;
pub mod forecast;
pub mod http;
pub mod joblogs;
pub mod jobs;
pub mod metrics;
pub mod nodes;
pub mod notify;
pub mod openapi;
pub mod plant;
pub mod policy;
pub mod protocol;
pub mod queue;
pub(crate) mod records;
pub mod replica;
pub mod restores;
pub mod rpo;
pub mod schedules;
pub mod tokens;
pub mod ui;
pub mod usage;
// The data-dir lock and watermark, free-space watch, serving loop.
pub mod datadir;
pub mod hardening;
pub mod listener;
pub mod longlived;
pub mod restore_db;
pub mod space;

use auth::{Principal, Tokens};
use event_loop::{wall_ms, Loop};
use lockgate_api::Role;
use lockgate_core::engine::Snapshot;
use lockgate_core::{Engine, Mode, Policy, Timestamp};
use lockgate_store::{AnyStore, Batch, Store, StoreLocation, TokenRecord};
use policy::{PolicyOp, PolicySource};
use protocol::{LoopHandle, Msg};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, watch};

/// How the server is started.
#[derive(Clone)]
pub struct Config {
    /// Where the store (`lockgate.db`) and `admin.token` live.
    pub data_dir: PathBuf,
    /// Address to listen on (`127.0.0.1:7400`; port 0 picks one).
    pub listen: SocketAddr,
    /// `--config FILE`: the policy file, the source of truth (else the store holds it).
    pub policy_file: Option<PathBuf>,
    /// `--tls-cert` and `--tls-key` (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Data-dir guards, disk watermark, connection limits ([`hardening::Hardening`]).
    pub hardening: hardening::Hardening,
    /// `--backup-input-root DIR` (repeatable): directories a non-admin's backup input must
    /// lie in, unioned with `[blocks] input_roots`. Each must be an existing directory.
    /// Default none: only admins may back up from the server's file system.
    pub backup_input_roots: Vec<PathBuf>,
    /// `--database-url` / `LOCKGATE_DATABASE_URL`: the store is this PostgreSQL database
    /// (`docs/postgresql.md`) instead of `<data-dir>/lockgate.db`, and the database holds
    /// the active policy (`--config` only seeds an empty one). A secret: never shown
    /// with its password (`Debug` redacts it).
    pub database_url: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("data_dir", &self.data_dir)
            .field("listen", &self.listen)
            .field("policy_file", &self.policy_file)
            .field("tls", &self.tls)
            .field("hardening", &self.hardening)
            .field("backup_input_roots", &self.backup_input_roots)
            .field(
                "database_url",
                &self
                    .database_url
                    .as_deref()
                    .map(lockgate_store::postgres::redact),
            )
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Where the store is: the database of `--database-url`, else `<data-dir>/lockgate.db`.
    pub fn store_location(&self) -> StoreLocation {
        match &self.database_url {
            Some(url) => StoreLocation::Postgres(url.clone()),
            None => StoreLocation::Sqlite(self.data_dir.join(datadir::DB_FILE)),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `LOCKGATE_PLANT` asks for a planted bug this build does not carry (plant.rs).
    #[error("{0}")]
    Plant(String),
    /// The data dir could not be created or written.
    #[error("data dir {path}: {message}")]
    DataDir {
        /// Path.
        path: String,
        /// Cause.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] lockgate_store::StoreError),
    /// The policy (file or stored) is invalid; nothing was started.
    #[error("invalid policy: {0}")]
    Policy(#[from] lockgate_core::policy::PolicyError),
    /// The policy file could not be read.
    #[error("cannot read the policy file {path}: {message}")]
    PolicyFile {
        /// Path.
        path: String,
        /// Cause.
        message: String,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Listen {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        message: String,
    },
    /// TLS files could not be loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// The data dir is in use, or its store is behind what it acknowledged.
    #[error(transparent)]
    Guard(#[from] datadir::GuardError),
    /// A `--backup-input-root` is not an existing directory (given as an absolute path).
    #[error("--backup-input-root: {0}")]
    InputRoot(#[from] lockgate_blocks::RootError),
}

/// A server ready to serve: store open, engine rebuilt, admin token written, address bound.
pub struct Server {
    /// The loop, loaded (`None` on a replica that starts as a standby).
    looper: Option<Loop>,
    /// With a database: the replica's leadership ([`replica`]).
    replica: Option<replica::Replica>,
    listener: std::net::TcpListener,
    addr: SocketAddr,
    tls: Option<(PathBuf, PathBuf)>,
    tokens: Tokens,
    events: broadcast::Sender<Arc<lockgate_api::EventView>>,
    admin_token: Option<String>,
    reload_on_hup: bool,
    data_dir: PathBuf,
    item_block_workers: usize,
    // Issue 10: held for the server's life; the watch and limits used by `run`.
    lock: datadir::DataDirLock,
    space: Arc<space::SpaceWatch>,
    limits: listener::Limits,
    backup_input_roots: Vec<PathBuf>,
    metrics_auth: bool,
    store_location: StoreLocation,
}

/// The policy a start uses: the `--config` file when there is one, else the stored
/// document, else no limits at all. With a database the stored document comes first, and
/// the file only seeds an empty database: then its text is returned to be stored.
pub(crate) fn startup_policy(
    config: &Config,
    stored: Option<&str>,
) -> Result<(Policy, PolicySource, Option<String>), ServerError> {
    if config.database_url.is_some() {
        let seed = config.policy_file.clone();
        let source = PolicySource::Database { seed: seed.clone() };
        return match (stored, &seed) {
            (Some(text), _) => {
                if let Some(path) = &seed {
                    tracing::info!(
                        "the database holds the active policy; {} is not read at start (SIGHUP applies it to the database)",
                        path.display()
                    );
                }
                Ok((
                    Policy::from_toml(text, Some("<stored policy>"))?,
                    source,
                    None,
                ))
            }
            (None, Some(path)) => {
                let (policy, text) = read_policy(path)?;
                Ok((policy, source, Some(text)))
            }
            (None, None) => Ok((Policy::unlimited(), source, None)),
        };
    }
    let (policy, source) = match &config.policy_file {
        Some(path) => file_policy(path)?,
        None => match stored {
            Some(text) => (
                Policy::from_toml(text, Some("<stored policy>"))?,
                PolicySource::Store,
            ),
            None => (Policy::unlimited(), PolicySource::Store),
        },
    };
    Ok((policy, source, None))
}

/// The `--config` file's (or directory's) policy.
fn file_policy(path: &Path) -> Result<(Policy, PolicySource), ServerError> {
    let (policy, _) = read_policy(path)?;
    Ok((policy, PolicySource::File(path.to_path_buf())))
}

/// Reads `--config` ([`lockgate_host::policy_files::read`]).
fn read_policy(path: &Path) -> Result<(Policy, String), ServerError> {
    lockgate_host::policy_files::read(path).map_err(|e| match e {
        lockgate_host::policy_files::ReadError::Io { path, message } => {
            ServerError::PolicyFile { path, message }
        }
        lockgate_host::policy_files::ReadError::Policy(e) => ServerError::Policy(e),
    })
}

/// The stored tokens as principals (names with a reserved prefix are skipped with a
/// warning); when none is an admin, or when this data dir owns its store (`own_file`) and
/// its `admin.token` is missing or holds no stored admin token (deleted or damaged while
/// the server was stopped), a new admin token is stored and written to `admin.token`
/// (never over an existing file), and returned. Earlier admin tokens keep working.
fn load_tokens(
    stored: &[TokenRecord],
    store: &mut AnyStore,
    dir: &Path,
    own_file: bool,
    now: Timestamp,
) -> Result<(Tokens, Option<String>), ServerError> {
    let tokens = Tokens::default();
    let mut has_admin = false;
    for t in stored {
        if let Some(prefix) = auth::reserved_prefix(&t.name) {
            tracing::warn!(
                "token {:?} is not loaded: the prefix {prefix:?} is reserved for the server's own principals; revoke it",
                t.name
            );
            continue;
        }
        has_admin |= t.role == Role::Admin;
        tokens.insert(
            t.hash.clone(),
            Principal {
                name: t.name.clone(),
                role: t.role,
                node: t.node.clone(),
            },
        );
    }
    let path = dir.join(lockgate_host::data_dir::ADMIN_TOKEN_FILE);
    if has_admin {
        let Some(why) = own_file.then(|| lost_admin_file(&path, &tokens)).flatten() else {
            return Ok((tokens, None));
        };
        tracing::warn!(
            "{} {why}: writing a new admin token to it; the earlier admin tokens still work (`lockgate token ls`; revoke any that may have leaked)",
            path.display()
        );
    }
    let mut name = "admin".to_string();
    let mut n = 1;
    while stored.iter().any(|t| t.name == name) {
        n += 1;
        name = format!("admin-{n}");
    }
    let token = auth::new_token();
    let rec = TokenRecord {
        name: name.clone(),
        role: Role::Admin,
        node: None,
        hash: auth::hash(&token),
        created_at: now,
    };
    store.commit(&Batch {
        tokens: vec![rec.clone()],
        ..Batch::default()
    })?;
    tokens.insert(
        rec.hash,
        Principal {
            name,
            role: Role::Admin,
            node: None,
        },
    );
    datadir::write_admin_token(&path, &token).map_err(|e| data_dir_err(&path, e))?;
    Ok((tokens, Some(token)))
}

/// Why `admin.token` no longer lets the host in: missing, unreadable, or holding no
/// admin token of those loaded. `None` when it holds one.
fn lost_admin_file(path: &Path, tokens: &Tokens) -> Option<&'static str> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some("is missing"),
        Err(_) => return Some("cannot be read"),
    };
    let admin = tokens
        .lookup(text.trim())
        .is_some_and(|p| p.role == Role::Admin);
    (!admin).then_some("holds no live admin token of the store (damaged, or its token was revoked)")
}

/// Binds the listening socket (non-blocking, for the accept loop) and reports the address
/// it got (port 0 picks one).
fn bind(listen: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), ServerError> {
    let err = |e: std::io::Error| ServerError::Listen {
        addr: listen,
        message: e.to_string(),
    };
    let listener = std::net::TcpListener::bind(listen).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    let addr = listener.local_addr().map_err(err)?;
    Ok((listener, addr))
}

fn data_dir_err(path: &Path, e: impl std::fmt::Display) -> ServerError {
    ServerError::DataDir {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The load path of a start and of a replica's takeover: reads the store, rebuilds the
/// engine (every lease gets a fresh TTL, as a restart), loads the tokens (writing
/// `admin.token` when the store has no admin yet) and settles. `fence` is set on a
/// PostgreSQL store before its first commit.
pub(crate) fn load_loop(
    config: &Config,
    store: AnyStore,
    fence: Option<lockgate_store::postgres::Fence>,
    tokens: &Tokens,
    events: &broadcast::Sender<Arc<lockgate_api::EventView>>,
) -> Result<(Loop, Option<String>), ServerError> {
    let dir = &config.data_dir;
    let store_location = config.store_location();
    let mut store = store;
    if let (AnyStore::Postgres(pg), Some(f)) = (&mut store, fence) {
        pg.set_fence(Some(f));
    }
    let mut loaded = store.load()?;
    // The watermark guards a file this data dir owns; a database is shared by the
    // replicas and kept by PostgreSQL (docs/postgresql.md).
    let mark = match store_location {
        StoreLocation::Sqlite(_) => Some(datadir::check_store(
            dir,
            &mut store,
            &mut loaded,
            config.hardening.start_fresh,
        )?),
        StoreLocation::Postgres(_) => None,
    };
    let (policy, source, seed) = startup_policy(config, loaded.policy.as_deref())?;
    lockgate_blocks::InputRoots::new(&config.backup_input_roots)?;
    let policy_file = config.policy_file.as_ref().map(|p| p.display().to_string());
    backups::check_policy_roots(&policy, policy_file.as_deref())?;
    let snapshot = Snapshot {
        next_id: loaded.max_job_id + 1,
        next_token: loaded.max_token + 1,
        jobs: std::mem::take(&mut loaded.live_jobs),
        nodes: std::mem::take(&mut loaded.nodes),
        pauses: std::mem::take(&mut loaded.pauses),
        next_pause_id: loaded.max_pause_id + 1,
    };
    let now = Timestamp(wall_ms());
    // Time windows and schedules read wall-clock times in the same zone.
    let zone = schedules::server_zone();
    let engine = Engine::restore_in_zone(policy, snapshot, now, Mode::Indexed, &zone);
    // A replica's data dir shares its database's tokens; only a data dir that owns its
    // store keeps its admin.token in step.
    let own_file = mark.is_some();
    let (fresh, admin_token) = load_tokens(&loaded.tokens, &mut store, dir, own_file, now)?;
    tokens.replace_with(&fresh);
    let store: Box<dyn Store> = match mark {
        Some(mark) => Box::new(datadir::Watermarked::new(store, dir, mark)),
        None => Box::new(store),
    };
    let mut looper = Loop::new(
        engine,
        store,
        tokens.clone(),
        source,
        events.clone(),
        loaded.last_event_seq,
        loaded.max_token,
    );
    looper.notify.backlog = loaded.outbox_pending;
    looper.retry_commits = store_location.is_postgres();
    // `--config` seeding an empty database: stored with the first commit.
    looper.batch.policy = seed;
    looper.reoffer();
    looper.load_schedules(loaded.schedules, zone)?;
    looper.recover::<lockgate_api::BackupView>()?;
    looper.recover::<lockgate_api::RestoreView>()?;
    looper.load_rpo(std::mem::take(&mut loaded.rpo));
    looper.restore_learned(loaded.learned.as_deref(), now);
    looper.settle()?;

    Ok((looper, admin_token))
}

impl Server {
    /// Opens the store (migrating it), reads the policy, rebuilds the engine (every lease
    /// gets a fresh TTL), writes `admin.token` when there is no admin token yet, and binds.
    ///
    /// # Errors
    /// [`ServerError`]: nothing is served.
    pub fn open(config: Config) -> Result<Server, ServerError> {
        Server::open_replica(config, replica::Options::default())
    }

    /// [`Server::open`] with a replica's options (`--advertise-url`, `--replica-id`): with
    /// a database the server is a replica (docs/cluster.md). It takes the lead at once when
    /// no other replica holds it (then it is loaded as `open` does); else it starts as a
    /// standby and loads the engine when it wins.
    ///
    /// # Errors
    /// [`ServerError`]: nothing is served.
    pub fn open_replica(config: Config, options: replica::Options) -> Result<Server, ServerError> {
        use std::os::unix::fs::PermissionsExt;
        plant::check().map_err(ServerError::Plant)?;
        let dir = &config.data_dir;
        std::fs::create_dir_all(dir).map_err(|e| data_dir_err(dir, e))?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        let lock = datadir::DataDirLock::acquire(dir)?;
        let store_location = config.store_location();
        let store = store_location.open()?;
        let (listener, addr) = bind(config.listen)?;
        let tokens = Tokens::default();
        let (events, _) = broadcast::channel(4096);
        let (looper, admin_token, replica) = match &store_location {
            StoreLocation::Sqlite(_) => {
                let (looper, admin_token) = load_loop(&config, store, None, &tokens, &events)?;
                (Some(looper), admin_token, None)
            }
            StoreLocation::Postgres(url) => {
                let (looper, admin_token, replica) = replica::start(
                    &config,
                    &options,
                    url.clone(),
                    addr,
                    store,
                    &tokens,
                    &events,
                )?;
                (looper, admin_token, Some(replica))
            }
        };
        let h = &config.hardening;
        let fd_limit = listener::raise_fd_limit();
        let limits = listener::Limits {
            header_read_timeout: h.header_read_timeout,
            idle_timeout: h.idle_timeout,
            write_stall_timeout: h.write_stall_timeout,
            max_connections: h
                .max_connections
                .unwrap_or_else(|| listener::default_max_connections(fd_limit)),
        };
        let space = space::SpaceWatch::new(dir, h.min_free_space, h.store_quota);
        Ok(Server {
            lock,
            space,
            limits,
            looper,
            listener,
            addr,
            tls: config.tls,
            tokens,
            events,
            admin_token,
            reload_on_hup: config.policy_file.is_some(),
            data_dir: config.data_dir,
            item_block_workers: backups::DEFAULT_WORKERS,
            backup_input_roots: config.backup_input_roots,
            metrics_auth: false,
            store_location,
            replica,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Worker threads of the item-block pool shared by every backup
    /// (`--item-block-workers`; default [`backups::DEFAULT_WORKERS`]). More workers overlap
    /// more hooks and snapshot waits; each holds one block's manifests in memory.
    pub fn set_item_block_workers(&mut self, workers: usize) {
        self.item_block_workers = workers.max(1);
    }

    /// `--metrics-auth`: `/metrics` answers 401 without a valid token of any role. Off by
    /// default, as Prometheus scrapes without one; turn it on when attribute values in
    /// metric labels (repository paths, datastore names) must not be readable by anyone
    /// who can reach the port.
    pub fn set_metrics_auth(&mut self, on: bool) {
        self.metrics_auth = on;
    }

    /// The admin token written at this start (first start only).
    pub fn new_admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// Serves until `shutdown` resolves, then stops accepting, answers the long-polls,
    /// flushes the store and returns.
    ///
    /// # Errors
    /// [`ServerError::Tls`] when the certificate or key cannot be loaded.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it skips the graceful stop (no last answers, no flush;
    /// what was acknowledged is committed already, so nothing acknowledged is lost, as
    /// after a kill -9). Stop it by resolving `shutdown`.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Server {
            looper,
            listener,
            addr,
            tls,
            tokens,
            events,
            reload_on_hup,
            data_dir,
            item_block_workers,
            lock,
            space,
            limits,
            backup_input_roots,
            metrics_auth,
            store_location,
            replica,
            ..
        } = self;
        let lp = LoopHandle::detached();
        let current: replica::Current = Arc::default();
        if let Some(mut looper) = looper {
            // A database keeps its own disk; the data dir's is the SQLite store's.
            if !store_location.is_postgres() {
                looper.space = Some(space.clone());
            }
            let lead = replica
                .as_ref()
                .and_then(|r| Some((r.leadership.clone(), r.won?)));
            let running = replica::start_term(looper, &lp, store_location.clone(), lead);
            *current.lock().await = Some(running);
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let leadership = replica.as_ref().map(|r| r.leadership.clone());
        let ready = Arc::new(AtomicBool::new(false));
        let backups = Arc::new(backups::Backups::new(
            lp.clone(),
            data_dir.clone(),
            item_block_workers,
            backup_input_roots,
        ));
        let restores = Arc::new(restores::Restores::new(backups.clone(), data_dir));
        let sessions = ui::Sessions::new(tls.is_some());
        let backup_routes =
            backups::routes::router(tokens.clone(), sessions.clone(), backups.clone()).merge(
                restores::routes::router(tokens.clone(), sessions.clone(), restores),
            );
        let state = http::AppState {
            lp: lp.clone(),
            tokens,
            events,
            shutdown: stop_rx.clone(),
            ready: ready.clone(),
            metrics_auth,
            sessions,
            cluster: match &leadership {
                Some(l) => cluster::Membership::Replica(l.clone()),
                None => cluster::Membership::single(addr),
            },
            open: Arc::default(),
        };
        if let Some(r) = replica {
            let follower = replica::follow(
                r,
                lp.clone(),
                current.clone(),
                state.tokens.clone(),
                state.events.clone(),
                stop_rx.clone(),
            );
            tokio::spawn(follower);
        }
        let audited = http::audited(http::router(state.clone()).merge(backup_routes), state);
        let mut app = http::shaped(audited).layer(axum::middleware::from_fn_with_state(
            space.clone(),
            space::refuse_new_submits,
        ));
        if let Some(l) = leadership.clone() {
            app = app.layer(axum::middleware::from_fn_with_state(l, cluster::gate));
        }
        space.spawn_timer(stop_rx.clone());
        alloc::purge_in_background();
        let serve_stop = stop_rx.clone();

        tokio::spawn(reload_on_sighup(
            lp.clone(),
            reload_on_hup,
            leadership.clone(),
        ));

        let stopper = lp;
        let stopped = tokio::spawn(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
            if let Some(running) = current.lock().await.take() {
                replica::stop_term(running, &stopper).await;
            }
        });
        // "listening on" is said once, by the caller, which knows the data dir (`lockgate
        // server` prints it whatever `LOCKGATE_LOG` says, and `lockgate demo` reads it).
        ready.store(true, Ordering::Release);
        let tls = match tls {
            Some((cert, key)) => Some(listener::load_tls(&cert, &key).map_err(ServerError::Tls)?),
            None => None,
        };
        let served = listener::serve(listener, app, tls, limits, serve_stop).await;
        if let Err(e) = served {
            tracing::error!("serving stopped: {e}");
        }
        let _ = stopped.await;
        if let Some(l) = leadership {
            // Released before `run` returns, so a replica started next takes over at once.
            // At most 5 s: the release is one UPDATE under its own lease-long timeout.
            let wait = std::time::Duration::from_secs(5);
            let _ = tokio::task::spawn_blocking(move || l.resign_and_wait(wait)).await;
        }
        let _ = tokio::task::spawn_blocking(move || backups.shutdown()).await;
        drop(lock);
        Ok(())
    }
}

/// Starts the event loop on its own OS thread with a current-thread runtime, so the store's
/// blocking calls never stall the HTTP workers.
pub(crate) fn spawn_loop(looper: Loop, rx: mpsc::Receiver<Msg>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("lockgate-loop".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("runtime");
            rt.block_on(looper.run(rx));
        })
        .expect("spawn the event loop thread")
}

/// SIGHUP re-reads the `--config` file; without one it is logged and ignored (never the
/// default action, which would end the server). Ends when the loop is shutting down.
///
/// On a replica only the leader applies it (to the database); a standby logs and ignores it.
async fn reload_on_sighup(
    lp: LoopHandle,
    reload_on_hup: bool,
    replica: Option<cluster::Leadership>,
) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        if replica.as_ref().is_some_and(|l| l.leading().is_none()) {
            tracing::info!(
                "SIGHUP ignored: this replica is a standby (the leader applies --config)"
            );
            continue;
        }
        let tag = audit::AuditTag::new(
            Some(Principal::system()),
            "SIGHUP",
            "/v1/policy",
            "reload the --config file".into(),
            false,
        );
        let asked = audit::scope(tag, lp.ask(Principal::system(), PolicyOp::Reload));
        match asked.await {
            Ok(_) if reload_on_hup => tracing::info!("SIGHUP: policy reloaded"),
            Ok(_) => {}
            Err(e) if e.code == lockgate_api::ErrorCode::Unavailable && replica.is_none() => return,
            Err(e) => tracing::error!("SIGHUP: policy not reloaded: {}", e.message),
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
///
/// # Cancel safety
/// Cancel safe: the signal handlers stay installed, and a signal that came while it was
/// not awaited is seen by the next call.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
}
