//! What a job's processes used, as the API shows it: the holder's totals
//! ([`lockgate_core::Usage`]) with the rates counted from them.

use lockgate_core::Usage;
use serde::{Deserialize, Serialize};

/// A job's usage in [`crate::JobView::usage`]: the totals its holder last reported and the
/// rates in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageView {
    /// The totals, counted from the start of the attempt's command.
    #[serde(flatten)]
    pub totals: Usage,
    /// Bytes read per second over the whole attempt so far (`read_bytes` / elapsed).
    pub mean_read_per_s: u64,
    /// Bytes written per second over the whole attempt so far.
    pub mean_written_per_s: u64,
    /// Bytes read per second between the holder's last two reports (a running job whose
    /// holder has reported twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_per_s: Option<u64>,
    /// Bytes written per second between the last two reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_per_s: Option<u64>,
}

impl UsageView {
    /// The view of `totals`, without the recent rates (they need two reports).
    pub fn of(totals: &Usage) -> UsageView {
        UsageView {
            totals: *totals,
            mean_read_per_s: per_second(totals.read_bytes, totals.elapsed_ms),
            mean_written_per_s: per_second(totals.written_bytes, totals.elapsed_ms),
            read_per_s: None,
            written_per_s: None,
        }
    }

    /// With the rates between an earlier report `before` and the totals.
    pub fn since(mut self, before: &Usage) -> UsageView {
        let now = &self.totals;
        if let Some(ms) = now
            .elapsed_ms
            .checked_sub(before.elapsed_ms)
            .filter(|&d| d > 0)
        {
            let read = now.read_bytes.saturating_sub(before.read_bytes);
            let written = now.written_bytes.saturating_sub(before.written_bytes);
            self.read_per_s = Some(per_second(read, ms));
            self.written_per_s = Some(per_second(written, ms));
        }
        self
    }
}

/// A node's pressure and network counters, as a holder on it sampled them from the kernel
/// (sent with a lease renewal, [`crate::LeaseRequest::node`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeSample {
    /// CPU pressure: the share of the last 10 s, in percent, in which some task stalled
    /// waiting for a CPU (`some avg10` of `/proc/pressure/cpu`). Absent where the kernel
    /// keeps no pressure information; a value outside 0-100 is dropped by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_some: Option<f64>,
    /// IO pressure, some task stalled (`/proc/pressure/io`, `some avg10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_some: Option<f64>,
    /// IO pressure, every task stalled (`full avg10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_full: Option<f64>,
    /// Memory pressure, some task stalled (`/proc/pressure/memory`, `some avg10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_some: Option<f64>,
    /// Memory pressure, every task stalled (`full avg10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_full: Option<f64>,
    /// Bytes received on every interface but loopback since the node started
    /// (`/proc/net/dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_rx_bytes: Option<u64>,
    /// Bytes sent on every interface but loopback since the node started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_tx_bytes: Option<u64>,
}

impl NodeSample {
    /// The sample with every pressure outside 0-100 (or not a number) left out.
    pub fn sane(mut self) -> NodeSample {
        for p in [
            &mut self.cpu_some,
            &mut self.io_some,
            &mut self.io_full,
            &mut self.memory_some,
            &mut self.memory_full,
        ] {
            *p = p.filter(|v| (0.0..=100.0).contains(v));
        }
        self
    }
}

/// A node's last sample in [`crate::NodeView::sample`]: when it came, what it said, and the
/// network rates since the sample before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeSampleView {
    /// When the server received it (RFC 3339).
    pub at: String,
    /// The sample.
    #[serde(flatten)]
    pub sample: NodeSample,
    /// Bytes received per second since the sample before (absent after one sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_rx_per_s: Option<u64>,
    /// Bytes sent per second since the sample before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_tx_per_s: Option<u64>,
}

/// `bytes` over `ms` milliseconds, per second (0 over no time).
pub fn per_second(bytes: u64, ms: u64) -> u64 {
    if ms == 0 {
        return 0;
    }
    let rate = u128::from(bytes) * 1000 / u128::from(ms);
    u64::try_from(rate).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_count_on_the_holders_clock() {
        let before = Usage {
            elapsed_ms: 2_000,
            read_bytes: 1_000,
            written_bytes: 4_000_000,
            ..Usage::default()
        };
        let now = Usage {
            elapsed_ms: 4_000,
            read_bytes: 3_000,
            written_bytes: 10_000_000,
            ..Usage::default()
        };
        let v = UsageView::of(&now).since(&before);
        assert_eq!(v.mean_written_per_s, 2_500_000);
        assert_eq!(v.written_per_s, Some(3_000_000));
        assert_eq!(v.read_per_s, Some(1_000));
        // The same report twice gives no recent rate rather than a division by zero.
        assert_eq!(UsageView::of(&now).since(&now).written_per_s, None);
        assert_eq!(per_second(5, 0), 0);
        assert_eq!(per_second(u64::MAX, 1), u64::MAX);
    }
}
