//! What a job's processes used, as its holder measured it from the kernel.
//!
//! A holder (`lockgate run`, a hook's holder, an agent) samples its command's whole
//! process group and sends the totals with each lease renewal and with the finish; the
//! engine keeps the last report on the job ([`crate::Job::usage`]), so a finished job's
//! record holds what it read, wrote and used. The totals count from the start of the
//! attempt's command (both stages of a two-stage job, one after the other).
//!
//! # Invariants
//! - Only the lease's holder reports: the engine takes a report with the lease's token
//!   only (the same check as a renewal), and a refused report changes nothing.
//! - Totals never go backwards within one lease: a report is folded into the last one
//!   counter by counter with `max` ([`Usage::merge`]), so a late or reordered report (a
//!   renewal retried after a timeout) cannot undo what an earlier one said. A new
//!   attempt (a new lease) starts from its own first report.

use serde::{Deserialize, Serialize};

/// Totals for one attempt of a job, counted from the start of its command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Milliseconds from the command's start to this sample, on the holder's clock: rates
    /// are counted on it, so a slow network between holder and server does not skew them.
    pub elapsed_ms: u64,
    /// Bytes its processes read with read-like calls: files, pipes and sockets alike
    /// (`rchar` in `/proc/PID/io`).
    pub read_bytes: u64,
    /// Bytes its processes wrote with write-like calls: files, pipes and sockets alike
    /// (`wchar`).
    pub written_bytes: u64,
    /// Bytes the kernel fetched from storage for it (`read_bytes`; page-cache hits are
    /// not counted).
    pub disk_read_bytes: u64,
    /// Bytes it caused to be sent to storage (`write_bytes` less
    /// `cancelled_write_bytes`).
    pub disk_written_bytes: u64,
    /// CPU time, user and system, in milliseconds.
    pub cpu_ms: u64,
    /// Resident memory of its live processes at the sample, in bytes.
    pub rss_bytes: u64,
    /// The largest `rss_bytes` of any sample so far.
    pub peak_rss_bytes: u64,
    /// Its live processes at the sample.
    pub processes: u32,
}

impl Usage {
    /// `self` updated by a later report `next`: the totals and the peak are the larger of
    /// the two (they never go backwards), the current memory and process count are
    /// `next`'s when it is the later sample.
    pub fn merge(&self, next: &Usage) -> Usage {
        let later = next.elapsed_ms >= self.elapsed_ms;
        let (now, then) = if later { (next, self) } else { (self, next) };
        Usage {
            elapsed_ms: now.elapsed_ms,
            read_bytes: self.read_bytes.max(next.read_bytes),
            written_bytes: self.written_bytes.max(next.written_bytes),
            disk_read_bytes: self.disk_read_bytes.max(next.disk_read_bytes),
            disk_written_bytes: self.disk_written_bytes.max(next.disk_written_bytes),
            cpu_ms: self.cpu_ms.max(next.cpu_ms),
            rss_bytes: now.rss_bytes,
            peak_rss_bytes: self
                .peak_rss_bytes
                .max(next.peak_rss_bytes)
                .max(now.rss_bytes)
                .max(then.rss_bytes),
            processes: now.processes,
        }
    }

    /// Every counter of the two added (the memory and processes of two processes side by
    /// side), the peak the larger.
    pub fn sum(&self, other: &Usage) -> Usage {
        Usage {
            elapsed_ms: self.elapsed_ms.saturating_add(other.elapsed_ms),
            read_bytes: self.read_bytes.saturating_add(other.read_bytes),
            written_bytes: self.written_bytes.saturating_add(other.written_bytes),
            disk_read_bytes: self.disk_read_bytes.saturating_add(other.disk_read_bytes),
            disk_written_bytes: self
                .disk_written_bytes
                .saturating_add(other.disk_written_bytes),
            cpu_ms: self.cpu_ms.saturating_add(other.cpu_ms),
            rss_bytes: self.rss_bytes.saturating_add(other.rss_bytes),
            peak_rss_bytes: self.peak_rss_bytes.max(other.peak_rss_bytes),
            processes: self.processes.saturating_add(other.processes),
        }
    }

    /// `self` followed by a later stage's totals `next` (counted from that stage's own
    /// start): the sum of the two, the peak the larger, the current values `next`'s.
    pub fn then(&self, next: &Usage) -> Usage {
        Usage {
            rss_bytes: next.rss_bytes,
            processes: next.processes,
            ..self.sum(next)
        }
    }
}

/// A number of bytes for people, in binary units: `512 B`, `1.5 KiB`, `8.0 MiB`, `1.2 GiB`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_for_people() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(8 << 20), "8.0 MiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }

    fn at(ms: u64, written: u64, rss: u64) -> Usage {
        Usage {
            elapsed_ms: ms,
            written_bytes: written,
            rss_bytes: rss,
            peak_rss_bytes: rss,
            processes: 1,
            ..Usage::default()
        }
    }

    #[test]
    fn a_late_report_never_undoes_an_earlier_one() {
        let first = at(1_000, 500, 10);
        let second = at(2_000, 900, 30);
        let merged = first.merge(&second);
        assert_eq!(merged.written_bytes, 900);
        assert_eq!(merged.elapsed_ms, 2_000);
        // The earlier report arrives again after the later one (a retried renewal).
        let again = merged.merge(&first);
        assert_eq!(again, merged);
        assert_eq!(again.rss_bytes, 30, "the later sample's memory stays");
        assert_eq!(again.peak_rss_bytes, 30);
    }

    #[test]
    fn a_second_stage_adds_to_the_first() {
        let prepare = at(1_000, 500, 50);
        let run = at(3_000, 700, 20);
        let both = prepare.then(&run);
        assert_eq!(both.elapsed_ms, 4_000);
        assert_eq!(both.written_bytes, 1_200);
        assert_eq!(both.rss_bytes, 20);
        assert_eq!(both.peak_rss_bytes, 50);
    }
}
