//! Forecasts over real HTTP with a real store: learned durations (from the store at start,
//! then from finished jobs), the estimate in explain, `GET /v1/forecast` and the
//! `[[deadline]]` metrics.

use crate::harness::*;
use lockgate_api::{time, ForecastQuery, JobView};
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use std::time::Duration;

const POLICY: &str = r#"
[global]
max_running = 1

[forecast]
key = ["group"]

[[deadline]]
name = "nightly"
match = "kind=backup"
by = "*:*:00/1"
"#;

/// Runs one `backup` of `group` for about `ms` (submit, wait for admission, finish).
fn run_one(c: &Client, group: &str, ms: u64) -> JobView {
    let (j, _) = c.submit(&job("backup", &[("group", group)])).unwrap();
    assert_eq!(j.state, JobState::Running, "nothing else runs");
    std::thread::sleep(Duration::from_millis(ms));
    c.finish_job(j.id, j.lease.unwrap().token, Outcome::Succeeded, None)
        .unwrap()
}

fn ms_of(t: &Option<String>) -> u64 {
    time::parse(t.as_deref().expect("a time")).unwrap().0
}

#[test]
fn durations_are_learned_and_queued_jobs_get_an_estimate() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let c = s.admin();
    for ms in [300, 300, 600] {
        run_one(&c, "vm/1", ms);
    }
    // Learned from the store after a restart, as well as from the finish events.
    s.stop();
    let s = TestServer::open(dir.path(), None);
    let c = s.admin();
    let (running, _) = c.submit(&job("backup", &[("group", "vm/1")])).unwrap();
    let queued: Vec<JobView> = (0..3)
        .map(|_| c.submit(&job("backup", &[("group", "vm/2")])).unwrap().0)
        .collect();
    let shown = c.job(queued[0].id).unwrap();
    let run = shown.expected.unwrap().run.unwrap();
    assert_eq!(
        (run.samples, run.basis.as_str()),
        (3, "kind"),
        "no run of vm/2 yet"
    );
    assert!((0.29..0.4).contains(&run.p50_s), "{run:?}");
    assert!((0.59..0.7).contains(&run.p90_s), "{run:?}");
    let keyed = c.job(running.id).unwrap().expected.unwrap().run.unwrap();
    assert_eq!(keyed.basis, "key");
    assert_eq!(
        keyed.key,
        ["group=vm/1"],
        "what the runs shared with the job"
    );

    let ex = c.explain(queued[2].id).unwrap();
    let e = ex.estimate.expect("a queued job has an estimate");
    assert!(e.computed_at.is_some(), "{e:?}");
    let started = ms_of(&running.started_at);
    // Two jobs ahead of it plus the running one, about 0.3 s each at p50.
    let start50 = ms_of(&e.start_p50);
    assert!(
        start50 >= started + 800 && start50 <= started + 1_500,
        "{e:?} started {started}"
    );
    assert!(ms_of(&e.start_p90) >= start50);
    assert!(ms_of(&e.end_p90) >= ms_of(&e.end_p50));
    assert!(
        c.explain(running.id).unwrap().estimate.is_none(),
        "not queued"
    );

    let f = c.forecast(&ForecastQuery::default()).unwrap();
    assert_eq!((f.jobs, f.unknown), (4, 0), "{f:?}");
    assert!(f.complete);
    assert_eq!(f.bottleneck.as_deref(), Some("global"), "{f:?}");
    assert!(ms_of(&f.done_p90) >= ms_of(&f.done_p50));
    // Everything ends after a deadline one second from now at p90.
    let soon = time::format(lockgate_core::Timestamp(started + 200));
    let f = c
        .forecast(&ForecastQuery {
            until: Some(soon),
            r#match: Some("group=vm/2".into()),
        })
        .unwrap();
    assert_eq!(f.jobs, 3);
    assert_eq!(f.missing.len(), 3, "{f:?}");
    let bad = c.forecast(&ForecastQuery {
        until: Some("tomorrow".into()),
        r#match: None,
    });
    assert_eq!(bad.unwrap_err().status(), Some(422));

    // The deadline is the next whole second: the queue takes longer, so it is at risk.
    let (status, text) = s.raw("GET", "/metrics", Some(&s.admin), None);
    assert_eq!(status, 200);
    assert!(
        text.contains("lockgate_window_at_risk{window=\"nightly\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "lockgate_window_forecast_end_timestamp_seconds{window=\"nightly\",quantile=\"0.9\"}"
        ),
        "{text}"
    );
    assert!(text.contains("lockgate_window_unknown_jobs{window=\"nightly\"} 0"));
}

#[test]
fn a_kind_without_history_has_null_times() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), "[global]\nmax_running = 1\n");
    let c = s.admin();
    let (_, _) = c.submit(&job("verify", &[])).unwrap();
    let (q, _) = c.submit(&job("verify", &[])).unwrap();
    let e = c.explain(q.id).unwrap().estimate.unwrap();
    assert_eq!((e.start_p50, e.end_p50, e.end_p90), (None, None, None));
    assert!(
        e.computed_at.is_some(),
        "the forecast knows it, without a time"
    );
    assert!(c.job(q.id).unwrap().expected.unwrap().run.is_none());
    let f = c.forecast(&ForecastQuery::default()).unwrap();
    assert_eq!((f.unknown, f.done_p50), (2, None));
}

/// `text`'s tags nest and close by name (what an XML parser checks of the markup the
/// simulator's writer produces), and every `<` starts a tag.
fn assert_nested(text: &str) {
    let mut open: Vec<&str> = Vec::new();
    for part in text.split('<').skip(1) {
        let tag = &part[..part.find('>').expect("a tag closes")];
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(
                open.pop(),
                Some(closing.trim()),
                "</{closing}> closes another tag"
            );
        } else if !tag.ends_with('/') {
            open.push(tag.split_whitespace().next().expect("a tag name"));
        }
    }
    assert!(open.is_empty(), "left open: {open:?}");
}

#[test]
fn the_gantt_picture_names_the_running_and_queued_jobs() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let get = |path: &str| {
        ureq::get(&format!("{}{path}", s.url))
            .set("Authorization", &format!("Bearer {}", s.admin))
            .call()
            .unwrap()
    };
    let empty = get("/v1/forecast/gantt?at=1");
    assert_eq!(empty.content_type(), "image/svg+xml");
    let text = empty.into_string().unwrap();
    assert_nested(&text);
    assert!(text.contains("Nothing queued or running"), "{text}");

    let c = s.admin();
    run_one(&c, "vm/1", 200);
    let mut ids: Vec<u64> = (0..3)
        .map(|_| c.submit(&job("backup", &[("group", "vm/1")])).unwrap().0.id)
        .collect();
    // A job pinned to a registered node: its own group of lanes, named with its number.
    let (status, body) = s.raw(
        "PUT",
        "/v1/nodes/n-1",
        Some(&s.admin),
        Some((
            "application/json",
            r#"{"labels": {"disk": "ssd"}, "kinds": ["backup"]}"#,
        )),
    );
    assert!(matches!(status, 200 | 201), "{status} {body}");
    let mut pinned = job("backup", &[("group", "vm/1")]);
    pinned.node = Some("n-1".into());
    ids.push(c.submit(&pinned).unwrap().0.id);
    let text = get("/v1/forecast/gantt?hours=1&at=2")
        .into_string()
        .unwrap();
    assert_nested(&text);
    assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for id in &ids {
        assert!(
            text.contains(&format!("job {id} (backup)")),
            "job {id}: {text}"
        );
    }
    // Named on the bars too (an <img> shows no tooltips), and the node with its number.
    for id in &ids {
        assert!(
            text.contains(&format!(">job {id}</text>")),
            "job {id}: {text}"
        );
    }
    assert!(text.contains("class=\"bar-label\""));
    assert!(text.contains("n-1 [unlimited] (1 lane)"), "{text}");
    assert!(text.contains("(no node) (3 lanes)"), "{text}");
    assert!(text.contains("Forecast (p50)") && text.contains("class=\"legend\""));
    assert!(text.contains("class=\"axis\""));
    let bad = ureq::get(&format!("{}/v1/forecast/gantt?hours=0", s.url))
        .set("Authorization", &format!("Bearer {}", s.admin))
        .call();
    // A bad field value is 422 `invalid_field` naming the field, as everywhere.
    let Err(ureq::Error::Status(422, resp)) = bad else {
        panic!("hours=0: expected 422, got {bad:?}");
    };
    let body: serde_json::Value = serde_json::from_str(&resp.into_string().unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "invalid_field", "{body}");
    assert_eq!(body["error"]["field"], "hours", "{body}");
}
