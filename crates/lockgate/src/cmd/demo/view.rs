//! The demo's live view (stderr) and its summary.
//!
//! The view follows the server's event log (`GET /v1/events?after=SEQ`), the node list
//! and the scope gauges of `GET /metrics`, a few times per second. On a terminal it redraws
//! one block in place (queue, each node's slots, the scopes, recent events); otherwise it
//! prints one plain line per event and a status line every second.
//!
//! The summary uses the definitions of `lockgate simulate` (`lockgate_sim::Summary`): the
//! jobs' real times are turned into a `lockgate_sim::Run` (milliseconds from the first
//! submit) and summarised by the same code. Scope peaks are the server's own exact peaks
//! (`lockgate_scope_peak`), read before and after the policy change (peaks restart with
//! each policy), with the limit in force at the end; the demo's change only raises limits.

use super::setup::Paths;
use lockgate_api::{JobView, NodeView};
use lockgate_client::Client;
use lockgate_core::JobState;
use lockgate_sim::sim::NodeSlots;
use lockgate_sim::{JobRecord, Run, ScopePeak, Summary};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

/// How many recent events the terminal view shows.
const RECENT: usize = 8;

/// What the view knows.
pub struct View {
    tty: bool,
    /// Wall-clock ms of the demo's start (time 0 of the view and the summary).
    t0: u64,
    jobs: BTreeMap<u64, JobView>,
    after: u64,
    recent: VecDeque<String>,
    nodes: Vec<NodeView>,
    running: BTreeMap<String, u64>,
    limits: BTreeMap<String, u64>,
    /// The last limit seen per scope: a per-value scope leaves `/metrics` once nothing
    /// holds it, and the summary still compares its peak with its limit.
    last_limits: BTreeMap<String, u64>,
    peaks: BTreeMap<String, u64>,
    drawn: usize,
    last_status: Instant,
    waiting_note: Option<(u64, String)>,
    note_at: Option<Instant>,
    metrics_url: String,
}

fn ms_of(t: &Option<String>) -> Option<u64> {
    t.as_deref()
        .and_then(|t| lockgate_api::time::parse(t).ok())
        .map(|t| t.0)
}

impl View {
    /// A view of the server at `url`; `t0` is the demo's start (wall-clock ms).
    pub fn new(tty: bool, t0: u64, url: &str) -> View {
        View {
            tty,
            t0,
            jobs: BTreeMap::new(),
            after: 0,
            recent: VecDeque::new(),
            nodes: Vec::new(),
            running: BTreeMap::new(),
            limits: BTreeMap::new(),
            last_limits: BTreeMap::new(),
            peaks: BTreeMap::new(),
            drawn: 0,
            last_status: Instant::now(),
            waiting_note: None,
            note_at: None,
            metrics_url: format!("{url}/metrics"),
        }
    }

    fn secs(&self, at_ms: u64) -> f64 {
        at_ms.saturating_sub(self.t0) as f64 / 1000.0
    }

    fn note(&mut self, at_ms: u64, text: String) {
        let line = format!("{:6.2}s  {text}", self.secs(at_ms));
        if self.tty {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// Reads what changed on the server.
    ///
    /// # Errors
    /// The server could not be read.
    pub fn poll(&mut self, c: &Client) -> anyhow::Result<()> {
        loop {
            let list = c.events(self.after)?;
            let n = list.events.len();
            for ev in list.events {
                self.after = self.after.max(ev.seq);
                let at = lockgate_api::time::parse(&ev.at)
                    .map(|t| t.0)
                    .unwrap_or(self.t0);
                self.event(at, &ev.data);
            }
            if n < 1000 {
                break;
            }
        }
        self.nodes = c.nodes()?.nodes;
        self.read_metrics()?;
        Ok(())
    }

    fn event(&mut self, at: u64, data: &serde_json::Map<String, serde_json::Value>) {
        let ty = data.get("type").and_then(|t| t.as_str()).unwrap_or("");
        match ty {
            "job" => {
                let Some(job) = data
                    .get("job")
                    .and_then(|j| serde_json::from_value::<JobView>(j.clone()).ok())
                else {
                    return;
                };
                let change = data.get("change").and_then(|c| c.as_str()).unwrap_or("");
                let node = job.node.clone().unwrap_or_else(|| "-".into());
                let what = match change {
                    "admitted_prepare" => Some(format!("preparing on {node}")),
                    "prepared" => Some(format!("prepared on {node}")),
                    "started" => Some(format!("running on {node}")),
                    "finished" => Some(format!("{} on {node}", job.state)),
                    "requeued" => Some(format!("queued again (attempt {})", job.attempt)),
                    _ => None,
                };
                if let Some(w) = what {
                    self.note(at, format!("job {:>3} {:<11} {w}", job.id, job.kind));
                }
                self.jobs.insert(job.id, job);
            }
            "policy_applied" => self.note(at, "policy applied (no restart)".into()),
            "node_lost" | "node_removed" | "node_changed" => {
                let node = data.get("node").and_then(|n| n.as_str()).unwrap_or("?");
                let state = data.get("state").and_then(|s| s.as_str()).unwrap_or("");
                self.note(
                    at,
                    format!("node {node} {} {state}", ty.trim_start_matches("node_")),
                );
            }
            _ => {}
        }
    }

    fn read_metrics(&mut self) -> anyhow::Result<()> {
        let text = ureq::get(&self.metrics_url)
            .timeout(Duration::from_secs(10))
            .call()?
            .into_string()?;
        self.running.clear();
        self.limits.clear();
        for line in text.lines() {
            let Some((name, rest)) = line.split_once("{scope=\"") else {
                continue;
            };
            let Some((scope, value)) = rest.split_once("\"} ") else {
                continue;
            };
            let Ok(v) = value.trim().parse::<u64>() else {
                continue;
            };
            let scope = scope.replace("\\\"", "\"").replace("\\\\", "\\");
            match name {
                "lockgate_scope_running" => {
                    self.running.insert(scope, v);
                }
                "lockgate_scope_limit" => {
                    self.last_limits.insert(scope.clone(), v);
                    self.limits.insert(scope, v);
                }
                "lockgate_scope_peak" => {
                    let p = self.peaks.entry(scope).or_default();
                    *p = (*p).max(v);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether every job seen has ended (and `expected` have been seen).
    pub fn all_final(&self, expected: usize) -> bool {
        self.jobs.len() >= expected && self.jobs.values().all(|j| j.state.is_terminal())
    }

    fn counts(&self) -> String {
        let mut by: BTreeMap<&str, usize> = BTreeMap::new();
        for j in self.jobs.values() {
            *by.entry(j.state.as_str()).or_default() += 1;
        }
        let order = [
            "queued",
            "preparing",
            "prepared",
            "running",
            "succeeded",
            "failed",
            "lost",
        ];
        order
            .iter()
            .filter(|s| by.contains_key(*s) || ["queued", "running", "succeeded"].contains(s))
            .map(|s| format!("{s} {}", by.get(s).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join("  ")
    }

    fn node_line(&self, n: &NodeView) -> String {
        let slots = n
            .number
            .map(|m| m.to_string())
            .unwrap_or_else(|| "∞".into());
        let why = match &n.rule {
            Some(r) => format!("rule {r:?}"),
            None => "default".into(),
        };
        let bar: String = (0..n.number.unwrap_or(n.running))
            .map(|i| if i < n.running { '#' } else { '.' })
            .collect();
        let done = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Succeeded && j.node.as_deref() == Some(&n.name))
            .count();
        format!(
            "  {:<7} {:<5} {}/{slots:<2} [{bar:<3}] preparing {} prepared {}  done {done:<3} ({why})",
            n.name, n.state, n.running, n.preparing, n.prepared
        )
    }

    /// Finds a pinned job that waits, and asks the server why (once a second).
    pub fn explain_waiting(&mut self, c: &Client) {
        if self
            .note_at
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.note_at = Some(Instant::now());
        let waiting = self
            .jobs
            .values()
            .find(|j| j.state == JobState::Queued && j.pinned)
            .map(|j| j.id);
        self.waiting_note = waiting.and_then(|id| c.explain(id).ok().map(|e| (id, e.text)));
    }

    /// Draws the view (terminal) or a status line (plain, once a second).
    pub fn draw(&mut self, now_ms: u64) {
        let t = self.secs(now_ms);
        let scopes: Vec<String> = self
            .limits
            .iter()
            .filter(|(s, _)| s.starts_with("global") || s.starts_with("limit:"))
            .map(|(s, l)| format!("{s} {}/{l}", self.running.get(s).copied().unwrap_or(0)))
            .collect();
        if !self.tty {
            if self.last_status.elapsed() >= Duration::from_secs(1) {
                self.last_status = Instant::now();
                let nodes: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| {
                        format!(
                            "{} {}/{}",
                            n.name,
                            n.running,
                            n.number
                                .map(|m| m.to_string())
                                .unwrap_or_else(|| "-".into())
                        )
                    })
                    .collect();
                eprintln!(
                    "{t:6.2}s  [{}] [{}] [{}]",
                    self.counts(),
                    nodes.join(", "),
                    scopes.join(", ")
                );
            }
            return;
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\x1b[1mlockgate demo\x1b[0m  {t:5.1}s   {}",
            self.counts()
        );
        let _ = writeln!(out, "scopes: {}", scopes.join("   "));
        let _ = writeln!(out, "nodes:");
        for n in &self.nodes {
            let _ = writeln!(out, "{}", self.node_line(n));
        }
        match &self.waiting_note {
            Some((id, text)) => {
                let _ = writeln!(out, "why job {id} waits: {text}");
            }
            None => {
                let _ = writeln!(out);
            }
        }
        let _ = writeln!(out, "recent events:");
        for r in &self.recent {
            let _ = writeln!(out, "  {r}");
        }
        for _ in self.recent.len()..RECENT {
            let _ = writeln!(out);
        }
        // Lines never wrap, so the block's height is its line count.
        let width = terminal_width();
        let out: String = out
            .lines()
            .map(|l| format!("{}\n", clip(l, width)))
            .collect();
        let mut err = std::io::stderr().lock();
        if self.drawn > 0 {
            let _ = write!(err, "\x1b[{}F\x1b[J", self.drawn);
        }
        let _ = err.write_all(out.as_bytes());
        let _ = err.flush();
        self.drawn = out.lines().count();
    }

    /// The summary in `lockgate simulate`'s terms (times from the first submit).
    pub fn summary(&self) -> Summary {
        let start = self
            .jobs
            .values()
            .filter_map(|j| ms_of(&Some(j.submitted_at.clone())))
            .min()
            .unwrap_or(self.t0);
        let rel = |t: Option<u64>| t.map(|t| t.saturating_sub(start));
        let jobs = self
            .jobs
            .values()
            .map(|j| JobRecord {
                submitted_ms: rel(ms_of(&Some(j.submitted_at.clone()))).unwrap_or(0),
                admitted_ms: rel(ms_of(&j.prepare_started_at).or(ms_of(&j.started_at))),
                started_ms: rel(ms_of(&j.started_at)),
                finished_ms: rel(ms_of(&j.finished_at)),
                node: j.node.clone(),
                outcome: j.outcome.or(Some(j.state)).filter(|s| s.is_terminal()),
                run_alone_ms: None,
            })
            .collect();
        let scopes = self
            .peaks
            .iter()
            .filter(|(_, &p)| p > 0)
            .map(|(s, &p)| ScopePeak {
                scope: s.clone(),
                limit: self.last_limits.get(s).copied(),
                peak: p,
            })
            .collect();
        let nodes = self
            .nodes
            .iter()
            .map(|n| NodeSlots {
                name: n.name.clone(),
                slots: n.number,
            })
            .collect();
        Summary::from_run(&Run {
            jobs,
            scopes,
            nodes,
        })
    }
}

/// The terminal's width (80 when unknown).
fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|&w| w > 10)
        .unwrap_or(80)
}

/// `line` cut to `width` columns; escape sequences take none.
fn clip(line: &str, width: usize) -> String {
    let mut out = String::new();
    let (mut cols, mut esc) = (0, false);
    for c in line.chars() {
        if c == '\x1b' {
            esc = true;
        }
        if !esc {
            if cols + 1 >= width {
                break;
            }
            cols += 1;
        }
        if esc && c.is_ascii_alphabetic() {
            esc = false;
        }
        out.push(c);
    }
    if esc || line.contains('\x1b') {
        out.push_str("\x1b[0m");
    }
    out
}

/// The handlers' own records: how many ran at once at most (any stage), and how many runs.
pub fn records_peak(p: &Paths) -> (usize, usize) {
    let text = std::fs::read_to_string(&p.record).unwrap_or_default();
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(kind), Some(t)) = (f.next(), f.next().and_then(|t| t.parse().ok())) else {
            continue;
        };
        match kind {
            "start" => edges.push((t, 1)),
            "end" => edges.push((t, -1)),
            _ => {}
        }
    }
    let runs = edges.iter().filter(|e| e.1 == 1).count();
    edges.sort();
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    (peak.max(0) as usize, runs)
}

/// The summary for people (stderr).
pub fn print_summary(s: &Summary, records: (usize, usize), global_limit: Option<u64>) {
    let mut out = String::new();
    let ok = s.jobs - s.unfinished;
    let _ = writeln!(
        out,
        "\nlockgate demo: {} jobs in {:.2} s ({ok} succeeded, {} not)",
        s.jobs, s.makespan_s, s.unfinished
    );
    let _ = writeln!(
        out,
        "waits for admission: p50 {:.2} s, p95 {:.2} s, max {:.2} s",
        s.wait_s.p50, s.wait_s.p95, s.wait_s.max
    );
    let _ = writeln!(
        out,
        "peak per scope (the server's exact counts) against its limit:"
    );
    let shown: Vec<&ScopePeak> = s
        .scopes
        .iter()
        .filter(|p| !p.scope.starts_with("conflict:"))
        .collect();
    let conflicts = s.scopes.len() - shown.len();
    let w = shown.iter().map(|p| p.scope.len()).max().unwrap_or(0);
    for p in shown {
        let limit = p.limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into());
        let flag = match p.limit {
            Some(l) if p.peak > l => "  OVER LIMIT",
            Some(l) if p.peak == l => "  (full)",
            _ => "",
        };
        let _ = writeln!(out, "  {:<w$}  {}/{limit}{flag}", p.scope, p.peak);
    }
    if conflicts > 0 {
        let _ = writeln!(
            out,
            "  and {conflicts} conflict scopes, each held by one job at a time"
        );
    }
    let _ = writeln!(out, "per node (run slots, jobs, busy over the makespan):");
    for n in &s.nodes {
        let slots = n.slots.map(|m| m.to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {:<7} slots {slots}  jobs {:>2}  busy {:>3.0}%",
            n.node,
            n.jobs,
            n.busy * 100.0
        );
    }
    let (peak, runs) = records;
    let _ =
        writeln!(
        out,
        "the handlers' own records: {runs} handler runs, at most {peak} at once (global limit {})",
        global_limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into())
    );
    eprint!("{out}");
}
