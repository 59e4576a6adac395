//! Measuring a command's work from the kernel, without its help: the totals of its whole
//! process group ([`lockgate_core::Usage`]) read from `/proc`, for the holder to send with
//! its lease renewals and its finish.
//!
//! # What is counted, and why once
//! A process's `/proc/PID/io` and the CPU fields of `/proc/PID/stat` include the children
//! it has reaped: when a parent waits for a child, the kernel adds the child's totals to
//! the parent's. A child still alive (or a zombie not yet reaped) has its totals in its
//! own files only. So the sum over the group's present members, zombies included, counts
//! every byte once. Members are read in ascending pid order, parents (usually older, so
//! lower pids) before their children: a child reaped mid-scan is then missed for one
//! sample rather than counted twice.
//!
//! # Invariants
//! - **Never backwards**: a sample reports each total as the largest seen so far
//!   ([`Usage::merge`]): a dip (a child reaped mid-scan, an orphan reaped by init)
//!   does not undo what was reported.
//! - **Nothing of the command lost at its exit**: [`crate::child::Supervised`]'s waiter
//!   reads the command's totals while it is a zombie (`waitid` with `WNOWAIT`) and only
//!   then reaps it; those totals hold every descendant it reaped.
//!
//! [`TreeMeter`] measures another way, for a holder whose work is not its child (the
//! hooks' holder, bound to the tool that called the hook): the tool's process and its
//! descendants, counted from the hold's start (their totals then are subtracted). The same
//! rule counts each byte once; what the tool did before the hold is not counted; its final
//! totals are the last sample, since its parent, not the holder, reaps it.
//!
//! Out of reach: a process that leaves the group (`setsid`, a daemon), and the work an
//! orphan (a descendant whose parent exited first) does after the last sample, since init
//! reaps it, not the group. Where `/proc` cannot be read a sample is all zeros: the
//! holder still holds, it only has nothing to report.

use lockgate_core::Usage;
use std::time::Instant;

/// Samples one process group's totals. See the module docs.
#[derive(Debug, Clone)]
pub struct GroupMeter {
    pgid: u32,
    started: Instant,
    /// What the earlier stages of the job used ([`GroupMeter::after`]).
    before: Usage,
    /// The largest totals seen, this stage only.
    seen: Usage,
}

impl GroupMeter {
    /// Measures the group led by `pgid` (the command's pid), started now.
    pub fn new(pgid: u32) -> GroupMeter {
        GroupMeter::after(pgid, Usage::default())
    }

    /// Measures a later stage of a job whose earlier stages used `before`: its samples
    /// are `before` followed by this group's totals ([`Usage::then`]).
    pub fn after(pgid: u32, before: Usage) -> GroupMeter {
        GroupMeter {
            pgid,
            started: Instant::now(),
            before,
            seen: Usage::default(),
        }
    }

    /// The group's totals now.
    pub fn sample(&mut self) -> Usage {
        let mut now = scan(self.pgid);
        now.elapsed_ms = self.elapsed_ms();
        self.fold(now)
    }

    /// Folds in the totals `at_exit` the waiter read from the exited command (see
    /// [`crate::child::Supervised::usage_at_exit`]) and returns the final totals.
    pub fn finish(&mut self, at_exit: Option<Usage>) -> Usage {
        let mut last = at_exit.unwrap_or_default();
        last.elapsed_ms = self.elapsed_ms();
        last.rss_bytes = 0;
        last.processes = 0;
        self.fold(last)
    }

    fn fold(&mut self, now: Usage) -> Usage {
        self.seen = self.seen.merge(&now);
        self.before.then(&self.seen)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Samples a process and its descendants from the start of a hold. See the module docs.
#[derive(Debug, Clone)]
pub struct TreeMeter {
    root: u32,
    started: Instant,
    /// The tree's totals when the hold started.
    base: Usage,
    /// The largest totals seen since, less `base`.
    seen: Usage,
}

impl TreeMeter {
    /// Measures process `root` and its descendants from now on.
    pub fn new(root: u32) -> TreeMeter {
        TreeMeter {
            root,
            started: Instant::now(),
            base: scan_tree(root),
            seen: Usage::default(),
        }
    }

    /// The tree's totals since the start.
    pub fn sample(&mut self) -> Usage {
        let now = scan_tree(self.root);
        let since = Usage {
            elapsed_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            read_bytes: now.read_bytes.saturating_sub(self.base.read_bytes),
            written_bytes: now.written_bytes.saturating_sub(self.base.written_bytes),
            disk_read_bytes: now
                .disk_read_bytes
                .saturating_sub(self.base.disk_read_bytes),
            disk_written_bytes: now
                .disk_written_bytes
                .saturating_sub(self.base.disk_written_bytes),
            cpu_ms: now.cpu_ms.saturating_sub(self.base.cpu_ms),
            ..now
        };
        self.seen = self.seen.merge(&since);
        self.seen
    }
}

/// Every process's pid, in ascending order (parents, usually older, first).
fn pids() -> Vec<u32> {
    let mut pids: Vec<u32> = match std::fs::read_dir("/proc") {
        Ok(d) => d
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => return Vec::new(),
    };
    pids.sort_unstable();
    pids
}

/// The summed totals of the present members of group `pgid` (see the module docs);
/// `elapsed_ms` is left 0.
pub fn scan(pgid: u32) -> Usage {
    let members = pids()
        .into_iter()
        .filter_map(process)
        .filter(|p| p.pgrp == pgid);
    sum(members)
}

/// The summed totals of process `root` and its present descendants; `elapsed_ms` is left
/// 0.
pub fn scan_tree(root: u32) -> Usage {
    let all: Vec<(u32, Process)> = pids()
        .into_iter()
        .filter_map(|pid| Some((pid, process(pid)?)))
        .collect();
    let mut inside = std::collections::HashSet::from([root]);
    // Parents before children by pid; a child with a lower pid (pids wrapped) is found by
    // going over again until nothing is added.
    loop {
        let before = inside.len();
        for (pid, p) in &all {
            if inside.contains(&p.ppid) {
                inside.insert(*pid);
            }
        }
        if inside.len() == before {
            break;
        }
    }
    sum(all
        .into_iter()
        .filter(|(pid, _)| inside.contains(pid))
        .map(|(_, p)| p))
}

fn sum(members: impl Iterator<Item = Process>) -> Usage {
    let mut total = Usage::default();
    for one in members {
        total = total.sum(&one.usage);
    }
    total.peak_rss_bytes = total.rss_bytes;
    total
}

/// The totals of one process, whatever its group: the exited command read by its waiter.
pub fn of_process(pid: u32) -> Option<Usage> {
    process(pid).map(|p| p.usage)
}

/// One process's totals, parent and group.
struct Process {
    ppid: u32,
    pgrp: u32,
    usage: Usage,
}

fn process(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (ppid, pgrp, mut usage) = parse_stat(&stat)?;
    // A process of another user (or one gone since) has no readable io file: its CPU and
    // memory still count.
    if let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) {
        add_io(&mut usage, &io);
    }
    Some(Process { ppid, pgrp, usage })
}

/// The parent, group, CPU time (its own and its reaped children's), resident memory and
/// liveness from a `/proc/PID/stat` line. Its fields after the command's closing
/// parenthesis are numbered from 3 (`state`): `ppid` is 4, `pgrp` 5, `utime`..`cstime`
/// 14..17, `rss` 24.
fn parse_stat(stat: &str) -> Option<(u32, u32, Usage)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    let live = !matches!(fields.first().copied(), Some("Z" | "X" | "x"));
    let ppid = u32::try_from(field(4)?).ok()?;
    let pgrp = u32::try_from(field(5)?).ok()?;
    let ticks = field(14)? + field(15)? + field(16)? + field(17)?;
    let rss_pages = if live { field(24).unwrap_or(0) } else { 0 };
    let usage = Usage {
        cpu_ms: ticks * 1000 / clock_ticks(),
        rss_bytes: rss_pages * page_size(),
        processes: u32::from(live),
        ..Usage::default()
    };
    Some((ppid, pgrp, usage))
}

/// Adds the counters of a `/proc/PID/io` file to `u`.
fn add_io(u: &mut Usage, io: &str) {
    let mut cancelled = 0;
    let mut disk_written = 0;
    for line in io.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(n) = value.trim().parse::<u64>() else {
            continue;
        };
        match key {
            "rchar" => u.read_bytes += n,
            "wchar" => u.written_bytes += n,
            "read_bytes" => u.disk_read_bytes += n,
            "write_bytes" => disk_written = n,
            "cancelled_write_bytes" => cancelled = n,
            _ => {}
        }
    }
    u.disk_written_bytes += disk_written.saturating_sub(cancelled);
}

/// The pressure and network counters of the node this process runs on
/// ([`lockgate_api::NodeSample`]); what the kernel does not offer is left out.
pub fn node_sample() -> lockgate_api::NodeSample {
    let psi = |resource: &str| {
        std::fs::read_to_string(format!("/proc/pressure/{resource}"))
            .ok()
            .map(|text| parse_pressure(&text))
            .unwrap_or_default()
    };
    let (cpu_some, _) = psi("cpu");
    let (io_some, io_full) = psi("io");
    let (memory_some, memory_full) = psi("memory");
    let (rx, tx) = std::fs::read_to_string("/proc/net/dev")
        .ok()
        .map_or((None, None), |text| {
            let (rx, tx) = parse_net_dev(&text);
            (Some(rx), Some(tx))
        });
    lockgate_api::NodeSample {
        cpu_some,
        io_some,
        io_full,
        memory_some,
        memory_full,
        net_rx_bytes: rx,
        net_tx_bytes: tx,
    }
}

/// `avg10` of the `some` and `full` lines of a `/proc/pressure/*` file.
fn parse_pressure(text: &str) -> (Option<f64>, Option<f64>) {
    let avg10 = |kind: &str| {
        let line = text.lines().find(|l| l.starts_with(kind))?;
        let value = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("avg10="))?;
        value.parse().ok()
    };
    (avg10("some "), avg10("full "))
}

/// Bytes received and sent on every interface but loopback, from `/proc/net/dev`: after
/// each `name:` the first number is bytes received, the ninth bytes sent.
fn parse_net_dev(text: &str) -> (u64, u64) {
    let mut total = (0u64, 0u64);
    for line in text.lines() {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == "lo" {
            continue;
        }
        let numbers: Vec<u64> = counters
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if let (Some(rx), Some(tx)) = (numbers.first(), numbers.get(8)) {
            total.0 = total.0.saturating_add(*rx);
            total.1 = total.1.saturating_add(*tx);
        }
    }
    total
}

fn clock_ticks() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_the_name() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194304 100 0 0 0 \
                    250 50 30 20 20 0 1 0 100 1000000 300 18446744073709551615";
        let (ppid, pgrp, u) = parse_stat(line).unwrap();
        assert_eq!((ppid, pgrp), (1, 4242));
        assert_eq!(u.cpu_ms, 350 * 1000 / clock_ticks());
        assert_eq!(u.rss_bytes, 300 * page_size());
        assert_eq!(u.processes, 1);
        let zombie = line.replace(") S 1", ") Z 1");
        let (_, _, z) = parse_stat(&zombie).unwrap();
        assert_eq!((z.rss_bytes, z.processes), (0, 0));
        assert_eq!(z.cpu_ms, u.cpu_ms, "a zombie's CPU time still counts");
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn pressure_and_network_files() {
        let psi = "some avg10=3.25 avg60=1.00 avg300=0.50 total=123\n\
                   full avg10=0.75 avg60=0.10 avg300=0.00 total=45\n";
        assert_eq!(parse_pressure(psi), (Some(3.25), Some(0.75)));
        assert_eq!(parse_pressure("garbage"), (None, None));
        let dev = "Inter-|   Receive                                                |  Transmit\n\
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n\
                   lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n\
                   eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n\
                   veth1: 5 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n";
        assert_eq!(parse_net_dev(dev), (1005, 2007));
        let here = node_sample();
        assert!(here.net_rx_bytes.is_some(), "{here:?}");
    }

    #[test]
    fn an_io_file_counts_cancelled_writes_out() {
        let mut u = Usage::default();
        add_io(
            &mut u,
            "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
             write_bytes: 8192\ncancelled_write_bytes: 4096\n",
        );
        assert_eq!(
            (
                u.read_bytes,
                u.written_bytes,
                u.disk_read_bytes,
                u.disk_written_bytes
            ),
            (10, 20, 4096, 4096)
        );
    }
}
