//! Self-checks for the property tests and the simulator: O(n), never on the admission path.

use super::{Engine, Mode};
use crate::job::{JobId, JobState};
use std::collections::HashMap;

impl Engine {
    /// Queued jobs that could be admitted right now (not held by strict order). After
    /// every operation this is empty; a non-empty answer is an engine bug.
    pub fn admissible_waiting(&mut self, now: crate::time::Timestamp) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self
            .entries
            .values()
            .filter(|e| e.job.state == JobState::Queued && e.class.is_some())
            .map(|e| e.job.id)
            .collect();
        ids.sort_by_key(|&id| self.eff_rank(id));
        let mut out = Vec::new();
        for id in ids {
            if self.evaluate(id, now, false).is_ok() {
                out.push(id);
            } else if self.policy.queue.strict {
                break;
            }
        }
        out
    }

    /// Checks the engine's bookkeeping: every scope's count equals what its holders took,
    /// every queued job past `not_before` is in exactly one class, every non-empty class is
    /// filed exactly once, and the per-owner count of live jobs is a true count.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut owned: HashMap<&str, usize> = HashMap::new();
        for e in self.entries.values() {
            *owned.entry(e.job.owner.as_str()).or_default() += 1;
        }
        if let Some((o, n)) = owned.iter().find(|(o, &n)| self.live_jobs_of(o) != n) {
            return Err(format!(
                "owner {o:?} has {n} live jobs but the per-owner count says {}",
                self.live_jobs_of(o)
            ));
        }
        let mut counted: HashMap<u32, u64> = HashMap::new();
        for e in self.entries.values() {
            if !e.job.state.is_admitted() && !e.held.is_empty() {
                return Err(format!(
                    "job {} is {} but holds {:?}",
                    e.job.id, e.job.state, e.held
                ));
            }
            for &(s, amount) in &e.held {
                *counted.entry(s).or_insert(0) += amount;
            }
            let queued = e.job.state == JobState::Queued;
            if !queued && e.class.is_some() {
                return Err(format!(
                    "job {} is {} but still in a class",
                    e.job.id, e.job.state
                ));
            }
            let held = e.paused_by.is_some() || self.deps.holds(e.job.id);
            if held && e.class.is_some() {
                return Err(format!(
                    "job {} is held by a pause or dependency but in a class",
                    e.job.id
                ));
            }
            if let Some(p) = e.paused_by {
                if !self
                    .pauses
                    .get(&p)
                    .is_some_and(|a| a.held.contains(&e.job.id))
                {
                    return Err(format!(
                        "job {} names pause {p}, which does not hold it",
                        e.job.id
                    ));
                }
            }
            if let Some(cid) = e.class {
                if !self.queue.classes[cid as usize]
                    .jobs
                    .contains(&self.base_rank(&e.job))
                {
                    return Err(format!("job {} is not in its class {cid}", e.job.id));
                }
            }
        }
        for (i, s) in self.scopes.states.iter().enumerate() {
            let c = counted.get(&(i as u32)).copied().unwrap_or(0);
            if c != s.used {
                return Err(format!(
                    "scope {} counts {} but its holders took {c}",
                    self.scopes.interner.key(i as u32),
                    s.used
                ));
            }
        }
        for (i, s) in self.scopes.states.iter().enumerate() {
            if let Some(r) = s.exclusive_waiting.iter().find(|r| {
                self.entries
                    .find(r.id)
                    .is_none_or(|e| e.class.is_none() || self.base_rank(&e.job) != **r)
            }) {
                return Err(format!(
                    "scope {} holds back for job {}, which is not queued in a class",
                    self.scopes.interner.key(i as u32),
                    r.id
                ));
            }
        }
        for (cid, class) in self.queue.classes.iter().enumerate() {
            if class.jobs.is_empty() || self.queue.free.contains(&(cid as u32)) {
                continue;
            }
            let Some(key) = class.key else {
                return Err(format!("class {cid} is not filed"));
            };
            let cid = cid as u32;
            if !self.queue.heads.contains(&(key, cid)) {
                return Err(format!("class {cid} is missing from heads"));
            }
            let in_waiters = class
                .parked
                .is_some_and(|s| self.scopes.states[s as usize].waiters.contains(&(key, cid)));
            let in_ready = class.ready && self.queue.ready.contains(&(key, cid));
            if self.mode == Mode::Indexed && !self.policy.queue.strict && !(in_waiters ^ in_ready) {
                return Err(format!(
                    "class {cid} is filed {in_ready} ready / {in_waiters} parked"
                ));
            }
        }
        Ok(())
    }
}

impl Engine {
    /// Where a queued job's class is filed (debugging aid).
    #[doc(hidden)]
    pub fn debug_job(&self, id: JobId) -> String {
        let Some(e) = self.entries.find(id) else {
            return "gone".into();
        };
        let Some(cid) = e.class else {
            return format!("{} not in a class", e.job.state);
        };
        let c = &self.queue.classes[cid as usize];
        format!(
            "class {cid} head {:?} ready {} parked {:?} needs {:?}",
            c.head(),
            c.ready,
            c.parked.map(|s| self.scopes.interner.key(s).to_string()),
            e.needs
                .common
                .iter()
                .map(|n| self.scopes.interner.key(n.scope).to_string())
                .collect::<Vec<_>>()
        )
    }
}
