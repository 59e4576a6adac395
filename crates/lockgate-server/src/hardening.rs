//! [`Hardening`]: the knobs of the server's self-protection (issue 10, items 6 to 9), in
//! one place so [`crate::Config`] grows by one field.
//!
//! Every default is chosen so that a server started with no flag is protected: the data
//! dir is locked ([`crate::datadir`]), a store behind what was acknowledged is refused
//! ([`crate::datadir`]), new submits stop before the disk is full ([`crate::space`]), and
//! connections that never send a request cannot starve real clients ([`crate::listener`]).

use std::time::Duration;

/// How the server protects itself. `Hardening::default()` is what `lockgate server`
/// uses without flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardening {
    /// `--start-fresh`: start even though the store is empty, replaced, or behind the
    /// acknowledged watermark (`lockgate.watermark`). Default `false`: such a data dir
    /// refuses to start, because serving from it would silently lose acknowledged jobs
    /// and reissue their ids. With the flag the store is taken as it is, its id counters
    /// are raised to the watermark (ids and event numbers still never repeat), and a stale
    /// `admin.token` is moved aside, never overwritten.
    pub start_fresh: bool,
    /// `--min-free-space BYTES`: below this many free bytes on the data dir's filesystem,
    /// new submits are refused with 507. Default `None`: the smaller of 1% of the
    /// filesystem and 256 MiB (etcd-like: enough room for heartbeats, finishes and
    /// cancels to commit; small enough not to waste a large disk). `Some(0)` turns the
    /// watermark off (a full disk then stops the server at its first failed commit).
    pub min_free_space: Option<u64>,
    /// `--store-quota BYTES`: above this size of `lockgate.db` plus its WAL, new submits
    /// are refused with 507. Default `None`: no quota (the free-space watermark still
    /// holds). A quota bounds what submitters can make the store grow to, independently
    /// of the filesystem the store shares with other data.
    pub store_quota: Option<u64>,
    /// `--header-read-timeout`: a new connection must send a complete request head within
    /// this long (TLS handshake included) or it is closed. Default 10 s: generous for any
    /// real client on a slow link, short enough that idle sockets do not pile up.
    pub header_read_timeout: Duration,
    /// `--idle-timeout`: a keep-alive connection with no request in flight is closed after
    /// this long. Default 60 s (clients reconnect transparently; long-polls and SSE streams
    /// have a request in flight and are never idle).
    pub idle_timeout: Duration,
    /// `--max-connections`: at most this many open connections; at the cap, a new one
    /// first closes the oldest connection that has not yet sent a complete request, then
    /// the oldest idle keep-alive one, and is itself refused only when every connection
    /// has a request in flight. Default `None`: the fd soft limit (raised to the hard
    /// limit at start) minus [`crate::listener::FD_RESERVE`] for the store, backups and
    /// hooks.
    pub max_connections: Option<usize>,
    /// `--write-stall-timeout`: a connection whose answer cannot be written for this long
    /// (its client stopped reading: an event stream, a long-poll or a log follow held open
    /// by a reader that never drains) is closed, and what it held is freed. Default 60 s:
    /// far above any real client's pause, short enough that stalled sockets do not pile
    /// up. A stream's client resumes with `Last-Event-ID`.
    pub write_stall_timeout: Duration,
}

impl Default for Hardening {
    fn default() -> Hardening {
        Hardening {
            start_fresh: false,
            min_free_space: None,
            store_quota: None,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
            write_stall_timeout: Duration::from_secs(60),
        }
    }
}
