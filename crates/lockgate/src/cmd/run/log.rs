//! `lockgate run --log`: the command's stdout and stderr go through pipes; a reader
//! thread per pipe copies the bytes to our own stdout or stderr unchanged and hands every
//! line to the job's [`LogShipper`] (`lockgate_client::logs`: bounded, never blocks).
//!
//! The last lines are sent before the job is finished (the server takes lines only from
//! the job's current holder), waiting at most [`FINAL_FLUSH`]: a slow server costs at
//! most that much of the slot, and the lines it did not take are reported on stderr.

use lockgate_api::{JobView, LogStream};
use lockgate_client::logs::spawn_copy;
use lockgate_client::{Client, LogShipper};
use std::process::Child;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest wait for the last lines to reach the server before the job is finished.
pub const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// How long the readers may take to see the end of their pipes once the command exited
/// (a background grandchild may hold a pipe open for ever).
const READERS_GRACE: Duration = Duration::from_millis(500);

/// Whether `lockgate run` sends the output: `--log`, `--no-log`, else the kind's
/// `[kinds.NAME].log` in the policy, as the submit answer says (`job.log`; a server older
/// than that field says false).
pub fn wanted(job: &JobView, log: bool, no_log: bool) -> bool {
    if log || no_log {
        return log;
    }
    job.log
}

/// The readers and the shipper of one run of the command.
pub struct Logging {
    shipper: LogShipper,
    readers: Vec<JoinHandle<()>>,
}

impl Logging {
    /// Takes the child's piped stdout and stderr and starts copying them.
    pub fn start(child: &mut Child, client: Client, id: u64, token: u64) -> Logging {
        let shipper = LogShipper::start(client, id, token);
        let mut readers = Vec::new();
        if let Some(p) = child.stdout.take() {
            readers.push(spawn_copy(p, LogStream::Stdout, shipper.sink(), true));
        }
        if let Some(p) = child.stderr.take() {
            readers.push(spawn_copy(p, LogStream::Stderr, shipper.sink(), true));
        }
        Logging { shipper, readers }
    }

    /// Once the command has exited: lets the readers reach the end of the pipes, sends
    /// the last lines, and says on stderr what the server did not get.
    pub fn finish(self, id: u64) {
        let start = Instant::now();
        for r in self.readers {
            while !r.is_finished() && start.elapsed() < READERS_GRACE {
                std::thread::sleep(Duration::from_millis(2));
            }
            if r.is_finished() {
                let _ = r.join();
            }
        }
        match self.shipper.finish(FINAL_FLUSH) {
            None => eprintln!(
                "lockgate: job {id}: the server did not take the last lines of the output within {FINAL_FLUSH:?}"
            ),
            Some(s) if s.unreported > 0 => {
                let why = s.refused.unwrap_or_else(|| "the server was slow or down".into());
                eprintln!(
                    "lockgate: job {id}: {} lines of the output were not stored ({why})",
                    s.unreported
                );
            }
            Some(_) => {}
        }
    }
}
