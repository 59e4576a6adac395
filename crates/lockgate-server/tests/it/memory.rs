//! Memory under a hostile tenant: one submitter opening and resetting a thousand stalled
//! event streams and a thousand job waits, three times, against a server in its own
//! process (its RSS is its own). Every stream catches up through two ~120 KiB jobs. The
//! memory returns because the server's allocator gives freed pages back (`alloc.rs`).

use crate::hardening::{admin_of, spawn_server};
use crate::harness::*;
use lockgate_api::Role;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Streams and waits opened per round.
const EACH: usize = 1000;
/// The most the server may hold while they are open (stated in docs/security.md).
const PEAK_MB: f64 = 200.0;
/// What it may keep a minute after they closed, against the warm start (docs/security.md).
const AFTER: f64 = 1.2;
/// Long enough for the allocator to have purged what was freed (its decay time is 10 s).
const PURGED: Duration = Duration::from_secs(11);

/// The resident set of `pid` in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

/// Sends `request` on a new connection and never reads the answer.
fn stalled(addr: &str, request: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    c
}

/// Closes with a reset (linger 0), as a client that crashed or was killed.
fn reset(c: TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(&c, Some(Duration::ZERO));
    drop(c);
}

/// Kills the child server when the test ends, passed or not (it holds the test's stdout).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_thousand_stalled_streams_and_waits_stay_bounded_and_memory_returns_after() {
    lockgate_server::listener::raise_fd_limit();
    let dir = tempdir();
    let (child, url) = spawn_server(dir.path());
    let pid = child.id();
    let _child = KillOnDrop(child);
    let admin = admin_of(dir.path(), &url);
    admin
        .put_policy(
            "[global]\nmax_running = 0\n[quotas]\nmax_attrs = 32\nmax_attr_value_bytes = 4096\n",
            false,
            None,
        )
        .unwrap();
    let create = lockgate_api::TokenCreate {
        name: "mallory".into(),
        role: Role::Submitter,
        node: None,
    };
    let token = admin.create_token(&create).unwrap().token;
    let mallory = lockgate_client::Client::new(&url, Some(token.clone())).unwrap();
    let mut big = job("backup", &[]);
    big.attrs = (0..30)
        .map(|a| (format!("a{a}"), "x".repeat(4000)))
        .collect();
    let (held, _) = mallory.submit(&big).unwrap();
    mallory.submit(&big).unwrap();
    let addr = url.trim_start_matches("http://").to_string();
    let stream = format!(
        "GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    let wait = format!(
        "GET /v1/jobs/{}/wait?from=queued&timeout_s=300 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n",
        held.id
    );
    // The start is measured warm: after a few streams and waits have filled the caches
    // that stay (SQLite's page cache, the runtime's threads) and the allocator has purged.
    let warm: Vec<TcpStream> = (0..64)
        .flat_map(|_| [stalled(&addr, &stream), stalled(&addr, &wait)])
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    warm.into_iter().for_each(reset);
    std::thread::sleep(PURGED);
    let start = rss_mb(pid);
    let mut peak = start;
    for round in 0..3 {
        let open: Vec<TcpStream> = (0..EACH)
            .flat_map(|_| [stalled(&addr, &stream), stalled(&addr, &wait)])
            .collect();
        // Let the server answer (64 streams, the rest 429) and fill what it buffers.
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_secs(3) {
            peak = peak.max(rss_mb(pid));
            std::thread::sleep(Duration::from_millis(100));
        }
        let t = Instant::now();
        mallory.job(held.id).unwrap_or_else(|e| {
            panic!("round {round}: the server answers while they are open: {e}")
        });
        assert!(t.elapsed() < Duration::from_secs(5), "round {round}");
        open.into_iter().for_each(reset);
    }
    // The memory goes back: within AFTER of the start a minute after at most.
    let after = Instant::now();
    let mut now = rss_mb(pid);
    while now > start * AFTER && after.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        now = rss_mb(pid);
    }
    println!(
        "RSS: {start:.1} MB at the start, peak {peak:.1} MB with {EACH} streams and {EACH} waits open, {now:.1} MB {:.1} s after they closed",
        after.elapsed().as_secs_f64()
    );
    assert!(peak < PEAK_MB, "peak {peak:.1} MB");
    assert!(
        now <= start * AFTER,
        "{now:.1} MB after, {start:.1} MB at the start"
    );
    // Nothing was lost, and the server still serves mallory.
    assert_eq!(mallory.job(held.id).unwrap().id, held.id);
}
