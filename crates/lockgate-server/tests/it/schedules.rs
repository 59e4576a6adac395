//! Periodic schedules (design `schedules.md`) through the real server: bad expressions,
//! duplicates, misfires across a restart, `max_start_delay`, retries, and how API-created
//! schedules live next to the policy's. Schedules fire every 2 s (`*:*:0/2`) or once at an
//! explicit second, so each test takes seconds; no test asserts speed beyond wide margins.

use crate::harness::*;
use lockgate_api::{time, JobView, ScheduleRequest, ScheduleRunView, ScheduleView};
use lockgate_client::{Client, ClientError};
use lockgate_core::{JobState, Outcome, Timestamp};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const EVERY_2S: &str = "*:*:0/2";
/// Admitted runs hold their slot (no one renews) for the whole test, and the node the test
/// registers as an agent's ([`agent_node`]) is not lost for want of heartbeats.
const LONG_LEASES: &str = "[leases]\nttl = \"120s\"\n\n[nodes]\nttl = \"10m\"\n";

/// Registers node `n1` as an agent with a handler for `check` would: a schedule's runs are
/// agent jobs on any node, so without it they would wait. The test then holds the runs as
/// that agent would (finish, heartbeat with the lease token).
fn agent_node(c: &Client) {
    let reg = lockgate_api::NodeRegister {
        kinds: ["check".to_string()].into(),
        ..Default::default()
    };
    c.register_node("n1", &reg).unwrap();
}

fn request(name: &str, when: &str, extra: Value) -> ScheduleRequest {
    let mut v =
        json!({"name": name, "when": when, "job": {"kind": "check", "attrs": {"schedule": name}}});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A calendar event that elapses once, at the first whole second at least `secs` from now.
fn once_in(secs: u64) -> (String, Timestamp) {
    let at = (now_ms() / 1000 + secs + 1) * 1000;
    let ts = jiff::Timestamp::from_millisecond(at as i64).unwrap();
    (
        ts.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Timestamp(at),
    )
}

/// Polls `f` every 50 ms until it gives a value; panics with `what` after 30 s.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn show(c: &Client, name: &str) -> ScheduleView {
    c.schedule(name, 1000).unwrap()
}

/// The schedule's runs, oldest first.
fn runs(c: &Client, name: &str) -> Vec<ScheduleRunView> {
    let mut h = show(c, name).history;
    h.reverse();
    h
}

fn jobs_of(runs: &[ScheduleRunView]) -> Vec<u64> {
    runs.iter().filter_map(|r| r.job).collect()
}

fn ms(t: &str) -> u64 {
    time::parse(t).unwrap().0
}

fn finish(c: &Client, id: u64, outcome: Outcome) -> JobView {
    let token = c.job(id).unwrap().lease.expect("admitted").token;
    c.finish_job(id, token, outcome, None).unwrap()
}

fn error(body: &str) -> Value {
    serde_json::from_str::<Value>(body).unwrap()["error"].clone()
}

#[test]
fn bad_expressions_name_the_part_and_a_policy_holding_one_is_rejected_whole() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 2\n");
    let t = Some(s.admin.as_str());
    for (when, part) in [
        ("mon..xyz", "xyz"),
        ("25:00", "25"),
        ("*:0/0", "0/0"),
        ("03:00 Mars/Olympus", "Mars/Olympus"),
        ("61 * * * *", "61"),
    ] {
        let body = json!({"name": "bad", "when": when, "job": {"kind": "check"}}).to_string();
        let (status, text) = s.raw(
            "POST",
            "/v1/schedules",
            t,
            Some(("application/json", &body)),
        );
        assert_eq!(status, 422, "{when}: {text}");
        let e = error(&text);
        assert_eq!(e["field"], "when", "{when}: {text}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("{part:?}")),
            "{when}: the message names {part:?}: {msg}"
        );
    }
    for (body, field) in [
        (
            json!({"name": "a/b", "when": "daily", "job": {"kind": "check"}}),
            "name",
        ),
        (
            json!({"name": "j", "when": "daily", "job": {"kind": "check"}, "jitter_s": -1}),
            "jitter_s",
        ),
        (
            json!({"name": "j", "when": "daily", "job": {"kind": "check"}, "duplicates": "later"}),
            "duplicates",
        ),
        (
            json!({"name": "j", "when": "daily", "job": {"kind": "check", "cost": {"tape": 1}}}),
            "job.cost.tape",
        ),
        (
            json!({"name": "j", "when": "daily", "job": {"kind": "check"}, "colour": "red"}),
            "colour",
        ),
    ] {
        let (status, text) = s.raw(
            "POST",
            "/v1/schedules",
            t,
            Some(("application/json", &body.to_string())),
        );
        assert_eq!(
            (status, error(&text)["field"].as_str()),
            (422, Some(field)),
            "{text}"
        );
    }

    // A policy with one good and one bad schedule is rejected whole.
    let digest = s.admin().policy().unwrap().digest;
    let policy = "[global]\nmax_running = 2\n\n[[schedule]]\nname = \"good\"\nwhen = \"daily\"\njob = { kind = \"check\" }\n\n[[schedule]]\nname = \"bad\"\nwhen = \"25:00\"\njob = { kind = \"check\" }\n";
    let (status, text) = s.raw("PUT", "/v1/policy", t, Some(("application/toml", policy)));
    assert_eq!(status, 422, "{text}");
    let e = error(&text);
    assert_eq!(e["field"], "schedule[1].when");
    assert_eq!(e["line"], 11);
    assert!(e["message"].as_str().unwrap().contains("\"25\""), "{e}");
    let admin = s.admin();
    assert_eq!(admin.policy().unwrap().digest, digest, "nothing applied");
    assert!(admin.schedules().unwrap().schedules.is_empty());
}

#[test]
fn duplicates_skip_records_the_skipped_run_and_runs_start_at_their_time() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LONG_LEASES);
    let admin = s.admin();
    agent_node(&admin);
    let created = admin
        .create_schedule(&request("skipper", EVERY_2S, json!({})))
        .unwrap();
    assert_eq!(
        (created.source.as_str(), created.duplicates.as_str()),
        ("api", "skip")
    );
    let first = wait_for("the first run", || {
        runs(&admin, "skipper")
            .into_iter()
            .find(|r| r.job.is_some())
    });
    let j1 = admin.job(first.job.unwrap()).unwrap();
    assert_eq!(j1.owner, "schedule:skipper");
    assert_eq!(
        j1.idempotency_key.as_deref(),
        Some(format!("skipper/{}", first.planned).as_str())
    );
    assert_eq!(j1.state, JobState::Running, "nothing limits it");
    // The loop wakes at the planned time: never before it, and not a polling tick later
    // (the bound is wide on purpose: a loaded machine may be slow, a minute tick is not).
    let late = ms(&j1.submitted_at) as i64 - ms(&first.planned) as i64;
    assert!(
        (0..5_000).contains(&late),
        "submitted {late} ms after its planned time"
    );

    // While it runs, the next planned time is skipped and recorded as such.
    let skipped = wait_for("a skipped run", || {
        runs(&admin, "skipper")
            .into_iter()
            .find(|r| r.skipped && ms(&r.planned) > ms(&first.planned))
    });
    let note = skipped.note.clone().unwrap();
    assert!(
        note.contains(&format!("job {}", j1.id)) && note.contains("still running"),
        "{note}"
    );
    assert_eq!(skipped.state, None);
    let listed = admin.schedules().unwrap().schedules;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].next.is_some() && listed[0].last_run.is_some());

    // Once it ended, the next planned time gets a job again.
    finish(&admin, j1.id, Outcome::Succeeded);
    let second = wait_for("a second job", || {
        jobs_of(&runs(&admin, "skipper"))
            .into_iter()
            .find(|&j| j != j1.id)
    });
    assert!(second > j1.id);
    let h = runs(&admin, "skipper");
    let first_entry = h.iter().find(|r| r.job == Some(j1.id)).unwrap();
    assert_eq!(first_entry.state, Some(JobState::Succeeded));

    let (_, metrics) = s.raw("GET", "/metrics", None, None);
    assert!(
        metrics.contains("lockgate_schedule_runs_total{schedule=\"skipper\",result=\"skipped\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("lockgate_schedule_runs_total{schedule=\"skipper\",result=\"submitted\"}")
    );

    admin.delete_schedule("skipper").unwrap();
    assert!(admin.schedules().unwrap().schedules.is_empty());
    assert_eq!(
        admin.schedule("skipper", 1).unwrap_err().status(),
        Some(404)
    );
}

#[test]
fn duplicates_cancel_running_cancels_the_old_run_and_queue_keeps_both() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LONG_LEASES);
    let admin = s.admin();
    agent_node(&admin);
    let extra = |d: &str| json!({"duplicates": d});
    admin
        .create_schedule(&request("canceller", EVERY_2S, extra("cancel-running")))
        .unwrap();
    admin
        .create_schedule(&request("queuer", EVERY_2S, extra("queue")))
        .unwrap();

    let old = wait_for("the first run", || {
        jobs_of(&runs(&admin, "canceller")).first().copied()
    });
    assert_eq!(admin.job(old).unwrap().state, JobState::Running);
    let new = wait_for("the next run", || {
        jobs_of(&runs(&admin, "canceller"))
            .into_iter()
            .find(|&j| j != old)
    });
    let entry = runs(&admin, "canceller")
        .into_iter()
        .find(|r| r.job == Some(new))
        .unwrap();
    assert_eq!(
        entry.note.as_deref(),
        Some(format!("cancelled the previous run (job {old})").as_str())
    );
    // The running run is asked to stop (its holder sees it on the next heartbeat) and ends
    // cancelled when it does; its slot is not taken from it before.
    let j = admin.job(old).unwrap();
    assert!(j.cancel_requested, "{j:?}");
    let hb = admin.heartbeat(old, j.lease.unwrap().token).unwrap();
    assert!(hb.cancel_requested);
    assert_eq!(
        finish(&admin, old, Outcome::Cancelled).state,
        JobState::Cancelled
    );

    let both = wait_for("two runs of the queue schedule", || {
        let j = jobs_of(&runs(&admin, "queuer"));
        (j.len() >= 2).then_some(j)
    });
    for id in &both[..2] {
        let j = admin.job(*id).unwrap();
        assert_eq!(j.state, JobState::Running, "queue keeps both: {j:?}");
        assert!(!j.cancel_requested);
    }
}

#[test]
fn misfires_after_a_downtime_run_once_submits_one_catch_up_and_skip_none() {
    let dir = tempdir();
    let policy = format!(
        "{LONG_LEASES}\n[[schedule]]\nname = \"once\"\nwhen = \"{EVERY_2S}\"\njob = {{ kind = \"check\" }}\nduplicates = \"queue\"\nmisfire = \"run-once\"\n\n[[schedule]]\nname = \"never\"\nwhen = \"{EVERY_2S}\"\njob = {{ kind = \"check\" }}\nduplicates = \"queue\"\nmisfire = \"skip\"\n"
    );
    let s = TestServer::start(dir.path(), &policy);
    let admin = s.admin();
    for name in ["once", "never"] {
        wait_for("a run before the downtime", || {
            jobs_of(&runs(&admin, name)).first().copied()
        });
        assert_eq!(show(&admin, name).source, "policy");
    }
    s.stop();
    let down = now_ms();
    // Down across at least three planned times (every 2 s).
    std::thread::sleep(Duration::from_millis(7_000));
    let s = TestServer::open(dir.path(), None);
    let admin = s.admin();
    for (name, catch_up) in [("once", 1), ("never", 0)] {
        // The times decided at the restart (in one pass, so with one decision time).
        let after: Vec<ScheduleRunView> = runs(&admin, name)
            .into_iter()
            .filter(|r| ms(&r.planned) > down)
            .collect();
        let first_at = after.iter().map(|r| ms(&r.at)).min().unwrap();
        let missed: Vec<&ScheduleRunView> =
            after.iter().filter(|r| ms(&r.at) == first_at).collect();
        assert!(missed.len() >= 3, "{name}: {missed:?}");
        let submitted: Vec<_> = missed.iter().filter(|r| r.job.is_some()).collect();
        assert_eq!(submitted.len(), catch_up, "{name}: {missed:?}");
        for r in missed.iter().filter(|r| r.skipped) {
            assert!(
                r.note
                    .as_deref()
                    .unwrap()
                    .contains("missed while the server was down"),
                "{r:?}"
            );
        }
        if catch_up == 1 {
            assert_eq!(
                submitted[0].planned,
                missed.last().unwrap().planned,
                "the catch-up run is the latest missed time"
            );
        }
    }
    // Then both go on at their planned times, and no run was ever submitted twice.
    wait_for("an on-time run of the skip schedule", || {
        runs(&admin, "never")
            .into_iter()
            .find(|r| r.job.is_some() && ms(&r.planned) > down + 7_000)
    });
    for name in ["once", "never"] {
        let list = admin
            .jobs(&lockgate_api::JobQuery {
                owner: Some(format!("schedule:{name}")),
                limit: Some(1000),
                ..Default::default()
            })
            .unwrap()
            .jobs;
        let mut keys: Vec<_> = list
            .iter()
            .map(|j| j.idempotency_key.clone().unwrap())
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "{name}: a planned time submitted twice");
        assert_eq!(n, jobs_of(&runs(&admin, name)).len());
    }
}

#[test]
fn max_start_delay_expires_a_run_that_cannot_be_admitted_in_time() {
    let dir = tempdir();
    let s = TestServer::start(
        dir.path(),
        &format!("[global]\nmax_running = 1\n{LONG_LEASES}"),
    );
    let admin = s.admin();
    agent_node(&admin);
    let blocker = admin.submit(&job("blocker", &[])).unwrap().0;
    assert_eq!(blocker.state, JobState::Running);
    let (when, planned) = once_in(3);
    admin
        .create_schedule(&request("late", &when, json!({"max_start_delay_s": 1})))
        .unwrap();
    let run = wait_for("the run", || {
        runs(&admin, "late").into_iter().find(|r| r.job.is_some())
    });
    assert_eq!(ms(&run.planned), planned.0);
    let id = run.job.unwrap();
    let j = admin.job(id).unwrap();
    assert_eq!(j.max_wait_s, Some(1.0));
    let j = if j.state == JobState::Queued {
        admin.wait(id, JobState::Queued, 20).unwrap()
    } else {
        j
    };
    assert_eq!(j.state, JobState::Expired, "{j:?}");
    let msg = j.message.unwrap();
    assert!(msg.contains("not admitted within"), "{msg}");
    assert_eq!(runs(&admin, "late")[0].state, Some(JobState::Expired));
    assert_eq!(
        show(&admin, "late").next,
        None,
        "a one-time schedule is done"
    );
}

#[test]
fn retry_queues_a_failed_run_again_as_the_same_job_and_never_a_cancelled_one() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LONG_LEASES);
    let admin = s.admin();
    agent_node(&admin);
    let (when, _) = once_in(3);
    admin
        .create_schedule(&request(
            "retried",
            &when,
            json!({"retry": {"times": 2, "interval_s": 1}}),
        ))
        .unwrap();
    let id = wait_for("the run", || {
        jobs_of(&runs(&admin, "retried")).first().copied()
    });
    let j = admin.job(id).unwrap();
    assert_eq!((j.state, j.attempt), (JobState::Running, 1));
    let failed = finish(&admin, id, Outcome::Failed);
    assert_eq!(failed.state, JobState::Failed);
    assert!(failed.retry_at.is_some(), "{failed:?}");
    // After the interval the same job is queued again (and, unlimited, admitted).
    let mut j = admin.wait(id, JobState::Failed, 20).unwrap();
    if j.state == JobState::Queued {
        j = admin.wait(id, JobState::Queued, 20).unwrap();
    }
    assert_eq!((j.id, j.state, j.attempt), (id, JobState::Running, 2));
    // A cancelled run is not retried, though retries are left.
    assert_eq!(
        finish(&admin, id, Outcome::Cancelled).state,
        JobState::Cancelled
    );
    std::thread::sleep(Duration::from_millis(2_500));
    let j = admin.job(id).unwrap();
    assert_eq!(
        (j.state, j.attempt, j.retry_at),
        (JobState::Cancelled, 2, None)
    );
    assert_eq!(jobs_of(&runs(&admin, "retried")), [id], "one run, one job");
}

#[test]
fn api_schedules_share_names_with_the_policy_and_survive_a_restart() {
    let dir = tempdir();
    let policy =
        "[[schedule]]\nname = \"from-policy\"\nwhen = \"daily\"\njob = { kind = \"verify\" }\n";
    let s = TestServer::start(dir.path(), policy);
    let admin = s.admin();
    let t = Some(s.admin.as_str());
    let api = admin
        .create_schedule(&request(
            "from-api",
            "mon..fri 02:00",
            json!({"jitter_s": 60}),
        ))
        .unwrap();
    assert_eq!(api.jitter_s, Some(60.0));
    assert!(api.next.is_some());

    let e = admin
        .create_schedule(&request("from-policy", "daily", json!({})))
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), Some("schedule_exists")));
    let e = admin
        .create_schedule(&request("from-api", "daily", json!({})))
        .unwrap_err();
    assert_eq!(e.status(), Some(409));
    let taken = format!("{policy}\n[[schedule]]\nname = \"from-api\"\nwhen = \"daily\"\njob = {{ kind = \"verify\" }}\n");
    let (status, text) = s.raw("PUT", "/v1/policy", t, Some(("application/toml", &taken)));
    assert_eq!(status, 409, "{text}");
    assert_eq!(error(&text)["field"], "schedule[1].name");
    let (status, text) = s.raw("DELETE", "/v1/schedules/from-policy", t, None);
    assert_eq!(
        (status, error(&text)["code"].as_str()),
        (409, Some("policy_schedule")),
        "{text}"
    );
    assert!(error(&text)["message"].as_str().unwrap().contains("policy"));
    let viewer = s.token("watcher", lockgate_api::Role::Viewer, None);
    assert_eq!(viewer.schedules().unwrap().schedules.len(), 2);
    assert_eq!(
        viewer.delete_schedule("from-api").unwrap_err().status(),
        Some(403)
    );
    s.stop();

    let s = TestServer::open(dir.path(), None);
    let admin = s.admin();
    let list = admin.schedules().unwrap().schedules;
    let names: Vec<(&str, &str)> = list
        .iter()
        .map(|v| (v.name.as_str(), v.source.as_str()))
        .collect();
    assert_eq!(names, [("from-api", "api"), ("from-policy", "policy")]);
    assert_eq!(list[0].next, api.next, "same expression, same next time");
    admin.delete_schedule("from-api").unwrap();
    // Removing it from the policy removes the policy one.
    admin.put_policy("", false, None).unwrap();
    assert!(admin.schedules().unwrap().schedules.is_empty());
}

/// Regression: a schedule's run was a client job nobody held (`running` with no process,
/// then `lost`, and the next runs skipped as its duplicates). A run is an agent job on any
/// node; it waits for an agent with a handler for its kind, and explain says so; a
/// schedule with `executor = "client"` is refused naming why; `job submit` of a client job
/// is as before.
#[test]
fn a_schedule_run_is_an_agent_job_that_waits_for_an_agent_and_client_runs_are_refused() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LONG_LEASES);
    let admin = s.admin();
    let e = admin
        .create_schedule(&request(
            "by-hand",
            "daily",
            json!({"job": {"kind": "backup", "executor": "client"}}),
        ))
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(422), Some("invalid_field")),
        "{e}"
    );
    let ClientError::Api { detail, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(detail.field.as_deref(), Some("job.executor"));
    assert!(
        detail.message.contains("no client would hold it") && detail.message.contains("\"agent\""),
        "{}",
        detail.message
    );
    let policy = "[[schedule]]\nname = \"n\"\nwhen = \"daily\"\njob = { kind = \"backup\", executor = \"client\" }\n";
    let (status, text) = s.raw(
        "PUT",
        "/v1/policy",
        Some(s.admin.as_str()),
        Some(("application/toml", policy)),
    );
    assert_eq!(
        (status, error(&text)["field"].as_str()),
        (422, Some("schedule[0].job.executor")),
        "{text}"
    );

    let (when, _) = once_in(2);
    admin
        .create_schedule(&request(
            "nightly",
            &when,
            json!({"job": {"kind": "backup"}}),
        ))
        .unwrap();
    let id = wait_for("the run", || {
        jobs_of(&runs(&admin, "nightly")).first().copied()
    });
    let j = admin.job(id).unwrap();
    assert_eq!(
        (j.state, j.executor),
        (JobState::Queued, lockgate_core::policy::Executor::Agent)
    );
    let ex = admin.explain(id).unwrap();
    let texts: Vec<&str> = ex.reasons.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        texts,
        ["no eligible node: no ready agent has a handler for kind backup"],
        "{ex:?}"
    );
    // A node whose agent runs `backup` takes it.
    let reg = lockgate_api::NodeRegister {
        kinds: ["backup".to_string()].into(),
        ..Default::default()
    };
    admin.register_node("n1", &reg).unwrap();
    let j = admin.wait(id, JobState::Queued, 20).unwrap();
    assert_eq!(
        (j.state, j.node.as_deref()),
        (JobState::Running, Some("n1"))
    );
    // `job submit` with no placement is a client job, admitted at once, as before.
    let c = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(
        (c.state, c.executor),
        (JobState::Running, lockgate_core::policy::Executor::Client)
    );
}

/// `when` text for the instant `t` (a whole second), as [`once_in`] writes it.
fn at_text(t: Timestamp) -> String {
    let ts = jiff::Timestamp::from_millisecond(t.0 as i64).unwrap();
    ts.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A run with `after` waits for its target's latest run planned at or before it, and starts
/// once that run ended, in any state. The verify is planned at the same instant as the
/// backup and its name sorts first, so this also shows that schedules due together are
/// planned targets first; the GC, a second later, waits for the verify in turn.
#[test]
fn a_run_after_a_schedule_waits_for_its_run_of_the_same_night_and_starts_when_it_ends() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), LONG_LEASES);
    let admin = s.admin();
    agent_node(&admin);
    let (when, at) = once_in(2);
    let gc_at = Timestamp(at.0 + 1000);
    let after = |target: &str| json!({ "after": target });
    admin
        .create_schedule(&request("nightly-backup", &when, json!({})))
        .unwrap();
    let verify = admin
        .create_schedule(&request("backup-verify", &when, after("nightly-backup")))
        .unwrap();
    assert_eq!(verify.after.as_deref(), Some("nightly-backup"));
    admin
        .create_schedule(&request("gc", &at_text(gc_at), after("backup-verify")))
        .unwrap();

    let backup = wait_for("the backup run", || {
        jobs_of(&runs(&admin, "nightly-backup")).first().copied()
    });
    let run = wait_for("the verify run", || {
        runs(&admin, "backup-verify")
            .into_iter()
            .find(|r| r.job.is_some())
    });
    assert_eq!(ms(&run.planned), at.0);
    assert_eq!(
        run.note,
        Some(format!("after nightly-backup: waits for job {backup}"))
    );
    let v = admin.job(run.job.unwrap()).unwrap();
    assert_eq!((v.state, v.after.clone()), (JobState::Queued, vec![backup]));
    assert_eq!(admin.job(backup).unwrap().state, JobState::Running);
    let ex = admin.explain(v.id).unwrap();
    assert!(ex.text.contains(&format!("after:{backup}")), "{}", ex.text);

    // The GC, planned later, waits for the verify run (still queued).
    let gc = wait_for("the gc run", || {
        jobs_of(&runs(&admin, "gc")).first().copied()
    });
    assert_eq!(admin.job(gc).unwrap().after, vec![v.id]);
    assert_eq!(admin.job(gc).unwrap().state, JobState::Queued);

    // `after` is any end: a failed backup still lets the verify run, after it ended.
    let ended = finish(&admin, backup, Outcome::Failed);
    let v = admin.wait(v.id, JobState::Queued, 20).unwrap();
    assert_eq!(v.state, JobState::Running);
    assert!(ms(v.started_at.as_deref().unwrap()) >= ms(ended.finished_at.as_deref().unwrap()));
    assert_eq!(admin.job(gc).unwrap().state, JobState::Queued);
    finish(&admin, v.id, Outcome::Succeeded);
    let g = admin.wait(gc, JobState::Queued, 20).unwrap();
    assert_eq!(g.state, JobState::Running);
}

/// A run whose target has no run planned at or before it proceeds without a dependency,
/// and its history says why; an unknown target and a cycle are refused at create.
#[test]
fn a_run_after_a_schedule_with_no_run_yet_proceeds_and_its_history_says_why() {
    let dir = tempdir();
    let policy = format!(
        "{LONG_LEASES}\n[[schedule]]\nname = \"prune\"\nwhen = \"2099-01-01 02:00:00 UTC\"\njob = {{ kind = \"check\" }}\n"
    );
    let s = TestServer::start(dir.path(), &policy);
    let admin = s.admin();
    agent_node(&admin);
    let refused = |req: ScheduleRequest| {
        let e = admin.create_schedule(&req).unwrap_err();
        let ClientError::Api { detail, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(
            (e.status(), detail.field.as_deref()),
            (Some(422), Some("after"))
        );
        detail.message.clone()
    };
    let typo = refused(request("gc", "daily", json!({"after": "prnue"})));
    assert!(typo.contains("no schedule is named \"prnue\""), "{typo}");
    let itself = refused(request("gc", "daily", json!({"after": "gc"})));
    assert!(itself.contains("cannot wait for its own runs"), "{itself}");
    // A cycle can only be closed by removing and recreating a schedule.
    admin
        .create_schedule(&request("x", "daily", json!({})))
        .unwrap();
    admin
        .create_schedule(&request("y", "daily", json!({"after": "x"})))
        .unwrap();
    admin.delete_schedule("x").unwrap();
    let cycle = refused(request("x", "daily", json!({"after": "y"})));
    assert!(
        cycle.contains("schedules \"x\" -> \"y\" -> \"x\" wait for each other in a cycle"),
        "{cycle}"
    );

    let (when, at) = once_in(2);
    admin
        .create_schedule(&request("gc", &when, json!({"after": "prune"})))
        .unwrap();
    let run = wait_for("the gc run", || {
        runs(&admin, "gc").into_iter().find(|r| r.job.is_some())
    });
    assert_eq!(
        run.note,
        Some(format!(
            "after prune: no run planned at or before {}; not waiting",
            time::format(at)
        ))
    );
    let j = admin.job(run.job.unwrap()).unwrap();
    assert_eq!((j.state, j.after), (JobState::Running, vec![]));
    assert_eq!(show(&admin, "gc").after.as_deref(), Some("prune"));
}
