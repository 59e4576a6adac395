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
    let s = Srv::start(policy);
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
    for h in &mut holders {
        let _ = h.kill();
        let _ = h.wait();
    }
    assert!(stepped_back, "no step back within 90 s: {seen:?}");
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
