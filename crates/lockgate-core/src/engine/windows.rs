//! Time windows in the engine: which `windows` entry and which `[[maintenance]]` is active
//! now, the limits that follow, and the timer at the next boundary.
//!
//! The engine reads wall-clock times in the time zone it was given
//! ([`Engine::set_time_zone`], UTC by default); it never reads a clock. The state is
//! computed for one instant and holds until the next boundary of any window
//! ([`WindowState::until`]); a [`Timer::Window`] is armed there, so
//! [`Engine::next_deadline`] includes it and the pass that follows applies the new numbers.
//!
//! Invariants:
//! - the limit of every interned `global`, `limit:` and `maintenance:` scope is what
//!   [`Engine::scope_limit`] says for the current state: a refresh that changes a number
//!   updates the scope in place and wakes it (a raised number admits at once, a lowered
//!   one leaves the scope over its limit to drain, as a lowered policy limit does);
//! - the state is refreshed before every admission pass ([`Engine::refresh_windows`] is
//!   O(1) until a boundary is reached), and again from scratch on every rebuild (a policy
//!   change renumbers the limits).
//!
//! Cost: O(1) per pass between boundaries; at a boundary O(W) window occurrences for the W
//! windows of the policy plus O(S) over the interned scopes. Never per queued job.

use super::timers::Timer;
use super::Engine;
use crate::daily::DailyWindow;
use crate::policy::LimitWindow;
use crate::scope::{ScopeId, ScopeKey};
use crate::time::Timestamp;
use jiff::tz::TimeZone;

/// The window that sets a rule's number now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Active {
    /// Position in the rule's `windows`.
    pub window: usize,
    /// Its number.
    pub max: u32,
    /// When this occurrence ends.
    pub until: Timestamp,
}

/// What is active, computed for one instant.
#[derive(Debug, Clone)]
pub(crate) struct WindowState {
    pub zone: TimeZone,
    /// `None` until computed; then the next boundary (`Timestamp(u64::MAX)` when no window
    /// will ever change again).
    pub until: Option<Timestamp>,
    /// `[global].windows`.
    pub global: Option<Active>,
    /// By position in `policy.limits`.
    pub limits: Vec<Option<Active>>,
    /// By position in `policy.maintenance`: when the active occurrence ends.
    pub maintenance: Vec<Option<Timestamp>>,
}

impl Default for WindowState {
    fn default() -> Self {
        WindowState {
            zone: TimeZone::UTC,
            until: None,
            global: None,
            limits: Vec::new(),
            maintenance: Vec::new(),
        }
    }
}

/// The smallest active window of a list (the first of equals), if any.
fn smallest_active(windows: &[LimitWindow], now: Timestamp, zone: &TimeZone) -> Option<Active> {
    let mut best: Option<Active> = None;
    for (i, w) in windows.iter().enumerate() {
        let Some(until) = w.when.active_until(now, zone) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| w.max < b.max) {
            best = Some(Active {
                window: i,
                max: w.max,
                until,
            });
        }
    }
    best
}

impl Engine {
    /// Sets the time zone the windows' wall-clock times are read in (an IANA name such as
    /// `Europe/Vienna`, or `UTC`, the default): the server passes its local zone, as it does
    /// for schedules. Takes effect at the next operation.
    ///
    /// # Errors
    /// The zone is not in the bundled database.
    pub fn set_time_zone(&mut self, name: &str) -> Result<(), crate::calendar::CalendarError> {
        let zone =
            crate::calendar::zone_by_name(name).ok_or_else(|| crate::calendar::CalendarError {
                part: name.to_string(),
                message:
                    "unknown time zone; expected an IANA zone name such as Europe/Vienna, or UTC"
                        .into(),
            })?;
        self.windows.zone = zone;
        self.windows.until = None;
        Ok(())
    }

    /// Brings the window state to `now` if a boundary was reached (O(1) otherwise).
    pub(crate) fn refresh_windows(&mut self, now: Timestamp) {
        if self.windows.until.is_some_and(|u| now < u) {
            return;
        }
        self.compute_windows(now);
        let ids: Vec<ScopeId> = (0..self.scopes.states.len() as ScopeId)
            .filter(|&id| {
                matches!(
                    self.scopes.interner.key(id),
                    ScopeKey::Global | ScopeKey::Limit { .. } | ScopeKey::Maintenance(_)
                )
            })
            .collect();
        for id in ids {
            let limit = self.scope_limit(self.scopes.interner.key(id));
            if self.scopes.states[id as usize].limit != limit {
                self.scopes.states[id as usize].limit = limit;
                self.wake(id, None);
            }
        }
    }

    /// Computes the state for `now` and arms the timer at the next boundary.
    pub(crate) fn compute_windows(&mut self, now: Timestamp) {
        let p = &self.policy;
        let zone = self.windows.zone.clone();
        self.windows.global = smallest_active(&p.global.windows, now, &zone);
        self.windows.limits = p
            .limits
            .iter()
            .map(|l| smallest_active(&l.windows, now, &zone))
            .collect();
        self.windows.maintenance = p
            .maintenance
            .iter()
            .map(|m| m.when.active_until(now, &zone))
            .collect();
        let all: Vec<&DailyWindow> = p
            .global
            .windows
            .iter()
            .chain(p.limits.iter().flat_map(|l| &l.windows))
            .map(|w| &w.when)
            .chain(p.maintenance.iter().map(|m| &m.when))
            .collect();
        let next = all.iter().filter_map(|w| w.next_boundary(now, &zone)).min();
        self.windows.until = Some(next.unwrap_or(Timestamp(u64::MAX)));
        if let Some(at) = next {
            self.timers.arm(at, Timer::Window);
        }
    }

    /// The number of a `global` or `limit:` scope now: the active window's, else the
    /// policy's own. `None` for other scopes.
    pub(crate) fn windowed_limit(&self, key: &ScopeKey) -> Option<Option<u64>> {
        match key {
            ScopeKey::Global => Some(match &self.windows.global {
                Some(a) => Some(u64::from(a.max)),
                None => self.policy.global.max_running.map(u64::from),
            }),
            ScopeKey::Limit { name, parts } => {
                let i = self.policy.limits.iter().position(|l| &l.name == name)?;
                let auto = self.auto_number(key);
                if let Some(Some(a)) = self.windows.limits.get(i) {
                    // The smallest active window holds, an automatic number below it too.
                    return Some(Some(u64::from(auto.map_or(a.max, |n| n.min(a.max)))));
                }
                if let Some(n) = auto {
                    return Some(Some(u64::from(n)));
                }
                let values: Vec<String> = parts.iter().map(|(_, v)| v.clone()).collect();
                Some(self.policy.limits[i].limit_for(&values).map(u64::from))
            }
            ScopeKey::Maintenance(name) => {
                let i = self
                    .policy
                    .maintenance
                    .iter()
                    .position(|m| &m.name == name)?;
                let active = self.windows.maintenance.get(i).is_some_and(Option::is_some);
                Some(active.then_some(0))
            }
            _ => None,
        }
    }

    /// A block on a scope a window sets, in words (`window:<limit>`, `maintenance:<name>`);
    /// `None` for every other block.
    pub(crate) fn describe_window(
        &self,
        block: &super::admission::Block,
    ) -> Option<super::explain::Reason> {
        use super::admission::BlockKind;
        if !matches!(
            block.kind,
            BlockKind::Capacity | BlockKind::Zero | BlockKind::OverLimit
        ) {
            return None;
        }
        let scope = block.scope?;
        let key = self.scopes.interner.key(scope);
        let s = &self.scopes.states[scope as usize];
        let holders: Vec<crate::job::JobId> = s.holders.iter().copied().collect();
        let (name, active, rule) = match key {
            ScopeKey::Global => (
                "global".to_string(),
                self.windows.global.as_ref()?,
                &self.policy.global.windows,
            ),
            ScopeKey::Limit { name, parts } => {
                let i = self.policy.limits.iter().position(|l| &l.name == name)?;
                let a = self.windows.limits.get(i)?.as_ref()?;
                let mut n = name.clone();
                if !parts.is_empty() {
                    let kv: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    n = format!("{n}[{}]", kv.join(","));
                }
                (n, a, &self.policy.limits[i].windows)
            }
            ScopeKey::Maintenance(name) => {
                let i = self
                    .policy
                    .maintenance
                    .iter()
                    .position(|m| &m.name == name)?;
                let until = (*self.windows.maintenance.get(i)?)?;
                let when = self.policy.maintenance[i].when.text();
                return Some(super::explain::Reason {
                    scope: Some(key.to_string()),
                    kind: "maintenance".into(),
                    count: Some(s.used),
                    limit: s.limit,
                    holders,
                    text: format!(
                        "maintenance:{name}: window \"{when}\" admits nothing it matches until {} ({} matching still running)",
                        super::explain::rfc3339(until),
                        s.used
                    ),
                });
            }
            _ => return None,
        };
        let when = rule[active.window].when.text();
        let until = super::explain::rfc3339(active.until);
        let text = if active.max == 0 {
            format!("window:{name}: window \"{when}\" allows 0 until {until}")
        } else {
            format!(
                "window:{name}: {}/{} in window \"{when}\" until {until}{}",
                s.used,
                active.max,
                if s.used > u64::from(active.max) {
                    "; admits nothing until it drains"
                } else {
                    ""
                }
            )
        };
        Some(super::explain::Reason {
            scope: Some(format!("window:{name}")),
            kind: "window".into(),
            count: Some(s.used),
            limit: s.limit,
            holders,
            text,
        })
    }
}
