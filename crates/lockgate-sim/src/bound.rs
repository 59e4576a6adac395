//! A lower bound on the makespan: no scheduler that obeys the policy's limits can finish
//! the workload earlier, whatever order it picks.
//!
//! # How it is derived
//! Every constraint below is a resource of some capacity `L` that a job occupies for at
//! least a known time `p`, taking `c` units, and that the job cannot start using before a
//! release time `r`. For any instant `t`, the jobs with `r >= t` need `W(t) = sum c * p`
//! unit-seconds, all of it after `t`, and the resource delivers at most `L` per second, so
//!
//! ```text
//! makespan >= max over t of  t + W(t) / L        (t ranging over the release times)
//! ```
//!
//! The bound is the largest of these over every resource, and of `at + prepare + run` over
//! every job (a job cannot end before it arrived and did its work; this covers "the last
//! arrival plus its run time" and "the longest job"). The resources (a two-stage job holds
//! everything but its run slot from prepare admission to its end, policy.md):
//!
//! | resource | L | jobs | r | p | c |
//! |---|---|---|---|---|---|
//! | `global` | `[global].max_running` | non-coordinator | at | prepare + run | 1 |
//! | `global-prepare` | `[global].prepare_queue` | two-stage | at | prepare | 1 |
//! | each `limit:` partition | its number | those it counts | at | prepare + run | 1 |
//! | each pool | capacity | those that cost it | at | prepare + run | cost |
//! | each conflict key (a set of jobs that pairwise conflict: equal keys, or for `overlap` one value plus the `*` holders) | 1 | those | at | prepare + run | 1 |
//! | run slots of a node set `E` | sum of the numbers in `E` | jobs whose eligible nodes all lie in `E` | at + prepare | run | 1 |
//! | prepare bound of `E` | sum of `number + prepare_queue` | two-stage jobs eligible only in `E` | at | prepare + run | 1 |
//!
//! Which scopes a job takes, and under which names, is the engine's own answer
//! ([`Policy::scopes_of`] on the job as [`JobSpec::check`](lockgate_core::job::JobSpec::check)
//! makes it); this module only turns those scopes into resources.
//!
//! The node sets `E` are the distinct eligible sets of the workload's jobs (a pinned job's
//! is its node; a movable job's, the nodes its selector matches). Jobs that eligible only
//! inside `E` must run inside `E`, whatever the placement. Unlimited resources give no
//! bound. Per-node pools and reservations are left out (that only makes the bound lower,
//! never wrong). Jobs that can never run (a `max = 0` scope, a pinned node that does not
//! exist, a cost above a pool's capacity, no eligible node with a non-zero number, a job
//! the engine would refuse) are left out of every term: the simulator reports them as unfinished.
//!
//! What the bound does not see: the interplay of constraints (a job needing a free slot in
//! two saturated scopes at once), integrality at the end of a run (the last jobs cannot be
//! split across idle slots) and the time a prepare step leaves a run slot idle. Those are
//! what separates a good schedule from the bound.

use crate::input::{NodeSpec, WorkloadJob};
use lockgate_core::job::{Job, Placement};
use lockgate_core::policy::Policy;
use lockgate_core::scope::{JobScopes, ScopeKey};
use lockgate_core::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// The bound and what sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerBound {
    /// The bound, in milliseconds.
    pub ms: u64,
    /// The constraint that sets it (`limit:per-datastore[datastore=ds1]`, `run slots of
    /// node-1, node-2`, `job 17: at + prepare + run`, ...).
    pub by: String,
    /// Every resource's own bound, largest first (ties by name).
    pub terms: Vec<(String, u64)>,
}

/// One job's use of a resource: release time, hold time (ms) and units taken.
type Use = (u64, u64, u64);

/// One resource: capacity and every job's use of it.
#[derive(Debug, Default)]
struct Resource {
    capacity: u64,
    uses: Vec<Use>,
}

/// A capacity scope a job uses.
struct ScopeUse {
    name: String,
    capacity: u64,
    uses: Use,
}

/// What the bound needs to know about one job.
struct Shape<'a> {
    job: &'a WorkloadJob,
    two_stage: bool,
    prep: u64,
    run: u64,
    /// Eligible nodes (indices), `None` for a job that runs on no node.
    eligible: Option<BTreeSet<usize>>,
    /// The scopes the engine would have it take; `None` when the engine would refuse it.
    scopes: Option<JobScopes>,
}

impl<'a> Shape<'a> {
    fn of(
        policy: &Policy,
        nodes: &[NodeSpec],
        numbers: &[Option<u64>],
        j: &'a WorkloadJob,
    ) -> Self {
        let checked: Option<Job> = j
            .spec()
            .check(policy)
            .ok()
            .map(|c| c.into_job(0, Timestamp(j.at_ms())));
        let two_stage = checked.as_ref().is_some_and(|c| c.two_stage);
        let eligible = checked.as_ref().and_then(|c| match &c.placement {
            Placement::Anywhere => None,
            Placement::Pinned(n) => Some(
                nodes
                    .iter()
                    .position(|x| &x.name == n)
                    .into_iter()
                    .collect(),
            ),
            Placement::Movable { selector, .. } => Some(
                (0..nodes.len())
                    .filter(|&i| selector.matches_map(&nodes[i].labels))
                    .collect(),
            ),
        });
        let eligible = eligible
            .map(|e: BTreeSet<usize>| e.into_iter().filter(|&i| numbers[i] != Some(0)).collect());
        Shape {
            job: j,
            two_stage,
            prep: if two_stage { j.prepare_ms() } else { 0 },
            run: j.run_ms(),
            eligible,
            scopes: checked.map(|c| policy.scopes_of(&c)),
        }
    }
}

/// Computes the lower bound (see the module docs).
pub fn lower_bound(policy: &Policy, nodes: &[NodeSpec], jobs: &[WorkloadJob]) -> LowerBound {
    let numbers: Vec<Option<u64>> = nodes
        .iter()
        .map(|n| policy.node_number(&n.labels).0.map(u64::from))
        .collect();
    let shapes: Vec<Shape> = jobs
        .iter()
        .map(|j| Shape::of(policy, nodes, &numbers, j))
        .collect();
    let (mut resources, impossible) = scope_resources(policy, &shapes);
    add_star_holders(&mut resources);
    add_node_sets(
        policy,
        nodes,
        &numbers,
        &shapes,
        &impossible,
        &mut resources,
    );
    largest(&shapes, &impossible, resources)
}

/// The capacity-scope resources of every job that can run, and which jobs cannot (a
/// refused job, one with no eligible node, one taking more than a scope holds).
fn scope_resources(policy: &Policy, shapes: &[Shape]) -> (BTreeMap<String, Resource>, Vec<bool>) {
    let mut resources: BTreeMap<String, Resource> = BTreeMap::new();
    let mut impossible = vec![false; shapes.len()];
    let mut job_uses: Vec<Vec<ScopeUse>> = Vec::with_capacity(shapes.len());
    for (i, s) in shapes.iter().enumerate() {
        let mut uses = Vec::new();
        capacity_uses(policy, s, &mut uses);
        if s.scopes.is_none()
            || s.eligible.as_ref().is_some_and(BTreeSet::is_empty)
            || uses.iter().any(|u| u.capacity < u.uses.2)
        {
            impossible[i] = true;
        }
        job_uses.push(uses);
    }
    for (i, uses) in job_uses.into_iter().enumerate() {
        if impossible[i] {
            continue;
        }
        for u in uses {
            let res = resources.entry(u.name).or_default();
            res.capacity = u.capacity;
            res.uses.push(u.uses);
        }
    }
    (resources, impossible)
}

/// The run-slot and prepare resources of every node set `E` (the distinct eligible sets).
///
/// Groups the jobs by eligible set once, then every set takes the groups whose set it
/// contains (few distinct sets in practice, many jobs).
fn add_node_sets(
    policy: &Policy,
    nodes: &[NodeSpec],
    numbers: &[Option<u64>],
    shapes: &[Shape],
    impossible: &[bool],
    resources: &mut BTreeMap<String, Resource>,
) {
    let mut groups: BTreeMap<&BTreeSet<usize>, Vec<&Shape>> = BTreeMap::new();
    for (i, s) in shapes.iter().enumerate() {
        if let Some(e) = s
            .eligible
            .as_ref()
            .filter(|e| !e.is_empty() && !impossible[i])
        {
            groups.entry(e).or_default().push(s);
        }
    }
    for &set in groups.keys() {
        let names: Vec<&str> = set.iter().map(|&i| nodes[i].name.as_str()).collect();
        let inside = || {
            groups
                .iter()
                .filter(|(e, _)| e.is_subset(set))
                .flat_map(|(_, g)| g.iter().copied())
        };
        let run_cap: Option<u64> = set.iter().map(|&i| numbers[i]).sum();
        let Some(cap) = run_cap else { continue };
        let uses = inside()
            .map(|s| (s.job.at_ms() + s.prep, s.run, 1))
            .collect();
        resources.insert(
            format!("run slots of {}", names.join(", ")),
            Resource {
                capacity: cap,
                uses,
            },
        );
        let prep_cap = cap + u64::from(policy.nodes.prepare_queue) * set.len() as u64;
        let uses: Vec<Use> = inside()
            .filter(|s| s.two_stage)
            .map(|s| (s.job.at_ms(), s.prep + s.run, 1))
            .collect();
        if uses.is_empty() {
            continue;
        }
        resources.insert(
            format!("prepare bound of {}", names.join(", ")),
            Resource {
                capacity: prep_cap,
                uses,
            },
        );
    }
}

/// The largest of every runnable job's `at + prepare + run` and every resource's bound.
fn largest(
    shapes: &[Shape],
    impossible: &[bool],
    resources: BTreeMap<String, Resource>,
) -> LowerBound {
    let mut best = (0, "empty workload".to_string());
    for (i, s) in shapes.iter().enumerate() {
        let end = s.job.at_ms() + s.prep + s.run;
        if !impossible[i] && end > best.0 {
            best = (end, format!("job {}: at + prepare + run", i + 1));
        }
    }
    let mut terms: Vec<(String, u64)> = resources
        .into_iter()
        .map(|(name, res)| (name, resource_bound(res)))
        .collect();
    terms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if let Some((name, ms)) = terms.first().filter(|t| t.1 > best.0) {
        best = (*ms, name.clone());
    }
    LowerBound {
        ms: best.0,
        by: best.1,
        terms,
    }
}

const CLIQUE: &str = " (overlap clique)";
const STAR_CLIQUE: &str = "=* (overlap clique)";

/// A `*` holder of an overlap conflict conflicts with every job that has the attribute:
/// it joins the clique of every value of the same conflict key.
fn add_star_holders(resources: &mut BTreeMap<String, Resource>) {
    let stars: Vec<(String, Vec<Use>)> = resources
        .iter()
        .filter_map(|(n, r)| {
            n.strip_suffix(STAR_CLIQUE)
                .map(|p| (format!("{p}="), r.uses.clone()))
        })
        .collect();
    for (prefix, uses) in stars {
        for (name, res) in resources.iter_mut() {
            if name.starts_with(&prefix) && name.ends_with(CLIQUE) && !name.ends_with(STAR_CLIQUE) {
                res.uses.extend(uses.iter().copied());
            }
        }
    }
}

/// `max over t of t + W(t) / L`, rounded up to a whole millisecond.
fn resource_bound(mut res: Resource) -> u64 {
    if res.capacity == 0 {
        return 0;
    }
    res.uses.sort_unstable_by_key(|u| std::cmp::Reverse(u.0));
    let (mut work, mut best) = (0u128, 0u64);
    for (r, p, c) in res.uses {
        work += u128::from(p) * u128::from(c);
        let t = u128::from(r) + work.div_ceil(u128::from(res.capacity));
        best = best.max(t.min(u128::from(u64::MAX)) as u64);
    }
    best
}

/// The capacity scopes a job uses: (name, release, hold, take, capacity), from the scopes
/// the engine has it take (global, limits, pools, conflicts), scope names included.
fn capacity_uses(policy: &Policy, s: &Shape, out: &mut Vec<ScopeUse>) {
    let Some(scopes) = &s.scopes else { return };
    let at = s.job.at_ms();
    let hold = s.prep + s.run;
    let mut push = |name: String, hold: u64, take: u64, capacity: u64| {
        out.push(ScopeUse {
            name,
            capacity,
            uses: (at, hold, take),
        });
    };
    for u in &scopes.common {
        match &u.key {
            // Under a conflict with `exclusive`, only exclusive jobs form cliques: shared
            // jobs take the key without needing it alone, and the exclusive twin only
            // counts. Leaving them out keeps the bound a lower bound.
            ScopeKey::Conflict {
                index, exclusive, ..
            } if *exclusive || shares(scopes, *index) => {}
            ScopeKey::Conflict { overlap: None, .. } => push(u.key.to_string(), hold, 1, 1),
            // Jobs sharing a value conflict pairwise, and a `*` holder conflicts with all
            // of them: one clique per value, the `*` holders in every clique (and their
            // own; `add_star_holders`). The empty value (every holder) and the `*` check
            // of a job without a star (it takes 0) are not cliques.
            ScopeKey::Conflict {
                overlap: Some((_, v)),
                ..
            } => {
                if !v.is_empty() && u.take > 0 {
                    push(format!("{}{CLIQUE}", u.key), hold, 1, 1);
                }
            }
            key => {
                if let Some(cap) = key.limit_in(policy) {
                    push(key.to_string(), hold, u.take, cap);
                }
            }
        }
    }
    if let Some(cap) = scopes.prepare.as_ref().and_then(|k| k.limit_in(policy)) {
        push(ScopeKey::GlobalPrepare.to_string(), s.prep, 1, cap);
    }
}

/// Whether a job shares the keys of conflict `index` (it needs the exclusive twin free).
fn shares(scopes: &JobScopes, index: usize) -> bool {
    scopes.common.iter().any(|w| {
        matches!(&w.key, ScopeKey::Conflict { index: i, exclusive: true, .. } if *i == index)
            && w.take == 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(at: f64, run: f64) -> WorkloadJob {
        serde_json::from_value(serde_json::json!({"at": at, "kind": "backup", "run_s": run}))
            .unwrap()
    }

    #[test]
    fn capacity_bound_with_arrivals() {
        // Two slots, four jobs of 10 s at 0: 20 s. A late arrival sets its own bound.
        let res = Resource {
            capacity: 2,
            uses: vec![(0, 10, 1); 4],
        };
        assert_eq!(resource_bound(res), 20);
        let res = Resource {
            capacity: 2,
            uses: vec![(0, 10, 1), (100, 10, 1), (100, 10, 1), (100, 10, 1)],
        };
        assert_eq!(resource_bound(res), 115);
    }

    #[test]
    fn global_limit_and_longest_job() {
        let p = Policy::from_toml("[global]\nmax_running = 2\n", None).unwrap();
        let jobs: Vec<WorkloadJob> = (0..4).map(|_| job(0.0, 10.0)).collect();
        let b = lower_bound(&p, &[], &jobs);
        assert_eq!((b.ms, b.by.as_str()), (20_000, "global"));
        let mut jobs = jobs;
        jobs.push(job(5.0, 100.0));
        assert_eq!(lower_bound(&p, &[], &jobs).by, "job 5: at + prepare + run");
    }
}
