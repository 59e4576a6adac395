//! Limits that set themselves: the controller behind a limit whose `max` is a range with a
//! goal (`max = { auto = "throughput", min = 1, max = 12 }`). Pure: the caller measures,
//! once per interval, the scope's total rate (what its jobs' holders report, `usage.rs`)
//! and whether the scope was full, and applies the number the controller gives back.
//!
//! # How it steps
//! It climbs while each added job still adds to the total and steps back once one does not:
//! - only intervals in which the scope was **full** (as many jobs as the number, and more
//!   waiting) say anything about the number, so only they are counted; the first one after
//!   a change is left out (the new job is still starting, or a lowered scope still drains);
//! - the rate at a number is the mean of [`AutoConfig::dwell`] such intervals, blended with
//!   what earlier visits measured there;
//! - at `n`, once measured: with the rate at `n - 1` known and `rate(n) < rate(n - 1) ×
//!   (1 + gain)` (no gain worth a job, or a fall), it steps back to `n - 1` and does not
//!   try `n` again for [`AutoConfig::hold`] intervals; otherwise it tries `n + 1`.
//!
//! # Invariants
//! - One step per decision, never below `min` nor above `max`.
//! - Hysteresis: a number it stepped back from is not tried again for `hold` intervals, so
//!   at a knee it stays put between rare probes one step above: it never moves by more
//!   than one step around where it settled.
//! - Every step says why, with the numbers behind it ([`Step`]).

use std::collections::BTreeMap;

/// What the controller aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// The most bytes per second through the scope (read and written by its jobs).
    Throughput,
}

/// How an automatic number moves.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AutoConfig {
    /// The goal.
    pub goal: Goal,
    /// The lowest number.
    pub min: u32,
    /// The highest number.
    pub max: u32,
    /// The least growth of the total, as a fraction, that one more job must bring to be
    /// kept (0.05: 5%).
    pub gain: f64,
    /// Full intervals measured at a number before it is judged.
    pub dwell: u32,
    /// Intervals a number stepped back from is left untried.
    pub hold: u32,
    /// The number the admin holds it at (`pin = N`, within the range): the controller stands
    /// still, and what it learned is kept for when the pin is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<u32>,
}

impl AutoConfig {
    /// `min` to `max` for throughput, with the default gain (5%), dwell (3) and hold (20).
    pub fn throughput(min: u32, max: u32) -> AutoConfig {
        AutoConfig {
            goal: Goal::Throughput,
            min,
            max,
            gain: 0.05,
            dwell: 3,
            hold: 20,
            pin: None,
        }
    }
}

/// Why a number moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepReason {
    /// Nothing is known above the lowest number, or the last job added enough: try one
    /// more.
    Grew,
    /// The last job added less than the gain: back to the number before.
    NoGain,
    /// The total fell with the last job: back to the number before.
    Fell,
}

/// One change of the number, with the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The number before.
    pub from: u32,
    /// The number after.
    pub to: u32,
    /// Why.
    pub why: StepReason,
    /// The rate measured at `from` (bytes per second).
    pub rate: f64,
    /// The rate measured at `from - 1`, where known.
    pub rate_below: Option<f64>,
}

/// The state of one automatic number.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoLimit {
    config: AutoConfig,
    value: u32,
    /// The rate measured at each number visited (bytes per second).
    seen: BTreeMap<u32, f64>,
    /// Full intervals at the current number since it was set (the first is left out).
    samples: Vec<f64>,
    warm: bool,
    /// A number stepped back from, and the intervals left before it is tried again.
    ceiling: Option<(u32, u32)>,
}

impl AutoLimit {
    /// Starts at `start`, brought within the range.
    pub fn new(config: AutoConfig, start: u32) -> AutoLimit {
        AutoLimit {
            value: start.clamp(config.min, config.max),
            config,
            seen: BTreeMap::new(),
            samples: Vec::new(),
            warm: false,
            ceiling: None,
        }
    }

    /// The number now.
    pub fn value(&self) -> u32 {
        self.value
    }

    /// The configuration.
    pub fn config(&self) -> &AutoConfig {
        &self.config
    }

    /// The rate measured at `n`, where it was.
    pub fn rate_at(&self, n: u32) -> Option<f64> {
        self.seen.get(&n).copied()
    }

    /// One interval: the scope's total `rate` over it (bytes per second) and whether it
    /// was `full` throughout. Gives the step taken, if any.
    pub fn observe(&mut self, rate: f64, full: bool) -> Option<Step> {
        if let Some((n, left)) = self.ceiling {
            self.ceiling = (left > 1).then(|| (n, left - 1));
        }
        if !full || !rate.is_finite() || rate < 0.0 {
            return None;
        }
        if !self.warm {
            self.warm = true;
            return None;
        }
        self.samples.push(rate);
        if self.samples.len() < self.config.dwell.max(1) as usize {
            return None;
        }
        let mean = self.samples.iter().sum::<f64>() / self.samples.len() as f64;
        self.samples.clear();
        let v = self.value;
        let measured = match self.seen.get(&v) {
            Some(earlier) => (earlier + mean) / 2.0,
            None => mean,
        };
        self.seen.insert(v, measured);
        let below = v
            .checked_sub(1)
            .filter(|&b| b >= self.config.min)
            .and_then(|b| self.seen.get(&b).copied());
        let step = |to, why| Step {
            from: v,
            to,
            why,
            rate: measured,
            rate_below: below,
        };
        let decided = match below {
            Some(b) if measured < b * (1.0 + self.config.gain) => {
                self.ceiling = Some((v, self.config.hold));
                let why = if measured < b {
                    StepReason::Fell
                } else {
                    StepReason::NoGain
                };
                Some(step(v - 1, why))
            }
            _ if v < self.config.max && self.ceiling.is_none_or(|(c, _)| c != v + 1) => {
                Some(step(v + 1, StepReason::Grew))
            }
            _ => None,
        };
        if let Some(s) = decided {
            self.value = s.to;
            self.warm = false;
        }
        decided
    }
}

/// The pressure limits of a node rule's guard (`guard = { memory = 20, io = 40 }`): PSI
/// `some avg10`, in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuardLimits {
    /// CPU pressure above which the node gets one slot fewer.
    pub cpu: Option<f64>,
    /// IO pressure above which the node gets one slot fewer.
    pub io: Option<f64>,
    /// Memory pressure above which the node gets one slot fewer.
    pub memory: Option<f64>,
}

/// A node's pressure as sampled (PSI `some avg10`, percent; `None`: not reported).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    /// CPU.
    pub cpu: Option<f64>,
    /// IO.
    pub io: Option<f64>,
    /// Memory.
    pub memory: Option<f64>,
}

/// Why a guarded node's number moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardReason {
    /// A pressure passed its guard: one slot fewer.
    Over,
    /// Every pressure stayed under half its guard for the hold: one slot more.
    Eased,
}

/// The slots of one guarded node: at most the rule's number, one fewer each interval a
/// pressure passes its guard, one more again after [`Guard::HOLD`] intervals in which every
/// pressure stayed under half its guard (hysteresis: between half and the guard it holds).
/// Never below 1 (a node is not shut by its own pressure) nor above the rule's number.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    limits: GuardLimits,
    max: u32,
    value: u32,
    calm: u32,
}

impl Guard {
    /// Intervals of calm before a slot comes back.
    pub const HOLD: u32 = 3;

    /// A node whose rule gives it `max` slots, guarded by `limits`.
    pub fn new(limits: GuardLimits, max: u32) -> Guard {
        Guard {
            limits,
            max,
            value: max,
            calm: 0,
        }
    }

    /// As [`Guard::new`], at `value` slots (brought within 1 and `max`): what a guard left
    /// the node before a restart.
    pub fn starting_at(limits: GuardLimits, max: u32, value: u32) -> Guard {
        Guard {
            value: value.clamp(1.min(max), max),
            ..Guard::new(limits, max)
        }
    }

    /// The slots now.
    pub fn value(&self) -> u32 {
        self.value
    }

    /// One interval's sample; gives the move, if any, with the resource that made it.
    pub fn observe(&mut self, p: Pressure) -> Option<(u32, GuardReason, &'static str)> {
        let pairs = [
            ("cpu", p.cpu, self.limits.cpu),
            ("io", p.io, self.limits.io),
            ("memory", p.memory, self.limits.memory),
        ];
        let over = pairs
            .iter()
            .find(|(_, v, g)| matches!((v, g), (Some(v), Some(g)) if v > g));
        if let Some((name, _, _)) = over {
            self.calm = 0;
            if self.value > 1.min(self.max) {
                self.value -= 1;
                return Some((self.value, GuardReason::Over, name));
            }
            return None;
        }
        let calm = pairs.iter().all(|(_, v, g)| match (v, g) {
            (Some(v), Some(g)) => *v < g / 2.0,
            _ => true,
        });
        self.calm = if calm { self.calm + 1 } else { 0 };
        if self.calm >= Self::HOLD && self.value < self.max {
            self.calm = 0;
            self.value += 1;
            return Some((self.value, GuardReason::Eased, "all"));
        }
        None
    }
}

#[cfg(test)]
mod tests;
