use super::*;
use lockgate_core::engine::{Engine, Mode};
use lockgate_core::event::Event;
use lockgate_core::job::{JobSpec, Outcome};
use lockgate_core::Policy;
use serde_json::json;
use std::collections::BTreeMap;

/// The event the server records for an engine event (as `Loop::drain_events` builds it:
/// the view with the policy's lease TTL and log flag).
fn served(ev: &Event) -> Option<Map<String, Value>> {
    let Event::Job { change, job } = ev else {
        return None;
    };
    let mut view = JobView::from_job(job, std::time::Duration::from_secs(30));
    view.log = true;
    match json!({ "type": "job", "change": change, "job": view }) {
        Value::Object(m) => Some(m),
        _ => unreachable!(),
    }
}

/// Two jobs through most of a life: submitted with every fixed field set, one queued
/// behind the other, its priority set, admitted, a lease renewed, cancellation asked,
/// finished, failed. Returns the events as served and the final rows of the jobs (also
/// the stores' tests' fixture).
pub(crate) fn a_life() -> (Vec<Map<String, Value>>, HashMap<JobId, Job>) {
    let policy = Policy::from_toml("[global]\nmax_running = 1\n", None).unwrap();
    let mut e = Engine::new(policy, Mode::Indexed);
    let spec = |key: &str, after: Vec<JobId>| JobSpec {
        kind: "backup".into(),
        attrs: BTreeMap::from([("group".into(), "vm/100".into())]),
        owner: "alice".into(),
        priority: Some(3),
        cost: Some(BTreeMap::new()),
        max_wait_ms: Some(3_600_000),
        max_run_ms: Some(60_500),
        idempotency_key: Some(key.into()),
        after,
        ..JobSpec::default()
    };
    let a = e.submit(spec("a", vec![]), Timestamp(1_000)).unwrap().job;
    let b = e
        .submit(spec("b", vec![a.id]), Timestamp(2_000))
        .unwrap()
        .job;
    e.set_priority(b.id, 9, Timestamp(3_000)).unwrap();
    let token = e.job(a.id).unwrap().lease.unwrap().token;
    e.heartbeat(a.id, token, Timestamp(4_000)).unwrap();
    e.cancel(a.id, false, Timestamp(5_000)).unwrap();
    e.finish(
        a.id,
        token,
        Outcome::Cancelled,
        Some("asked".into()),
        Timestamp(6_000),
    )
    .unwrap();
    let token = e.job(b.id).unwrap().lease.unwrap().token;
    e.finish(
        b.id,
        token,
        Outcome::Failed,
        Some("exit 2".into()),
        Timestamp(7_000),
    )
    .unwrap();
    let mut events = Vec::new();
    let mut last = HashMap::new();
    while let Some(ev) = e.poll_event() {
        if let Event::Job { job, .. } = &ev {
            last.insert(job.id, Job::clone(job));
        }
        events.extend(served(&ev));
    }
    (events, last)
}

#[test]
fn every_event_of_a_life_reads_back_as_it_was_served_from_the_last_job_row() {
    let (events, last) = a_life();
    assert!(events.len() >= 8, "{events:?}");
    let bodies: HashMap<JobId, String> = last
        .iter()
        .map(|(id, j)| (*id, serde_json::to_string(j).unwrap()))
        .collect();
    let mut x = Expander::default();
    for (seq, data) in events.iter().enumerate() {
        let row = StoredEvent::new(seq as u64 + 1, Timestamp(1), data);
        let id = row.job.expect("a job event refers to its job");
        for fixed in [
            "\"attrs\"",
            "\"owner\"",
            "\"kind\"",
            "\"submitted_at\"",
            "null",
        ] {
            assert!(!row.data.contains(fixed), "{fixed} in {}", row.data);
        }
        let back = x.expand(row.data, row.job, bodies.get(&id).map(String::as_str));
        let back: Value = serde_json::from_str(&back).unwrap();
        assert_eq!(back, Value::Object(data.clone()), "event {}", seq + 1);
    }
}

#[test]
fn a_job_row_is_smaller_than_a_third_of_the_whole_event() {
    let (events, _) = a_life();
    let whole = serde_json::to_string(&events[0]).unwrap();
    let row = StoredEvent::new(1, Timestamp(1), &events[0]);
    assert!(
        row.data.len() * 3 < whole.len(),
        "{} of {}",
        row.data,
        whole
    );
}

#[test]
fn other_events_are_kept_whole() {
    let data = json!({ "type": "node_lost", "node": "n1", "job": null });
    let Value::Object(data) = data else {
        unreachable!()
    };
    let row = StoredEvent::new(4, Timestamp(9), &data);
    assert_eq!(row.job, None);
    assert_eq!(
        serde_json::from_str::<Value>(&row.data).unwrap(),
        json!(data)
    );
    let mut x = Expander::default();
    assert_eq!(x.expand(row.data.clone(), None, None), row.data);
}

#[test]
fn an_event_whose_job_row_is_gone_reads_with_what_its_row_holds_and_the_id() {
    let (events, _) = a_life();
    let row = StoredEvent::new(1, Timestamp(1), &events[0]);
    let back = Expander::default().expand(row.data, row.job, None);
    let back: Value = serde_json::from_str(&back).unwrap();
    assert_eq!(back["job"]["id"], events[0]["job"]["id"]);
    assert_eq!(back["job"]["state"], events[0]["job"]["state"]);
    assert_eq!(back["job"].get("owner"), None);
    let garbled = Expander::default().expand(
        "{\"type\":\"job\",\"job\":{}}".into(),
        Some(3),
        Some("not json"),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&garbled).unwrap(),
        json!({ "type": "job", "job": { "id": 3 } })
    );
}

/// An event row as versions before the `job` column wrote it: seq, at (ms), whole data.
pub(crate) type OldEvent = (u64, u64, String);

/// The rows an older lockgate wrote for [`a_life`] (schema versions before the `job`
/// column: every event whole), with an event whose job row is gone and one that is not a
/// job's: the jobs (with their `live` flag) and the events as (seq, at, data). A store
/// migrated from them must read back every event as it is here.
pub(crate) fn old_rows() -> (Vec<(Job, bool)>, Vec<OldEvent>) {
    let (mut events, last) = a_life();
    let mut orphan = events[0].clone();
    orphan["job"]["id"] = json!(99);
    events.push(orphan);
    match json!({ "type": "node_lost", "node": "n1" }) {
        Value::Object(m) => events.push(m),
        _ => unreachable!(),
    }
    let mut jobs: Vec<(Job, bool)> = last.into_values().map(|j| (j, false)).collect();
    jobs.sort_by_key(|(j, _)| j.id);
    let rows = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                i as u64 + 1,
                1_000 * (i as u64 + 1),
                serde_json::to_string(e).unwrap(),
            )
        })
        .collect();
    (jobs, rows)
}

/// Checks what a migrated store reads back against [`old_rows`]: every event equal, in
/// order.
pub(crate) fn assert_reads_back(old: &[OldEvent], read: &[StoredEvent]) {
    assert_eq!(read.len(), old.len());
    for ((seq, at, data), r) in old.iter().zip(read) {
        assert_eq!((r.seq, r.at), (*seq, Timestamp(*at)));
        let want: Value = serde_json::from_str(data).unwrap();
        let got: Value = serde_json::from_str(&r.data).unwrap();
        assert_eq!(got, want, "event {seq}");
    }
}

#[test]
fn the_fields_a_view_leaves_out_when_empty_are_the_ones_named() {
    let (_, last) = a_life();
    let job = last.values().next().unwrap();
    let keys = |v: &JobView| match serde_json::to_value(v).unwrap() {
        Value::Object(m) => m.keys().cloned().collect::<std::collections::BTreeSet<_>>(),
        _ => unreachable!(),
    };
    let mut empty = JobView::from_job(job, std::time::Duration::ZERO);
    (empty.after, empty.after_ok, empty.cancel_reason) = (vec![], vec![], None);
    (empty.preemptions, empty.expected, empty.log) = (0, None, false);
    let mut full = empty.clone();
    (full.after, full.after_ok) = (vec![1], vec![2]);
    full.cancel_reason = Some(lockgate_core::job::CancelReason::Cancel);
    (full.preemptions, full.log) = (1, true);
    full.expected = Some(Default::default());
    let left_out: Vec<String> = keys(&full).difference(&keys(&empty)).cloned().collect();
    let mut named: Vec<String> = JOB_OMITTED_WHEN_EMPTY
        .iter()
        .map(|s| s.to_string())
        .collect();
    named.sort();
    assert_eq!(left_out, named);
}
