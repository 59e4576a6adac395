//! `lockgate agent` and `lockgate demo` against a real server: real agent processes, real
//! handlers (`lockgate __demo-task`, which append their own start and end records), real
//! `kill -9`. Timing-sensitive tests take [`SERIAL`] so they do not compete with each
//! other for the two cores.

mod demo;
mod failures;
mod leases;
mod placement;
mod preempt;

use crate::harness::{Srv, BIN};
use lockgate_api::{JobQuery, JobView, SubmitRequest};
use lockgate_client::Client;
use lockgate_core::policy::Executor;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Held by the tests whose numbers depend on having the machine to themselves.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running `lockgate agent`.
pub struct AgentProc {
    pub node: String,
    pub token: String,
    child: Option<Child>,
}

impl AgentProc {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Handlers for the test kinds: `move` (one stage) and `upload` (two stages); each lasts
/// `attr.ms` (`attr.prepare_ms`) and records itself in `records.txt`.
pub fn handlers(srv: &Srv) -> String {
    let rec = srv.path("records.txt").display().to_string();
    let task = |ms: &str| {
        format!(
            r#"["{BIN}", "__demo-task", "--ms", "{{attr.{ms}}}", "--record", "{rec}", "--label", "{{job.id}}@{{node}}"]"#
        )
    };
    format!(
        "[agent]\ngrace = \"500ms\"\n\n[handlers.move]\nrun = {}\n\n[handlers.upload]\nprepare = {}\nrun = {}\n",
        task("ms"),
        task("prepare_ms"),
        task("ms")
    )
}

/// Starts an agent for `node` with its own bound token and waits until the node is ready.
pub fn start_agent(srv: &Srv, node: &str, labels: &[&str], config: &str) -> AgentProc {
    let token = crate::harness::agent_token(&srv.admin(), node);
    let cfg = srv.path(&format!("agent-{node}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let mut a = AgentProc {
        node: node.into(),
        token,
        child: None,
    };
    respawn(srv, &mut a, labels);
    a
}

/// Starts (again) the agent process of `a`.
pub fn respawn(srv: &Srv, a: &mut AgentProc, labels: &[&str]) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(srv.path(&format!("agent-{}.log", a.node)))
        .unwrap();
    let mut c = Command::new(BIN);
    c.args(["agent", "--node", &a.node, "--config"])
        .arg(srv.path(&format!("agent-{}.toml", a.node)));
    for l in labels {
        c.args(["--label", l]);
    }
    let child = c
        .env("LOCKGATE_SERVER", srv.url())
        .env("LOCKGATE_TOKEN", &a.token)
        .env("LOCKGATE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    a.child = Some(child);
    let admin = srv.admin();
    let ok = crate::harness::eventually(Duration::from_secs(20), || {
        admin.node(&a.node).is_ok_and(|n| n.state == "ready")
    });
    assert!(ok, "agent {} did not register", a.node);
}

/// A movable agent job of `kind` lasting `ms` (`prepare_ms` for two-stage jobs).
pub fn movable(kind: &str, ms: u64, prepare_ms: u64) -> SubmitRequest {
    SubmitRequest {
        kind: kind.into(),
        attrs: BTreeMap::from([
            ("ms".to_string(), ms.to_string()),
            ("prepare_ms".to_string(), prepare_ms.to_string()),
        ]),
        node_selector: Some(String::new()),
        executor: Some(Executor::Agent),
        two_stage: Some(kind == "upload"),
        ..SubmitRequest::default()
    }
}

/// Every job (up to 1000).
pub fn all_jobs(c: &Client) -> Vec<JobView> {
    c.jobs(&JobQuery {
        limit: Some(1000),
        ..JobQuery::default()
    })
    .unwrap()
    .jobs
}

/// Waits until `n` jobs have ended; panics (with the agents' logs) after `limit`.
/// Every job succeeded; a failure names each job that did not, with its state and reason.
pub fn assert_all_succeeded(jobs: &[JobView]) {
    let bad: Vec<String> = jobs
        .iter()
        .filter(|j| j.state != lockgate_core::JobState::Succeeded)
        .map(|j| format!("{j:?}"))
        .collect();
    assert!(
        bad.is_empty(),
        "{} job(s) did not succeed: {bad:#?}",
        bad.len()
    );
}

pub fn wait_all_final(srv: &Srv, n: usize, limit: Duration) -> Vec<JobView> {
    let c = srv.admin();
    let start = Instant::now();
    loop {
        let jobs = all_jobs(&c);
        if jobs.len() >= n && jobs.iter().all(|j| j.state.is_terminal()) {
            return jobs;
        }
        if start.elapsed() > limit {
            let states: Vec<String> = jobs
                .iter()
                .map(|j| format!("{}:{}", j.id, j.state))
                .collect();
            panic!(
                "jobs not done after {limit:?}: {}\n{}",
                states.join(" "),
                logs(srv)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The agents' and the server's logs, for failure messages.
pub fn logs(srv: &Srv) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(srv.dir.path()).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log") {
            out.push_str(&crate::harness::tail(&p, 30));
        }
    }
    out
}

/// One handler run, from the handler's own records.
#[derive(Debug, Clone)]
pub struct Rec {
    pub start: u64,
    pub end: Option<u64>,
    pub job: u64,
    pub node: String,
    pub stage: String,
    pub pid: u32,
    pub label: String,
}

/// Reads `records.txt`: start lines paired with their end lines (by pid).
pub fn records(path: &PathBuf) -> Vec<Rec> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: Vec<Rec> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() >= 7, "bad record line {line:?}");
        let (t, pid): (u64, u32) = (f[1].parse().unwrap(), f[5].parse().unwrap());
        match f[0] {
            "start" => out.push(Rec {
                start: t,
                end: None,
                job: f[2].parse().unwrap(),
                node: f[3].into(),
                stage: f[4].into(),
                pid,
                label: f[6].into(),
            }),
            "end" => {
                let r = out
                    .iter_mut()
                    .rev()
                    .find(|r| r.pid == pid && r.end.is_none())
                    .unwrap_or_else(|| panic!("end without start: {line:?}"));
                r.end = Some(t);
            }
            other => panic!("bad record kind {other:?}"),
        }
    }
    out
}

/// The most intervals open at once (an interval ending at t does not overlap one starting
/// at t).
pub fn max_overlap(spans: &[(u64, u64)]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for &(a, b) in spans {
        edges.push((a, 1));
        edges.push((b, -1));
    }
    edges.sort();
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak as usize
}

/// Busy fraction of `slots` slots over `[from, to]`: the sum of the spans' lengths inside
/// the window over `slots * (to - from)`.
pub fn busy(spans: &[(u64, u64)], slots: u64, from: u64, to: u64) -> f64 {
    let inside: u64 = spans
        .iter()
        .map(|&(a, b)| b.min(to).saturating_sub(a.max(from)))
        .sum();
    inside as f64 / (slots * (to - from).max(1)) as f64
}

/// Wall-clock milliseconds (the clock of the handlers' records).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
