//! The last lines of a handler's output, for the job's finish message.
//!
//! The handler's stdout and stderr are pipes; one reader thread per pipe keeps the last
//! `n` lines (both streams interleaved in arrival order) and forwards every line to the
//! agent's log at debug level. Reading never blocks the handler: the readers drain the
//! pipes as fast as the handler writes.
//!
//! With a [`LogSink`] ([`Tail::read_logged`]), every line is also sent whole (up to the
//! API's line bound) to the job's log on the server (`lockgate_client::logs`: a bounded
//! buffer that drops and counts lines rather than wait).

use lockgate_api::LogStream;
use lockgate_client::LogSink;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest line kept, in bytes; longer lines are cut (with `...`).
const MAX_LINE: usize = 400;

/// The last lines of output.
#[derive(Debug, Clone)]
pub struct Tail {
    lines: Arc<Mutex<VecDeque<String>>>,
    keep: usize,
}

impl Tail {
    /// Keeps the last `keep` lines.
    pub fn new(keep: usize) -> Tail {
        Tail {
            lines: Arc::new(Mutex::new(VecDeque::new())),
            keep,
        }
    }

    /// Adds a line.
    pub fn push(&self, line: String) {
        if self.keep == 0 {
            return;
        }
        let mut l = self.lines.lock().expect("tail lock");
        if l.len() == self.keep {
            l.pop_front();
        }
        l.push_back(line);
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .expect("tail lock")
            .iter()
            .cloned()
            .collect()
    }

    /// Reads `pipe` line by line into the tail on a thread of its own; `label` prefixes the
    /// debug log lines.
    pub fn read_from(&self, pipe: impl Read + Send + 'static, label: String) -> JoinHandle<()> {
        self.read_logged(pipe, label, LogStream::Stdout, None)
    }

    /// [`Tail::read_from`], also sending every line to `log` as `stream`.
    pub fn read_logged(
        &self,
        pipe: impl Read + Send + 'static,
        label: String,
        stream: LogStream,
        log: Option<LogSink>,
    ) -> JoinHandle<()> {
        let tail = self.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let mut line = String::from_utf8_lossy(&buf).trim_end().to_string();
                if let Some(log) = &log {
                    log.push(stream, &line);
                }
                if line.len() > MAX_LINE {
                    let mut cut = MAX_LINE;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                    line.push_str("...");
                }
                tracing::debug!("{label}: {line}");
                tail.push(line);
            }
        })
    }
}

/// Joins reader threads, giving up after `limit` (a grandchild of the handler may keep
/// the pipe open after the handler exited).
pub fn join_readers(readers: Vec<JoinHandle<()>>, limit: Duration) {
    let start = Instant::now();
    for r in readers {
        while !r.is_finished() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(2));
        }
        if r.is_finished() {
            let _ = r.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines() {
        let t = Tail::new(2);
        let h = t.read_from(&b"one\ntwo\nthree\n"[..], "test".into());
        h.join().unwrap();
        assert_eq!(t.lines(), ["two", "three"]);
    }

    #[test]
    fn cuts_long_lines_on_a_char_boundary() {
        let t = Tail::new(1);
        let long = "é".repeat(300);
        t.read_from(std::io::Cursor::new(long.into_bytes()), "x".into())
            .join()
            .unwrap();
        let l = &t.lines()[0];
        assert!(l.ends_with("...") && l.len() <= MAX_LINE + 3, "{}", l.len());
    }
}
