//! Sending a command's output to the server as its job's log, without ever slowing the
//! command down.
//!
//! [`copy_lines`] reads one pipe of the command (stdout or stderr) on its own thread,
//! passes the bytes on unchanged (to the terminal, for `lockgate run`) and hands every
//! line to a [`LogSink`]. The sink puts the line into a bounded buffer
//! ([`BUFFER_LINES`]) and never waits: when the buffer is full the line is counted as
//! dropped. One [`LogShipper`] thread takes the lines out in batches (every
//! [`FLUSH_EVERY`], or sooner when a batch is full) and posts them; a post that fails or
//! takes longer than [`POST_TIMEOUT`] loses its lines, which are counted as dropped too.
//! The next batch carries the count (`dropped`), and the server stores a marker "N lines
//! dropped" in their place.
//!
//! # Invariants
//! - **The command never waits for the log**: [`LogSink::push`] is a `try_send`; a slow or
//!   absent server costs lines, never the command's time or its slot.
//! - **Order is kept**: one channel, one sender thread, batches posted one at a time.
//! - **Every dropped line is counted** and reported with the next batch that gets through
//!   (or the last one, sent by [`LogShipper::finish`]).
//! - Once the server says the job is no longer held (`lease_lost`, 403, 404), nothing more
//!   is sent: the rest would be refused too.

use crate::Client;
use lockgate_api::{LogBatch, LogLineIn, LogStream, MAX_LOG_BATCH_LINES, MAX_LOG_LINE_BYTES};
use lockgate_core::Timestamp;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines waiting to be sent, at most (about 16 MiB at the longest lines; usually far less).
pub const BUFFER_LINES: usize = 4096;

/// A batch is sent at least this often while lines arrive.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// One post may take this long; after that its lines are dropped (and counted).
pub const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// A batch holds at most this many bytes of text (the server's body limit is above it).
const BATCH_BYTES: usize = 512 * 1024;

/// Where a reader puts lines: cheap to clone, never blocks.
#[derive(Debug, Clone)]
pub struct LogSink {
    tx: SyncSender<LogLineIn>,
    dropped: Arc<AtomicU64>,
}

impl LogSink {
    /// Queues one line (cut to [`MAX_LOG_LINE_BYTES`]); counts it as dropped when the
    /// buffer is full or the shipper has stopped.
    pub fn push(&self, stream: LogStream, text: &str) {
        let line = LogLineIn {
            at: lockgate_api::time::format(Timestamp(wall_ms())),
            stream,
            text: cut(text).to_string(),
        };
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// What the shipper did, once it has finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shipped {
    /// Lines the server accepted.
    pub sent: u64,
    /// Lines dropped (buffer full, server slow or down, job no longer held) and not yet
    /// reported to the server by a marker.
    pub unreported: u64,
    /// Why the server refused the log, when it did (nothing more was sent after that).
    pub refused: Option<String>,
}

/// The sender thread of one job's log. See the module docs.
#[derive(Debug)]
pub struct LogShipper {
    sink: Option<LogSink>,
    thread: JoinHandle<Shipped>,
}

impl LogShipper {
    /// Starts sending lines to job `id`'s log with the holder's lease `token`.
    pub fn start(client: Client, id: u64, token: u64) -> LogShipper {
        let (tx, rx) = mpsc::sync_channel(BUFFER_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let sink = LogSink {
            tx,
            dropped: dropped.clone(),
        };
        let thread = std::thread::spawn(move || ship(&client, id, token, &rx, &dropped));
        LogShipper {
            sink: Some(sink),
            thread,
        }
    }

    /// A sink for a reader thread.
    pub fn sink(&self) -> LogSink {
        self.sink.clone().expect("a running shipper has its sink")
    }

    /// Sends what is buffered (and the count of dropped lines) once every sink is gone,
    /// waiting at most `within`; `None` when that was not enough (the thread is left to
    /// end with the process).
    pub fn finish(mut self, within: Duration) -> Option<Shipped> {
        self.sink = None;
        let start = Instant::now();
        while !self.thread.is_finished() {
            if start.elapsed() >= within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.thread.join().ok()
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `text` cut to at most [`MAX_LOG_LINE_BYTES`] bytes on a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= MAX_LOG_LINE_BYTES {
        return text;
    }
    let mut end = MAX_LOG_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The sender loop: a batch at a time until every sink is gone and the buffer is empty.
fn ship(
    client: &Client,
    id: u64,
    token: u64,
    rx: &mpsc::Receiver<LogLineIn>,
    dropped: &AtomicU64,
) -> Shipped {
    let mut out = Shipped::default();
    loop {
        let (lines, open) = next_batch(rx);
        let lost = dropped.swap(0, Ordering::Relaxed);
        if out.refused.is_some() {
            out.unreported += lost + lines.len() as u64;
        } else if !lines.is_empty() || lost > 0 {
            let n = lines.len() as u64;
            let batch = LogBatch {
                token,
                dropped: lost,
                lines,
            };
            match client.post_logs(id, &batch, POST_TIMEOUT) {
                Ok(_) => out.sent += n,
                Err(e) if e.is_temporary() => {
                    dropped.fetch_add(n + lost, Ordering::Relaxed);
                }
                Err(e) => {
                    out.refused = Some(e.to_string());
                    out.unreported += n + lost;
                }
            }
        }
        if !open {
            out.unreported += dropped.swap(0, Ordering::Relaxed);
            return out;
        }
    }
}

/// The next batch: waits up to [`FLUSH_EVERY`] for lines, then takes what is there (up
/// to the batch bounds); `false` once every sink is gone and the buffer is empty.
fn next_batch(rx: &mpsc::Receiver<LogLineIn>) -> (Vec<LogLineIn>, bool) {
    let mut lines = Vec::new();
    let mut bytes = 0;
    let deadline = Instant::now() + FLUSH_EVERY;
    while lines.len() < MAX_LOG_BATCH_LINES && bytes < BATCH_BYTES {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(l) => {
                bytes += l.text.len();
                lines.push(l);
            }
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return (lines, false),
        }
    }
    (lines, true)
}

/// Copies `pipe` to `tee` (when given) byte for byte, and hands each line (without its
/// newline; a last line without one too) to `on_line`. Returns at the pipe's end or a read
/// error. A line longer than [`MAX_LOG_LINE_BYTES`] is handed on in pieces.
pub fn copy_lines(
    mut pipe: impl Read,
    mut tee: Option<&mut dyn Write>,
    mut on_line: impl FnMut(&str),
) {
    let mut buf = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line);
        on_line(text.strip_suffix('\r').unwrap_or(&text));
        line.clear();
    };
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let Some(t) = tee.as_mut() {
            // The terminal going away must not stop the log (nor the command).
            if t.write_all(&buf[..n]).and_then(|()| t.flush()).is_err() {
                tee = None;
            }
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&mut line);
            } else {
                line.push(b);
                if line.len() >= MAX_LOG_LINE_BYTES {
                    emit(&mut line);
                }
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line);
    }
}

/// [`copy_lines`] on a thread of its own, into `sink` as `stream`, teeing to our own
/// stdout or stderr (the one that matches `stream`) when `tee` is true.
pub fn spawn_copy(
    pipe: impl Read + Send + 'static,
    stream: LogStream,
    sink: LogSink,
    tee: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut out: Box<dyn Write> = match stream {
            LogStream::Stderr => Box::new(std::io::stderr()),
            _ => Box::new(std::io::stdout()),
        };
        let tee: Option<&mut dyn Write> = if tee { Some(&mut *out) } else { None };
        copy_lines(pipe, tee, |l| sink.push(stream, l));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_teed_byte_for_byte_and_a_last_line_without_newline_is_kept() {
        let input = b"one\r\ntwo\n\nthree";
        let mut tee = Vec::new();
        let mut lines = Vec::new();
        copy_lines(&input[..], Some(&mut tee), |l| lines.push(l.to_string()));
        assert_eq!(tee, input);
        assert_eq!(lines, ["one", "two", "", "three"]);
    }

    #[test]
    fn a_full_buffer_drops_and_counts_instead_of_waiting() {
        let (tx, rx) = mpsc::sync_channel(2);
        let sink = LogSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        let start = Instant::now();
        for i in 0..10 {
            sink.push(LogStream::Stdout, &format!("line {i}"));
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(sink.dropped.load(Ordering::Relaxed), 8);
        assert_eq!(rx.try_recv().unwrap().text, "line 0");
        let long = "é".repeat(MAX_LOG_LINE_BYTES);
        assert!(cut(&long).len() <= MAX_LOG_LINE_BYTES);
    }
}

#[cfg(test)]
mod absent_server {
    use super::*;

    #[test]
    fn a_server_that_is_down_costs_lines_never_the_writer_and_every_line_is_counted() {
        // A port nothing listens on: every post fails at once (connection refused).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = Client::new(&format!("http://127.0.0.1:{port}"), None).unwrap();
        let shipper = LogShipper::start(client, 1, 1);
        let sink = shipper.sink();
        let start = Instant::now();
        for i in 0..10_000 {
            sink.push(LogStream::Stdout, &format!("line {i}"));
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        drop(sink);
        let shipped = shipper.finish(Duration::from_secs(10)).expect("finished");
        assert_eq!(shipped.sent, 0);
        assert_eq!(shipped.unreported, 10_000);
    }
}
