//! Property tests over random operation sequences: submit, register/cordon/remove node,
//! prepared, finish, cancel, heartbeats, lease expiry through time steps, policy changes.
//!
//! After every step: an independent recount from the jobs themselves shows no limit, node
//! number, prepare bound, pool or conflict exceeded by an admission; nothing admissible is
//! left waiting; every queued job's explanation names a holding condition; a policy change
//! stops no running job; no job is admitted twice. The indexed engine and the rescanning
//! oracle see the same operations and must end every step in the same state.
//!
//! Pauses and dependencies join the sequences: an independent model of the active pauses
//! and of the jobs that ended shows that nothing an active pause matches is admitted, that
//! no job is admitted before its dependencies ended (and succeeded, for `after_ok`), and
//! that a queued job the model says nothing holds is not held by a pause or a dependency.
//!
//! Cases: 64 by default (CI); set `PROPTEST_CASES` for more when run by hand.

use lockgate_core::engine::{Engine, Mode, NodeRegistration, PauseSpec};
use lockgate_core::event::{Event, JobChange};
use lockgate_core::job::{CancelReason, Job, JobId, JobSpec, JobState, Outcome};
use lockgate_core::policy::{Executor, LimitWindow};
use lockgate_core::{Policy, Timestamp};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

mod regressions;

const BASE: &str = r#"
[leases]
ttl = "1s"
[queue]
reserve_after = "10h"
[nodes]
max_running = 2
prepare_queue = 1
ttl = "3s"
[[nodes.rule]]
selector = "role=db"
max_running = 0
[[nodes.rule]]
selector = "size=big"
max_running = 3
[resources]
threads = 6
[resources.ds-io]
per = ["datastore"]
capacity = 3
[kinds.tape]
cost = { threads = 4 }
[kinds.backup]
cost = { threads = 1 }
[kinds.data-upload]
two_stage = true
retry = { times = 1, interval = "200ms" }
[[conflict]]
keys = ["datastore", "group"]
"#;

/// Policy variants: the limits part, appended to a queue/extra part.
fn policy_text(variant: u8) -> String {
    let limits = match variant % 5 {
        0 => "[global]\nmax_running = 5\nprepare_queue = 3\n[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 2\nvalues = { ds0 = 1 }\n[[limit]]\nname = \"per-kind\"\nper = [\"kind\"]\nvalues = { verify = 0, sync = 1 }\n",
        1 => "[global]\nmax_running = 2\n[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 1\n",
        2 => "[[limit]]\nname = \"per-owner\"\nper = [\"owner\"]\nmax = 3\n[[limit]]\nname = \"restores\"\nmatch = \"kind in (restore, data-upload)\"\nmax = 2\n",
        3 => "[global]\nmax_running = 7\n[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 3\n",
        // Windows, maintenance and per-value pools (virtual time starts on Thursday
        // 1970-01-01 00:00 UTC; `Tick` steps cross these boundaries).
        _ => concat!(
            "[global]\nmax_running = 5\nwindows = [{ when = \"00:10-00:40\", max = 2 }, { when = \"00:30-01:30\", max = 1 }, { when = \"thu 01:30-02:00\", max = 8 }]\n",
            "[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 2\nwindows = [{ when = \"23:50-00:20\", max = 0 }]\n",
            "[[maintenance]]\nname = \"ds1\"\nwhen = \"00:05-00:50\"\nmatch = \"datastore=ds1\"\n",
            "[[maintenance]]\nname = \"tape\"\nwhen = \"thu 01:00-01:45\"\nmatch = \"kind=tape\"\n",
            "[kinds.verify]\ncost = { ds-io = 2 }\n[kinds.sync]\ncost = { ds-io = 3 }\n",
        ),
    };
    // Shared and exclusive conflicts: on a key, with `overlap`, with and without a delay.
    let shared = match variant % 4 {
        0 => "[[conflict]]\nkeys = [\"datastore\"]\nmatch = \"kind in (backup, verify, sync)\"\nexclusive = \"kind=verify\"\n",
        1 => "[[conflict]]\noverlap = \"ns\"\nexclusive = \"kind in (restore, tape)\"\nexclusive_delay = \"700ms\"\n",
        2 => "[[conflict]]\nkeys = [\"datastore\"]\nexclusive = \"kind=sync\"\nexclusive_delay = \"2s\"\n[[conflict]]\nkeys = [\"group\"]\noverlap = \"ns\"\nexclusive = \"kind=verify\"\n",
        _ => "",
    };
    format!("{BASE}{limits}{shared}")
}

fn extra_queue(flavor: u8) -> &'static str {
    match flavor {
        0 => "",
        1 => "strict = true\n",
        2 => "fair_share = \"owner\"\naging = \"500ms\"\n",
        _ => "fair_share = \"owner\"\n",
    }
}

/// Flavors 0..=3 are queue flavors; 4..=7 add preempting kinds (restore, sync) and protect
/// tape, over the queue flavor `flavor % 4`; [`PER_SCOPE`] sets reservations per scope.
const PER_SCOPE: u8 = 8;

/// `[queue] order = "window"` (horizon 2 s) over queue flavor 0, beside the oracle;
/// [`WINDOW_AGING`] over flavor 2 (fair share, aging, `reserve_after` 300 ms counted from
/// the planned start), without it, as flavor 2 runs (reservations are armed by timers in the
/// indexed engine and on every pass in the oracle).
/// Every submit then gets an expected run from its shape.
const WINDOW: u8 = 9;
const WINDOW_AGING: u8 = 10;

fn make_policy(variant: u8, flavor: u8) -> Policy {
    if flavor >= WINDOW {
        let mut p = make_policy(variant, if flavor == WINDOW { 0 } else { 2 });
        p.queue.order = lockgate_core::policy::QueueOrder::Window;
        p.queue.window_horizon = std::time::Duration::from_secs(2);
        return p;
    }
    let per_scope = flavor == PER_SCOPE;
    let (preempt, flavor) = (flavor >= 4 && !per_scope, flavor % 4);
    let text =
        policy_text(variant).replace("[queue]\n", &format!("[queue]\n{}", extra_queue(flavor)));
    let text = if preempt {
        let text = text.replace("[kinds.tape]\n", "[kinds.tape]\npreemptible = false\n")
            + "[kinds.restore]\npreempt = true\n";
        // The windows variant declares `[kinds.sync]` already: extend it there.
        let windowed = "[kinds.sync]\ncost = { ds-io = 3 }\n";
        if text.contains(windowed) {
            text.replace(
                windowed,
                "[kinds.sync]\npreempt = true\ncost = { ds-io = 3, threads = 2 }\n",
            )
        } else {
            text + "[kinds.sync]\npreempt = true\ncost = { threads = 2 }\n"
        }
    } else {
        text
    };
    let text = if flavor == 2 {
        text.replace("reserve_after = \"10h\"", "reserve_after = \"300ms\"")
    } else {
        text
    };
    // Reservations per scope: a limit, a conflict, a plain pool (as a table) and a
    // per-value pool with their own `reserve_after`, a strict limit and strict conflicts;
    // the global `reserve_after` stays 10 h.
    let text = if per_scope {
        text.replace(
            "name = \"per-ds\"\n",
            "name = \"per-ds\"\nreserve_after = \"200ms\"\n",
        )
        .replace(
            "name = \"per-owner\"\n",
            "name = \"per-owner\"\nstrict = true\n",
        )
        .replace(
            "keys = [\"datastore\", \"group\"]\n",
            "keys = [\"datastore\", \"group\"]\nreserve_after = \"400ms\"\n",
        )
        .replace(
            "exclusive = \"kind=verify\"\n",
            "exclusive = \"kind=verify\"\nstrict = true\n",
        )
        .replace(
            "[resources]\nthreads = 6\n",
            "[resources.threads]\ncapacity = 6\nreserve_after = \"300ms\"\n",
        )
        .replace(
            "per = [\"datastore\"]\ncapacity = 3\n",
            "per = [\"datastore\"]\ncapacity = 3\nreserve_after = \"100ms\"\n",
        )
    } else {
        text
    };
    let policy = Policy::from_toml(&text, Some("props.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !per_scope || policy.pool_reserves.len() == 2,
        "both pools carry a reservation rule"
    );
    policy
}

#[derive(Debug, Clone)]
enum Op {
    Submit {
        kind: u8,
        ds: u8,
        group: u8,
        owner: u8,
        prio: i8,
        place: u8,
        node: u8,
    },
    Register {
        node: u8,
        labels: u8,
    },
    Cordon {
        node: u8,
        on: bool,
    },
    Remove {
        node: u8,
    },
    Prepared {
        pick: u16,
    },
    Finish {
        pick: u16,
        outcome: u8,
    },
    Cancel {
        pick: u16,
        force: bool,
    },
    Heartbeat,
    Advance {
        ms: u16,
    },
    /// A long step, to cross window boundaries.
    Tick {
        minutes: u8,
    },
    Apply {
        variant: u8,
    },
    Pause {
        selector: u8,
        until: Option<u16>,
    },
    Resume {
        pick: u16,
    },
    SubmitAfter {
        kind: u8,
        ds: u8,
        pick: u16,
        ok: bool,
        ended: bool,
    },
}

const PAUSE_MATCH: [Option<&str>; 4] = [
    None,
    Some("datastore=ds0"),
    Some("kind in (backup, verify)"),
    Some("owner=o1"),
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..6, 0u8..4, 0u8..3, 0u8..3, -2i8..3, 0u8..3, 0u8..4).prop_map(|(kind, ds, group, owner, prio, place, node)| Op::Submit { kind, ds, group, owner, prio, place, node }),
        2 => (0u8..4, 0u8..4).prop_map(|(node, labels)| Op::Register { node, labels }),
        1 => (0u8..4, any::<bool>()).prop_map(|(node, on)| Op::Cordon { node, on }),
        1 => (0u8..4).prop_map(|node| Op::Remove { node }),
        3 => any::<u16>().prop_map(|pick| Op::Prepared { pick }),
        5 => (any::<u16>(), 0u8..3).prop_map(|(pick, outcome)| Op::Finish { pick, outcome }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(pick, force)| Op::Cancel { pick, force }),
        3 => Just(Op::Heartbeat),
        3 => (1u16..1500).prop_map(|ms| Op::Advance { ms }),
        1 => (0u8..5).prop_map(|variant| Op::Apply { variant }),
        1 => (1u8..40).prop_map(|minutes| Op::Tick { minutes }),
        1 => (0u8..4, prop::option::of(1u16..3000)).prop_map(|(selector, until)| Op::Pause { selector, until }),
        1 => any::<u16>().prop_map(|pick| Op::Resume { pick }),
        3 => (0u8..6, 0u8..4, any::<u16>(), any::<bool>(), any::<bool>()).prop_map(|(kind, ds, pick, ok, ended)| Op::SubmitAfter { kind, ds, pick, ok, ended }),
    ]
}

const KINDS: [&str; 6] = ["backup", "verify", "sync", "tape", "data-upload", "restore"];

fn live_sorted(e: &Engine, pred: impl Fn(&Job) -> bool) -> Vec<Job> {
    let mut v: Vec<Job> = e.jobs().filter(|j| pred(j)).cloned().collect();
    v.sort_by_key(|j| j.id);
    v
}

fn pick(jobs: &[Job], i: u16) -> Option<&Job> {
    (!jobs.is_empty()).then(|| &jobs[i as usize % jobs.len()])
}

/// Applies one operation; returns whether it was a policy change.
fn apply(e: &mut Engine, op: &Op, now: &mut u64, flavor: u8) -> bool {
    let t = Timestamp(*now);
    match *op {
        Op::Submit {
            kind,
            ds,
            group,
            owner,
            prio,
            place,
            node,
        } => {
            let kind = KINDS[kind as usize];
            let mut attrs = BTreeMap::new();
            attrs.insert("datastore".to_string(), format!("ds{ds}"));
            attrs.insert("group".to_string(), format!("vm/{group}"));
            let ns = ["a", "b", "a,b", "*", ""][(ds + group + owner) as usize % 5];
            if !ns.is_empty() {
                attrs.insert("ns".to_string(), ns.to_string());
            }
            let (node, node_selector, executor) = match place {
                0 => (None, None, None),
                1 => (Some(format!("n{node}")), None, Some(Executor::Agent)),
                _ => (
                    None,
                    Some(if node % 2 == 0 {
                        String::new()
                    } else {
                        "size=big".into()
                    }),
                    None,
                ),
            };
            let spec = JobSpec {
                kind: kind.into(),
                attrs,
                owner: format!("o{owner}"),
                priority: Some(prio as i64),
                node,
                node_selector,
                executor,
                ..JobSpec::default()
            };
            let id = e.submit(spec, t).expect("valid submit").job.id;
            if flavor >= WINDOW {
                let run = (kind.len() as u64 * 397 + u64::from(ds) * 131 + u64::from(group)) % 3000;
                e.set_expected_run(id, std::time::Duration::from_millis(run), t);
            }
        }
        Op::Register { node, labels } => {
            let pairs: &[(&str, &str)] = match labels {
                0 => &[("role", "worker")],
                1 => &[("role", "db")],
                2 => &[("size", "big")],
                _ => &[("role", "worker"), ("size", "big")],
            };
            let labels: BTreeMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let kinds = KINDS.iter().map(|k| k.to_string()).collect();
            e.register_node(
                NodeRegistration {
                    name: format!("n{node}"),
                    labels,
                    resources: BTreeMap::new(),
                    kinds,
                    instance: None,
                },
                t,
            );
        }
        Op::Cordon { node, on } => {
            e.set_cordon(&format!("n{node}"), on, t);
        }
        Op::Remove { node } => {
            e.remove_node(&format!("n{node}"), t);
        }
        Op::Prepared { pick: i } => {
            let jobs = live_sorted(e, |j| j.state == JobState::Preparing);
            if let Some(j) = pick(&jobs, i) {
                e.prepared(j.id, j.lease.unwrap().token, t)
                    .expect("holder reports prepared");
            }
        }
        Op::Finish { pick: i, outcome } => {
            let jobs = live_sorted(e, |j| j.state.is_admitted());
            if let Some(j) = pick(&jobs, i) {
                let outcome =
                    [Outcome::Succeeded, Outcome::Failed, Outcome::Cancelled][outcome as usize];
                e.finish(j.id, j.lease.unwrap().token, outcome, None, t)
                    .expect("holder finishes");
            }
        }
        Op::Cancel { pick: i, force } => {
            let jobs = live_sorted(e, |j| !j.state.is_terminal());
            if let Some(j) = pick(&jobs, i) {
                e.cancel(j.id, force, t).expect("cancel a live job");
            }
        }
        Op::Heartbeat => {
            for j in live_sorted(e, |j| j.state.is_admitted()) {
                if let Some(l) = j.lease {
                    let _ = e.heartbeat(j.id, l.token, t);
                }
            }
            let names: Vec<String> = e.nodes().map(|n| n.name.clone()).collect();
            for n in names {
                e.node_heartbeat(&n, t);
            }
        }
        Op::Advance { ms } => {
            *now += u64::from(ms);
            e.handle_timeout(Timestamp(*now));
        }
        Op::Tick { minutes } => {
            *now += u64::from(minutes) * 60_000;
            e.handle_timeout(Timestamp(*now));
        }
        Op::Apply { variant } => {
            e.apply_policy(make_policy(variant, flavor), t);
            return true;
        }
        Op::Pause { selector, until } => {
            let spec = PauseSpec {
                selector: PAUSE_MATCH[selector as usize].map(str::to_string),
                reason: "props".into(),
                by: "admin".into(),
                until: until.map(|ms| Timestamp(*now + u64::from(ms))),
            };
            e.pause(spec, t).expect("valid pause");
        }
        Op::Resume { pick } => {
            e.handle_timeout(t);
            let ids: Vec<u64> = e.pauses().map(|p| p.id).collect();
            if !ids.is_empty() {
                e.resume(ids[pick as usize % ids.len()], t).expect("active");
            }
        }
        Op::SubmitAfter {
            kind,
            ds,
            pick: i,
            ok,
            ended,
        } => {
            let live = live_sorted(e, |_| true);
            let dep = if ended && !ok && e.next_id() > 1 {
                // Any id ever given: an ended one is met at once.
                Some(1 + u64::from(i) % (e.next_id() - 1))
            } else {
                pick(&live, i).map(|j| j.id)
            };
            let Some(dep) = dep else { return false };
            let mut attrs = BTreeMap::new();
            attrs.insert("datastore".to_string(), format!("ds{ds}"));
            let spec = JobSpec {
                kind: KINDS[kind as usize].into(),
                attrs,
                owner: format!("o{}", i % 3),
                after: if ok { vec![] } else { vec![dep] },
                after_ok: if ok { vec![dep] } else { vec![] },
                ..JobSpec::default()
            };
            e.submit(spec, t).expect("valid dependent");
        }
    }
    false
}

/// The number a rule with `windows` sets at `now` (UTC): the smallest active window's,
/// else its own.
fn windowed(windows: &[LimitWindow], own: Option<u64>, now: u64) -> Option<u64> {
    windows
        .iter()
        .filter(|w| {
            w.when
                .active_until(Timestamp(now), &jiff::tz::TimeZone::UTC)
                .is_some()
        })
        .map(|w| u64::from(w.max))
        .min()
        .or(own)
}

/// Whether an active `[[maintenance]]` matches `j` at `now`.
fn in_maintenance(p: &Policy, j: &Job, now: u64) -> Option<String> {
    p.maintenance
        .iter()
        .find(|m| {
            m.matcher
                .as_ref()
                .is_none_or(|s| s.matches(|k| j.key_value(k)))
                && m.when
                    .active_until(Timestamp(now), &jiff::tz::TimeZone::UTC)
                    .is_some()
        })
        .map(|m| m.name.clone())
}

/// What the test knows without asking the engine: the active pauses (the selectors and
/// `until` of the operations it applied, active from the engine's `paused` event on) and
/// every job that ended for good, with its state.
#[derive(Default)]
struct Model {
    pauses: BTreeMap<u64, (Option<String>, Option<u64>)>,
    /// The pause the current step creates.
    pending: Option<(Option<String>, Option<u64>)>,
    /// The current step is a resume.
    resuming: bool,
    ended: BTreeMap<JobId, JobState>,
}

impl Model {
    /// Before a step's events are read: what the operation asks for.
    fn note_op(&mut self, op: &Op, now: u64) {
        self.pending = match *op {
            Op::Pause { selector, until } => Some((
                PAUSE_MATCH[selector as usize].map(str::to_string),
                until.map(|ms| now + u64::from(ms)),
            )),
            _ => None,
        };
        self.resuming = matches!(op, Op::Resume { .. });
    }

    /// A pause event, in the order the engine reports it.
    fn pause_event(&mut self, ev: &Event, now: u64) -> Result<(), String> {
        match ev {
            Event::Paused { pause } => {
                let p = self.pending.take().ok_or("a pause nobody asked for")?;
                self.pauses.insert(pause.id, p);
            }
            Event::Resumed { pause } => {
                let (_, until) = self.pauses.remove(&pause.id).ok_or("resumed twice")?;
                let due = until.is_some_and(|u| u <= now);
                if !due && !std::mem::take(&mut self.resuming) {
                    return Err(format!("pause {} ended before its until", pause.id));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// After a step: no pause outlives its `until`.
    fn check_pauses(&self, now: u64) -> Result<(), String> {
        match self
            .pauses
            .iter()
            .find(|(_, (_, u))| u.is_some_and(|u| u <= now))
        {
            Some((id, _)) => Err(format!("pause {id} still active past its until")),
            None => Ok(()),
        }
    }

    fn pause_matching(&self, job: &Job) -> Option<u64> {
        self.pauses
            .iter()
            .find(|(_, (sel, _))| {
                sel.as_deref().is_none_or(|s| {
                    lockgate_core::selector::Selector::parse_jobs(s)
                        .expect("valid")
                        .matches(|k| job.key_value(k))
                })
            })
            .map(|(&id, _)| id)
    }

    /// An admission must respect every pause and dependency.
    fn check_admission(&self, job: &Job) -> Result<(), String> {
        if let Some(p) = self.pause_matching(job) {
            return Err(format!("job {} admitted under pause {p}", job.id));
        }
        for d in job.after.iter().chain(&job.after_ok) {
            if !self.ended.contains_key(d) {
                return Err(format!(
                    "job {} admitted before its dependency {d} ended",
                    job.id
                ));
            }
        }
        if let Some(d) = job
            .after_ok
            .iter()
            .find(|d| self.ended.get(d).is_some_and(|&s| s != JobState::Succeeded))
        {
            return Err(format!(
                "job {} admitted after_ok {d}, which did not succeed",
                job.id
            ));
        }
        Ok(())
    }

    /// A queued job is held by a pause or a dependency exactly when the model says so.
    fn check_queued(&self, e: &mut Engine, now: u64) -> Result<(), String> {
        for j in live_sorted(e, |j| j.state == JobState::Queued && j.attempt == 1) {
            let deps_open = j
                .after
                .iter()
                .chain(&j.after_ok)
                .any(|d| !self.ended.contains_key(d));
            if let Some(d) = j
                .after_ok
                .iter()
                .find(|d| self.ended.get(d).is_some_and(|&s| s != JobState::Succeeded))
            {
                return Err(format!(
                    "job {} still queued after_ok {d}, which failed",
                    j.id
                ));
            }
            let why = e.explain(j.id, Timestamp(now)).expect("live");
            let says_after = why.reasons.iter().any(|r| r.kind.starts_with("after"));
            if says_after != deps_open {
                return Err(format!(
                    "job {}: dependencies open {deps_open}, explain: {}",
                    j.id, why.text
                ));
            }
            let paused = self.pause_matching(&j).is_some();
            let past = j.not_before.is_none_or(|t| t.0 <= now);
            if past && !deps_open && paused != e.paused_by(j.id).is_some() {
                return Err(format!(
                    "job {}: model pause {paused}, explain: {}",
                    j.id, why.text
                ));
            }
        }
        Ok(())
    }
}

/// Counts from the jobs themselves, scope name -> (count, limit at `now`).
fn recount(
    e: &Engine,
    only: Option<&BTreeSet<JobId>>,
    now: u64,
) -> BTreeMap<String, (u64, Option<u64>)> {
    let p = e.policy();
    let mut out: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
    let mut add = |name: String, n: u64, limit: Option<u64>| {
        let entry = out.entry(name).or_insert((0, limit));
        entry.0 += n;
    };
    let admitted: Vec<Job> = live_sorted(e, |j| {
        j.state.is_admitted() && only.is_none_or(|o| o.contains(&j.id))
    });
    for j in &admitted {
        let coord = p.is_coordinator(&j.kind);
        let lookup = |k: &str| j.key_value(k);
        if !coord {
            let global = p.global.max_running.map(u64::from);
            add("global".into(), 1, windowed(&p.global.windows, global, now));
            for (pool, &c) in &j.cost {
                if let Some(&cap) = p.resources.get(pool) {
                    add(format!("pool:{pool}"), c, Some(cap));
                }
                let Some(vp) = p.value_pools.get(pool) else {
                    continue;
                };
                let parts: Option<Vec<String>> = vp
                    .per
                    .iter()
                    .map(|k| lookup(k.name()).map(|v| format!("{}={v}", k.name())))
                    .collect();
                if let Some(parts) = parts.filter(|_| c > 0) {
                    add(
                        format!("pool:{pool}[{}]", parts.join(",")),
                        c,
                        Some(vp.capacity),
                    );
                }
            }
        }
        if j.two_stage && matches!(j.state, JobState::Preparing | JobState::Prepared) && !coord {
            add(
                "global-prepare".into(),
                1,
                p.global.prepare_queue.map(u64::from),
            );
        }
        for l in &p.limits {
            let applies = match &l.matcher {
                Some(m) => m.matches(lookup) && (!coord || m.names_value("kind", &j.kind)),
                None => !coord,
            };
            let vals: Option<Vec<String>> = l
                .per
                .iter()
                .map(|k| lookup(k.name()).map(str::to_string))
                .collect();
            if let (true, Some(vals)) = (applies, vals) {
                let parts: Vec<String> = l
                    .per
                    .iter()
                    .zip(&vals)
                    .map(|(k, v)| format!("{}={v}", k.name()))
                    .collect();
                let own = l.limit_for(&vals).map(u64::from);
                add(
                    format!("limit:{}[{}]", l.name, parts.join(",")),
                    1,
                    windowed(&l.windows, own, now),
                );
            }
        }
        if let Some(n) = j.node().and_then(|n| e.node(n)) {
            let pq = u64::from(p.nodes.prepare_queue);
            let running = u64::from(j.state == JobState::Running);
            add(format!("node:{}", n.name), running, n.number.map(u64::from));
            add(
                format!("node-prepare:{}", n.name),
                1,
                n.number.map(|m| u64::from(m) + pq),
            );
        }
    }
    // Key conflicts only (the props policies have no `overlap` conflict; those are tested
    // in engine.rs): at most one admitted job per key.
    for (i, c) in p
        .conflicts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.overlap.is_none() && c.exclusive.is_none())
    {
        for j in &admitted {
            if c.matcher
                .as_ref()
                .is_some_and(|m| !m.matches(|k| j.key_value(k)))
            {
                continue;
            }
            let key: Option<Vec<String>> = c
                .keys
                .iter()
                .map(|k| j.key_value(k.name()).map(str::to_string))
                .collect();
            if let Some(key) = key {
                add(format!("conflict#{i}:{key:?}"), 1, Some(1));
            }
        }
    }
    out
}

/// A job taking part in a conflict: its key values, its set (with `overlap`), and whether
/// it needs the key alone.
type Taker<'a> = (&'a Job, Vec<String>, Option<BTreeSet<String>>, bool);

/// Every pair of admitted jobs that conflict under the policy, recomputed from the jobs
/// alone: equal keys, overlapping sets (`*` overlaps all) where the rule has `overlap`,
/// and not both shared where it has `exclusive`.
fn conflicting_pairs(
    e: &Engine,
    only: Option<&BTreeSet<JobId>>,
) -> BTreeSet<(usize, JobId, JobId)> {
    let admitted = live_sorted(e, |j| {
        j.state.is_admitted() && only.is_none_or(|o| o.contains(&j.id))
    });
    let mut out = BTreeSet::new();
    for (i, c) in e.policy().conflicts.iter().enumerate() {
        let part: Vec<Taker<'_>> = admitted
            .iter()
            .filter(|j| {
                c.matcher
                    .as_ref()
                    .is_none_or(|m| m.matches(|k| j.key_value(k)))
            })
            .filter_map(|j| {
                let key: Option<Vec<String>> = c
                    .keys
                    .iter()
                    .map(|k| j.key_value(k.name()).map(str::to_string))
                    .collect();
                let set = match &c.overlap {
                    None => None,
                    Some(a) => {
                        let set: BTreeSet<String> = j
                            .attrs
                            .get(a)?
                            .split(',')
                            .map(|v| v.trim().to_string())
                            .filter(|v| !v.is_empty())
                            .collect();
                        if set.is_empty() {
                            return None;
                        }
                        Some(set)
                    }
                };
                let alone = c
                    .exclusive
                    .as_ref()
                    .is_none_or(|m| m.matches(|k| j.key_value(k)));
                Some((j, key?, set, alone))
            })
            .collect();
        for (x, (a, ka, sa, ea)) in part.iter().enumerate() {
            for (b, kb, sb, eb) in &part[x + 1..] {
                let overlaps = match (sa, sb) {
                    (Some(sa), Some(sb)) => {
                        sa.contains("*") || sb.contains("*") || !sa.is_disjoint(sb)
                    }
                    _ => true,
                };
                if ka == kb && overlaps && (*ea || *eb) {
                    out.insert((i, a.id, b.id));
                }
            }
        }
    }
    out
}

struct Checker {
    prev: BTreeMap<String, (u64, Option<u64>)>,
    /// Conflicting pairs of the previous step (a policy change may create some).
    pairs: BTreeSet<(usize, JobId, JobId)>,
    admissions: BTreeSet<(JobId, u32, bool)>,
    /// Victims asked to stop: victim -> (preemptor, the attempt that was asked).
    asked: BTreeMap<JobId, (JobId, u32)>,
    model: Model,
}

/// The preemptor named in a victim's message (`preempted by job P: stopping`).
fn preemptor_of(job: &Job) -> Option<JobId> {
    let m = job.message.as_deref()?;
    m.strip_prefix("preempted by job ")?
        .strip_suffix(": stopping")?
        .parse()
        .ok()
}

impl Checker {
    /// Preemption rules, from the events alone: a victim has a lower priority than its
    /// preemptor; a victim still listed when its preemptor is admitted still holds (the
    /// recount counts it, so the preemptor fit beside it);
    /// a victim that stops without succeeding is queued again with attempt + 1; a failed
    /// or lost job keeps a retry exactly when its attempts less its preemptions are within
    /// the kind's retries.
    fn preemption(&mut self, e: &Engine, change: JobChange, job: &Job) -> Result<(), String> {
        let cancel_preempted = job.cancel_reason == Some(CancelReason::Preempted);
        match change {
            JobChange::CancelRequested if cancel_preempted => {
                let p = preemptor_of(job).ok_or(format!("victim {} names no preemptor", job.id))?;
                let pj = e
                    .job(p)
                    .ok_or(format!("preemptor {p} of {} is gone", job.id))?;
                if pj.priority <= job.priority {
                    return Err(format!(
                        "job {p} (priority {}) preempted job {} (priority {})",
                        pj.priority, job.id, job.priority
                    ));
                }
                self.asked.insert(job.id, (p, job.attempt));
            }
            JobChange::AdmittedPrepare | JobChange::Started => {
                // A preemptor is admitted before its victims released only when room came
                // from elsewhere (a node registered, a raised limit, another job ended):
                // then it must fit with every victim still counted, as the recount after
                // this step checks. Into its victims' own room it must never be admitted
                // early: every scope it holds must fit it with the victims counted.
                for (v, (p, _)) in &self.asked {
                    if *p == job.id && !e.job(*v).is_some_and(|j| j.state.is_admitted()) {
                        return Err(format!("victim {v} of {p} released but was not requeued"));
                    }
                }
            }
            JobChange::Requeued => {
                if let Some((_, attempt)) = self.asked.remove(&job.id) {
                    if job.attempt != attempt + 1 || job.state != JobState::Queued {
                        return Err(format!(
                            "victim {} requeued as attempt {} ({}), asked at attempt {attempt}",
                            job.id, job.attempt, job.state
                        ));
                    }
                }
            }
            JobChange::Finished => {
                self.asked.remove(&job.id);
                let times = u32::from(job.kind == "data-upload");
                let keeps = matches!(job.state, JobState::Failed | JobState::Lost)
                    && job.attempt - job.preemptions <= times;
                if keeps != job.retry_at.is_some() {
                    return Err(format!(
                        "job {} ended {} at attempt {} with {} preemptions: retry {:?}",
                        job.id, job.state, job.attempt, job.preemptions, job.retry_at
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Checker {
    fn step(
        &mut self,
        e: &mut Engine,
        now: u64,
        policy_change: bool,
        running_before: &BTreeSet<JobId>,
    ) -> Result<(), String> {
        e.check_invariants()?;
        while let Some(ev) = e.poll_event() {
            self.model.pause_event(&ev, now)?;
            if let Event::Job { change, job } = ev {
                self.preemption(e, change, &job)?;
                let stage = match change {
                    JobChange::AdmittedPrepare => Some(true),
                    JobChange::Started => Some(false),
                    _ => None,
                };
                if change == JobChange::Finished && job.retry_at.is_none() {
                    self.model.ended.insert(job.id, job.state);
                }
                let from_queue = change == JobChange::AdmittedPrepare
                    || (change == JobChange::Started && job.prepare_started_at.is_none());
                if from_queue {
                    self.model.check_admission(&job)?;
                }
                if let Some(prep) = stage {
                    // A two-stage job's start is not an admission: it took its scopes
                    // when it was admitted to prepare.
                    let admission = prep || !job.two_stage;
                    if let Some(m) = in_maintenance(e.policy(), &job, now).filter(|_| admission) {
                        return Err(format!(
                            "job {} admitted ({change:?}) during maintenance {m}",
                            job.id
                        ));
                    }
                    if !self.admissions.insert((job.id, job.attempt, prep)) {
                        return Err(format!(
                            "job {} attempt {} admitted twice ({change:?})",
                            job.id, job.attempt
                        ));
                    }
                }
            }
        }
        let counts = recount(e, None, now);
        if policy_change {
            // The new policy counts what already ran; only admissions must respect it.
            self.prev = recount(e, Some(running_before), now);
        }
        for (name, &(n, limit)) in &counts {
            let before = self.prev.get(name).map_or(0, |p| p.0);
            if limit.is_some_and(|l| n > l) && n > before {
                return Err(format!("{name}: {n} > limit {limit:?} (was {before})"));
            }
        }
        self.prev = counts;
        if policy_change {
            self.pairs = conflicting_pairs(e, Some(running_before));
        }
        let pairs = conflicting_pairs(e, None);
        if let Some(p) = pairs.difference(&self.pairs).next() {
            return Err(format!(
                "conflict[{}]: jobs {} and {} hold one key and one needs it alone",
                p.0, p.1, p.2
            ));
        }
        self.pairs = pairs;
        self.model.check_pauses(now)?;
        self.model.check_queued(e, now)?;
        let stuck = e.admissible_waiting(Timestamp(now));
        if !stuck.is_empty() {
            let detail: Vec<String> = stuck
                .iter()
                .map(|&id| {
                    format!(
                        "{} / {}",
                        e.debug_job(id),
                        e.explain(id, Timestamp(now))
                            .map(|x| x.text)
                            .unwrap_or_default()
                    )
                })
                .collect();
            return Err(format!(
                "admissible jobs left waiting: {stuck:?} {detail:?}"
            ));
        }
        let queued: Vec<JobId> = live_sorted(e, |j| j.state == JobState::Queued)
            .iter()
            .map(|j| j.id)
            .collect();
        for id in queued {
            let why = e.explain(id, Timestamp(now)).expect("live");
            if why.reasons.is_empty() {
                return Err(format!(
                    "queued job {id} has no holding condition: {}",
                    why.text
                ));
            }
        }
        if policy_change {
            for id in running_before {
                if !e.job(*id).is_some_and(|j| j.state.is_admitted()) {
                    return Err(format!("policy change stopped job {id}"));
                }
            }
        }
        Ok(())
    }
}

fn run_case(
    ops: &[Op],
    variant: u8,
    flavor: u8,
    compare_oracle: bool,
) -> Result<(), TestCaseError> {
    let mut fast = Engine::new(make_policy(variant, flavor), Mode::Indexed);
    let mut slow = Engine::new(make_policy(variant, flavor), Mode::Rescan);
    let (mut now_f, mut now_s) = (1_000u64, 1_000u64);
    let mut checker = Checker {
        prev: BTreeMap::new(),
        pairs: BTreeSet::new(),
        admissions: BTreeSet::new(),
        asked: BTreeMap::new(),
        model: Model::default(),
    };
    for (step, op) in ops.iter().enumerate() {
        let before: BTreeSet<JobId> = live_sorted(&fast, |j| j.state.is_admitted())
            .iter()
            .map(|j| j.id)
            .collect();
        checker.model.note_op(op, now_f);
        let changed = apply(&mut fast, op, &mut now_f, flavor);
        checker
            .step(&mut fast, now_f, changed, &before)
            .map_err(|m| TestCaseError::fail(format!("step {step} {op:?}: {m}")))?;
        if compare_oracle {
            apply(&mut slow, op, &mut now_s, flavor);
            while slow.poll_event().is_some() {}
            let (a, b) = (fast.export(), slow.export());
            if a != b {
                let diff: Vec<String> = a
                    .jobs
                    .iter()
                    .zip(&b.jobs)
                    .filter(|(x, y)| x != y)
                    .map(|(x, y)| {
                        format!(
                            "job {}: indexed {} on {:?} / rescan {} on {:?}",
                            x.id,
                            x.state,
                            x.node(),
                            y.state,
                            y.node()
                        )
                    })
                    .collect();
                return Err(TestCaseError::fail(format!(
                    "step {step} {op:?}: engines disagree: {diff:?}"
                )));
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn indexed_engine_matches_the_rescanning_oracle(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, 0, true)?;
    }

    #[test]
    fn invariants_hold_with_strict_order(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, 1, true)?;
    }

    #[test]
    fn invariants_hold_with_fair_share_aging_and_reservations(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, 2, false)?;
    }

    #[test]
    fn invariants_hold_with_reservations_per_scope(ops in prop::collection::vec(op(), 1..120), variant in 0u8..4) {
        run_case(&ops, variant, PER_SCOPE, false)?;
    }

    #[test]
    fn preemption_matches_the_oracle(ops in prop::collection::vec(op(), 1..120), variant in 0u8..4) {
        run_case(&ops, variant, 4, true)?;
    }

    #[test]
    fn preemption_with_strict_order_matches_the_oracle(ops in prop::collection::vec(op(), 1..120), variant in 0u8..4) {
        run_case(&ops, variant, 5, true)?;
    }

    #[test]
    fn preemption_with_fair_share_aging_and_reservations(ops in prop::collection::vec(op(), 1..120), variant in 0u8..4) {
        run_case(&ops, variant, 6, false)?;
    }

    #[test]
    fn window_order_matches_the_oracle(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, WINDOW, true)?;
    }

    #[test]
    fn window_order_with_fair_share_aging_and_reservations(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, WINDOW_AGING, false)?;
    }

    #[test]
    fn fair_share_matches_the_oracle(ops in prop::collection::vec(op(), 1..120), variant in 0u8..5) {
        run_case(&ops, variant, 3, true)?;
    }
}
