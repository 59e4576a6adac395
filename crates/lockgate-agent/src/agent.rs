//! The agent loop: register, heartbeat, take assignments, run handlers.
//!
//! Threads (all blocking; the API client is blocking and an agent runs a handful of jobs):
//! - the caller's thread ([`Agent::run`]) registers the node, starts the others and waits
//!   for [`Shutdown`]; then it stops the handlers and reports them;
//! - the *heartbeat* thread renews the node every node-TTL/3 (the TTL is read from the
//!   policy), re-registering when the server has forgotten the node;
//! - the *poll* thread long-polls `GET /v1/nodes/{node}/assignments`, hands each job to a
//!   worker and acknowledges it;
//! - one *worker* thread per job ([`worker`]) runs the prepare and run handlers, renews the
//!   lease while they run, reports `prepared` and finishes the job.
//!
//! # Invariants
//! - **One worker per job.** Workers are keyed by job id. An assignment for a job that
//!   already has a worker with the same lease token is a repeat (an unacknowledged offer,
//!   or a re-offer after a server restart): it is acknowledged and, for the run stage,
//!   passed to the worker, which ignores it unless it is waiting for its run slot. An
//!   assignment with a *new* token (a retry) waits, unacknowledged, until the old worker
//!   has stopped its handler, so one job never runs twice at once on this node.
//! - **A new process never runs an old one's lease.** Every registration carries this
//!   process's own id ([`Shared::instance`]); when it differs from the one the node had,
//!   the server loses every job the node held (they are retried under new leases) before
//!   this process can be offered one. The old handlers died with the old process
//!   (`PR_SET_PDEATHSIG`).
//! - **Only configured commands run.** The kind selects a handler of this agent's own
//!   configuration; a job of a kind without a handler fails with a message saying so.
//! - **A server restart costs no work.** Unreachable calls are retried; handlers keep
//!   running for up to `unreachable_grace` (see [`AgentConfig`]); leases get a fresh TTL
//!   when the server is back.

mod worker;

use crate::config::{AgentConfig, Stage};
use lockgate_api::NodeRegister;
use lockgate_client::child::Launcher;
use lockgate_client::{retry_with, Backoff, Client, ClientError, RetryError};
use std::collections::{BTreeMap, HashMap};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How an agent is set up.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The server's URL.
    pub server: String,
    /// An agent token bound to `node` (or an admin token).
    pub token: Option<String>,
    /// The node's name.
    pub node: String,
    /// The node's labels.
    pub labels: BTreeMap<String, String>,
    /// Per-node pool capacities it reports (`[nodes.resources]`).
    pub resources: BTreeMap<String, u64>,
    /// The handlers.
    pub config: AgentConfig,
    /// How handlers are started (normally [`Launcher::new`]: they die with the agent,
    /// `PR_SET_PDEATHSIG`).
    pub launcher: Launcher,
    /// How long one assignments long-poll may wait. Default 10 s.
    pub poll_timeout: Duration,
}

impl AgentOptions {
    /// Options with the defaults: no labels, no resources, handlers that die with the agent.
    pub fn new(
        server: &str,
        token: Option<String>,
        node: &str,
        config: AgentConfig,
    ) -> AgentOptions {
        AgentOptions {
            server: server.to_string(),
            token,
            node: node.to_string(),
            labels: BTreeMap::new(),
            resources: BTreeMap::new(),
            config,
            launcher: Launcher::new(),
            poll_timeout: Duration::from_secs(10),
        }
    }
}

/// Why the agent stopped or could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    /// The server refused the token (401) or its role (403): give an agent token bound to
    /// this node (`lockgate token create --role agent --node NODE`). Permanent.
    #[error("the server refused the token for node {node:?}: {error}")]
    Refused {
        /// The node.
        node: String,
        /// The server's answer (boxed: an enum of small variants stays small).
        error: Box<ClientError>,
    },
    /// The server refused the registration (a bad node name or label). Permanent.
    #[error("the server refused to register node {node:?}: {error}")]
    Rejected {
        /// The node.
        node: String,
        /// The server's answer (boxed: an enum of small variants stays small).
        error: Box<ClientError>,
    },
    /// The client could not be set up (a bad `LOCKGATE_CA_CERT`).
    #[error("{0}")]
    Setup(ClientError),
}

impl AgentError {
    /// The exit code for `lockgate agent`: 77 when the token was refused, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            AgentError::Refused { .. } => 77,
            _ => 1,
        }
    }
}

/// Tells an agent to stop; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl Shutdown {
    /// A handle that has not been triggered.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Asks everything that holds a clone to stop.
    pub fn trigger(&self) {
        let (m, c) = &*self.inner;
        *m.lock().expect("shutdown lock") = true;
        c.notify_all();
    }

    /// Whether [`Shutdown::trigger`] was called.
    pub fn is_triggered(&self) -> bool {
        *self.inner.0.lock().expect("shutdown lock")
    }

    /// Sleeps up to `d`; true when triggered (at once, if already).
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let (m, c) = &*self.inner;
        let g = m.lock().expect("shutdown lock");
        let (g, _) = c
            .wait_timeout_while(g, d, |stop| !*stop)
            .expect("shutdown lock");
        *g
    }
}

/// What a worker is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerMsg {
    /// The run stage was assigned (the job got its node's run slot).
    Run,
    /// The agent is stopping: stop the handler and report the job.
    Stop,
}

struct WorkerEntry {
    token: u64,
    tx: mpsc::Sender<WorkerMsg>,
}

/// What the threads share.
pub(crate) struct Shared {
    pub client: Client,
    pub node: String,
    pub labels: BTreeMap<String, String>,
    pub resources: BTreeMap<String, u64>,
    pub config: AgentConfig,
    pub launcher: Launcher,
    pub poll_timeout: Duration,
    workers: Mutex<HashMap<u64, WorkerEntry>>,
    /// Signalled whenever a worker ends.
    worker_gone: Condvar,
    pub shutdown: Shutdown,
    fatal: Mutex<Option<AgentError>>,
    /// This process's id in its registrations: its pid and start time, so a restarted
    /// agent (even one given the same pid) registers as a new process.
    instance: String,
}

/// A node agent. See the module docs.
pub struct Agent {
    shared: Arc<Shared>,
}

impl Agent {
    /// An agent; nothing is contacted yet.
    ///
    /// # Errors
    /// [`AgentError::Setup`] for a bad `LOCKGATE_CA_CERT`.
    pub fn new(opts: AgentOptions, shutdown: Shutdown) -> Result<Agent, AgentError> {
        let client = Client::new(&opts.server, opts.token.clone()).map_err(AgentError::Setup)?;
        Ok(Agent {
            shared: Arc::new(Shared {
                client,
                node: opts.node,
                labels: opts.labels,
                resources: opts.resources,
                config: opts.config,
                launcher: opts.launcher,
                poll_timeout: opts.poll_timeout,
                workers: Mutex::new(HashMap::new()),
                worker_gone: Condvar::new(),
                shutdown,
                fatal: Mutex::new(None),
                instance: instance_id(),
            }),
        })
    }

    /// Registers the node and works until [`Shutdown::trigger`] (or a permanent error);
    /// then stops the running handlers (SIGTERM, SIGKILL after the grace period), reports
    /// their jobs `failed` (so they are retried as their kind says) and returns.
    ///
    /// # Errors
    /// [`AgentError`]: the token or the registration was refused.
    pub fn run(&self) -> Result<(), AgentError> {
        let sh = &self.shared;
        if !sh.register_until_done() {
            return sh.take_fatal();
        }
        tracing::info!(
            "node {} registered (kinds: {})",
            sh.node,
            sh.config.kinds().into_iter().collect::<Vec<_>>().join(", ")
        );
        let hb = sh.clone();
        std::thread::Builder::new()
            .name("node-heartbeat".into())
            .spawn(move || hb.heartbeat_loop())
            .expect("spawn the heartbeat thread");
        let poll = sh.clone();
        std::thread::Builder::new()
            .name("assignments".into())
            .spawn(move || poll.poll_loop())
            .expect("spawn the poll thread");
        while !sh.shutdown.wait_timeout(Duration::from_secs(3600)) {}
        sh.stop_workers();
        sh.take_fatal()
    }
}

/// A new process id for [`Shared::instance`].
fn instance_id() -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}-{}", std::process::id(), started.as_nanos())
}

impl Shared {
    fn take_fatal(&self) -> Result<(), AgentError> {
        match self.fatal.lock().expect("fatal lock").take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fail(&self, e: AgentError) {
        tracing::error!("{e}");
        *self.fatal.lock().expect("fatal lock") = Some(e);
        self.shutdown.trigger();
    }

    fn registration(&self) -> NodeRegister {
        NodeRegister {
            labels: self.labels.clone(),
            resources: self.resources.clone(),
            kinds: self.config.kinds(),
            instance: Some(self.instance.clone()),
        }
    }

    /// Registers, retrying while the server is unreachable. False when stopped or refused.
    fn register_until_done(&self) -> bool {
        let mut warned = false;
        let wait = |pause, e: &ClientError| {
            if !warned {
                tracing::warn!("{e}; retrying");
                warned = true;
            }
            !self.shutdown.wait_timeout(pause)
        };
        let registered = retry_with(wait, || {
            self.client.register_node(&self.node, &self.registration())
        });
        match registered {
            Ok(_) => true,
            Err(RetryError::GaveUp(_)) => false,
            Err(RetryError::Permanent(e)) if e.is_refused() => {
                self.fail(AgentError::Refused {
                    node: self.node.clone(),
                    error: Box::new(e),
                });
                false
            }
            Err(RetryError::Permanent(e)) => {
                self.fail(AgentError::Rejected {
                    node: self.node.clone(),
                    error: Box::new(e),
                });
                false
            }
        }
    }

    /// The policy's node TTL (`[nodes].ttl`), if it can be read.
    fn node_ttl(&self) -> Option<Duration> {
        let p = self.client.policy().ok()?;
        let ttl = p.policy.get("nodes")?.get("ttl")?.as_str()?.to_string();
        lockgate_core::time::parse_duration(&ttl).ok()
    }

    fn heartbeat_loop(self: Arc<Self>) {
        let mut ttl = self.node_ttl().unwrap_or(Duration::from_secs(30));
        let mut ttl_read = Instant::now();
        let mut every = ttl / 3;
        while !self.shutdown.wait_timeout(every) {
            match self.client.node_heartbeat(&self.node) {
                Ok(_) => every = ttl / 3,
                Err(e) if e.is_temporary() => {
                    every = (ttl / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    continue;
                }
                Err(e) if e.status() == Some(404) => {
                    tracing::warn!("the server forgot node {}; registering again", self.node);
                    if !self.register_until_done() {
                        return;
                    }
                }
                Err(e) if e.is_refused() => {
                    return self.fail(AgentError::Refused {
                        node: self.node.clone(),
                        error: Box::new(e),
                    })
                }
                Err(e) => tracing::warn!("node heartbeat: {e}"),
            }
            if ttl_read.elapsed() > Duration::from_secs(5) {
                if let Some(t) = self.node_ttl() {
                    ttl = t;
                    every = ttl / 3;
                }
                ttl_read = Instant::now();
            }
        }
    }

    fn poll_loop(self: Arc<Self>) {
        let mut backoff = Backoff::new();
        while !self.shutdown.is_triggered() {
            match self.client.assignments(&self.node, self.poll_timeout) {
                Ok(list) => {
                    backoff = Backoff::new();
                    let mut deferred = false;
                    for a in list.assignments {
                        if self.shutdown.is_triggered() {
                            return;
                        }
                        deferred |= !self.take(a);
                    }
                    if deferred {
                        // An old attempt is still stopping: let it go before the retry.
                        self.shutdown.wait_timeout(Duration::from_millis(20));
                    }
                }
                Err(e) if e.is_temporary() => {
                    self.shutdown.wait_timeout(backoff.next_pause());
                }
                Err(e) if e.is_refused() => {
                    return self.fail(AgentError::Refused {
                        node: self.node.clone(),
                        error: Box::new(e),
                    })
                }
                Err(e) if e.status() == Some(404) => {
                    if !self.register_until_done() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("assignments: {e}");
                    self.shutdown.wait_timeout(Duration::from_secs(1));
                }
            }
        }
    }

    /// Hands one assignment to its worker (starting one if needed) and acknowledges it.
    /// False when it must wait (an old attempt of the job is still stopping).
    fn take(self: &Arc<Self>, a: lockgate_api::Assignment) -> bool {
        let id = a.job.id;
        let Some(stage) = Stage::parse(&a.stage) else {
            tracing::warn!("job {id}: unknown stage {:?}; ignored", a.stage);
            return true;
        };
        {
            let mut workers = self.workers.lock().expect("workers lock");
            match workers.get(&id) {
                Some(w) if w.token == a.token => {
                    if stage == Stage::Run {
                        let _ = w.tx.send(WorkerMsg::Run);
                    }
                }
                Some(_) => return false,
                None => {
                    let (tx, rx) = mpsc::channel();
                    workers.insert(id, WorkerEntry { token: a.token, tx });
                    let sh = self.clone();
                    let token = a.token;
                    let job = a.job;
                    std::thread::Builder::new()
                        .name(format!("job-{id}"))
                        .spawn(move || {
                            worker::work(&sh, job, token, stage, rx);
                            sh.worker_done(id, token);
                        })
                        .expect("spawn a job thread");
                }
            }
        }
        if let Err(e) = self.client.ack_assignment(&self.node, id) {
            // Not fatal: the offer comes again and is recognised as a repeat.
            tracing::debug!("job {id}: ack: {e}");
        }
        true
    }

    fn worker_done(&self, id: u64, token: u64) {
        let mut workers = self.workers.lock().expect("workers lock");
        if workers.get(&id).is_some_and(|w| w.token == token) {
            workers.remove(&id);
        }
        self.worker_gone.notify_all();
    }

    /// Tells every worker to stop and waits for them (their grace period, and a little).
    fn stop_workers(&self) {
        let mut workers = self.workers.lock().expect("workers lock");
        if !workers.is_empty() {
            tracing::info!("stopping {} job(s)", workers.len());
        }
        for w in workers.values() {
            let _ = w.tx.send(WorkerMsg::Stop);
        }
        let deadline = Instant::now() + self.config.grace + Duration::from_secs(5);
        while !workers.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!("{} job(s) did not stop in time", workers.len());
                return;
            }
            workers = self
                .worker_gone
                .wait_timeout(workers, left)
                .expect("workers lock")
                .0;
        }
    }
}
