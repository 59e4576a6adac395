//! The live jobs: everything the engine holds about a job from its submit until it ends
//! for good (a job waiting for a retry is still live).
//!
//! Invariants:
//! - every id held anywhere else in the engine (a class, a scope's holders or reservation,
//!   a node's prepared queue, the idempotency index) is the id of a live job, or is checked
//!   with [`Entries::find`] before use (timers and reservations may outlive their job);
//! - the idempotency index holds `(owner, key)` of exactly the live jobs that have a key:
//!   [`Entries::insert`] and [`Entries::remove`] keep it, nothing else touches it;
//! - `per_owner[o]` is the number of live jobs owned by `o` (absent when 0), kept the same
//!   way (the server's `[quotas].max_queued_per_owner` reads it).
//! - a job record is shared (`Arc<Job>`) with whoever took it since its last change (an
//!   event, the shared index below, a forecast's [`Shared`](super::Shared) copy); every
//!   change goes through [`Entries::job_mut`], which copies the record first if it is
//!   shared, so a record once handed out never changes under its holder;
//! - the shared index (a persistent map, taken in O(1) by [`Entries::shared`]) holds every
//!   live job as of the last call, and `dirty` the ids inserted, removed or changed since;
//!   until the first call there is no index and nothing is tracked (an engine nobody shares,
//!   the simulator's and the benchmark's, pays one branch per change).

use super::needs::Needs;
use super::queue::ClassId;
use crate::job::{Job, JobId};
use crate::scope::ScopeId;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The live jobs by id as a persistent map: a clone shares its nodes (O(1)).
pub type SharedJobs = imbl::OrdMap<JobId, Arc<Job>>;

/// Engine-private bookkeeping of a live job.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The job as it is now; change it only through [`Entry::job_mut`].
    pub job: Arc<Job>,
    /// Shared with the job's class while it is queued.
    pub needs: Arc<Needs>,
    /// Scopes and amounts it took at admission; given back exactly at the end.
    pub held: Vec<(ScopeId, u64)>,
    /// Its class while it is queued (and past `not_before`).
    pub class: Option<ClassId>,
    /// The placement scope of a movable job.
    pub placement: Option<ScopeId>,
    /// The earliest pending timer for when it may reserve (armed when it is found
    /// blocked by a rule whose `reserve_after` has not passed).
    pub reserve_armed: Option<crate::time::Timestamp>,
    /// The pause that holds it out of the queue.
    pub paused_by: Option<u64>,
}

impl Entry {
    /// A job as it enters the engine: nothing derived yet.
    pub fn new(job: Arc<Job>) -> Entry {
        Entry {
            job,
            needs: Arc::default(),
            held: Vec::new(),
            class: None,
            placement: None,
            reserve_armed: None,
            paused_by: None,
        }
    }
}

/// The shared index: the live jobs as of the last [`Entries::shared`], and what changed
/// since.
#[derive(Debug, Clone, Default)]
struct Index {
    jobs: SharedJobs,
    dirty: HashSet<JobId>,
}

/// The live jobs by id, and the idempotency index over them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entries {
    map: HashMap<JobId, Box<Entry>>,
    idempotency: HashMap<(String, String), JobId>,
    per_owner: HashMap<String, usize>,
    /// `None` until the first [`Entries::shared`].
    index: Option<Box<Index>>,
}

impl Entries {
    /// A live job's entry, if `id` is live.
    pub fn find(&self, id: JobId) -> Option<&Entry> {
        self.map.get(&id).map(|e| &**e)
    }

    /// A live job's entry for changing, if `id` is live.
    pub fn find_mut(&mut self, id: JobId) -> Option<&mut Entry> {
        self.map.get_mut(&id).map(|e| &mut **e)
    }

    /// A live job's entry.
    ///
    /// # Panics
    /// When `id` is not live. Callers pass ids they just took from the engine's own indexes
    /// (a class, a scope's holders, a node) or checked with [`Entries::find`], so a miss is
    /// a broken invariant of this module, not a caller's error.
    pub fn get(&self, id: JobId) -> &Entry {
        match self.map.get(&id) {
            Some(e) => e,
            None => panic!("job {id} is not live (engine bookkeeping is broken)"),
        }
    }

    /// A live job for changing: its record is copied first if it is shared (copy on
    /// write), so what an event or a forecast holds keeps the state it was taken in.
    /// Panics as [`Entries::get`] does.
    pub fn job_mut(&mut self, id: JobId) -> &mut Job {
        self.touch(id);
        Arc::make_mut(&mut self.get_mut(id).job)
    }

    fn touch(&mut self, id: JobId) {
        if let Some(index) = &mut self.index {
            index.dirty.insert(id);
        }
    }

    /// Every live job as a persistent map sharing the records: O(c log n) for the c jobs
    /// inserted, removed or changed since the last call (O(n log n) the first time).
    pub fn shared(&mut self) -> SharedJobs {
        let map = &self.map;
        let index = self.index.get_or_insert_with(|| {
            Box::new(Index {
                jobs: SharedJobs::new(),
                dirty: map.keys().copied().collect(),
            })
        });
        // In id order: neighbours share the tree's nodes, so each is copied once.
        let mut dirty: Vec<JobId> = index.dirty.drain().collect();
        dirty.sort_unstable();
        for id in dirty {
            match map.get(&id) {
                Some(e) => index.jobs.insert(id, e.job.clone()),
                None => index.jobs.remove(&id),
            };
        }
        index.jobs.clone()
    }

    /// A live job's entry for changing (not its job: see [`Entries::job_mut`]). Panics as
    /// [`Entries::get`] does.
    pub fn get_mut(&mut self, id: JobId) -> &mut Entry {
        match self.map.get_mut(&id) {
            Some(e) => e,
            None => panic!("job {id} is not live (engine bookkeeping is broken)"),
        }
    }

    /// Whether `id` is live.
    pub fn contains(&self, id: JobId) -> bool {
        self.map.contains_key(&id)
    }

    /// Adds a job (a submit, a retry or a restored job), indexing its idempotency key.
    pub fn insert(&mut self, entry: Entry) {
        let id = entry.job.id;
        if let Some(key) = &entry.job.idempotency_key {
            self.idempotency
                .insert((entry.job.owner.clone(), key.clone()), id);
        }
        *self.per_owner.entry(entry.job.owner.clone()).or_default() += 1;
        self.touch(id);
        if let Some(old) = self.map.insert(id, Box::new(entry)) {
            self.forget_owner(&old.job.owner);
        }
    }

    fn forget_owner(&mut self, owner: &str) {
        if let Some(n) = self.per_owner.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(owner);
            }
        }
    }

    /// Number of live jobs `owner` owns.
    pub fn owned_by(&self, owner: &str) -> usize {
        self.per_owner.get(owner).copied().unwrap_or(0)
    }

    /// Takes a job out, and its idempotency key with it.
    pub fn remove(&mut self, id: JobId) -> Option<Entry> {
        let e = self.map.remove(&id)?;
        self.touch(id);
        if let Some(key) = &e.job.idempotency_key {
            self.idempotency.remove(&(e.job.owner.clone(), key.clone()));
        }
        self.forget_owner(&e.job.owner);
        Some(*e)
    }

    /// The live job `owner` submitted with idempotency key `key`.
    pub fn idempotent(&self, owner: &str, key: &str) -> Option<JobId> {
        self.idempotency
            .get(&(owner.to_string(), key.to_string()))
            .copied()
    }

    /// Every live job, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Entry> {
        self.map.values().map(|e| &**e)
    }

    /// The live ids, ascending.
    pub fn sorted_ids(&self) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self.map.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Number of live jobs.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}
