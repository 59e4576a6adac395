//! The serving loop: accept, TLS, HTTP/1 (hyper), with a connection cap and timeouts.
//!
//! # Invariants
//! - **A connection that never sends a request goes away.** Until its first complete
//!   request head (TLS handshake included) it lives at most the header-read timeout; with
//!   no request in flight after that, at most the idle timeout. A long-poll or an SSE
//!   stream has a request in flight (until its response body is dropped) and is never
//!   idle.
//! - **Idle sockets cannot starve clients.** At most [`Limits::max_connections`] are open;
//!   a connection accepted at the cap first evicts the oldest connection that has not
//!   sent a complete request, else the oldest idle keep-alive one; only when every
//!   connection has a request in flight is the new one closed at once.
//! - **An idle socket costs a socket and a task.** The HTTP machinery (and its buffers)
//!   is created only once the first byte arrives.
//! - **A client that stops reading is let go.** A connection whose answer could not be
//!   written for [`Limits::write_stall_timeout`] (every write `Pending`: the client's
//!   receive window and the kernel's send buffer are full) is closed, request in flight or
//!   not: an event stream or long-poll held by a reader that never drains frees its
//!   buffers and its place under the caps. An event stream is first told to end
//!   ([`StallCut`]): its last message says why, and reaches a client that reads again
//!   within [`CUT_GRACE`]; the connection closes once that answer is done or the grace
//!   is over. A stream's client resumes with `Last-Event-ID`.
//! - **Every line of a request head ends in CRLF.** A lone LF in a head is refused (400,
//!   connection closed) instead of read as a line end (`Watched`).
//! - **Shutdown is graceful**: when `stop` turns true nothing more is accepted, idle
//!   connections close, in-flight requests finish (the event loop answers its long-polls
//!   at shutdown), and [`serve`] returns when all are gone or after [`SHUTDOWN_GRACE`].

use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tower_service::Service;

/// Bytes of an answer one connection buffers before waiting for its client (also the most
/// of a request head it reads at once: above `http::shape::MAX_HEADER_BYTES`).
pub const WRITE_BUFFER: usize = 64 * 1024;

/// File descriptors kept out of the default connection cap: the store, backup archives
/// and inputs, hook processes, logs.
pub const FD_RESERVE: u64 = 256;
/// At shutdown, connections get this long to finish their requests.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long an event stream told to end for a write stall ([`StallCut`]) may still take to
/// deliver its last message, before its connection is closed anyway.
pub const CUT_GRACE: Duration = Duration::from_secs(10);
/// The listen backlog (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 4096;

/// Connection limits (defaults and trade-offs: [`crate::hardening::Hardening`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Until the first complete request head.
    pub header_read_timeout: Duration,
    /// With no request in flight, after the first.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Closed when no byte of its answer could be written for this long.
    pub write_stall_timeout: Duration,
}

/// Raises the fd soft limit to the hard limit; returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let cur = getrlimit(Resource::Nofile);
    if cur.current != cur.maximum {
        let want = Rlimit {
            current: cur.maximum,
            maximum: cur.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, want) {
            tracing::warn!("cannot raise the fd limit to the hard limit: {e}");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// The default connection cap for an fd limit: the limit minus [`FD_RESERVE`] (half the
/// limit when it is below twice the reserve).
pub fn default_max_connections(fd_limit: u64) -> usize {
    let cap = if fd_limit >= 2 * FD_RESERVE {
        fd_limit - FD_RESERVE
    } else {
        fd_limit / 2
    };
    cap.clamp(1, 1 << 22) as usize
}

/// One connection's state, shared by its task, its requests and the registry.
#[derive(Debug)]
struct Conn {
    /// Sent at least one complete request head.
    requested: AtomicBool,
    /// Requests whose response body is not yet dropped.
    inflight: AtomicUsize,
    /// Milliseconds after the registry's epoch when it last became idle (or was accepted).
    idle_since: AtomicU64,
    /// Something above changed: recompute the deadline.
    changed: Notify,
    /// Close now (chosen by the cap).
    evict: Notify,
    /// Milliseconds after the registry's epoch plus one when a write last went `Pending`
    /// with none `Ready` since; 0 while writes go through.
    stalled_since: AtomicU64,
    /// The next bytes read start a request head (set at accept and when an answer is
    /// done): [`Watched`] checks its line endings.
    expect_head: AtomicBool,
    /// Tells this connection's event streams to end ([`StallCut`]).
    cut: StallCut,
    /// Milliseconds after the registry's epoch plus one when its streams were told to end
    /// for a write stall; 0 before.
    cut_since: AtomicU64,
}

/// What a connection's event streams listen to, to end with a last message of their own
/// instead of a close (a request extension, so handlers find it). The value is set to how
/// long the connection's writes had stalled when they reached the write-stall timeout; its
/// receivers are the streams listening ([`StallCut::listen`]), and with none a stall
/// closes at once.
#[derive(Debug, Clone)]
pub struct StallCut(Arc<watch::Sender<Option<Duration>>>);

impl StallCut {
    /// Listens until the returned [`CutListener`] is dropped.
    pub fn listen(&self) -> CutListener {
        CutListener {
            rx: self.0.subscribe(),
        }
    }
}

/// One event stream's ear for [`StallCut`].
#[derive(Debug)]
pub struct CutListener {
    rx: watch::Receiver<Option<Duration>>,
}

impl CutListener {
    /// Once the stream was told to end: how long its writes had stalled.
    pub fn asked(&self) -> Option<Duration> {
        *self.rx.borrow()
    }

    /// Resolves when the stream is told to end (never, if the connection is gone).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches a channel, so it may lose a `select!` and be awaited
    /// again; the request to end stays set and the next call sees it at once.
    pub async fn wait(&mut self) {
        if self.rx.wait_for(Option::is_some).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The open connections, oldest first (ids increase).
#[derive(Debug)]
struct Registry {
    epoch: Instant,
    next: AtomicU64,
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
}

impl Registry {
    fn ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn len(&self) -> usize {
        self.conns.lock().expect("not poisoned").len()
    }

    fn add(&self) -> (u64, Arc<Conn>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            requested: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.ms()),
            changed: Notify::new(),
            evict: Notify::new(),
            stalled_since: AtomicU64::new(0),
            expect_head: AtomicBool::new(true),
            cut: StallCut(Arc::new(watch::channel(None).0)),
            cut_since: AtomicU64::new(0),
        });
        self.conns
            .lock()
            .expect("not poisoned")
            .insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.conns.lock().expect("not poisoned").remove(&id);
    }

    /// Evicts the oldest connection without a complete request, else the oldest idle one.
    /// `false`: every connection has a request in flight.
    fn evict_one(&self) -> bool {
        let mut conns = self.conns.lock().expect("not poisoned");
        let idle = |c: &Arc<Conn>| c.inflight.load(Ordering::Acquire) == 0;
        let pick = conns
            .iter()
            .find(|(_, c)| idle(c) && !c.requested.load(Ordering::Acquire))
            .or_else(|| conns.iter().find(|(_, c)| idle(c)))
            .map(|(id, _)| *id);
        match pick.and_then(|id| conns.remove(&id)) {
            Some(c) => {
                c.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Marks a request in flight on its connection until dropped (with the response body).
struct Busy {
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl Busy {
    fn start(conn: &Arc<Conn>, registry: &Arc<Registry>) -> Busy {
        conn.inflight.fetch_add(1, Ordering::AcqRel);
        conn.requested.store(true, Ordering::Release);
        conn.changed.notify_one();
        Busy {
            conn: conn.clone(),
            registry: registry.clone(),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(self.registry.ms(), Ordering::Release);
        self.conn.expect_head.store(true, Ordering::Release);
        self.conn.inflight.fetch_sub(1, Ordering::AcqRel);
        self.conn.changed.notify_one();
    }
}

/// Loads a TLS certificate chain and key (PEM) into a server config (HTTP/1.1 only).
///
/// # Errors
/// A message naming the file and what is wrong with it.
pub fn load_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let certs = rustls_pemfile::certs(&mut read(cert)?.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key_der = rustls_pemfile::private_key(&mut read(key)?.as_slice())
        .map_err(|e| format!("{}: {e}", key.display()))?
        .ok_or_else(|| format!("{}: no private key found", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("{} / {}: {e}", cert.display(), key.display()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Serves `app` on `listener` until `stop` turns true (see the module docs).
///
/// # Errors
/// The listener could not be handed to the runtime.
///
/// # Cancel safety
/// Not cancel safe: dropping it stops accepting at once, without the drain `stop` gives
/// (in-flight requests are cut, long-polls get no last answer). Stop it through `stop`.
pub async fn serve(
    listener: std::net::TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let _ = rustix::net::listen(&listener, BACKLOG);
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let registry = Arc::new(Registry {
        epoch: Instant::now(),
        next: AtomicU64::new(0),
        conns: Mutex::new(BTreeMap::new()),
    });
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if registry.len() >= limits.max_connections && !registry.evict_one() {
            tracing::debug!("connection cap reached, every connection busy: closing a new one");
            continue;
        }
        let (id, conn) = registry.add();
        tokio::spawn(connection(
            stream,
            id,
            conn,
            registry.clone(),
            app.clone(),
            tls.clone(),
            limits,
            stop.clone(),
        ));
    }
    drop(listener);
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while registry.len() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One connection: wait for its first byte (or TLS handshake) within the header-read
/// timeout, then serve HTTP/1 on it.
#[allow(clippy::too_many_arguments)]
async fn connection(
    stream: TcpStream,
    id: u64,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    enum Ready {
        Plain(TcpStream),
        Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    }
    let _ = stream.set_nodelay(true);
    let first = async {
        match tls {
            None => stream.readable().await.ok().map(|()| Ready::Plain(stream)),
            Some(acceptor) => acceptor
                .accept(stream)
                .await
                .ok()
                .map(|s| Ready::Tls(Box::new(s))),
        }
    };
    let ready = tokio::select! {
        r = tokio::time::timeout(limits.header_read_timeout, first) => r.ok().flatten(),
        () = conn.evict.notified() => None,
        _ = stop.wait_for(|s| *s) => None,
    };
    match ready {
        Some(Ready::Plain(s)) => {
            let io = TokioIo::new(Watched::new(s, &conn, &registry));
            http(io, &conn, &registry, app, limits, stop).await;
        }
        Some(Ready::Tls(s)) => {
            let io = TokioIo::new(Watched::new(s, &conn, &registry));
            http(io, &conn, &registry, app, limits, stop).await;
        }
        None => {}
    }
    registry.remove(id);
}

/// When the connection expires if nothing changes (`None`: a request is in flight and
/// its answer is being written).
fn deadline(conn: &Conn, registry: &Registry, limits: &Limits) -> Option<Instant> {
    let cut = conn.cut_since.load(Ordering::Acquire);
    if cut > 0 {
        // Told its streams to end: it closes when their answer is done (`http`), or at
        // the grace.
        return Some(registry.epoch + Duration::from_millis(cut - 1) + CUT_GRACE);
    }
    let stalled = conn.stalled_since.load(Ordering::Acquire);
    let stall = (stalled > 0)
        .then(|| registry.epoch + Duration::from_millis(stalled - 1) + limits.write_stall_timeout);
    if conn.inflight.load(Ordering::Acquire) > 0 {
        return stall;
    }
    let since = Duration::from_millis(conn.idle_since.load(Ordering::Acquire));
    let timeout = if conn.requested.load(Ordering::Acquire) {
        limits.idle_timeout
    } else {
        limits.header_read_timeout
    };
    let idle = registry.epoch + since + timeout;
    Some(stall.map_or(idle, |s| s.min(idle)))
}

/// At a write stall's deadline: tells the connection's event streams to end, once, and
/// gives them [`CUT_GRACE`] (true); false when it has none listening or already told them
/// (the connection closes).
fn ask_streams_to_end(conn: &Conn, registry: &Registry, limits: &Limits) -> bool {
    let stalled = conn.stalled_since.load(Ordering::Acquire) > 0;
    if !stalled || conn.cut_since.load(Ordering::Acquire) > 0 || conn.cut.0.receiver_count() == 0 {
        return false;
    }
    conn.cut_since.store(registry.ms() + 1, Ordering::Release);
    conn.cut.0.send_replace(Some(limits.write_stall_timeout));
    true
}

/// The connection's plaintext socket (above TLS), watched on its way to hyper:
/// - **writes that stall**: the first `Pending` write after a `Ready` one starts the stall
///   clock in its [`Conn`] (and wakes the connection's loop to set its deadline), a
///   `Ready` one stops it;
/// - **bare LF in a request head**: every line of a request head must end in CRLF
///   (RFC 9112 section 2.2 lets a server refuse a lone LF, and a lone LF read one way here
///   and another way by a proxy in front is how requests get smuggled). A head is watched
///   from the first byte after the previous answer was done ([`Conn::expect_head`]) to its
///   empty line, so bodies are never looked at; a lone LF in it is replaced by a NUL byte,
///   which hyper's parser refuses with 400 and a closed connection.
struct Watched<I> {
    io: I,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    head: HeadScan,
}

/// Where a request head's scan is.
#[derive(Debug, Default)]
struct HeadScan {
    /// Inside a head.
    active: bool,
    /// The byte before was CR.
    prev_cr: bool,
    /// The line so far is empty (a CRLF now ends the head).
    blank: bool,
}

impl HeadScan {
    /// Scans `bytes` (just read), turning a lone LF into NUL and ending the scan there.
    fn scan(&mut self, bytes: &mut [u8]) {
        for b in bytes.iter_mut() {
            if !self.active {
                return;
            }
            match *b {
                b'\n' if !self.prev_cr => {
                    *b = 0;
                    self.active = false;
                }
                b'\n' => {
                    self.active = !self.blank;
                    self.blank = true;
                    self.prev_cr = false;
                }
                b'\r' => self.prev_cr = true,
                _ => {
                    self.prev_cr = false;
                    self.blank = false;
                }
            }
        }
    }
}

impl<I> Watched<I> {
    fn new(io: I, conn: &Arc<Conn>, registry: &Arc<Registry>) -> Watched<I> {
        Watched {
            io,
            conn: conn.clone(),
            registry: registry.clone(),
            head: HeadScan::default(),
        }
    }

    fn note<T>(&self, poll: &std::task::Poll<T>) {
        let stalled = &self.conn.stalled_since;
        if poll.is_pending() {
            if stalled.load(Ordering::Relaxed) == 0 {
                stalled.store(self.registry.ms() + 1, Ordering::Release);
                self.conn.changed.notify_one();
            }
        } else if stalled.load(Ordering::Relaxed) != 0 {
            stalled.store(0, Ordering::Release);
        }
    }
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.conn.expect_head.swap(false, Ordering::AcqRel) {
            self.head = HeadScan {
                active: true,
                ..HeadScan::default()
            };
        }
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if poll.is_ready() {
            self.head.scan(&mut buf.filled_mut()[before..]);
        }
        poll
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.note(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.note(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.note(&poll);
        poll
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

async fn http<I>(
    io: I,
    conn: &Arc<Conn>,
    registry: &Arc<Registry>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = {
        let (conn, registry) = (conn.clone(), registry.clone());
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let busy = Busy::start(&conn, &registry);
            req.extensions_mut().insert(conn.cut.clone());
            let mut app = app.clone();
            async move {
                let Ok(resp) = app.call(req).await;
                // The response body carries the guard: a long-poll or a stream stays "in
                // flight" until its body is done or dropped.
                Ok::<_, Infallible>(resp.map(move |body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_flight = &busy;
                        frame
                    }))
                }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our own deadlines (above) replace hyper's header timer, which would also cut idle
    // keep-alive connections at the header-read timeout.
    // A client that does not read holds at most this much of its answer here (hyper's
    // default is about 400 KiB a connection); the kernel's socket buffer holds the rest.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(WRITE_BUFFER)
        .keep_alive(true);
    let served = builder.serve_connection(io, svc);
    tokio::pin!(served);
    let mut stopping = false;
    loop {
        let sleep = match deadline(conn, registry, &limits) {
            Some(at) => tokio::time::sleep_until(at.into()),
            None => tokio::time::sleep(Duration::from_secs(86_400)),
        };
        tokio::select! {
            _ = &mut served => return,
            () = conn.evict.notified() => return,
            () = conn.changed.notified() => {
                let cut = conn.cut_since.load(Ordering::Acquire) > 0;
                if cut && !stopping && conn.inflight.load(Ordering::Acquire) == 0 {
                    // The stream's last message is out of its body: hyper writes what it
                    // holds and closes.
                    stopping = true;
                    served.as_mut().graceful_shutdown();
                }
            }
            () = sleep => {
                let due = deadline(conn, registry, &limits).is_some_and(|at| at <= Instant::now());
                if due && !ask_streams_to_end(conn, registry, &limits) {
                    return;
                }
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}
