//! Two in-process replicas (`Server::open_replica`) on one PostgreSQL database (the store's
//! test cluster): one leads, the other answers `not_leader` naming it; when the leader
//! stops, the standby takes over with the jobs (same ids) and their leases; a leader
//! whose row is taken finds its commits fenced and steps down in the same process.

use lockgate_server::replica::Options;
use lockgate_server::{Config, Server};
use lockgate_store::postgres::testdb;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A lease TTL of 3 s: the leadership lease is 500 ms (`lease_for_ttl`).
const POLICY: &str = "[leases]\nttl = \"3s\"\n";

struct Replica {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    fn start(dir: &Path, database: &str, id: &str) -> Replica {
        let policy = dir.join("policy.toml");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&policy, POLICY).unwrap();
        let config = Config {
            data_dir: dir.join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            policy_file: Some(policy),
            tls: None,
            hardening: Default::default(),
            backup_input_roots: Vec::new(),
            database_url: Some(database.to_string()),
        };
        let options = Options {
            advertise_url: None,
            replica_id: Some(id.to_string()),
        };
        let server = Server::open_replica(config, options).expect("replica opens");
        let url = format!("http://{}", server.local_addr());
        let (tx, thread) = crate::harness::serve(server);
        Replica {
            url,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn call(&self, method: &str, path: &str, token: &str, body: Option<&str>) -> (u16, Value) {
        let mut req = ureq::request(method, &format!("{}{path}", self.url))
            .set("Authorization", &format!("Bearer {token}"));
        let r = match body {
            Some(b) => {
                req = req.set("Content-Type", "application/json");
                req.send_string(b)
            }
            None => req.call(),
        };
        let (status, text) = match r {
            Ok(resp) => (resp.status(), resp.into_string().unwrap()),
            Err(ureq::Error::Status(s, resp)) => (s, resp.into_string().unwrap()),
            Err(e) => panic!("transport error: {e}"),
        };
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn cluster(&self) -> Value {
        let (status, v) = self.call("GET", "/v1/cluster", "", None);
        assert_eq!(status, 200, "{v}");
        v
    }

    fn role(&self) -> String {
        self.cluster()["role"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

fn admin_token(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("data/admin.token"))
        .expect("the replica that initialised the database wrote admin.token")
        .trim()
        .to_string()
}

fn psql(url: &str, sql: &str) {
    let bin = testdb::bindir().expect("PostgreSQL binaries (initdb, pg_ctl, psql)");
    let out = Command::new(bin.join("psql"))
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const SUBMIT: &str = r#"{"kind":"nightly"}"#;

#[test]
fn one_replica_leads_the_standby_names_it_and_takes_over_with_the_jobs() {
    let db = testdb::cluster().database();
    let tmp = tempfile::tempdir().unwrap();
    let a = Replica::start(&tmp.path().join("a"), &db, "a");
    assert_eq!(
        a.role(),
        "leader",
        "a replica alone on an empty database leads"
    );
    let token = admin_token(&tmp.path().join("a"));
    let b = Replica::start(&tmp.path().join("b"), &db, "b");
    assert!(
        !tmp.path().join("b/data/admin.token").exists(),
        "only the replica that initialised the database writes admin.token"
    );
    assert_eq!(b.role(), "standby");
    let view = b.cluster();
    assert_eq!(view["leader"]["holder"], "a", "{view}");
    assert_eq!(view["leader"]["url"], a.url.as_str(), "{view}");

    let (status, job) = a.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_u64().expect("a job id");
    let state = job["state"].clone();
    let (status, err) = b.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 503, "{err}");
    assert_eq!(err["error"]["code"], "not_leader", "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains(&a.url),
        "the standby names the leader's URL: {err}"
    );

    let term = a.cluster()["term"].as_i64().unwrap();
    a.stop();
    let took = until("the standby takes over", Duration::from_secs(10), || {
        b.role() == "leader"
    });
    eprintln!("takeover {took:?} after the leader stopped (lease 500 ms)");
    let view = b.cluster();
    assert!(view["term"].as_i64().unwrap() > term, "a new term: {view}");
    // The new leader rebuilt from the database: the same job under the same id, and its
    // lease (if granted) still alive with the restart's grace.
    let (status, got) = b.call("GET", &format!("/v1/jobs/{id}"), &token, None);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["kind"], "nightly", "{got}");
    assert_eq!(got["state"], state, "{got}");
    let (status, next) = b.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 201, "{next}");
    assert!(next["id"].as_u64().unwrap() > id, "ids continue: {next}");
    b.stop();
}

#[test]
fn a_leader_whose_row_is_taken_is_fenced_and_steps_down_in_the_same_process() {
    let db = testdb::cluster().database();
    let tmp = tempfile::tempdir().unwrap();
    let a = Replica::start(&tmp.path().join("a"), &db, "a");
    assert_eq!(a.role(), "leader");
    let token = admin_token(&tmp.path().join("a"));
    let (status, job) = a.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 201, "{job}");
    // Another holder takes the row under a new term (as a takeover after a pause would).
    psql(
        &db,
        "UPDATE lockgate_leader SET holder = 'x', url = 'http://x.example:7400', \
         term = term + 1, acquired_at = now(), expires_at = now() + interval '1 hour'",
    );
    // Whatever a still asks to commit is never acknowledged: the fence or the gate says 503.
    let (status, err) = a.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 503, "a stale leader acknowledged a submit: {err}");
    until("the old leader steps down", Duration::from_secs(5), || {
        a.role() == "standby"
    });
    let (status, err) = a.call("POST", "/v1/jobs", &token, Some(SUBMIT));
    assert_eq!(status, 503, "{err}");
    assert_eq!(err["error"]["code"], "not_leader", "{err}");
    until(
        "the standby names the new holder",
        Duration::from_secs(5),
        || a.cluster()["leader"]["holder"] == "x",
    );
    // Back to a free row: the same process takes the lead again and rebuilds.
    psql(
        &db,
        "UPDATE lockgate_leader SET expires_at = now() - interval '1 second'",
    );
    until("it leads again", Duration::from_secs(5), || {
        a.role() == "leader"
    });
    until("and admits", Duration::from_secs(5), || {
        a.call("POST", "/v1/jobs", &token, Some(SUBMIT)).0 == 201
    });
    a.stop();
}
