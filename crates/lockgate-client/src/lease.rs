//! Keeping a job's lease: renew every TTL/3, renew faster while the server cannot be
//! reached, and say when the holder must give the work up.
//!
//! # Invariant
//!
//! The server sets a lease's expiry to (when it *received* the renewal) + TTL, so the lease
//! is ours at least until [`LeaseKeeper::expires_no_earlier_than`]: (when the last
//! successful renewal was *sent*) + TTL. With [`WhileUnreachable::StopBeforeExpiry`] the
//! keeper gives the lease up a sixth of the TTL before that moment, and
//! [`LeaseKeeper::kill_by`] never lies past it, so work stopped as the keeper says is dead
//! before the server can hand its slot to someone else. Two things make this hold against
//! a server that stops answering rather than refusing connections:
//! - every renewal call has a timeout that ends at [`LeaseKeeper::give_up_at`] (no call
//!   blocks the keeper past the moment it must give up);
//! - while renewals fail, the next one is due within TTL/10 (at most 1 s), and never after
//!   the give-up moment.
//!
//! With several servers (a cluster, docs/api.md "Several servers") each renewal call also
//! ends after TTL/6, and the client moves on to the next server after such a failure, so
//! a leader that stopped answering costs one try: a renewal due at TTL/3 that finds no
//! leader still has until 5/6 of the TTL, which covers a failover shorter than TTL/3.
//!
//! A grant's answer says nothing of when the lease was granted: it may have been held up
//! by the network (a partition heals and TCP delivers it seconds late), or granted before
//! it was fetched (an agent's assignment, a long-poll that found the job admitted). So no
//! work starts under a new lease before [`LeaseKeeper::confirm`] has had a renewal
//! through: its send time is the first moment the keeper can count from. Until then the
//! lease may already have run out on the server and its slot be someone else's (the chaos
//! harness found both cases: docs/reliability.md).
//!
//! [`crate::hold()`] applies the keeper's verdicts to a child process.

use crate::{Client, ClientError, CALL_TIMEOUT};
use lockgate_api::{FinishRequest, JobView, LeaseRequest, NodeSample};
use lockgate_core::{Outcome, Usage};
use std::time::{Duration, Instant};

/// The shortest TTL the keeper works with (a lease view without `ttl_s` says 0).
const MIN_TTL: Duration = Duration::from_millis(30);

/// What the holder does while the server cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhileUnreachable {
    /// Give the lease up a sixth of the TTL before it can run out on the server, with the
    /// work dead by then (see the module's invariant). `lockgate run` does this.
    StopBeforeExpiry,
    /// Keep the work going for this long after the last successful renewal (the agent's
    /// `unreachable_grace`). A restarting server gives every lease a fresh TTL, so a restart
    /// costs no work; but a server that is up and cut off from the holder expires the lease
    /// after its TTL and may hand the slot on: past the TTL, this trades exactness for
    /// long transfers. A hold shorter than the TTL is as safe as `StopBeforeExpiry`.
    HoldFor(Duration),
}

/// What one renewal said.
#[derive(Debug, Clone, PartialEq)]
pub enum Renewal {
    /// Renewed; the job as the server sees it now (`cancel_requested`, `state`).
    Held(Box<JobView>),
    /// The server could not be reached (or answered a 5xx); the lease is still ours until
    /// [`LeaseKeeper::give_up_at`], and the next renewal is due sooner.
    Retrying(ClientError),
    /// The server could not be reached for too long: stop the work, dead by
    /// [`LeaseKeeper::kill_by`]. The lease must not be used any more.
    GiveUp(String),
    /// The server refused the renewal (lease lost, job gone, token refused): the job is no
    /// longer ours. Stop the work; do not finish the job.
    Lost(ClientError),
}

/// Keeps one lease. See the module docs.
#[derive(Debug)]
pub struct LeaseKeeper {
    client: Client,
    id: u64,
    token: u64,
    ttl: Duration,
    /// When the last successful renewal (or the grant's answer) was sent.
    renewed: Instant,
    /// When the next renewal is due.
    next: Instant,
    policy: WhileUnreachable,
    /// The last renewal failed with this (temporary) error.
    failing: Option<ClientError>,
    /// The holder's latest measurement of the work, sent with the renewals and the finish.
    usage: Option<Usage>,
    /// The holder's node, sampled with `usage`: sent with the next renewal.
    node: Option<NodeSample>,
    /// The server refused a report (it is older than the field): none is sent any more.
    unreported: bool,
}

fn ttl_of(ttl_s: f64) -> Duration {
    Duration::try_from_secs_f64(ttl_s)
        .unwrap_or(MIN_TTL)
        .max(MIN_TTL)
}

impl LeaseKeeper {
    /// Keeps the lease `token` of job `id` with the policy's `ttl`, counted from now until
    /// [`LeaseKeeper::confirm`] counts it from a renewal (call that before any work starts).
    pub fn new(
        client: Client,
        id: u64,
        token: u64,
        ttl: Duration,
        policy: WhileUnreachable,
    ) -> LeaseKeeper {
        let now = Instant::now();
        let ttl = ttl.max(MIN_TTL);
        LeaseKeeper {
            client,
            id,
            token,
            ttl,
            renewed: now,
            next: now + ttl / 3,
            policy,
            failing: None,
            usage: None,
            node: None,
            unreported: false,
        }
    }

    /// The work's latest totals (`meter.rs`): the next renewal and the finish carry them.
    pub fn report(&mut self, usage: Usage) {
        self.usage = Some(usage);
    }

    /// The holder's node as sampled now (`meter::node_sample`): the next renewal carries
    /// it.
    pub fn report_node(&mut self, sample: NodeSample) {
        self.node = Some(sample);
    }

    /// The totals last given to [`LeaseKeeper::report`].
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// The body that finishes the job with `outcome` under this lease, with the totals.
    pub fn finish_request(&self, outcome: Outcome, message: Option<String>) -> FinishRequest {
        FinishRequest {
            token: self.token,
            outcome,
            message,
            usage: self.usage.filter(|_| !self.unreported),
        }
    }

    /// One renewal call: with the totals, unless the server is older than them; a refusal
    /// of the field is answered by the same renewal without it.
    fn heartbeat(&mut self, timeout: Duration) -> Result<JobView, ClientError> {
        let plain = LeaseRequest::new(self.token);
        if self.unreported || (self.usage.is_none() && self.node.is_none()) {
            return self.client.heartbeat_within(self.id, &plain, timeout);
        }
        let req = LeaseRequest {
            usage: self.usage,
            node: self.node.clone(),
            ..plain.clone()
        };
        match self.client.heartbeat_within(self.id, &req, timeout) {
            Err(e) if e.refuses_field("usage") || e.refuses_field("node") => {
                self.unreported = true;
                self.client.heartbeat_within(self.id, &plain, timeout)
            }
            r => r,
        }
    }

    /// Keeps the lease of an admitted job, as [`LeaseKeeper::new`]; `None` when it holds none.
    pub fn for_job(client: Client, job: &JobView, policy: WhileUnreachable) -> Option<LeaseKeeper> {
        let lease = job.lease.as_ref()?;
        Some(LeaseKeeper::new(
            client,
            job.id,
            lease.token,
            ttl_of(lease.ttl_s),
            policy,
        ))
    }

    /// The client the lease is renewed with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The job.
    pub fn job_id(&self) -> u64 {
        self.id
    }

    /// The fencing token (to finish the job with).
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lease's TTL, as the last answer said.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The earliest moment the server may expire the lease: the last successful renewal's
    /// send time plus the TTL.
    pub fn expires_no_earlier_than(&self) -> Instant {
        self.renewed + self.ttl
    }

    /// When renewals that keep failing make the keeper give the lease up.
    pub fn give_up_at(&self) -> Instant {
        match self.policy {
            WhileUnreachable::StopBeforeExpiry => self.renewed + self.ttl - self.ttl / 6,
            WhileUnreachable::HoldFor(d) => self.renewed + d,
        }
    }

    /// When the next renewal is due.
    pub fn next_renewal(&self) -> Instant {
        self.next
    }

    /// The latest moment work stopped at `now` with a `grace` period (SIGTERM, then SIGKILL)
    /// may still run after the keeper gave up: `now + grace`, but never past
    /// [`LeaseKeeper::expires_no_earlier_than`] while that is still ahead.
    pub fn kill_by(&self, now: Instant, grace: Duration) -> Instant {
        let expiry = self.expires_no_earlier_than();
        if now < expiry {
            (now + grace).min(expiry)
        } else {
            now + grace
        }
    }

    /// Before any work starts under a new lease: renews it, retrying for up to a TTL while
    /// the server cannot be reached, so that the keeper counts from a renewal it sent
    /// rather than from when the grant's answer arrived (see the module docs). `Ok`: the
    /// lease is ours and the work may start (the job as the server sees it now); `Err`:
    /// why it must not (the lease was lost, or the server could not be reached).
    pub fn confirm(&mut self) -> Result<Box<JobView>, String> {
        let until = Instant::now() + self.ttl;
        loop {
            let sent = Instant::now();
            let timeout = self.call_timeout(until.saturating_duration_since(sent));
            match self.heartbeat(timeout) {
                Ok(job) => return Ok(self.held(sent, job)),
                Err(e) if e.is_temporary() => {
                    let now = Instant::now();
                    if now >= until {
                        return Err(format!(
                            "the new lease could not be confirmed within {:?}: {e}",
                            self.ttl
                        ));
                    }
                    std::thread::sleep(self.retry_pause().min(until - now));
                }
                Err(e) => return Err(format!("the lease was lost before the work started: {e}")),
            }
        }
    }

    /// How long one renewal call may take with `left` before the keeper must give up.
    fn call_timeout(&self, left: Duration) -> Duration {
        let timeout = left.min(CALL_TIMEOUT);
        if self.client.servers().len() > 1 {
            // A paused leader accepts connections and never answers: leave it after a
            // sixth of the TTL, so the next try (at most TTL/10 later) reaches the new one.
            timeout.min(self.ttl / 6)
        } else {
            timeout
        }
    }

    /// The pause between renewals that fail: TTL/10, from 10 ms to 1 s.
    fn retry_pause(&self) -> Duration {
        (self.ttl / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// A renewal sent at `sent` got through.
    fn held(&mut self, sent: Instant, job: JobView) -> Box<JobView> {
        self.renewed = sent;
        self.failing = None;
        if let Some(l) = &job.lease {
            self.ttl = ttl_of(l.ttl_s);
        }
        self.next = sent + self.ttl / 3;
        Box::new(job)
    }

    /// Renews once (call it at [`LeaseKeeper::next_renewal`]). The call gives up at
    /// [`LeaseKeeper::give_up_at`] at the latest.
    pub fn renew(&mut self) -> Renewal {
        let sent = Instant::now();
        let give_up = self.give_up_at();
        if sent >= give_up {
            return Renewal::GiveUp(self.give_up_reason());
        }
        let timeout = self.call_timeout(give_up - sent);
        match self.heartbeat(timeout) {
            Ok(job) => Renewal::Held(self.held(sent, job)),
            Err(e) if e.is_temporary() => {
                let now = Instant::now();
                self.failing = Some(e.clone());
                if now >= self.give_up_at() {
                    return Renewal::GiveUp(self.give_up_reason());
                }
                self.next = (now + self.retry_pause()).min(self.give_up_at());
                Renewal::Retrying(e)
            }
            Err(e) => Renewal::Lost(e),
        }
    }

    fn give_up_reason(&self) -> String {
        let why = self
            .failing
            .as_ref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        match self.policy {
            WhileUnreachable::StopBeforeExpiry => format!(
                "no renewal got through for {:?}, and the lease may run out on the server after {:?}{why}",
                self.give_up_at() - self.renewed,
                self.ttl
            ),
            WhileUnreachable::HoldFor(d) => format!(
                "the server was unreachable for longer than unreachable_grace ({d:?}){why}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeper(ttl_ms: u64, policy: WhileUnreachable) -> LeaseKeeper {
        let client = Client::new("http://127.0.0.1:9", None).unwrap();
        LeaseKeeper::new(client, 1, 7, Duration::from_millis(ttl_ms), policy)
    }

    #[test]
    fn deadlines_follow_the_ttl() {
        let k = keeper(600, WhileUnreachable::StopBeforeExpiry);
        let r = k.renewed;
        assert_eq!(k.next_renewal() - r, Duration::from_millis(200));
        assert_eq!(k.give_up_at() - r, Duration::from_millis(500));
        assert_eq!(k.expires_no_earlier_than() - r, Duration::from_millis(600));
        // The kill never lies past the expiry while that is ahead ...
        assert_eq!(
            k.kill_by(r, Duration::from_secs(10)) - r,
            Duration::from_millis(600)
        );
        assert_eq!(
            k.kill_by(r, Duration::from_millis(50)) - r,
            Duration::from_millis(50)
        );
        // ... and gets the whole grace once it is behind (a hold past the TTL).
        let late = r + Duration::from_secs(5);
        assert_eq!(
            k.kill_by(late, Duration::from_secs(1)) - late,
            Duration::from_secs(1)
        );
        let hold = keeper(600, WhileUnreachable::HoldFor(Duration::from_secs(300)));
        assert_eq!(hold.give_up_at() - hold.renewed, Duration::from_secs(300));
    }

    #[test]
    fn renewals_that_cannot_get_through_give_up_in_time() {
        let mut k = keeper(300, WhileUnreachable::StopBeforeExpiry);
        let start = Instant::now();
        let mut retries = 0;
        let why = loop {
            std::thread::sleep(k.next_renewal().saturating_duration_since(Instant::now()));
            match k.renew() {
                Renewal::Retrying(e) => {
                    assert!(e.is_temporary());
                    retries += 1;
                }
                Renewal::GiveUp(why) => break why,
                other => panic!("{other:?}"),
            }
        };
        assert!(
            start.elapsed() < Duration::from_millis(300),
            "{:?}",
            start.elapsed()
        );
        assert!(retries >= 3, "{retries}");
        assert!(why.contains("cannot reach the lockgate server"), "{why}");
    }
}
