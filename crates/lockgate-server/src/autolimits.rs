//! Limits that set themselves, driven from the loop: for every scope of a `[[limit]]` whose
//! `max` is a range (`Engine::auto_scopes`), a controller (`lockgate_core::auto`) judges
//! the scope once per interval from the rate its jobs' holders report (`usage.rs`) and
//! whether it was full, and the engine applies the number it gives.
//!
//! # Invariants
//! - One step per interval per scope, within the range (the controller's invariants); a
//!   lowered number drains (the engine's).
//! - Every change is an event (`auto_limit`: scope, from, to, why, the rates behind it),
//!   committed with the batch that made it, so a change and its reason are seen together.
//! - A controller starts from the scope's number now (its `min`, or what was set before),
//!   and is replaced when the policy changes its range.
//! - A node whose rule has a `guard` is judged on the samples its holders send (at most
//!   once per `guard_every`); every change of its slots is a `node_guard` event.

use crate::event_loop::Loop;
use lockgate_core::auto::{AutoConfig, AutoLimit, Guard, GuardLimits, Pressure, Step};
use lockgate_core::Timestamp;
use std::collections::HashMap;

/// The controllers of the automatic scopes.
#[derive(Debug, Default)]
pub struct AutoLimits {
    scopes: HashMap<String, Controller>,
    /// Slots guards left nodes before a restart: a node's guard starts from them.
    restored_guards: HashMap<String, u32>,
    /// The guards of nodes whose rule has one, by node.
    guards: HashMap<String, NodeGuard>,
    /// When the engine's automatic scopes are looked at next (new ones appear as jobs
    /// need them): at most every [`SCAN_EVERY`], and not at all under a policy without
    /// automatic limits, so the loop pays nothing for them then.
    scan_at: Timestamp,
}

#[derive(Debug)]
struct NodeGuard {
    guard: Guard,
    limits: GuardLimits,
    number: u32,
    next: Timestamp,
    /// The last sample's pressure, for explain.
    last: Pressure,
}

/// How often a node's guard is judged: a third of the lease TTL (the holders' renewal
/// cadence, so each judgement has a fresh sample), from 1 s to 10 s.
pub(crate) fn guard_every(ttl: std::time::Duration) -> std::time::Duration {
    (ttl / 3).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    )
}

/// What is kept across a restart (the store's `learned`).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Learned {
    /// Numbers of automatic scopes, by scope.
    auto: std::collections::BTreeMap<String, u32>,
    /// Slots guards leave nodes, by node.
    guards: std::collections::BTreeMap<String, u32>,
}

/// How often the engine's automatic scopes are listed.
const SCAN_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug)]
struct Controller {
    ctl: AutoLimit,
    next: Timestamp,
    /// The scope's byte count and the time at the last judgement: the rate over an
    /// interval is the difference.
    last: (u64, Timestamp),
}

impl AutoLimits {
    /// When the next scope is due (`None`: no automatic scope).
    pub(crate) fn deadline(&self) -> Option<Timestamp> {
        self.scopes.values().map(|c| c.next).min()
    }

    /// Whether a policy has an automatic limit.
    fn wanted(policy: &lockgate_core::Policy) -> bool {
        policy.limits.iter().any(|l| l.auto.is_some())
    }

    /// `scope`'s number and range with the rates it measured at that number and the one
    /// below, for explain (`auto 3 of 1-12: 41.0 MiB/s at 3, 39.2 MiB/s at 2`).
    pub(crate) fn describe(&self, scope: &str) -> Option<String> {
        let c = self.scopes.get(scope)?;
        let v = c.ctl.value();
        let b = lockgate_core::usage::format_bytes;
        let at = |n: u32| {
            c.ctl
                .rate_at(n)
                .map(|r| format!("{}/s at {n}", b(r as u64)))
        };
        let config = c.ctl.config();
        if let Some(pin) = config.pin {
            return Some(format!(
                "auto pinned at {pin} of {}-{}",
                config.min, config.max
            ));
        }
        let mut text = format!("auto {v} of {}-{}", config.min, config.max);
        let seen: Vec<String> = [at(v), v.checked_sub(1).and_then(at)]
            .into_iter()
            .flatten()
            .collect();
        if !seen.is_empty() {
            text = format!("{text}: {}", seen.join(", "));
        }
        Some(text)
    }

    /// Node `node`'s guard for explain (`guard 2 of 4: memory pressure 31.0%`).
    pub(crate) fn describe_guard(&self, node: &str) -> Option<String> {
        let g = self.guards.get(node)?;
        let p = g.last;
        let parts: Vec<String> = [("cpu", p.cpu), ("io", p.io), ("memory", p.memory)]
            .into_iter()
            .filter_map(|(n, v)| Some(format!("{n} pressure {:.1}%", v?)))
            .collect();
        Some(format!(
            "guard {} of {}: {}",
            g.guard.value(),
            g.number,
            parts.join(", ")
        ))
    }
}

impl Loop {
    /// Puts what the automatic limits and the guards learned in the batch, to be read
    /// back at the next start ([`Loop::restore_learned`]).
    fn save_learned(&mut self) {
        let learned = Learned {
            auto: self.engine.auto_limits().clone(),
            guards: self.engine.node_guards().clone(),
        };
        self.batch.learned = Some(serde_json::to_string(&learned).expect("learned serializes"));
    }

    /// Takes back what a previous run learned (`learned` as the store kept it); a text
    /// that does not read is left out with a warning (the numbers start again).
    pub(crate) fn restore_learned(&mut self, learned: Option<&str>, now: Timestamp) {
        let Some(text) = learned else { return };
        match serde_json::from_str::<Learned>(text) {
            Ok(l) => {
                for (node, &slots) in &l.guards {
                    self.auto.restored_guards.insert(node.clone(), slots);
                }
                self.engine.restore_learned(l.auto, l.guards, now);
            }
            Err(e) => tracing::warn!("the learned numbers of the last run do not read ({e}); automatic limits start again from their min"),
        }
    }

    /// Judges every automatic scope that is due at `now`.
    pub(crate) fn auto_tick(&mut self, now: Timestamp) {
        if !AutoLimits::wanted(self.engine.policy()) {
            self.auto.scopes.clear();
            return;
        }
        let due = self.auto.deadline().is_some_and(|d| now >= d);
        if now < self.auto.scan_at && !due {
            return;
        }
        self.auto.scan_at = now.plus(SCAN_EVERY);
        let scopes = self.engine.auto_scopes();
        let live: std::collections::HashSet<&str> =
            scopes.iter().map(|s| s.scope.as_str()).collect();
        self.auto.scopes.retain(|k, _| live.contains(k.as_str()));
        for s in &scopes {
            let moved = self.meters.scope_bytes(&s.scope);
            let fresh = || Controller {
                ctl: AutoLimit::new(s.config, s.limit),
                next: now.plus(s.interval),
                last: (moved, now),
            };
            let c = self
                .auto
                .scopes
                .entry(s.scope.clone())
                .or_insert_with(fresh);
            if *c.ctl.config() != s.config {
                *c = fresh();
            }
            // Pinned: it stands still (explain says so); unpinned, it goes on from the
            // number it had learned (the engine kept it).
            if now < c.next || s.config.pin.is_some() {
                continue;
            }
            c.next = now.plus(s.interval);
            let (before, then) = std::mem::replace(&mut c.last, (moved, now));
            let ms = now.since(then).max(1);
            let rate = moved.saturating_sub(before) as f64 * 1000.0 / ms as f64;
            let full = s.used >= u64::from(s.limit);
            let Some(step) = c.ctl.observe(rate, full) else {
                continue;
            };
            self.engine.set_auto_limit(&s.scope, step.to, now);
            self.record_auto_step(&s.scope, &s.config, &step, now);
            self.save_learned();
        }
        self.drain_events(now);
    }

    /// A node sample came for `node` (with a renewal the engine took): judges the node's
    /// guard if its rule has one and it is due.
    pub(crate) fn guard_sample(
        &mut self,
        node: &str,
        sample: &lockgate_api::NodeSample,
        now: Timestamp,
    ) {
        let Some((limits, number)) = self.engine.node_guard(node) else {
            self.auto.guards.remove(node);
            return;
        };
        let every = guard_every(self.engine.policy().leases.ttl);
        let pressure = Pressure {
            cpu: sample.cpu_some,
            io: sample.io_some,
            memory: sample.memory_some,
        };
        let restored = self.auto.restored_guards.remove(node);
        let g = self
            .auto
            .guards
            .entry(node.to_string())
            .or_insert_with(|| NodeGuard {
                guard: Guard::starting_at(limits, number, restored.unwrap_or(number)),
                limits,
                number,
                next: now,
                last: pressure,
            });
        if g.limits != limits || g.number != number {
            *g = NodeGuard {
                guard: Guard::new(limits, number),
                limits,
                number,
                next: now,
                last: pressure,
            };
        }
        g.last = pressure;
        if now < g.next {
            return;
        }
        g.next = now.plus(every);
        let from = g.guard.value();
        let Some((to, why, resource)) = g.guard.observe(pressure) else {
            return;
        };
        let slots = (to < number).then_some(to);
        self.engine.set_node_guard(node, slots, now);
        self.save_learned();
        let value = match resource {
            "cpu" => pressure.cpu,
            "io" => pressure.io,
            "memory" => pressure.memory,
            _ => None,
        };
        let serde_json::Value::Object(data) = serde_json::json!({
            "type": "node_guard",
            "node": node,
            "from": from,
            "to": to,
            "why": why,
            "resource": resource,
            "pressure": value,
            "max": number,
        }) else {
            unreachable!("an object")
        };
        tracing::info!("node {node}: guard {from} -> {to} slots ({why:?}, {resource} {value:?})");
        self.record_event(data, now);
    }

    fn record_auto_step(&mut self, scope: &str, config: &AutoConfig, step: &Step, now: Timestamp) {
        let serde_json::Value::Object(data) = serde_json::json!({
            "type": "auto_limit",
            "scope": scope,
            "from": step.from,
            "to": step.to,
            "why": step.why,
            "rate": step.rate,
            "rate_below": step.rate_below,
            "min": config.min,
            "max": config.max,
        }) else {
            unreachable!("an object")
        };
        tracing::info!(
            "{scope}: automatic number {} -> {} ({:?}: {:.0} B/s at {}, below {:?})",
            step.from,
            step.to,
            step.why,
            step.rate,
            step.from,
            step.rate_below
        );
        self.record_event(data, now);
    }
}
