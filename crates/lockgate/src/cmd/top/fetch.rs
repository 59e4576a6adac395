//! What `lockgate top` reads from the server, and the two threads that read it.
//!
//! # Invariants
//! - Nothing here polls the server on a timer while it answers. The stream thread follows
//!   `GET /v1/events/stream` and asks for a refetch after every event; the fetch thread
//!   waits for such an ask, lets [`COALESCE`] pass so a burst of events costs one read,
//!   then reads everything once. Only while the server does not answer does the fetch
//!   thread try again, every [`RETRY`], and the stream thread reconnect, every [`RETRY`].
//! - A [`Snapshot`] is read in one go and replaces the previous one whole: the screen never
//!   mixes numbers from two reads.
//! - The main thread only ever receives [`Msg`]s; it never blocks on the network.

use super::scopes::{self, ScopeRow};
use lockgate_api::{EventView, ExplainView, JobQuery, JobView, NodeView};
use lockgate_client::{Client, ClientError};
use lockgate_core::Policy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the fetch thread waits after an ask for more asks to fold into one read.
pub const COALESCE: Duration = Duration::from_millis(150);
/// How often a lost server is tried again (the fetch and the stream alike).
pub const RETRY: Duration = Duration::from_secs(1);
/// How many recent events the stream replays when it starts.
pub const RECENT: u64 = 30;
/// Active jobs read per snapshot, at most (pages of 1000).
pub const MAX_JOBS: usize = 20_000;

/// Everything the screen shows, read at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Jobs that have not ended (queued, preparing, prepared, running), by id.
    pub jobs: Vec<JobView>,
    /// True when there were more than [`MAX_JOBS`].
    pub truncated: bool,
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// The scope gauges.
    pub scopes: Vec<ScopeRow>,
    /// The explanation of the job open in the explain view, when one is.
    pub explain: Option<(u64, Result<ExplainView, String>)>,
    /// Why the oldest waiting job waits: its reasons, as `job explain` words them.
    pub oldest_why: Option<String>,
}

/// The queued job that has waited longest (then the lowest id).
pub fn oldest_waiting(jobs: &[JobView]) -> Option<&JobView> {
    jobs.iter()
        .filter(|j| j.state == lockgate_core::JobState::Queued)
        .min_by_key(|j| (j.queued_at.clone(), j.id))
}

/// What the worker threads tell the main thread.
#[derive(Debug)]
pub enum Msg {
    /// A key, a resize or another terminal event.
    Term(ratatui::crossterm::event::Event),
    /// A fresh snapshot, or why it could not be read.
    Snapshot(Box<Result<Snapshot, String>>),
    /// One event from the stream.
    Event(Box<EventView>),
    /// The stream broke (the server went away); it reconnects on its own.
    StreamLost(String),
    /// SIGTERM, SIGINT or SIGHUP: leave as `q` does.
    Quit,
}

/// The error as one line, with the URL once (the transport's message repeats it).
pub fn error_text(e: &ClientError) -> String {
    match e {
        ClientError::Unreachable { url, message } => {
            let why = message.strip_prefix(&format!("{url}: ")).unwrap_or(message);
            format!("cannot reach {url}: {why}")
        }
        other => other.to_string(),
    }
}

/// The active policy, parsed once per digest.
#[derive(Default)]
struct PolicyCache {
    digest: String,
    policy: Option<Policy>,
}

impl PolicyCache {
    /// The policy, or `None` when it cannot be read (the split of the gauges is then left
    /// out, not guessed).
    fn get(&mut self, client: &Client) -> Option<&Policy> {
        let view = client.policy().ok()?;
        if view.digest != self.digest {
            self.policy = Policy::from_json(&view.policy.to_string()).ok();
            self.digest = view.digest;
        }
        self.policy.as_ref()
    }
}

/// Every active job, page by page, up to [`MAX_JOBS`].
fn active_jobs(client: &Client) -> Result<(Vec<JobView>, bool), ClientError> {
    let mut jobs = Vec::new();
    let mut after = None;
    loop {
        let q = JobQuery {
            active: Some(true),
            limit: Some(1000),
            after,
            ..JobQuery::default()
        };
        let page = client.jobs(&q)?;
        jobs.extend(page.jobs);
        match page.next {
            Some(next) if jobs.len() < MAX_JOBS => after = Some(next),
            Some(_) => return Ok((jobs, true)),
            None => return Ok((jobs, false)),
        }
    }
}

/// One read of everything; `open` is the job whose explanation is shown (0: none).
fn read(client: &Client, open: u64, policy: &mut PolicyCache) -> Result<Snapshot, ClientError> {
    let (jobs, truncated) = active_jobs(client)?;
    let nodes = client.nodes()?.nodes;
    let metrics = scopes::parse_metrics(&client.metrics()?);
    let scopes = scopes::rows(&metrics, policy.get(client), &jobs, &nodes);
    let explain = (open != 0).then(|| (open, client.explain(open).map_err(|e| error_text(&e))));
    // The job may have been admitted since the list was read: then there is no reason.
    let oldest_why = oldest_waiting(&jobs)
        .and_then(|j| client.explain(j.id).ok())
        .map(|ex| {
            ex.reasons
                .iter()
                .map(|r| r.text.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .filter(|why| !why.is_empty());
    Ok(Snapshot {
        jobs,
        truncated,
        nodes,
        scopes,
        explain,
        oldest_why,
    })
}

/// The fetch thread: one read per burst of asks on `asks`, results to `out`. Returns when
/// either channel closes.
pub fn fetcher(client: Client, asks: Receiver<()>, out: Sender<Msg>, open: Arc<AtomicU64>) {
    let mut policy = PolicyCache::default();
    let mut failing = false;
    loop {
        // A failed read is tried again after RETRY, asked or not.
        let wait = if failing { RETRY } else { Duration::MAX };
        match asks.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let until = Instant::now() + COALESCE;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if let Err(RecvTimeoutError::Disconnected) = asks.recv_timeout(left) {
                return;
            }
        }
        let snap = read(&client, open.load(Ordering::Relaxed), &mut policy);
        failing = snap.is_err();
        let msg = Msg::Snapshot(Box::new(snap.map_err(|e| error_text(&e))));
        if out.send(msg).is_err() {
            return;
        }
    }
}

/// Where the stream starts: a few events before the newest, so the panel is not empty.
fn start_seq(client: &Client) -> Result<u64, ClientError> {
    let seq = scopes::parse_metrics(&client.metrics()?).event_seq;
    Ok(seq.unwrap_or(0).saturating_sub(RECENT))
}

/// The stream thread: every event to `out` and an ask to `asks`; a lost stream is
/// reported (with an ask, so the screen's status follows) and followed again from the last
/// event seen, every [`RETRY`]. Returns when `out` closes.
pub fn stream(client: Client, asks: Sender<()>, out: Sender<Msg>) {
    let mut after = None;
    loop {
        let r = match after {
            None => start_seq(&client).map(|s| after = Some(s)),
            Some(a) => {
                let mut closed = false;
                let r = client.follow_events(a, |ev| {
                    after = Some(ev.seq);
                    let _ = asks.send(());
                    closed = out.send(Msg::Event(Box::new(ev))).is_err();
                    !closed
                });
                if closed {
                    return;
                }
                // A stream that ends without an error was ended by the server (shutdown).
                r.and(Err(ClientError::Unreachable {
                    url: client.base().to_string(),
                    message: "the server ended the event stream".into(),
                }))
            }
        };
        if let Err(e) = r {
            let _ = asks.send(());
            if out.send(Msg::StreamLost(error_text(&e))).is_err() {
                return;
            }
            std::thread::sleep(RETRY);
        }
    }
}
