//! The event loop: the one task that owns the [`Engine`].
//!
//! Requests arrive as [`Msg`]s on an mpsc channel and are answered on oneshot channels;
//! nothing else touches the engine, so it needs no lock. The loop sleeps until a message
//! arrives or the engine's [`Engine::next_deadline`] (or housekeeping, or a schedule's next
//! planned time: [`Loop::schedule_deadline`]) is due: there is no polling interval anywhere.
//!
//! # Invariants
//! - **Durable before acknowledged.** Messages are taken in batches (everything waiting in
//!   the channel, up to [`MAX_BATCH`]); each is applied to the engine, the engine's events
//!   are turned into one store [`Batch`], the batch is committed (one transaction: group
//!   commit), and only then are the answers sent and the events broadcast. An answer
//!   therefore never reports a state the store could lose. If a commit fails the process
//!   exits: memory would be ahead of the disk.
//! - **Ids and fencing tokens never repeat**: the store keeps the highest of each.
//! - **Long-polls wake on the change**: a waiter is answered in the batch whose commit
//!   makes its job's state differ from the state it waits on.
//!
//! The loop runs on its own OS thread (with a current-thread runtime), so the store's
//! blocking SQLite calls never stall the HTTP workers.

pub(crate) mod admin;
pub mod backups;
mod jobs;
pub mod schedules;

use crate::auth::{Principal, Tokens};
use crate::error::ApiError;
use crate::metrics::Metrics;
use axum::http::StatusCode;
use lockgate_api::{EventView, JobView};
use lockgate_core::event::{Event, JobChange};
use lockgate_core::job::{Job, JobId, JobState};
use lockgate_core::{Engine, Timestamp};
use lockgate_store::{Batch, Store, StoredEvent};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot};

/// At most this many messages go into one group commit.
pub const MAX_BATCH: usize = 1024;

/// Housekeeping (retention) runs this often.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(3600);

/// What a request gets back.
#[derive(Debug)]
pub enum Answer {
    /// A JSON document with a status.
    Json(StatusCode, Value),
    /// Plain text (metrics).
    Text(String),
}

/// An answer or an error.
pub type Reply = Result<Answer, ApiError>;

/// One request to the loop.
#[derive(Debug)]
pub struct Msg {
    /// Who asks.
    pub principal: Principal,
    /// What.
    pub op: Op,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Reply>,
}

/// The operations.
#[derive(Debug)]
pub enum Op {
    /// `POST /v1/jobs`.
    Submit(Box<lockgate_api::SubmitRequest>),
    /// `GET /v1/jobs/{id}`.
    Get(JobId),
    /// `GET /v1/jobs`.
    List(lockgate_api::JobQuery),
    /// `GET /v1/jobs/{id}/wait`: answered when the state differs from `from`.
    Wait {
        /// Job.
        id: JobId,
        /// The state the caller knows.
        from: JobState,
    },
    /// `GET /v1/jobs/{id}/explain`.
    Explain(JobId),
    /// `POST /v1/jobs/{id}/heartbeat`.
    Heartbeat(JobId, u64),
    /// `POST /v1/jobs/{id}/prepared`.
    Prepared(JobId, u64),
    /// `POST /v1/jobs/{id}/finish`.
    Finish(JobId, lockgate_api::FinishRequest),
    /// `POST /v1/jobs/{id}/cancel`.
    Cancel(JobId, bool),
    /// `GET /v1/policy`.
    PolicyGet,
    /// `PUT /v1/policy`.
    PolicyPut {
        /// The validated policy.
        policy: Box<lockgate_core::Policy>,
        /// Its TOML text (what the file or the store will hold).
        text: String,
        /// `If-Match`.
        if_match: Option<String>,
        /// Only report.
        dry_run: bool,
    },
    /// SIGHUP: read the `--config` file again.
    PolicyReload,
    /// `PUT /v1/nodes/{name}`.
    NodePut(String, lockgate_api::NodeRegister),
    /// `DELETE /v1/nodes/{name}`.
    NodeDelete(String),
    /// `POST /v1/nodes/{name}/heartbeat`.
    NodeHeartbeat(String),
    /// `GET /v1/nodes`.
    NodeList,
    /// `GET /v1/nodes/{name}`.
    NodeGet(String),
    /// `POST /v1/nodes/{name}/cordon` (true) or `/uncordon`.
    Cordon(String, bool),
    /// `GET /v1/nodes/{name}/assignments`: answered when there is something to take.
    Assignments(String),
    /// `POST /v1/nodes/{name}/assignments/{job}/ack`.
    Ack(String, JobId),
    /// `POST /v1/tokens`.
    TokenCreate(lockgate_api::TokenCreate),
    /// `GET /v1/tokens`.
    TokenList,
    /// `DELETE /v1/tokens/{name}`.
    TokenRevoke(String),
    /// `GET /v1/events`.
    Events {
        /// After this sequence number.
        after: u64,
        /// At most this many.
        limit: usize,
    },
    /// `GET /metrics`.
    Metrics,
    /// Schedules (`/v1/schedules`).
    Schedule(schedules::ScheduleOp),
    /// Item-block backups: records and their `resource-backup` jobs.
    Backup(backups::BackupOp),
    /// Answer every waiter, flush the store, stop.
    Shutdown,
}

/// Where the policy lives.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// `--config FILE`: the file is the source of truth.
    File(PathBuf),
    /// The store holds it.
    Store,
}

struct Waiter {
    from: JobState,
    reply: oneshot::Sender<Reply>,
}

/// The loop's state. See the module docs.
pub struct Loop {
    pub(crate) engine: Engine,
    pub(crate) store: Box<dyn Store>,
    pub(crate) tokens: Tokens,
    pub(crate) source: PolicySource,
    pub(crate) digest: String,
    pub(crate) events_tx: broadcast::Sender<Arc<EventView>>,
    pub(crate) seq: u64,
    pub(crate) max_token: u64,
    pub(crate) metrics: Metrics,
    pub(crate) schedules: schedules::Schedules,
    waiters: HashMap<JobId, Vec<Waiter>>,
    node_waiters: HashMap<String, Vec<(Principal, oneshot::Sender<Reply>)>>,
    /// Agent jobs admitted on a node and not yet acknowledged: node -> job -> token.
    pub(crate) offered: HashMap<String, BTreeMap<JobId, u64>>,
    housekeeping_at: Timestamp,
    last_now: u64,
    pub(crate) batch: Batch,
    changed: BTreeMap<JobId, Job>,
    replies: Vec<(oneshot::Sender<Reply>, Reply)>,
    broadcasts: Vec<Arc<EventView>>,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// SHA-256 of the policy's canonical JSON, hex.
pub fn policy_digest(p: &lockgate_core::Policy) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(&p.to_json_value()).expect("policies serialize");
    crate::auth::hex(&Sha256::digest(text.as_bytes()))
}

/// JSON of a value that always serializes.
pub(crate) fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("API types serialize")
}

pub(crate) fn ok(v: Value) -> Reply {
    Ok(Answer::Json(StatusCode::OK, v))
}

impl Loop {
    /// A loop around a restored engine. `seq` and `max_token` come from the store.
    pub fn new(
        engine: Engine,
        store: Box<dyn Store>,
        tokens: Tokens,
        source: PolicySource,
        events_tx: broadcast::Sender<Arc<EventView>>,
        seq: u64,
        max_token: u64,
    ) -> Loop {
        let digest = policy_digest(engine.policy());
        let now = wall_ms();
        Loop {
            engine,
            store,
            tokens,
            source,
            digest,
            events_tx,
            seq,
            max_token,
            metrics: Metrics::default(),
            schedules: schedules::Schedules::default(),
            waiters: HashMap::new(),
            node_waiters: HashMap::new(),
            offered: HashMap::new(),
            housekeeping_at: Timestamp(now),
            last_now: now,
            batch: Batch::default(),
            changed: BTreeMap::new(),
            replies: Vec::new(),
            broadcasts: Vec::new(),
        }
    }

    /// Engine time: wall-clock milliseconds, never going backwards.
    pub(crate) fn now(&mut self) -> Timestamp {
        self.last_now = self.last_now.max(wall_ms());
        Timestamp(self.last_now)
    }

    pub(crate) fn lease_ttl(&self) -> Duration {
        self.engine.policy().leases.ttl
    }

    pub(crate) fn view(&self, job: &Job) -> JobView {
        JobView::from_job(job, self.lease_ttl())
    }

    /// Commits what the restore (or anything before serving) produced.
    ///
    /// # Errors
    /// The store's error.
    pub fn settle(&mut self) -> Result<(), lockgate_store::StoreError> {
        let now = self.now();
        self.engine.handle_timeout(now);
        self.drain_events(now);
        self.commit()
    }

    /// Runs until [`Op::Shutdown`] or until every sender is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut msgs: Vec<Msg> = Vec::with_capacity(MAX_BATCH);
        let mut stopping = None;
        while stopping.is_none() {
            let now = self.now();
            let wake = match self.engine.next_deadline() {
                Some(d) => d.min(self.housekeeping_at),
                None => self.housekeeping_at,
            };
            let wake = self.schedule_deadline().map_or(wake, |d| d.min(wake));
            let sleep = Duration::from_millis(wake.since(now));
            tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => msgs.push(m),
                    None => break,
                },
                () = tokio::time::sleep(sleep) => {}
            }
            while msgs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(m) => msgs.push(m),
                    Err(_) => break,
                }
            }
            let now = self.now();
            self.engine.handle_timeout(now);
            self.drain_events(now);
            if now >= self.housekeeping_at {
                self.housekeeping(now);
            }
            for msg in msgs.drain(..) {
                if matches!(msg.op, Op::Shutdown) {
                    stopping = Some(msg.reply);
                    continue;
                }
                self.handle(msg, now);
                self.drain_events(now);
            }
            self.schedules_tick(now);
            if let Err(e) = self.commit() {
                tracing::error!("store commit failed, stopping: {e}");
                eprintln!("lockgate server: store commit failed: {e}; exiting so no answer outruns the disk");
                std::process::exit(70);
            }
            self.send_replies();
        }
        self.stop();
        if let Some(reply) = stopping {
            let _ = reply.send(ok(Value::Null));
        }
    }

    fn stop(&mut self) {
        let waiters: Vec<Waiter> = self.waiters.drain().flat_map(|(_, w)| w).collect();
        for w in waiters {
            let _ = w.reply.send(Err(ApiError::unavailable(
                "the server is shutting down; wait again",
            )));
        }
        for (_, ws) in self.node_waiters.drain() {
            for (_, r) in ws {
                let _ = r.send(Err(ApiError::unavailable(
                    "the server is shutting down; poll again",
                )));
            }
        }
        if let Err(e) = self.store.flush() {
            tracing::warn!("store flush at shutdown: {e}");
        }
    }

    fn housekeeping(&mut self, now: Timestamp) {
        self.housekeeping_at = now.plus(HOUSEKEEPING_EVERY);
        let days = u64::from(self.engine.policy().retention.days);
        let cutoff = Timestamp(now.0.saturating_sub(days * 86_400_000));
        match self.store.prune(cutoff) {
            Ok(p) if p.jobs + p.events > 0 => {
                tracing::info!(
                    "retention: deleted {} finished jobs and {} events older than {days} days",
                    p.jobs,
                    p.events
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("retention failed (will retry): {e}"),
        }
        for ws in self.waiters.values_mut() {
            ws.retain(|w| !w.reply.is_closed());
        }
        self.waiters.retain(|_, ws| !ws.is_empty());
    }

    fn handle(&mut self, msg: Msg, now: Timestamp) {
        let Msg {
            principal,
            op,
            reply,
        } = msg;
        match op {
            Op::Wait { id, from } => match self.wait(&principal, id, from) {
                Ok(Some(answer)) => self.replies.push((reply, Ok(answer))),
                Ok(None) => {
                    let ws = self.waiters.entry(id).or_default();
                    ws.retain(|w| !w.reply.is_closed());
                    ws.push(Waiter { from, reply });
                }
                Err(e) => self.replies.push((reply, Err(e))),
            },
            Op::Assignments(node) => match self.assignments(&principal, &node, now) {
                Ok(Some(answer)) => self.replies.push((reply, Ok(answer))),
                Ok(None) => {
                    let ws = self.node_waiters.entry(node).or_default();
                    ws.retain(|(_, r)| !r.is_closed());
                    ws.push((principal, reply));
                }
                Err(e) => self.replies.push((reply, Err(e))),
            },
            op => {
                let r = self.dispatch(&principal, op, now);
                self.replies.push((reply, r));
            }
        }
    }

    fn dispatch(&mut self, p: &Principal, op: Op, now: Timestamp) -> Reply {
        match op {
            Op::Submit(req) => self.submit(p, *req, now),
            Op::Get(id) => self.get(p, id),
            Op::List(q) => self.list(p, q),
            Op::Explain(id) => self.explain(p, id, now),
            Op::Heartbeat(id, token) => self.heartbeat(p, id, token, now),
            Op::Prepared(id, token) => self.prepared(p, id, token, now),
            Op::Finish(id, req) => self.finish(p, id, req, now),
            Op::Cancel(id, force) => self.cancel(p, id, force, now),
            Op::PolicyGet => self.policy_get(p),
            Op::PolicyPut {
                policy,
                text,
                if_match,
                dry_run,
            } => self.policy_put(p, *policy, text, if_match, dry_run, now),
            Op::PolicyReload => self.policy_reload(now),
            Op::NodePut(name, reg) => self.node_put(p, name, reg, now),
            Op::NodeDelete(name) => self.node_delete(p, &name, now),
            Op::NodeHeartbeat(name) => self.node_heartbeat(p, &name, now),
            Op::NodeList => self.node_list(p),
            Op::NodeGet(name) => self.node_get(p, &name),
            Op::Cordon(name, on) => self.cordon(p, &name, on, now),
            Op::Ack(node, id) => self.ack(p, &node, id),
            Op::TokenCreate(req) => self.token_create(p, req, now),
            Op::TokenList => self.token_list(p),
            Op::TokenRevoke(name) => self.token_revoke(p, &name),
            Op::Events { after, limit } => self.events(p, after, limit),
            Op::Metrics => {
                let mut text = self.metrics.render(&self.engine, self.seq);
                self.render_schedule_metrics(&mut text);
                Ok(Answer::Text(text))
            }
            Op::Schedule(op) => self.schedule_op(p, op, now),
            Op::Backup(op) => self.backup_op(op, now),
            Op::Wait { .. } | Op::Assignments(_) | Op::Shutdown => {
                unreachable!("handled in handle()")
            }
        }
    }

    /// Turns the engine's events into store rows, log entries, metrics and wake-ups.
    pub(crate) fn drain_events(&mut self, now: Timestamp) {
        while let Some(ev) = self.engine.poll_event() {
            let data = match &ev {
                Event::Job { change, job } => {
                    self.observe(*change, job);
                    let view = self.view(job);
                    if let Some(ws) = self.waiters.get_mut(&job.id) {
                        let mut keep = Vec::new();
                        for w in ws.drain(..) {
                            if w.from != job.state {
                                self.replies.push((w.reply, ok(json(&view))));
                            } else {
                                keep.push(w);
                            }
                        }
                        *ws = keep;
                    }
                    self.changed.insert(job.id, (**job).clone());
                    serde_json::json!({ "type": "job", "change": change, "job": view })
                }
                other => json(other),
            };
            let Value::Object(data) = data else {
                unreachable!("events are objects")
            };
            self.seq += 1;
            self.batch.events.push(StoredEvent {
                seq: self.seq,
                at: now,
                data: serde_json::to_string(&data).expect("serializes"),
            });
            self.broadcasts.push(Arc::new(EventView {
                seq: self.seq,
                at: lockgate_api::time::format(now),
                data,
            }));
        }
    }

    fn observe(&mut self, change: JobChange, job: &Job) {
        if let Some(l) = job.lease {
            if l.token > self.max_token {
                self.max_token = l.token;
                self.batch.max_token = Some(l.token);
            }
        }
        let admitted_at = match change {
            JobChange::AdmittedPrepare => job.prepare_started_at,
            JobChange::Started if job.prepare_started_at.is_none() => job.started_at,
            _ => None,
        };
        if let Some(at) = admitted_at {
            *self.metrics.admissions.entry(job.kind.clone()).or_default() += 1;
            self.metrics
                .wait
                .observe(at.since(job.queued_at) as f64 / 1000.0);
            if job.executor == lockgate_core::policy::Executor::Agent {
                if let (Some(node), Some(l)) = (job.node(), job.lease) {
                    self.offered
                        .entry(node.to_string())
                        .or_default()
                        .insert(job.id, l.token);
                }
            }
        }
        if change == JobChange::Started
            && job.prepare_started_at.is_some()
            && job.executor == lockgate_core::policy::Executor::Agent
        {
            if let (Some(node), Some(l)) = (job.node(), job.lease) {
                self.offered
                    .entry(node.to_string())
                    .or_default()
                    .insert(job.id, l.token);
            }
        }
        if change == JobChange::Finished {
            *self
                .metrics
                .finished
                .entry((job.state, job.kind.clone()))
                .or_default() += 1;
            if job.state == JobState::Lost {
                self.metrics.lease_expiries += 1;
            }
            if let Some(node) = job.node() {
                if let Some(o) = self.offered.get_mut(node) {
                    o.remove(&job.id);
                }
            }
        }
    }

    /// Writes the batch: changed jobs (with whether the engine still holds them), events,
    /// and whatever the handlers added.
    pub(crate) fn commit(&mut self) -> Result<(), lockgate_store::StoreError> {
        let changed = std::mem::take(&mut self.changed);
        for (id, job) in changed {
            let live = self.engine.job(id).is_some();
            self.batch.jobs.push((job, live));
        }
        if self.batch.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let batch = std::mem::take(&mut self.batch);
        self.store.commit(&batch)?;
        self.metrics.commit.observe(start.elapsed().as_secs_f64());
        self.metrics.committed_jobs += batch.jobs.len() as u64;
        Ok(())
    }

    fn send_replies(&mut self) {
        for (tx, r) in self.replies.drain(..) {
            let _ = tx.send(r);
        }
        for ev in self.broadcasts.drain(..) {
            let _ = self.events_tx.send(ev);
        }
        if !self.node_waiters.is_empty() {
            let now = Timestamp(self.last_now);
            let nodes: Vec<String> = self
                .node_waiters
                .keys()
                .filter(|n| self.offered.get(*n).is_some_and(|o| !o.is_empty()))
                .cloned()
                .collect();
            for node in nodes {
                let ws = self.node_waiters.remove(&node).unwrap_or_default();
                for (p, reply) in ws {
                    let r = self
                        .assignments(&p, &node, now)
                        .map(|a| a.unwrap_or(Answer::Json(StatusCode::OK, Value::Null)));
                    let _ = reply.send(r);
                }
            }
        }
    }
}
