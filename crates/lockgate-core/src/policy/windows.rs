//! The validated forms of per-value pools, time-windowed limits and maintenance windows
//! (docs `policy.md`, "Pools per attribute value", "Time windows", "Maintenance windows").
//!
//! Invariants (given by validation):
//! - a per-value pool has a non-empty `per` without `node`, and its name is not also a
//!   plain or per-node pool;
//! - every window parsed ([`DailyWindow`]); maintenance names are unique and valid scope
//!   names.
//!
//! Which number holds at an instant is not decided here: the policy has no clock. The
//! engine (`engine/windows.rs`) reads the windows in its time zone at `now`.

use super::{Limit, PerKey, Policy};
use crate::daily::DailyWindow;
use crate::selector::Selector;

/// A `[resources.<name>]` with `per`: each value of the `per` keys has its own pool of
/// `capacity` (scope `pool:<name>[k=v]`). A job without one of the keys takes nothing
/// from it, as a `[[limit]]` with `per` does not count a job without the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuePool {
    /// Partition keys (non-empty).
    pub per: Vec<PerKey>,
    /// Each value's capacity.
    pub capacity: u64,
}

/// One entry of a `windows` list: while `when` is active, the number is `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitWindow {
    /// When it is active, in the engine's time zone.
    pub when: DailyWindow,
    /// The number while it is active (for every partition of a limit).
    pub max: u32,
}

/// One `[[maintenance]]`: while `when` is active, no job it matches is admitted (to
/// prepare or to run); running jobs go on.
#[derive(Debug, Clone, PartialEq)]
pub struct Maintenance {
    /// Unique name; the scope is `maintenance:<name>`.
    pub name: String,
    /// When it is active, in the engine's time zone.
    pub when: DailyWindow,
    /// Which jobs it holds; `None`: every job.
    pub matcher: Option<Selector>,
}

impl Limit {
    /// The loosest number the limit ever sets for a partition (its own, or a window's if
    /// larger); `None` when it is ever unlimited.
    pub fn loosest_for(&self, values: &[String]) -> Option<u32> {
        let own = self.limit_for(values)?;
        Some(self.windows.iter().map(|w| w.max).fold(own, u32::max))
    }
}

impl Policy {
    /// The loosest `[global]` number (its `max_running`, or a window's if larger); `None`
    /// when it is ever unlimited.
    pub fn loosest_global(&self) -> Option<u32> {
        let own = self.global.max_running?;
        Some(
            self.global
                .windows
                .iter()
                .map(|w| w.max)
                .fold(own, u32::max),
        )
    }

    /// Whether any rule of the policy changes with the time of day.
    pub fn has_windows(&self) -> bool {
        !self.global.windows.is_empty()
            || !self.maintenance.is_empty()
            || self.limits.iter().any(|l| !l.windows.is_empty())
    }
}
