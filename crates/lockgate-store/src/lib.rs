//! lockgate-store: the server's durable state, behind the [`Store`] trait.
//!
//! What is kept: every job (live and finished, as the engine's [`Job`]), registered nodes
//! (the engine's [`NodeRecord`]),
//! tokens (SHA-256 hashes only), the event log (sequence-numbered; a `job` event's row
//! refers to its job's row and holds only what changed, `event_row`), the policy document
//! (when the server has no `--config` file), schedules with their run history, active
//! pauses, the RPO values (`[[rpo]]`: each value's last success), the output lines of
//! jobs' commands (bounded per job and in total, deleted with their job), and a few
//! counters (highest job id, highest lease token, last event sequence) so ids and fencing
//! tokens never repeat after a restart, even once the rows that carried them are pruned.
//!
//! The server writes in **batches**: every state change of many requests goes into one
//! [`Batch`], committed as one transaction (group commit) before any of those requests is
//! answered. [`SqliteStore`] is the embedded implementation (SQLite in WAL mode,
//! `synchronous = FULL`: a commit that returned survives a crash of the process or of the
//! machine); its schema is versioned (`PRAGMA user_version`) and migrated forward on open.
//! [`PgStore`] keeps the same data in PostgreSQL (`--database-url`), for several servers
//! on one database; [`StoreLocation`] says which one a server opens.
#![warn(missing_docs)]

#[cfg(test)]
mod conformance;
mod event_row;
#[cfg(test)]
mod golden_stores;
mod location;
mod log_bounds;
pub mod postgres;
mod sqlite;

use lockgate_api::{AuditOutcome, BackupState, LogStream, Role};
use lockgate_core::engine::{NodeRecord, Pause};
use lockgate_core::job::{Job, JobId, JobState};
use lockgate_core::Timestamp;

pub use event_row::JOB_FIXED_FIELDS;
pub use location::{AnyStore, OutboxReader, StoreLocation};
pub use log_bounds::LINE_OVERHEAD as LOG_LINE_OVERHEAD;
pub use postgres::{Fence, PgOutboxReader, PgStore, PG_SCHEMA_VERSION};
pub use sqlite::{copy, SqliteOutboxReader, SqliteStore, SCHEMA_VERSION};

/// Why a store operation failed.
///
/// # Error rules
/// - Each variant names where it happened: the store's path or redacted URL, the
///   operation, or the table of a corrupt row; the database's own words come after it.
/// - A store error never says whether to retry: the server decides (a failed commit keeps
///   its batch on a database, and on SQLite only for a full disk, [`StoreError::Full`];
///   a [`StoreError::Fenced`] commit ends the term; anything else stops the server
///   before an answer could outrun the disk).
/// - A URL in a message has its password masked (`postgres::redact`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or created.
    #[error("cannot open the store at {path}: {message}")]
    Open {
        /// Database file.
        path: String,
        /// Cause.
        message: String,
    },
    /// The database was written by a newer lockgate (schema version above ours).
    #[error("the store at {path} has schema version {found}; this lockgate knows up to {known}: upgrade lockgate")]
    TooNew {
        /// Database file.
        path: String,
        /// Its version.
        found: u32,
        /// Ours.
        known: u32,
    },
    /// A read or write failed (disk full, I/O error). Temporary in some cases; the batch was
    /// not committed.
    #[error("store {operation} failed: {message}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// Cause.
        message: String,
    },
    /// A row could not be decoded.
    #[error("corrupt {what} row in the store: {message}")]
    Corrupt {
        /// Which table.
        what: &'static str,
        /// Cause.
        message: String,
    },
    /// A fenced commit ([`PgStore::set_fence`]) found that this server no longer holds
    /// the leadership of `term`; nothing of the batch was written.
    #[error(
        "not the leader any more: term {term} has passed to another server; nothing was committed"
    )]
    Fenced {
        /// The term the commit was fenced with.
        term: i64,
    },
    /// The database could not be reached (refused, the connection lost, the server
    /// shutting down): the operation is not known to be durable, so nothing that waited
    /// for it is acknowledged; asking again once the database is back is safe (a submit
    /// with its idempotency key finds its job). The API answers 503 `unavailable`, never
    /// 500.
    #[error("the database cannot be reached ({operation}): {message}; not acknowledged, ask again once it is back")]
    Unreachable {
        /// What was being done.
        operation: &'static str,
        /// Cause.
        message: String,
    },
    /// The store's disk is full (SQLite's `SQLITE_FULL`, PostgreSQL's SQLSTATE 53100):
    /// nothing of the write was kept, and the same write may succeed once space is freed.
    /// The API answers 507 `insufficient_storage`.
    #[error("the store's disk is full ({operation}): {message}; not acknowledged, free space and ask again")]
    Full {
        /// What was being done.
        operation: &'static str,
        /// Cause.
        message: String,
    },
}

/// A token as stored (the secret itself never is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Principal name (unique).
    pub name: String,
    /// Role (stored as its name: `admin`, `submitter`, `agent`, `viewer`; a name this
    /// build does not know reads as `viewer`, the least privilege).
    pub role: Role,
    /// Bound node (agent tokens).
    pub node: Option<String>,
    /// SHA-256 of the secret, lowercase hex.
    pub hash: String,
    /// Created.
    pub created_at: Timestamp,
}

/// One event of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Sequence number (1, 2, ...).
    pub seq: u64,
    /// When it happened.
    pub at: Timestamp,
    /// The event as JSON (`{"type": ..., ...}`). As written: whole, or, with `job`, the
    /// fields of its `job` that change over the job's life ([`StoredEvent::new`] builds
    /// that). As read: always whole (the rest taken from the job's row).
    pub data: String,
    /// The job a `job` event reports (its row supplies the fields `data` leaves out);
    /// `None` for every other event.
    pub job: Option<JobId>,
}

/// A schedule's durable state (design `schedules.md`). Policy-file schedules have a record
/// too (their state: last planned time and run), without a `spec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// Unique name.
    pub name: String,
    /// Where it was defined.
    pub source: ScheduleSource,
    /// The creation request as JSON (`api` schedules; `None` for policy ones).
    pub spec: Option<String>,
    /// The latest planned time handled (submitted or skipped); runs are planned after it.
    pub last_planned: Timestamp,
    /// The job of the latest submitted run.
    pub last_job: Option<JobId>,
    /// When the schedule was created (or first seen in the policy).
    pub created_at: Timestamp,
}

/// Where a schedule was defined (stored as `policy` or `api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleSource {
    /// A `[[schedule]]` of the policy document.
    Policy,
    /// Created with `POST /v1/schedules`.
    Api,
}

impl ScheduleSource {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleSource::Policy => "policy",
            ScheduleSource::Api => "api",
        }
    }
}

/// One planned time of a schedule and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRun {
    /// The schedule.
    pub schedule: String,
    /// The planned time.
    pub planned: Timestamp,
    /// The job submitted for it (`None`: skipped).
    pub job: Option<JobId>,
    /// Why it was skipped (or, with a job, what else happened: a cancelled previous run).
    pub note: Option<String>,
    /// When it was decided.
    pub at: Timestamp,
}

/// An item-block backup's record (design `item-blocks.md`): kept until deleted, never
/// pruned by retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupRecord {
    /// Unique name.
    pub name: String,
    /// Its state (also inside `body`; this copy is what queries filter on).
    pub state: BackupState,
    /// When it was created.
    pub created_at: Timestamp,
    /// The record as the API shows it (JSON).
    pub body: String,
}

/// A restore's record: the shape of a backup's (its name, state, creation time and the
/// API's JSON), in a table of its own.
pub type RestoreRecord = BackupRecord;

/// One entry of the audit log (see `lockgate_api::AuditEntry`). The server writes an
/// act's entry in the batch of the change it describes; a later write with the same
/// `request` replaces it (the final outcome of a request that asked the loop twice)
/// and keeps its `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// Sequence number, given by the store at the first write (0 in a batch: not yet
    /// given). Never reused, also after pruning.
    pub seq: u64,
    /// The request's unique id (random), the key of a replacing write.
    pub request: String,
    /// When.
    pub at: Timestamp,
    /// The token's name; `None` without a valid token.
    pub principal: Option<String>,
    /// The token's role.
    pub role: Option<Role>,
    /// HTTP method (or `SIGHUP`).
    pub method: String,
    /// Request path.
    pub path: String,
    /// The compact, secret-free summary of the request.
    pub summary: String,
    /// What came of it.
    pub outcome: AuditOutcome,
    /// `code: message` of an error answer.
    pub error: Option<String>,
}

/// Filters of an audit listing; every given filter must hold. Oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only entries with a larger `seq`.
    pub after: u64,
    /// Only entries at or after this time.
    pub since: Option<Timestamp>,
    /// Only this principal's entries.
    pub principal: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// A notification waiting to be sent: one event for one `[[notify]]` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// The event's sequence number.
    pub seq: u64,
    /// The target's name.
    pub target: String,
    /// The event as `/v1/events` serves it (JSON).
    pub body: String,
    /// When the event happened.
    pub created_at: Timestamp,
    /// Attempts so far.
    pub attempts: u32,
    /// Not to be tried before.
    pub next_at: Timestamp,
}

/// What a sender reports about one outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxUpdate {
    /// The event's sequence number.
    pub seq: u64,
    /// The target's name.
    pub target: String,
    /// Attempts so far, this one included.
    pub attempts: u32,
    /// How the attempt ended.
    pub outcome: OutboxOutcome,
}

/// How an attempt to send an outbox row ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxOutcome {
    /// Sent; the row is done.
    Delivered {
        /// When.
        at: Timestamp,
    },
    /// Failed; try again at `next_at`.
    Retry {
        /// The next attempt's time.
        next_at: Timestamp,
        /// Why it failed.
        error: String,
    },
    /// Failed for the last time (retries used up, or the target is gone); the row is done.
    GaveUp {
        /// When.
        at: Timestamp,
        /// Why the last attempt failed.
        error: String,
    },
}

/// Everything one group commit writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Jobs to insert or replace, with whether the engine still holds them (`live`: rebuilt
    /// into the engine at the next start).
    pub jobs: Vec<(Job, bool)>,
    /// Events to append.
    pub events: Vec<StoredEvent>,
    /// Nodes to insert or replace.
    pub nodes: Vec<NodeRecord>,
    /// Nodes to forget.
    pub removed_nodes: Vec<String>,
    /// Tokens to insert or replace.
    pub tokens: Vec<TokenRecord>,
    /// Tokens to delete, by name.
    pub revoked_tokens: Vec<String>,
    /// A new policy document (TOML).
    pub policy: Option<String>,
    /// The highest lease token granted so far.
    pub max_token: Option<u64>,
    /// What the automatic limits and the pressure guards learned (the server's JSON),
    /// when it changed: kept whole, read back at the next start.
    pub learned: Option<String>,
    /// Schedules to insert or replace.
    pub schedules: Vec<ScheduleRecord>,
    /// Schedules to forget, by name (with their run history).
    pub removed_schedules: Vec<String>,
    /// Schedule runs to record (insert or replace by schedule and planned time).
    pub schedule_runs: Vec<ScheduleRun>,
    /// Backup records to insert or replace (by name).
    pub backups: Vec<BackupRecord>,
    /// Restore records to insert or replace (by name).
    pub restores: Vec<RestoreRecord>,
    /// Pauses to insert (or replace, by id).
    pub pauses: Vec<Pause>,
    /// Pauses that ended, by id.
    pub removed_pauses: Vec<u64>,
    /// RPO values to insert or replace (by rule and value).
    pub rpo: Vec<RpoRecord>,
    /// RPO values retired (`lockgate rpo forget`): rule and value.
    pub removed_rpo: Vec<(String, Vec<(String, String)>)>,
    /// Audit entries to insert, or to replace by their `request`.
    pub audit: Vec<AuditRecord>,
    /// Lines of job output to append (bounded as [`Batch::log_limits`] says).
    pub job_logs: Vec<LogAppend>,
    /// The bounds of the job logs after this batch (`[retention]` of the policy).
    pub log_limits: LogLimits,
    /// Notifications to send, one per (event, target); a row already there is kept.
    pub outbox: Vec<OutboxRow>,
    /// What senders reported about outbox rows.
    pub outbox_updates: Vec<OutboxUpdate>,
}

/// Lines of one job's output, as a holder sent them in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppend {
    /// The job.
    pub job: JobId,
    /// When the server received them (the time of the markers it writes).
    pub at: Timestamp,
    /// Lines the holder dropped before these: stored as one marker line first.
    pub dropped: u64,
    /// The lines, oldest first (their `seq` is ignored: the store numbers them).
    pub lines: Vec<StoredLogLine>,
}

/// One line of a job's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLogLine {
    /// Its number in the job's log (1, 2, ...; never reused).
    pub seq: u64,
    /// When the holder read it.
    pub at: Timestamp,
    /// Where it came from.
    pub stream: LogStream,
    /// The line, without its newline.
    pub text: String,
}

/// How much job output the store keeps. A line costs its text's bytes plus
/// [`LOG_LINE_OVERHEAD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Bytes per job: its oldest lines are dropped first (with a marker).
    pub per_job: u64,
    /// Bytes of all jobs: the oldest jobs' logs are dropped first.
    pub total: u64,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            per_job: lockgate_core::policy::DEFAULT_JOB_LOG_BYTES,
            total: lockgate_core::policy::DEFAULT_JOB_LOGS_TOTAL_BYTES,
        }
    }
}

impl Batch {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.events.is_empty()
            && self.nodes.is_empty()
            && self.removed_nodes.is_empty()
            && self.tokens.is_empty()
            && self.revoked_tokens.is_empty()
            && self.policy.is_none()
            && self.max_token.is_none()
            && self.learned.is_none()
            && self.schedules.is_empty()
            && self.removed_schedules.is_empty()
            && self.schedule_runs.is_empty()
            && self.backups.is_empty()
            && self.restores.is_empty()
            && self.pauses.is_empty()
            && self.removed_pauses.is_empty()
            && self.rpo.is_empty()
            && self.removed_rpo.is_empty()
            && self.audit.is_empty()
            && self.job_logs.is_empty()
            && self.outbox.is_empty()
            && self.outbox_updates.is_empty()
    }
}

/// The state the server starts from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// Jobs the engine held (queued, admitted, or waiting for a retry), by id.
    pub live_jobs: Vec<Job>,
    /// Registered nodes.
    pub nodes: Vec<NodeRecord>,
    /// Every token.
    pub tokens: Vec<TokenRecord>,
    /// The stored policy document, if any.
    pub policy: Option<String>,
    /// The highest job id ever stored (0 when none).
    pub max_job_id: JobId,
    /// The highest lease token ever granted (0 when none).
    pub max_token: u64,
    /// What the automatic limits and guards learned, as last written ([`Batch::learned`]).
    pub learned: Option<String>,
    /// The last event sequence number (0 when none).
    pub last_event_seq: u64,
    /// Every schedule's state, by name.
    pub schedules: Vec<ScheduleRecord>,
    /// Every active pause, by id.
    pub pauses: Vec<Pause>,
    /// The highest pause id ever stored (0 when none).
    pub max_pause_id: u64,
    /// Every tracked RPO value, by rule and value.
    pub rpo: Vec<RpoRecord>,
    /// Outbox rows not yet delivered or given up.
    pub outbox_pending: u64,
}

/// One value of an `[[rpo]]` rule (a group, a repository) and what the server saw of its
/// jobs: kept until it is retired (`lockgate rpo forget`), never pruned by retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpoRecord {
    /// The rule's name.
    pub rule: String,
    /// The value: the rule's `per` keys with this value's values, in `per` order.
    pub value: Vec<(String, String)>,
    /// When its first job was seen (any outcome).
    pub first_seen: Timestamp,
    /// When its latest job was seen (submitted or ended).
    pub last_seen: Timestamp,
    /// The latest job seen, and its state then.
    pub last_job: Option<(JobId, JobState)>,
    /// When its latest successful job ended, and that job.
    pub last_success: Option<(Timestamp, JobId)>,
    /// Whether an `rpo_alert` was raised and not yet cleared (so a restart does not raise
    /// it again).
    pub alerting: bool,
}

/// Filters of a job listing; every given filter must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// State.
    pub state: Option<JobState>,
    /// Kind.
    pub kind: Option<String>,
    /// Owner.
    pub owner: Option<String>,
    /// Node.
    pub node: Option<String>,
    /// Only jobs that have not ended: queued, preparing, prepared or running.
    pub active: bool,
    /// Only ids above this.
    pub after: Option<JobId>,
    /// Only ids below this (the cursor of a newest-first listing).
    pub before: Option<JobId>,
    /// Newest (highest id) first; otherwise oldest first.
    pub newest_first: bool,
    /// At most this many.
    pub limit: usize,
}

/// What housekeeping deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Finished jobs (and with them their idempotency keys).
    pub jobs: usize,
    /// Events.
    pub events: usize,
    /// Schedule runs (history entries).
    pub schedule_runs: usize,
    /// Audit entries.
    pub audit: usize,
    /// Lines of the deleted jobs' logs.
    pub log_lines: usize,
}

/// Durable state. One owner (the server's event loop) calls it; `&mut self` everywhere.
pub trait Store: Send {
    /// Reads the state to start from.
    ///
    /// # Errors
    /// [`StoreError::Io`] or [`StoreError::Corrupt`].
    fn load(&mut self) -> Result<Loaded, StoreError>;

    /// Every token.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn load_tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError>;

    /// Writes a batch atomically and durably.
    ///
    /// # Errors
    /// [`StoreError::Io`]; then nothing of the batch was written.
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError>;

    /// One job by id (live or finished).
    ///
    /// # Errors
    /// [`StoreError::Io`] or [`StoreError::Corrupt`].
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;

    /// The job an owner submitted with an idempotency key, live or finished.
    ///
    /// # Errors
    /// [`StoreError::Io`] or [`StoreError::Corrupt`].
    fn job_by_key(&mut self, owner: &str, key: &str) -> Result<Option<Job>, StoreError>;

    /// Jobs matching a filter, by id (ascending, or descending with
    /// [`JobFilter::newest_first`]).
    ///
    /// # Errors
    /// [`StoreError::Io`] or [`StoreError::Corrupt`].
    fn jobs(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError>;

    /// Events after a sequence number, oldest first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn events_after(&mut self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError>;

    /// A schedule's latest runs, newest first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn schedule_runs(&mut self, name: &str, limit: usize) -> Result<Vec<ScheduleRun>, StoreError>;

    /// One backup record by name.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn backup(&mut self, name: &str) -> Result<Option<BackupRecord>, StoreError>;

    /// Every backup record, oldest first (by creation time, then name).
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn backups(&mut self) -> Result<Vec<BackupRecord>, StoreError>;

    /// One restore record by name.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn restore(&mut self, name: &str) -> Result<Option<RestoreRecord>, StoreError>;

    /// Every restore record, oldest first (by creation time, then name).
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn restores(&mut self) -> Result<Vec<RestoreRecord>, StoreError>;

    /// Audit entries matching a filter, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Io`] or [`StoreError::Corrupt`].
    fn audit(&mut self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError>;

    /// Deletes finished jobs, events, schedule runs and audit entries older than `cutoff`.
    /// Lines of a job's log after line `after`, oldest first: at most `limit` lines and
    /// about `max_bytes` of text (at least one line when there is one). When lines after
    /// `after` were dropped by the bounds, the first line is a marker (stream `lockgate`)
    /// saying how many.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn job_log(
        &mut self,
        job: JobId,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredLogLine>, StoreError>;

    /// The last `n` stored lines of a job's log, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn job_log_tail(&mut self, job: JobId, n: usize) -> Result<Vec<StoredLogLine>, StoreError>;

    /// The bytes all job logs keep together.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn job_log_bytes(&mut self) -> Result<u64, StoreError>;

    /// Deletes finished jobs (with their logs), events and schedule runs older than `cutoff`.
    /// Deletes finished jobs, events, schedule runs and done outbox rows older than
    /// `cutoff`.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned, StoreError>;

    /// Flushes everything to the main database file (a WAL checkpoint); called at shutdown.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn flush(&mut self) -> Result<(), StoreError>;
}
