//! Event streams under a hostile tenant (`longlived.rs`, `events/routes.rs`): a cap on
//! open streams per token answered 429 with `Retry-After`, and catch-up in bounded pages
//! that read past what the token may not see.

use crate::harness::*;
use lockgate_api::Role;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Opens `GET /v1/events/stream` as `token` and reads the answer's head: the socket and
/// the head's lines.
fn open_stream(s: &TestServer, token: &str) -> (BufReader<TcpStream>, Vec<String>) {
    open_stream_with(s, token, "")
}

/// [`open_stream`] with `extra` header lines (each ending in CRLF).
fn open_stream_with(
    s: &TestServer,
    token: &str,
    extra: &str,
) -> (BufReader<TcpStream>, Vec<String>) {
    let addr = s.url.trim_start_matches("http://");
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        sock,
        "GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n{extra}\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(sock);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    (reader, head)
}

/// A new submitter token's secret.
fn submitter_token(s: &TestServer, name: &str) -> String {
    let create = lockgate_api::TokenCreate {
        name: name.into(),
        role: Role::Submitter,
        node: None,
    };
    s.admin().create_token(&create).unwrap().token
}

#[test]
fn one_token_past_its_stream_cap_gets_429_with_retry_after_and_others_are_served() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "");
    let alice = submitter_token(&s, "alice");
    let cap = lockgate_server::longlived::STREAMS_PER_TOKEN;
    let open: Vec<_> = (0..cap)
        .map(|i| {
            let (reader, head) = open_stream(&s, &alice);
            assert!(head[0].contains(" 200 "), "stream {i}: {head:?}");
            reader
        })
        .collect();
    let (mut refused, head) = open_stream(&s, &alice);
    assert!(head[0].contains(" 429 "), "{head:?}");
    assert!(
        head.iter()
            .any(|h| h.eq_ignore_ascii_case("retry-after: 5")),
        "{head:?}"
    );
    let mut body = String::new();
    let _ = refused.read_to_string(&mut body);
    assert!(
        body.contains("quota_exceeded") && body.contains(&format!("({cap})")),
        "{body}"
    );
    // Another token is not held back by alice's streams.
    let (_, head) = open_stream(&s, &s.admin);
    assert!(head[0].contains(" 200 "), "{head:?}");
    drop(open);
}

#[test]
fn a_submitter_s_stream_replays_its_own_events_from_past_the_first_pages() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 0\n");
    // Over two catch-up pages of events alice may not see, then one of hers.
    let admin = s.admin();
    for _ in 0..600 {
        admin.submit(&job("backup", &[])).unwrap();
    }
    let alice = submitter_token(&s, "alice");
    let mine = s
        .client(Some(&alice))
        .submit(&job("backup", &[]))
        .unwrap()
        .0;
    let (mut reader, head) = open_stream(&s, &alice);
    assert!(head[0].contains(" 200 "), "{head:?}");
    let start = Instant::now();
    let needle = format!("\"id\":{}", mine.id);
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("an event within 10 s");
        if line.starts_with("data:") && line.contains("\"type\":\"job\"") {
            assert!(line.contains(&needle), "alice sees only her job: {line}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn a_stream_whose_client_stops_reading_is_cut_after_the_write_stall_timeout_and_resumes() {
    let dir = tempdir();
    let hardening = lockgate_server::hardening::Hardening {
        write_stall_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let s = TestServer::open_with(dir.path(), None, hardening);
    s.admin()
        .put_policy(
            "[global]\nmax_running = 0\n[quotas]\nmax_attrs = 32\nmax_attr_value_bytes = 4096\n",
            false,
            None,
        )
        .unwrap();
    let alice = submitter_token(&s, "alice");
    let (mut reader, head) = open_stream(&s, &alice);
    assert!(head[0].contains(" 200 "), "{head:?}");
    // A second stream that never reads again.
    let (mut gone, _) = open_stream(&s, &alice);
    // About 5 MB of alice's events: more than the socket buffers hold while she does not
    // read.
    let big = |i: usize| {
        let mut j = job("backup", &[]);
        j.attrs = (0..30)
            .map(|a| (format!("a{a}"), format!("{i}{}", "x".repeat(4000))))
            .collect();
        j
    };
    let client = s.client(Some(&alice));
    let jobs = 40;
    for i in 0..jobs {
        client.submit(&big(i)).unwrap();
    }
    let submitted = Instant::now();
    // She stops reading for well over the timeout, then reads again within the grace the
    // server gives a stream it ends: after what was written she gets its last message,
    // which says why and where to resume, and the connection closes.
    std::thread::sleep(Duration::from_secs(4));
    let start = Instant::now();
    let (mut ids, mut last, mut cut) = (0, 0u64, None);
    let mut kind = String::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .expect("the server closed the stalled stream (no read timeout)");
        if n == 0 {
            break;
        }
        if let Some(id) = line.strip_prefix("id:") {
            last = id.trim().parse().unwrap();
            ids += 1;
        } else if let Some(k) = line.strip_prefix("event:") {
            kind = k.trim().to_string();
        } else if let Some(d) = line.strip_prefix("data:") {
            if kind == "cut" {
                cut = Some(serde_json::from_str::<lockgate_api::StreamCut>(d.trim()).unwrap());
            }
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    assert!(
        ids > 0 && ids < jobs,
        "cut part-way: {ids} of {jobs} events"
    );
    let cut = cut.expect("the stream's last message says why it ended");
    assert_eq!(cut.reason, "write_stall");
    assert_eq!(cut.resume_after, last, "{cut:?}");
    assert!(
        cut.message.contains("could not be written for 1 s")
            && cut.message.contains(&format!("Last-Event-ID: {last}")),
        "{}",
        cut.message
    );
    // The other never read again: its connection was closed at the end of the grace
    // (what the kernel holds is still there to read, then the end).
    let grace = Duration::from_secs(1) + lockgate_server::listener::CUT_GRACE;
    std::thread::sleep((grace + Duration::from_secs(2)).saturating_sub(submitted.elapsed()));
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut gone, &mut rest)
        .expect("closed after the grace (no read timeout)");
    assert!(
        !String::from_utf8_lossy(&rest).contains("event: cut"),
        "its last message could not be written"
    );
    // Resuming after the last event seen gives the rest, none twice.
    let (mut reader, head) = open_stream_with(&s, &alice, &format!("Last-Event-ID: {last}\r\n"));
    assert!(head[0].contains(" 200 "), "{head:?}");
    let mut rest = 0;
    while ids + rest < jobs {
        let mut line = String::new();
        reader.read_line(&mut line).expect("the rest within 10 s");
        if let Some(id) = line.strip_prefix("id:") {
            assert!(id.trim().parse::<u64>().unwrap() > last);
            rest += 1;
        }
    }
}
