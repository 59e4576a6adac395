//! `[[rpo]]` on a real server in compressed time (`max_age = "2s"`): a group whose backups
//! stop succeeding raises `rpo_alert` once its last success is older than `max_age`, once;
//! a success clears it (`rpo_cleared`); the metrics and `GET /v1/rpo` say the same; forget
//! retires a value (admins only); a restart keeps the ages and raises nothing twice.

use crate::harness::*;
use lockgate_client::Client;
use lockgate_core::Outcome;
use serde_json::Value;
use std::time::{Duration, Instant};

const POLICY: &str =
    "[[rpo]]\nname = \"vms\"\nmatch = \"kind=backup\"\nper = [\"group\"]\nmax_age = \"2s\"\n";

/// Runs one backup of `group` to `outcome`.
fn backup(c: &Client, group: &str, outcome: Outcome) -> u64 {
    let (j, _) = c.submit(&job("backup", &[("group", group)])).unwrap();
    let token = j.lease.expect("admitted at once").token;
    c.finish_job(j.id, token, outcome, None).unwrap();
    j.id
}

/// The server's own events of `kind` so far.
fn events(c: &Client, kind: &str) -> Vec<Value> {
    c.events(0)
        .unwrap()
        .events
        .into_iter()
        .filter(|e| e.data["type"] == kind)
        .map(|e| Value::Object(e.data))
        .collect()
}

/// Waits (10 s at most) until there are `n` events of `kind`.
fn wait_events(c: &Client, kind: &str, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let evs = events(c, kind);
        if evs.len() >= n || start.elapsed() > Duration::from_secs(10) {
            return evs;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status(c: &Client, group: &str) -> Option<(String, u64, Option<String>)> {
    c.rpo().unwrap().rules[0]
        .values
        .iter()
        .find(|v| v.label == group)
        .map(|v| {
            (
                v.status.as_str().to_string(),
                v.age_s,
                v.last_success.clone(),
            )
        })
}

fn metric(s: &TestServer, line_start: &str) -> Option<f64> {
    let (code, text) = s.raw("GET", "/metrics", None, None);
    assert_eq!(code, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn a_group_without_a_good_backup_alerts_past_max_age_and_clears_on_success() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let c = s.admin();
    backup(&c, "vm/100", Outcome::Succeeded);
    backup(&c, "vm/101", Outcome::Succeeded);
    let good = Instant::now();
    let failed = backup(&c, "vm/101", Outcome::Failed);
    let list = c.rpo().unwrap();
    assert_eq!(list.rules.len(), 1);
    assert_eq!(
        (list.rules[0].name.as_str(), list.rules[0].max_age_s),
        ("vms", 2)
    );
    let v = &list.rules[0].values[1];
    assert_eq!(
        (v.label.as_str(), v.last_job, v.last_state.as_deref()),
        ("vm/101", Some(failed), Some("failed"))
    );
    assert_eq!(v.value["group"], "vm/101");
    assert_eq!(
        status(&c, "vm/101").unwrap().0,
        "ok",
        "a failure alone is no alert"
    );
    assert!(events(&c, "rpo_alert").is_empty());

    // Past max_age: one alert per value, each naming its last success.
    let alerts = wait_events(&c, "rpo_alert", 2);
    assert!(
        good.elapsed() >= Duration::from_secs(2),
        "not before max_age"
    );
    assert_eq!(alerts.len(), 2, "{alerts:?}");
    let a = alerts
        .iter()
        .find(|a| a["label"] == "vm/101")
        .expect("vm/101 alerted");
    assert_eq!(
        (a["severity"].as_str(), a["rule"].as_str()),
        (Some("warning"), Some("vms"))
    );
    assert_eq!(a["value"]["group"], "vm/101");
    assert_eq!(a["max_age_s"], 2);
    assert!(a["age_s"].as_u64().unwrap() >= 2, "{a}");
    assert!(
        a["last_success"].is_string() && a["last_state"] == "failed",
        "{a}"
    );
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        events(&c, "rpo_alert").len(),
        2,
        "raised once, not every tick"
    );
    assert_eq!(status(&c, "vm/101").unwrap().0, "overdue");
    assert_eq!(
        metric(&s, "lockgate_rpo_violations{rule=\"vms\"}"),
        Some(2.0)
    );
    assert_eq!(metric(&s, "lockgate_rpo_values{rule=\"vms\"}"), Some(2.0));
    assert_eq!(
        metric(&s, "lockgate_rpo_max_age_seconds{rule=\"vms\"}"),
        Some(2.0)
    );
    assert!(
        metric(
            &s,
            "lockgate_rpo_age_seconds{rule=\"vms\",value=\"vm/101\"}"
        )
        .unwrap()
            >= 2.0
    );
    assert!(
        metric(
            &s,
            "lockgate_rpo_last_success_timestamp_seconds{rule=\"vms\",value=\"vm/101\"}"
        )
        .unwrap()
            > 1.7e9
    );

    // A success clears it.
    let ok = backup(&c, "vm/101", Outcome::Succeeded);
    let cleared = wait_events(&c, "rpo_cleared", 1);
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert_eq!(
        (
            cleared[0]["label"].as_str(),
            cleared[0]["severity"].as_str()
        ),
        (Some("vm/101"), Some("info"))
    );
    assert_eq!(cleared[0]["last_job"], ok);
    assert_eq!(cleared[0]["previous_success"], a["last_success"]);
    assert_eq!(status(&c, "vm/101").unwrap().0, "ok");
    assert_eq!(
        metric(&s, "lockgate_rpo_violations{rule=\"vms\"}"),
        Some(1.0)
    );

    // Forget: viewers may list but not forget; an unknown value is a 404.
    let viewer = s.token("watcher", lockgate_api::Role::Viewer, None);
    assert_eq!(viewer.rpo().unwrap().rules[0].values.len(), 2);
    assert_eq!(
        viewer
            .rpo_forget("vms", &["vm/100".into()])
            .unwrap_err()
            .status(),
        Some(403)
    );
    assert_eq!(
        c.rpo_forget("vms", &["vm/999".into()])
            .unwrap_err()
            .status(),
        Some(404)
    );
    assert_eq!(
        c.rpo_forget("nope", &["vm/100".into()])
            .unwrap_err()
            .status(),
        Some(404)
    );
    assert_eq!(
        c.rpo_forget("vms", &[]).unwrap_err().status(),
        Some(422),
        "vms has a per key"
    );
    let gone = c.rpo_forget("vms", &["vm/100".into()]).unwrap();
    assert_eq!(gone.forgotten[0].label, "vm/100");
    assert!(status(&c, "vm/100").is_none());
    assert_eq!(metric(&s, "lockgate_rpo_values{rule=\"vms\"}"), Some(1.0));
    assert!(metric(
        &s,
        "lockgate_rpo_age_seconds{rule=\"vms\",value=\"vm/100\"}"
    )
    .is_none());
    assert_eq!(events(&c, "rpo_forgotten").len(), 1);
}

#[test]
fn a_restart_keeps_the_ages_and_raises_no_alert_twice() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let c = s.admin();
    backup(&c, "vm/1", Outcome::Succeeded);
    backup(&c, "vm/2", Outcome::Succeeded);
    assert_eq!(wait_events(&c, "rpo_alert", 2).len(), 2);
    let forgotten = backup(&c, "vm/3", Outcome::Succeeded);
    c.rpo_forget("vms", &["vm/3".into()]).unwrap();
    let before = status(&c, "vm/1").unwrap();
    s.stop();

    let s = TestServer::open(dir.path(), None);
    let c = s.admin();
    let after = status(&c, "vm/1").unwrap();
    assert_eq!(after.2, before.2, "the same last success");
    assert!(after.1 >= before.1 && after.0 == "overdue", "{after:?}");
    assert!(
        status(&c, "vm/3").is_none(),
        "a forgotten value stays forgotten (job {forgotten})"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        events(&c, "rpo_alert").len(),
        2,
        "not raised again after the restart"
    );
    backup(&c, "vm/1", Outcome::Succeeded);
    assert_eq!(wait_events(&c, "rpo_cleared", 1).len(), 1);
    assert_eq!(
        wait_events(&c, "rpo_alert", 3).len(),
        3,
        "and raised again 2s later"
    );
}

#[test]
fn rules_are_reloaded_with_the_policy() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let c = s.admin();
    backup(&c, "vm/1", Outcome::Succeeded);
    assert_eq!(wait_events(&c, "rpo_alert", 1).len(), 1);
    // A longer max_age ends the alert.
    c.put_policy(&POLICY.replace("\"2s\"", "\"1h\""), false, None)
        .unwrap();
    assert_eq!(wait_events(&c, "rpo_cleared", 1).len(), 1);
    assert_eq!(status(&c, "vm/1").unwrap().0, "ok");
    // A rule taken out is no longer listed or exported.
    c.put_policy("", false, None).unwrap();
    assert!(c.rpo().unwrap().rules.is_empty());
    assert!(metric(&s, "lockgate_rpo_values{rule=\"vms\"}").is_none());
}
