//! A limit that sets itself, against real contention: jobs (`lockgate run`, real
//! processes) write into one local sink that takes at most 1 MiB/s from each connection
//! and 4 MiB/s in all, so a fifth job adds nothing. The number climbs from its `min` while
//! jobs add throughput, steps back once one does not, says why in an event, and explain
//! shows it with the rates.

use crate::harness::*;
use std::io::Read;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB: f64 = (1 << 20) as f64;

/// A token bucket of `rate` bytes per second.
struct Bucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64) -> Bucket {
        Bucket {
            rate,
            tokens: 0.0,
            last: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let burst = self.rate / 10.0;
        self.tokens = (self.tokens + self.rate * (now - self.last).as_secs_f64()).min(burst);
        self.last = now;
    }
}

/// A sink on 127.0.0.1 that reads each connection at `each` and all of them at `all`
/// bytes per second; its port.
fn sink(each: f64, all: f64) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let shared = Arc::new(Mutex::new(Bucket::new(all)));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut own = Bucket::new(each);
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    own.refill();
                    let grant = {
                        let mut g = shared.lock().unwrap();
                        g.refill();
                        let n = own.tokens.min(g.tokens).min(buf.len() as f64).max(0.0) as usize;
                        g.tokens -= n as f64;
                        n
                    };
                    own.tokens -= grant as f64;
                    if grant == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    match conn.read(&mut buf[..grant]) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    port
}

#[test]
fn an_automatic_limit_climbs_to_the_knee_of_a_real_contended_sink_and_steps_back() {
    let port = sink(MIB, 4.0 * MIB);
    let policy = "[leases]\nttl = \"300ms\"\n\n[[limit]]\nname = \"ds\"\nper = [\"datastore\"]\nmax = { auto = \"throughput\", min = 1, max = 8, interval = \"1s\" }\n";
    let mut s = Srv::start(policy);
    let admin = s.admin();
    let script =
        format!("exec dd if=/dev/zero bs=64k count=20000 status=none > /dev/tcp/127.0.0.1/{port}");
    let mut holders: Vec<std::process::Child> = (0..10)
        .map(|_| {
            s.run(&["--attr", "datastore=ds1", "--", "bash", "-c", &script])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let steps =
        |admin: &lockgate_client::Client| -> Vec<serde_json::Map<String, serde_json::Value>> {
            admin
                .events(0)
                .unwrap()
                .events
                .into_iter()
                .filter(|e| e.data.get("type").and_then(|t| t.as_str()) == Some("auto_limit"))
                .map(|e| e.data)
                .collect()
        };
    let stepped_back = eventually(Duration::from_secs(90), || {
        steps(&admin)
            .iter()
            .any(|e| e["to"].as_u64() < e["from"].as_u64())
    });
    let seen = steps(&admin);
    let queued = jobs_in(&admin, "queued");
    let why = queued
        .first()
        .map(|j| admin.explain(j.id).unwrap().text)
        .unwrap_or_default();
    // A restart keeps the learned number (the holders ride it out).
    let last = seen.last().and_then(|e| e["to"].as_u64()).unwrap_or(0);
    s.kill9();
    s.spawn();
    let admin = s.admin();
    let metrics = admin.metrics().unwrap();
    let kept = format!("lockgate_scope_limit{{scope=\"limit:ds[datastore=ds1]\"}} {last}");
    for h in &mut holders {
        let _ = h.kill();
        let _ = h.wait();
    }
    assert!(stepped_back, "no step back within 90 s: {seen:?}");
    assert!(metrics.contains(&kept), "{kept} after a restart: {metrics}");
    let highest = seen.iter().filter_map(|e| e["to"].as_u64()).max().unwrap();
    assert!(
        (4..=6).contains(&highest),
        "it climbs to about the knee (4 jobs fill the sink): {seen:?}"
    );
    let back = seen
        .iter()
        .find(|e| e["to"].as_u64() < e["from"].as_u64())
        .unwrap();
    assert!(
        matches!(back["why"].as_str(), Some("no_gain" | "fell")),
        "{back:?}"
    );
    assert!(back["rate_below"].as_f64().is_some(), "{back:?}");
    assert!(seen.iter().all(|e| e["to"].as_u64() <= Some(8)), "{seen:?}");
    // A waiting job's explain names the number, its range and the rates behind it.
    assert!(
        why.contains("limit:ds[datastore=ds1]")
            && why.contains(" of 1-8: ")
            && why.contains("/s at "),
        "{why}"
    );
}

#[test]
fn a_pressure_guard_takes_a_slot_from_a_node_under_memory_pressure_and_gives_it_back() {
    use lockgate_api::{LeaseRequest, NodeSample, SubmitRequest};
    let policy = "[leases]\nttl = \"3s\"\n[nodes]\n[[nodes.rule]]\nselector = \"\"\nmax_running = 3\nguard = { memory = 20 }\n";
    let mut s = Srv::start(policy);
    let admin = s.admin();
    admin
        .register_node("n1", &lockgate_api::NodeRegister::default())
        .unwrap();
    let jobs: Vec<lockgate_api::JobView> = (0..5)
        .map(|_| {
            let req = SubmitRequest {
                kind: "backup".into(),
                node: Some("n1".into()),
                executor: Some(lockgate_core::policy::Executor::Client),
                ..SubmitRequest::default()
            };
            admin.submit(&req).unwrap().0
        })
        .collect();
    let held: Vec<(u64, u64)> = jobs
        .iter()
        .filter_map(|j| Some((j.id, j.lease.as_ref()?.token)))
        .collect();
    assert_eq!(held.len(), 3, "the rule's 3 slots");
    let report = |memory: f64| {
        for &(id, token) in &held {
            let req = LeaseRequest {
                node: Some(NodeSample {
                    memory_some: Some(memory),
                    ..NodeSample::default()
                }),
                ..LeaseRequest::new(token)
            };
            admin
                .heartbeat_within(id, &req, Duration::from_secs(5))
                .unwrap();
        }
    };
    report(50.0);
    assert_eq!(admin.node("n1").unwrap().guarded, Some(2));
    let queued = jobs.iter().find(|j| j.lease.is_none()).unwrap().id;
    let why = admin.explain(queued).unwrap().text;
    assert!(why.contains("guard 2 of 3: memory pressure 50.0%"), "{why}");
    let guard_events = |admin: &lockgate_client::Client| -> Vec<serde_json::Value> {
        admin
            .events(0)
            .unwrap()
            .events
            .into_iter()
            .filter(|e| e.data.get("type").and_then(|t| t.as_str()) == Some("node_guard"))
            .map(|e| serde_json::Value::Object(e.data))
            .collect()
    };
    let over = guard_events(&admin);
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!(
        (
            over[0]["why"].as_str(),
            over[0]["resource"].as_str(),
            over[0]["to"].as_u64()
        ),
        (Some("over"), Some("memory"), Some(2))
    );
    // A restart keeps what the guard learned.
    s.kill9();
    s.spawn();
    assert_eq!(
        admin.node("n1").unwrap().guarded,
        Some(2),
        "after a restart"
    );
    // Calm samples (under half the guard) give the slot back after three judgements.
    let back = eventually(Duration::from_secs(30), || {
        report(1.0);
        std::thread::sleep(Duration::from_millis(200));
        admin.node("n1").unwrap().guarded.is_none()
    });
    assert!(back, "{:?}", guard_events(&admin));
    let events = guard_events(&admin);
    assert_eq!(
        events.last().unwrap()["why"].as_str(),
        Some("eased"),
        "{events:?}"
    );
}

#[test]
fn a_pinned_automatic_number_stands_still_and_explain_says_so() {
    use lockgate_api::SubmitRequest;
    let policy = "[leases]\nttl = \"30s\"\n\n[[limit]]\nname = \"ds\"\nper = [\"datastore\"]\nmax = { auto = \"throughput\", min = 1, max = 8, interval = \"100ms\", pin = 2 }\n";
    let s = Srv::start(policy);
    let admin = s.admin();
    let jobs: Vec<lockgate_api::JobView> = (0..5)
        .map(|_| {
            let req = SubmitRequest {
                kind: "backup".into(),
                attrs: [("datastore".to_string(), "ds1".to_string())].into(),
                executor: Some(lockgate_core::policy::Executor::Client),
                ..SubmitRequest::default()
            };
            admin.submit(&req).unwrap().0
        })
        .collect();
    let admitted = jobs.iter().filter(|j| j.lease.is_some()).count();
    assert_eq!(admitted, 2, "the pin, not the range's min");
    // Over twenty intervals with the scope full (and past the first scan, at most 1 s in):
    // a controller that moved would have stepped by now.
    std::thread::sleep(Duration::from_millis(3000));
    let steps = admin
        .events(0)
        .unwrap()
        .events
        .into_iter()
        .filter(|e| e.data.get("type").and_then(|t| t.as_str()) == Some("auto_limit"))
        .count();
    assert_eq!(steps, 0);
    let queued = jobs.iter().find(|j| j.lease.is_none()).unwrap().id;
    let why = admin.explain(queued).unwrap().text;
    assert!(why.contains("(auto pinned at 2 of 1-8)"), "{why}");
}
