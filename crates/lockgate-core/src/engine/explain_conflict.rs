//! Explain texts of shared and exclusive conflicts (policy.md, "Conflicts"):
//! `conflict:repo=main: shared by jobs 1, 2, 3; job 5 (prune) needs it alone`.
//!
//! A conflict with `exclusive` counts its exclusive holders in a twin scope
//! (`conflict-exclusive:..`); users see one key, so a reason names the key itself, never
//! the twin. Rules without `exclusive` keep the texts of `explain.rs`.

use super::Engine;
use crate::job::JobId;
use crate::scope::ScopeKey;

/// The key a user sees for a conflict scope: the twin shows as its key.
pub(crate) fn shown_key(key: &ScopeKey) -> ScopeKey {
    match key {
        ScopeKey::Conflict {
            index,
            parts,
            overlap,
            exclusive: true,
        } => ScopeKey::Conflict {
            index: *index,
            parts: parts.clone(),
            overlap: overlap.clone(),
            exclusive: false,
        },
        other => other.clone(),
    }
}

/// `conflict:repo=main`, or `conflict:ns (all)` for an overlap's every-holder scope.
fn key_name(key: &ScopeKey) -> String {
    match shown_key(key) {
        ScopeKey::Conflict {
            overlap: Some((k, v)),
            parts,
            ..
        } if v.is_empty() || v == "*" => {
            let mut kv: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            kv.push(format!("{k} (all)"));
            format!("conflict:{}", kv.join(","))
        }
        k => k.to_string(),
    }
}

/// `job 5 (prune)`.
fn job_named(engine: &Engine, id: JobId) -> String {
    match engine.entries.find(id) {
        Some(e) => format!("job {id} ({})", e.job.kind),
        None => format!("job {id}"),
    }
}

impl Engine {
    /// Each holder's id, and for a coordinator job (a whole backup's or restore's, whose
    /// owner names it) its owner: `41 (restore:nightly)`.
    pub(crate) fn holder_names(&self, holders: &[JobId]) -> Vec<String> {
        holders
            .iter()
            .map(|&h| match self.entries.find(h) {
                Some(e) if self.policy.is_coordinator(&e.job.kind) => {
                    format!("{h} ({})", e.job.owner)
                }
                _ => h.to_string(),
            })
            .collect()
    }
}

/// `jobs 1, 2, 3` (at most eight listed).
fn jobs(ids: &[JobId]) -> String {
    let shown: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
    let more = match ids.len() {
        n if n > 8 => format!(", +{} more", n - 8),
        _ => String::new(),
    };
    let word = if ids.len() == 1 { "job" } else { "jobs" };
    format!("{word} {}{more}", shown.join(", "))
}

impl Engine {
    /// The exclusive holders of the key `key` belongs to (the holders of its twin).
    fn exclusive_holders(&self, key: &ScopeKey) -> Vec<JobId> {
        let ScopeKey::Conflict {
            index,
            parts,
            overlap,
            ..
        } = key
        else {
            return Vec::new();
        };
        let twin = ScopeKey::Conflict {
            index: *index,
            parts: parts.clone(),
            overlap: overlap.clone(),
            exclusive: true,
        };
        self.scopes
            .interner
            .get(&twin)
            .map(|s| {
                self.scopes.states[s as usize]
                    .holders
                    .iter()
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of a conflict block under a rule with `exclusive`; `None` for a rule
    /// without (the plain texts apply).
    pub(crate) fn shared_conflict_text(
        &self,
        id: JobId,
        key: Option<&ScopeKey>,
        holders: &[JobId],
    ) -> Option<String> {
        let key = key?;
        let ScopeKey::Conflict {
            index, exclusive, ..
        } = key
        else {
            return None;
        };
        self.policy.conflicts.get(*index)?.exclusive.as_ref()?;
        let name = key_name(key);
        let me = job_named(self, id);
        if *exclusive {
            // A shared job, held by an exclusive holder.
            let holder = holders
                .first()
                .map_or_else(String::new, |&h| job_named(self, h));
            return Some(format!("{name}: {holder} holds it alone; {me} shares it"));
        }
        // An exclusive job (only those need an every-holder scope free).
        let alone = self.exclusive_holders(key);
        let who = match alone.first() {
            Some(&h) => format!("{} holds it alone", job_named(self, h)),
            None => format!("shared by {}", jobs(holders)),
        };
        Some(format!("{name}: {who}; {me} needs it alone"))
    }

    /// `conflict:repo=main: job 5 (prune) waits to hold it alone; job 7 (backup) is ranked
    /// below it`.
    pub(crate) fn exclusive_waiting_text(
        &self,
        id: JobId,
        waiting: JobId,
        key: Option<&ScopeKey>,
    ) -> String {
        let name = key.map(key_name).unwrap_or_default();
        format!(
            "{name}: {} waits to hold it alone; {} shares it and is ranked below",
            job_named(self, waiting),
            job_named(self, id)
        )
    }
}
