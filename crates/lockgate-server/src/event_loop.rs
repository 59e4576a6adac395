//! The event loop: the one task that owns the [`Engine`].
//!
//! Requests arrive as [`Msg`]s on an mpsc channel; each carries its own typed reply channel
//! (see [`crate::protocol`]). Nothing else touches the engine, so it needs no lock. The loop
//! sleeps until a message arrives or the engine's [`Engine::next_deadline`] (or
//! housekeeping, or a schedule's next planned time: `Loop::schedule_deadline`, or an RPO
//! value's deadline: `Loop::rpo_deadline`) is due:
//! there is no polling interval anywhere.
//!
//! This file holds only the loop itself: [`Loop::run`], `Loop::drain_events` and
//! `Loop::commit`. The operations live with their feature (`jobs/ops.rs`,
//! `nodes/ops.rs`, ...), each an `impl Loop` block with one `*_op` entry point.
//!
//! # Invariants
//! - **Durable before acknowledged.** Messages are taken in batches (everything waiting in
//!   the channel, up to [`MAX_BATCH`]); each is applied to the engine, the engine's events
//!   are turned into one store [`Batch`], the batch is committed (one transaction: group
//!   commit), and only then are the answers sent (`Loop::answer` defers them) and the
//!   events broadcast. An answer therefore never reports a state the store could lose. If
//!   a commit fails for any reason but those below, the process exits: memory would be
//!   ahead of the disk.
//! - **A database that is away, or a full disk, is waited for** (PostgreSQL,
//!   `Loop::retry_commits`; on any store, [`StoreError::Full`], answered 507): a
//!   failed commit answers every request of its batch with `unavailable` (nothing of it is
//!   acknowledged), keeps the batch, and commits the kept batches first, in order, at the
//!   next commit (retried at least every [`RETRY_COMMIT`]); their events are broadcast
//!   once they are committed. Memory and the database agree again at the first commit that
//!   succeeds; until then every answer is an error.
//! - **Ids and fencing tokens never repeat**: the store keeps the highest of each.
//! - **Long-polls wake on the change**: a waiter is answered in the batch whose commit
//!   makes its job's state differ from the state it waits on.
//!
//! The loop runs on its own OS thread (with a current-thread runtime), so the store's
//! blocking SQLite calls never stall the HTTP workers.

use crate::auth::Tokens;
use crate::error::ApiError;
use crate::jobs::Waiter;
use crate::metrics::Metrics;
use crate::nodes::NodeWaiter;
use crate::policy::{policy_digest, PolicySource};
use crate::protocol::{Msg, Op, Reply};
use lockgate_api::{EventView, JobView};
use lockgate_core::event::Event;
use lockgate_core::job::{Job, JobId};
use lockgate_core::{Engine, Timestamp};
use lockgate_store::{Batch, Store, StoreError, StoredEvent};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};

/// At most this many messages go into one group commit.
pub const MAX_BATCH: usize = 1024;

/// Housekeeping (retention) runs this often.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(3600);

/// A failed commit of a database store is tried again after at most this long.
pub const RETRY_COMMIT: Duration = Duration::from_millis(500);

/// An answer waiting for the commit of its batch; given the error when the commit failed.
type Deferred = Box<dyn FnOnce(Option<&ApiError>) + Send>;

/// The loop's state. See the module docs.
pub struct Loop {
    pub(crate) engine: Engine,
    pub(crate) store: Box<dyn Store>,
    pub(crate) tokens: Tokens,
    pub(crate) source: PolicySource,
    pub(crate) digest: String,
    pub(crate) events_tx: broadcast::Sender<Arc<EventView>>,
    pub(crate) seq: u64,
    /// The highest lease token the store has (the engine's `next_token() - 1` is written
    /// with the batch that granted it).
    pub(crate) max_token: u64,
    pub(crate) metrics: Metrics,
    /// Usage reports of admitted jobs, for rates (`usage.rs`).
    pub(crate) meters: crate::usage::Meters,
    /// What the admitted jobs moved over the last hour, for the dashboard
    /// (`usage/history.rs`).
    pub(crate) throughput_history: crate::usage::History,
    /// Node samples that came with renewals (`usage/nodes.rs`).
    pub(crate) node_meters: crate::usage::NodeMeters,
    /// The controllers of automatic limits (`autolimits.rs`).
    pub(crate) auto: crate::autolimits::AutoLimits,
    pub(crate) schedules: crate::schedules::Schedules,
    /// Long-polls on a job's state (`GET /v1/jobs/{id}/wait`).
    pub(crate) waiters: HashMap<JobId, Vec<Waiter>>,
    /// Long-polls on a node's assignments.
    pub(crate) node_waiters: HashMap<String, Vec<NodeWaiter>>,
    /// Agent jobs admitted on a node and not yet acknowledged: node -> job -> token.
    pub(crate) offered: HashMap<String, BTreeMap<JobId, u64>>,
    housekeeping_at: Timestamp,
    /// Engine time, safe for leases across a step of the wall clock (clock.rs).
    clock: crate::clock::EngineClock,
    /// Engine time at the last reading, in milliseconds.
    pub(crate) last_now: u64,
    pub(crate) batch: Batch,
    /// Jobs changed in this batch (the store has their previous state until the commit).
    pub(crate) changed: BTreeMap<JobId, Job>,
    replies: Vec<Deferred>,
    /// Answers of requests that only look ([`Op::observes`]): sent after the commit even
    /// when it failed for a full disk and its batch is kept, so an operator can still
    /// read jobs, explain, the dashboard and `/metrics`.
    observations: Vec<Deferred>,
    /// The message being handled only looks ([`Op::observes`]).
    observing: bool,
    broadcasts: Vec<Arc<EventView>>,
    /// `[[rpo]]` values and their deadlines.
    pub(crate) rpo: crate::rpo::Tracker,
    /// The audited request of the message being handled ([`crate::audit`]).
    pub(crate) audit_cur: Option<Arc<crate::audit::AuditTag>>,
    /// What the operation being handled noted for its audit row.
    pub(crate) audit_note: Option<(lockgate_api::AuditOutcome, String)>,
    /// Long-polls on a job's log (`GET /v1/jobs/{id}/logs?timeout_s=`).
    pub(crate) log_waiters: HashMap<JobId, Vec<crate::joblogs::LogWaiter>>,
    /// Notifications: the outbox backlog, the delivery task's wake-up and targets.
    pub(crate) notify: crate::notify::LoopSide,
    /// Learned durations and the cached forecast (`forecast.rs`).
    pub(crate) forecast: crate::forecast::ForecastState,
    /// A failed commit keeps its batch for the next one instead of ending the process
    /// (a database store: the database may come back).
    pub(crate) retry_commits: bool,
    /// The data dir's free-space watch (a SQLite store): asked for each new job.
    pub(crate) space: Option<Arc<crate::space::SpaceWatch>>,
    /// About how many bytes the jobs submitted into this batch will write.
    pub(crate) pending_bytes: u64,
    /// Batches whose commit failed (with their broadcasts), oldest first.
    unsaved: Vec<(Batch, Vec<Arc<EventView>>)>,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    crate::clock::wall_now().as_millis() as u64
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
        let mut engine = engine;
        // The engine's shared map of the jobs is built once, at start (O(n log n), beside
        // the restore): from then on a forecast's copy costs O(changes), never a walk of
        // the queue (forecast.rs).
        let _ = engine.share();
        let digest = policy_digest(engine.policy());
        let now = wall_ms();
        let clock = crate::clock::EngineClock::new(
            std::time::Duration::from_millis(now),
            crate::clock::boot_now(),
        );
        let notify = crate::notify::LoopSide::new(&engine.policy().notify, &digest);
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
            meters: crate::usage::Meters::default(),
            throughput_history: crate::usage::History::default(),
            node_meters: crate::usage::NodeMeters::default(),
            auto: crate::autolimits::AutoLimits::default(),
            schedules: crate::schedules::Schedules::default(),
            waiters: HashMap::new(),
            node_waiters: HashMap::new(),
            offered: HashMap::new(),
            housekeeping_at: Timestamp(now),
            clock,
            last_now: now,
            batch: Batch::default(),
            changed: BTreeMap::new(),
            replies: Vec::new(),
            observations: Vec::new(),
            observing: false,
            broadcasts: Vec::new(),
            rpo: crate::rpo::Tracker::default(),
            audit_cur: None,
            audit_note: None,
            log_waiters: HashMap::new(),
            notify,
            forecast: Default::default(),
            retry_commits: false,
            space: None,
            pending_bytes: 0,
            unsaved: Vec::new(),
        }
    }

    /// Engine time: wall-clock milliseconds, never going backwards; a forward step of the
    /// wall clock moves every lease and node TTL with it (clock.rs).
    pub(crate) fn now(&mut self) -> Timestamp {
        let reading = self
            .clock
            .read(crate::clock::wall_now(), crate::clock::boot_now());
        if let Some(by) = reading.stepped {
            self.engine.clock_stepped(by);
            tracing::warn!(
                "the wall clock stepped forward by {}: leases and node TTLs moved with it",
                lockgate_core::time::format_duration(by)
            );
        }
        if let Some(by) = reading.stepped_back {
            tracing::warn!(
                "the wall clock stepped back by {}: engine time runs at half speed until it \
                 meets it (leases last up to twice their TTL meanwhile)",
                lockgate_core::time::format_duration(by)
            );
        }
        // The clock never goes back (clock.rs), so neither does this.
        self.last_now = reading.now.as_millis() as u64;
        Timestamp(self.last_now)
    }

    pub(crate) fn view(&self, job: &Job) -> JobView {
        let policy = self.engine.policy();
        let mut view = JobView::from_job(job, policy.leases.ttl);
        if let Some(u) = job.usage.as_deref() {
            view.usage = Some(self.meters.view(job.id, u));
        }
        view.log = policy.kind_log(&job.kind);
        view.run_if_unreachable = policy.kind_runs_if_unreachable(&job.kind);
        view
    }

    /// Queues an answer; it is sent after this batch's commit.
    pub(crate) fn answer<T: Send + 'static>(&mut self, reply: Reply<T>, r: Result<T, ApiError>) {
        if self.audit_cur.is_some() {
            self.audit_answered(r.as_ref().err());
        }
        let send: Deferred = Box::new(move |failed| {
            let _ = reply.send(match failed {
                Some(e) => Err(e.clone()),
                None => r,
            });
        });
        if self.observing {
            self.observations.push(send);
        } else {
            self.replies.push(send);
        }
    }

    /// Commits what the restore (or anything before serving) produced.
    ///
    /// # Errors
    /// The store's error.
    pub fn settle(&mut self) -> Result<(), lockgate_store::StoreError> {
        let now = self.now();
        self.engine.handle_timeout(now);
        self.drain_events(now);
        self.rpo_tick(now);
        self.commit()
    }

    /// Runs until [`Op::Shutdown`] or until every sender is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: it owns the engine and the store. Dropped between batches, what
    /// was acknowledged is committed and nothing is lost, but waiters get no answer and
    /// the store is not flushed; dropped inside a commit (it blocks there, so only with
    /// its thread), the batch's answers are never sent. Stop it with [`Op::Shutdown`].
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
            let wake = self.rpo_deadline().map_or(wake, |d| d.min(wake));
            let wake = self.forecast_deadline(now).map_or(wake, |d| d.min(wake));
            let wake = self.auto.deadline().map_or(wake, |d| d.min(wake));
            let mut sleep = Duration::from_millis(wake.since(now));
            if !self.unsaved.is_empty() {
                sleep = sleep.min(RETRY_COMMIT);
            }
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
                if let Op::Shutdown(reply) = msg.op {
                    stopping = Some(reply);
                    continue;
                }
                self.handle(msg, now);
                self.drain_events(now);
            }
            self.schedules_tick(now);
            self.rpo_tick(now);
            self.forecast_tick(now);
            self.auto_tick(now);
            self.throughput_tick(now);
            match self.commit() {
                Ok(()) => self.send_replies(),
                Err(e @ lockgate_store::StoreError::Fenced { .. }) => {
                    // Another replica leads: nothing of this term may be acknowledged
                    // or committed any more; the replica goes back to standby.
                    tracing::warn!("the store fenced this replica off ({e}): stopping the loop");
                    self.unsaved.clear();
                    self.fail_replies(&e);
                    break;
                }
                Err(e) if self.kept(&e) => self.fail_replies(&e),
                Err(e) => {
                    tracing::error!("store commit failed, stopping: {e}");
                    eprintln!("lockgate server: store commit failed: {e}; exiting so no answer outruns the disk");
                    std::process::exit(70);
                }
            }
        }
        self.stop();
        if let Some(reply) = stopping {
            let _ = reply.send(Ok(()));
        }
    }

    fn stop(&mut self) {
        self.stop_waiters();
        self.stop_node_waiters();
        if let Err(e) = self.store.flush() {
            tracing::warn!("store flush at shutdown: {e}");
        }
    }

    fn housekeeping(&mut self, now: Timestamp) {
        self.housekeeping_at = now.plus(HOUSEKEEPING_EVERY);
        let days = u64::from(self.engine.policy().retention.days);
        let cutoff = Timestamp(now.0.saturating_sub(days * 86_400_000));
        match self.store.prune(cutoff) {
            Ok(p) if p.jobs + p.events + p.audit > 0 => {
                tracing::info!(
                    "retention: deleted {} finished jobs, {} events and {} audit entries older than {days} days",
                    p.jobs,
                    p.events,
                    p.audit
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("retention failed (will retry): {e}"),
        }
        self.forget_gone_waiters();
        self.node_meters.prune(now);
        let held: std::collections::HashSet<String> = self
            .engine
            .scope_usage()
            .into_iter()
            .filter(|u| u.used > 0)
            .map(|u| u.scope)
            .collect();
        self.meters.prune_scopes(|s| held.contains(s));
    }

    /// Hands one message to its feature.
    pub(crate) fn handle(&mut self, msg: Msg, now: Timestamp) {
        let Msg {
            principal: p,
            op,
            audit,
        } = msg;
        self.audit_cur = audit;
        self.observing = op.observes();
        match op {
            Op::Jobs(op) => self.job_op(&p, op, now),
            Op::Nodes(op) => self.node_op(p, op, now),
            Op::Policy(op) => self.policy_op(&p, op, now),
            Op::Tokens(op) => self.token_op(&p, op, now),
            Op::Schedules(op) => self.schedule_op(&p, op, now),
            Op::Backups(op) => self.backup_op(op, now),
            Op::Restores(op) => self.restore_op(op, now),
            Op::Events(op) => self.event_op(&p, op),
            Op::Metrics(reply) => {
                let mut text = self.metrics.render(&self.engine, self.seq, now);
                self.meters.throughput(&self.engine).render(&mut text);
                self.node_meters.render(&mut text, now);
                self.render_schedule_metrics(&mut text);
                self.render_rpo_metrics(&mut text, now);
                self.render_notify_metrics(&mut text);
                self.render_forecast_metrics(&mut text, now);
                self.answer(reply, Ok(text));
            }
            Op::Shutdown(reply) => self.answer(reply, Ok(())),
            Op::Queue(op) => self.queue_op(&p, op, now),
            Op::Rpo(op) => self.rpo_op(&p, op, now),
            Op::Audit(op) => self.audit_op(&p, op, now),
            Op::Logs(op) => self.log_op(&p, op, now),
            Op::Notify(op) => self.notify_op(&p, op),
            Op::Forecast(op) => self.forecast_op(op),
            Op::Ui(op) => self.ui_op(&p, op, now),
        }
        self.observing = false;
        self.audit_cur = None;
        self.audit_note = None;
    }

    /// Turns the engine's events into store rows, log entries, metrics and wake-ups.
    pub(crate) fn drain_events(&mut self, now: Timestamp) {
        while let Some(ev) = self.engine.poll_event() {
            self.track_pause(&ev);
            let data = match &ev {
                Event::Job { change, job } => {
                    self.metrics.observe(*change, job, self.engine.policy());
                    self.track_offer(*change, job);
                    self.forecast_learn(*change, job, now);
                    if !job.state.is_admitted() {
                        self.meters.forget(job.id);
                    }
                    let view = self.view(job);
                    self.wake_waiters(job, &view);
                    self.changed.insert(job.id, (**job).clone());
                    serde_json::json!({ "type": "job", "change": change, "job": view })
                }
                other => {
                    self.forecast.touch();
                    serde_json::to_value(other).expect("events serialize")
                }
            };
            let Value::Object(data) = data else {
                unreachable!("events are objects")
            };
            self.record_event(data, now);
            self.track_rpo(&ev, now);
        }
    }

    /// Gives an event its sequence number, adds it to the batch (so it is committed with
    /// the changes it reports) and to the broadcast sent after the commit. Engine events
    /// come here through [`Self::drain_events`]; the server's own events (its `type` is
    /// not an engine event's) are recorded here directly. Each `[[notify]]` target that
    /// selects the event gets its outbox row in the same batch.
    pub(crate) fn record_event(&mut self, data: serde_json::Map<String, Value>, now: Timestamp) {
        self.seq += 1;
        self.batch
            .events
            .push(StoredEvent::new(self.seq, now, &data));
        let view = Arc::new(EventView {
            seq: self.seq,
            at: lockgate_api::time::format(now),
            data,
        });
        self.enqueue_notifications(&view, now);
        self.broadcasts.push(view);
    }

    /// Writes the batch: changed jobs (with whether the engine still holds them), events,
    /// and whatever the operations added.
    pub(crate) fn commit(&mut self) -> Result<(), StoreError> {
        let granted = self.engine.next_token().saturating_sub(1);
        if granted > self.max_token {
            self.max_token = granted;
            self.batch.max_token = Some(granted);
        }
        let changed = std::mem::take(&mut self.changed);
        for (id, job) in changed {
            let live = self.engine.job(id).is_some();
            self.batch.jobs.push((job, live));
        }
        self.pending_bytes = 0;
        if self.batch.is_empty() && self.unsaved.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        if !batch.is_empty() {
            let broadcasts = std::mem::take(&mut self.broadcasts);
            self.unsaved.push((batch, broadcasts));
        }
        // Oldest first; a batch whose commit fails is put back when the failure is one
        // that is waited for (`Loop::kept`), and the error ends this commit.
        while !self.unsaved.is_empty() {
            let (batch, broadcasts) = self.unsaved.remove(0);
            if let Err(e) = self.commit_one(&batch) {
                if self.kept(&e) {
                    self.unsaved.insert(0, (batch, broadcasts));
                }
                return Err(e);
            }
            self.broadcasts.extend(broadcasts);
        }
        Ok(())
    }

    /// Whether a failed commit is waited for (its batch kept, its answers errors) rather
    /// than ending the process: a database that is away, or a full disk.
    fn kept(&self, e: &StoreError) -> bool {
        self.retry_commits || matches!(e, StoreError::Full { .. })
    }

    fn commit_one(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let start = Instant::now();
        self.store.commit(batch)?;
        self.metrics.commit.observe(start.elapsed().as_secs_f64());
        self.metrics.committed_jobs += batch.jobs.len() as u64;
        let logged: Vec<JobId> = batch.job_logs.iter().map(|a| a.job).collect();
        self.wake_log_waiters(&logged);
        Ok(())
    }

    /// After a failed commit that is kept for the next one: every answer of a change in the
    /// batch is `unavailable` (507 for a full disk); nothing is broadcast. On a full disk,
    /// requests that only look are answered from memory, which holds the kept changes
    /// too: what the server will commit first once it can.
    fn fail_replies(&mut self, e: &StoreError) {
        tracing::error!(
            "store commit failed ({} batch(es) kept, retrying): {e}",
            self.unsaved.len()
        );
        let text = format!(
            "the store could not commit this request, so it was not acknowledged: {e}; \
             the server keeps the change and retries the commit, so retry with an \
             idempotency key (or read back) rather than submitting twice"
        );
        let err = match e {
            StoreError::Full { .. } => {
                ApiError::new(lockgate_api::ErrorCode::InsufficientStorage, text)
            }
            _ => ApiError::unavailable(text),
        };
        for send in self.replies.drain(..) {
            send(Some(&err));
        }
        // Only a full disk lets reads through: a database that is away or a fence may
        // mean another replica leads, and this one's memory is no longer the truth.
        let full = matches!(e, StoreError::Full { .. });
        for send in self.observations.drain(..) {
            send(if full { None } else { Some(&err) });
        }
    }

    /// After the commit: the answers, the broadcasts, and the node long-polls that have
    /// something to take now.
    pub(crate) fn send_replies(&mut self) {
        for send in self.replies.drain(..).chain(self.observations.drain(..)) {
            send(None);
        }
        for ev in self.broadcasts.drain(..) {
            let _ = self.events_tx.send(ev);
        }
        self.notify_after_commit();
        self.wake_node_waiters();
    }
}
