//! A lockgate server stand-in on a real TCP port whose answers to lease renewals the test
//! controls: answer, answer "cancel requested", refuse (409 `lease_lost`), close the
//! connection, or stop answering (accept and never reply).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 200 with the job, its lease renewed.
    Renew,
    /// 200 with the job, `cancel_requested` set.
    CancelRequested,
    /// 409 `lease_lost`.
    Refuse,
    /// Accept the connection and close it at once (a crashing server).
    Close,
    /// Accept the connection, read the request, never answer (a hung server).
    Silent,
    /// 503 `not_leader` naming the URL given to [`Fake::name_leader`] (a standby).
    NotLeader,
    /// As [`Mode::Renew`], but a renewal that carries `usage` is refused with 422 naming
    /// the unknown field (a server older than the field).
    Old,
}

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    /// When each renewal that was answered 200 arrived.
    renewed: Vec<Instant>,
    /// The leader a [`Mode::NotLeader`] answer names.
    leader: Option<String>,
    /// The body of every renewal, in order of arrival.
    bodies: Vec<serde_json::Value>,
}

/// The stand-in; it lives as long as the test process.
#[derive(Clone)]
pub struct Fake {
    url: String,
    state: Arc<Mutex<State>>,
    ttl: Duration,
}

impl Fake {
    /// Starts answering in `mode`, with leases of `ttl`.
    pub fn start(mode: Mode, ttl: Duration) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            mode: Some(mode),
            renewed: Vec::new(),
            leader: None,
            bodies: Vec::new(),
        }));
        let fake = Fake { url, state, ttl };
        let f = fake.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let f = f.clone();
                std::thread::spawn(move || f.serve(conn));
            }
        });
        fake
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers in `mode` from now on.
    pub fn set(&self, mode: Mode) {
        self.state.lock().unwrap().mode = Some(mode);
    }

    /// The leader [`Mode::NotLeader`] answers name.
    pub fn name_leader(&self, url: &str) {
        self.state.lock().unwrap().leader = Some(url.to_string());
    }

    /// When the last renewal answered 200 arrived: the server-side lease runs until then
    /// plus the TTL.
    pub fn last_renewal(&self) -> Option<Instant> {
        self.state.lock().unwrap().renewed.last().copied()
    }

    /// The body of every renewal received, in order.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.state.lock().unwrap().bodies.clone()
    }

    /// How many renewals were answered 200.
    pub fn renewals(&self) -> usize {
        self.state.lock().unwrap().renewed.len()
    }

    fn serve(&self, mut conn: TcpStream) {
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut length = 0;
        let mut first = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if first.is_empty() {
                first.clone_from(&line);
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let arrived = Instant::now();
        let mode = self.state.lock().unwrap().mode.unwrap();
        // The holder's cancel watch (`GET /v1/jobs/1/wait?...&cancel=true`): answered with
        // the cancel in that mode, else refused as a server without `cancel` refuses it
        // (the watch then stops and the renewals alone carry a cancel). Never a renewal.
        let wait = first.starts_with("GET ") && first.contains("/wait?");
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let reports = sent.get("usage").is_some();
        if !wait {
            self.state.lock().unwrap().bodies.push(sent);
        }
        let (status, text) = match mode {
            Mode::Old if reports => (
                422,
                r#"{"error":{"code":"invalid_field","message":"unknown field `usage`, expected `token`","field":null}}"#
                    .to_string(),
            ),
            Mode::CancelRequested if wait => (200, job(self.ttl, true)),
            Mode::Renew | Mode::Refuse | Mode::NotLeader | Mode::Old if wait => (
                422,
                r#"{"error":{"code":"invalid_field","message":"unknown field `cancel`","field":"cancel"}}"#
                    .to_string(),
            ),
            Mode::Renew | Mode::CancelRequested | Mode::Old => {
                self.state.lock().unwrap().renewed.push(arrived);
                (200, job(self.ttl, mode == Mode::CancelRequested))
            }
            Mode::Refuse => (
                409,
                r#"{"error":{"code":"lease_lost","message":"the lease was lost","field":null}}"#
                    .to_string(),
            ),
            Mode::NotLeader => {
                let leader = self.state.lock().unwrap().leader.clone();
                let body = serde_json::json!({"error": {"code": "not_leader",
                    "message": "this server is a standby", "field": null, "leader": leader}});
                (503, body.to_string())
            }
            Mode::Close => return,
            Mode::Silent => {
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
        };
        let _ = write!(
            conn,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
    }
}

/// Job 1 running with lease token 7.
fn job(ttl: Duration, cancel_requested: bool) -> String {
    serde_json::json!({
        "id": 1, "kind": "backup", "attrs": {}, "owner": "test", "priority": 0,
        "executor": "client", "state": "running", "node": null, "attempt": 1,
        "lease": {"token": 7, "expires_at": "2030-01-01T00:00:00Z", "ttl_s": ttl.as_secs_f64()},
        "cancel_requested": cancel_requested, "submitted_at": "2030-01-01T00:00:00Z",
        "prepare_started_at": null, "started_at": null, "finished_at": null,
        "outcome": null, "message": null
    })
    .to_string()
}
