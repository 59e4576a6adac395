//! `lockgate demo`: a real server, three real agents and a sample workload, with a live
//! view, in one command (api.md: `lockgate demo [--json]`).
//!
//! Everything runs as the real programs: `lockgate server` and three `lockgate agent`
//! processes, started through the same child runner as any handler (own process group,
//! `PR_SET_PDEATHSIG`, so they die with the demo even on `kill -9`), on a free port with a
//! temporary data dir. The handlers are `lockgate __demo-task`, which copy and checksum
//! files in the temporary directory and record their own start and end.
//!
//! Cleanup: the processes are stopped (SIGTERM, SIGKILL after a second) and the
//! temporary directory removed on every way out: the end, an error, or Ctrl+C, SIGTERM or
//! a closed terminal (exit 130). After `kill -9` of the demo the processes still go (their
//! death signal) but the temporary directory stays.
//! `--json` prints the summary in the JSON form of `simulate -o json` on stdout and nothing
//! else; the live view goes to stderr.
//!
//! The dashboard: once the server is up, stderr gets its address and a one-time sign-in
//! code (`POST /v1/ui/codes`, valid 10 minutes, single use; never the admin token in a
//! URL). With `--keep` the server and agents stay up after the workload, with a fresh
//! code, until Ctrl+C or SIGTERM; then they are stopped and the directory kept.

mod setup;
pub mod task;
mod view;

use crate::{GlobalArgs, Output};
use anyhow::{bail, Context as _};
use lockgate_api::{Role, TokenCreate};
use lockgate_client::child::{Launcher, Signal, Supervised};
use lockgate_client::Client;
use setup::Paths;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `lockgate demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the summary as JSON (the form of `simulate -o json`) on stdout, nothing else.
    #[arg(long)]
    pub json: bool,
    /// Keep the server and agents up after the workload (the dashboard stays reachable,
    /// a fresh sign-in code is printed) until Ctrl+C or SIGTERM, then keep the temporary
    /// directory (logs, records, repository) and print its path.
    #[arg(long)]
    pub keep: bool,
}

/// Longest the demo may take before it gives up.
const DEADLINE: Duration = Duration::from_secs(50);

/// The processes the demo started; stopped on drop.
#[derive(Default)]
struct Procs {
    list: Vec<(String, Supervised)>,
}

impl Procs {
    fn stop_all(&mut self) {
        for (_, p) in &self.list {
            p.signal(Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for (_, p) in &mut self.list {
            let left = deadline.saturating_duration_since(Instant::now());
            if p.wait_timeout(left).is_none() {
                p.terminate(Duration::ZERO);
            }
        }
        self.list.clear();
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.stop_all();
    }
}

struct Demo {
    exe: PathBuf,
    launcher: Launcher,
    paths: Paths,
    procs: Procs,
    stop: Arc<AtomicBool>,
    /// The server's URL and admin client, once it is up.
    server: Option<(String, Client)>,
}

/// Prints the dashboard's address and a fresh one-time sign-in code on stderr.
fn print_dashboard(url: &str, admin: &Client) {
    match admin.ui_code() {
        Ok(c) => eprintln!(
            "lockgate demo: dashboard {url}/ui/ (sign in with the one-time code {}, valid 10 minutes)",
            c.code
        ),
        Err(e) => eprintln!("lockgate demo: dashboard {url}/ui/ (no sign-in code: {e})"),
    }
}

/// Runs the subcommand.
///
/// # Errors
/// A process that does not start, or a server that does not answer.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json || global.output == Output::Json;
    let stop = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let dir = tempfile::Builder::new()
        .prefix("lockgate-demo-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let exe = std::env::current_exe().context("cannot find the lockgate binary")?;
    let mut demo = Demo {
        launcher: Launcher::new(),
        exe,
        paths: Paths::new(dir.path()),
        procs: Procs::default(),
        stop: stop.clone(),
        server: None,
    };
    let result = demo.run(json);
    if args.keep && result.is_ok() && !stop.load(Ordering::SeqCst) {
        if let Some((url, admin)) = &demo.server {
            print_dashboard(url, admin);
            eprintln!("lockgate demo: the server and agents stay up (--keep); Ctrl+C stops them");
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.store(false, Ordering::SeqCst);
        }
    }
    demo.procs.stop_all();
    if args.keep {
        let kept = dir.keep();
        eprintln!("lockgate demo: kept {}", kept.display());
    } else {
        drop(dir);
    }
    if stop.load(Ordering::SeqCst) {
        eprintln!("\nlockgate demo: interrupted; processes stopped, temporary files removed");
        return Ok(ExitCode::from(130));
    }
    result
}

impl Demo {
    fn interrupted(&self) -> anyhow::Result<()> {
        if self.stop.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        Ok(())
    }

    fn spawn(
        &mut self,
        name: &str,
        argv: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<PathBuf> {
        let log_path = self.paths.at(&format!("{name}.log"));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = self.launcher.command(argv);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        cmd.env("LOCKGATE_LOG", "warn").env_remove("LOCKGATE_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start the {name}"))?;
        self.procs
            .list
            .push((name.to_string(), Supervised::new(child)));
        Ok(log_path)
    }

    fn arg(&self, p: &Path) -> String {
        p.display().to_string()
    }

    /// Starts the server on a free port; its URL and admin client.
    fn start_server(&mut self) -> anyhow::Result<(String, Client)> {
        let argv = vec![
            self.arg(&self.exe),
            "server".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            self.arg(&self.paths.at("data")),
            "--config".into(),
            self.arg(&self.paths.at("policy.toml")),
        ];
        let log = self.spawn("server", &argv, &[])?;
        let start = Instant::now();
        let addr = loop {
            self.interrupted()?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(rest) = text.split("listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap_or("").to_string();
            }
            if let Some((_, p)) = self.procs.list.last_mut() {
                if let Some(s) = p.wait_timeout(Duration::ZERO) {
                    bail!(
                        "the server exited ({}): {text}",
                        lockgate_client::child::describe(s)
                    );
                }
            }
            if start.elapsed() > Duration::from_secs(20) {
                bail!("the server did not start within 20 s: {text}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let url = format!("http://{addr}");
        let token = std::fs::read_to_string(self.paths.at("data/admin.token"))
            .context("reading the server's admin token")?;
        let admin = Client::new(&url, Some(token.trim().to_string()))?;
        Ok((url, admin))
    }

    fn start_agents(&mut self, url: &str, admin: &Client) -> anyhow::Result<()> {
        let cfg = self.paths.at("agent.toml");
        std::fs::write(&cfg, setup::agent_toml(&self.exe, &self.paths))?;
        for n in &setup::NODES {
            let token = admin
                .create_token(&TokenCreate {
                    name: format!("agent-{}", n.name),
                    role: Role::Agent,
                    node: Some(n.name.to_string()),
                })
                .with_context(|| format!("creating the agent token of {}", n.name))?
                .token;
            let mut argv = vec![
                self.arg(&self.exe),
                "agent".into(),
                "--node".into(),
                n.name.into(),
                "--config".into(),
                self.arg(&cfg),
            ];
            for (k, v) in n.labels {
                argv.push("--label".into());
                argv.push(format!("{k}={v}"));
            }
            self.spawn(
                &format!("agent-{}", n.name),
                &argv,
                &[("LOCKGATE_SERVER", url), ("LOCKGATE_TOKEN", &token)],
            )?;
        }
        let start = Instant::now();
        loop {
            self.interrupted()?;
            let nodes = admin.nodes()?.nodes;
            if nodes.iter().filter(|n| n.state == "ready").count() == setup::NODES.len() {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(20) {
                bail!(
                    "the agents did not register within 20 s (logs in {})",
                    self.paths.root.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn run(&mut self, json: bool) -> anyhow::Result<ExitCode> {
        let t0 = task::wall_ms();
        let started = Instant::now();
        setup::write_files(&self.paths)?;
        let (url, admin) = self.start_server()?;
        self.server = Some((url.clone(), admin.clone()));
        self.start_agents(&url, &admin)?;
        let tty = std::io::stderr().is_terminal();
        eprintln!(
            "lockgate demo: server {url}, 3 agents, temporary dir {}",
            self.paths.root.display()
        );
        eprintln!(
            "  node-a disk=ssd -> 3 slots; node-b -> 2 (default); node-c disk=ssd + role=database -> 0 (the smaller number wins)"
        );
        print_dashboard(&url, &admin);
        let plan = setup::workload(&self.paths);
        let total = plan.len();
        let mut next = 0;
        let mut view = view::View::new(tty, t0, &url);
        let mut changed = false;
        let begin = Instant::now();
        loop {
            self.interrupted()?;
            let t = begin.elapsed().as_secs_f64();
            while next < total && plan[next].at <= t {
                admin
                    .submit(&plan[next].req)
                    .context("submitting a demo job")?;
                next += 1;
            }
            if !changed && t >= setup::POLICY_CHANGE_AT {
                view.poll(&admin)?;
                admin
                    .put_policy(&setup::policy_after(), false, None)
                    .context("applying the policy change")?;
                changed = true;
            }
            view.poll(&admin)?;
            view.explain_waiting(&admin);
            view.draw(task::wall_ms());
            if next == total && changed && view.all_final(total) {
                break;
            }
            if started.elapsed() > DEADLINE {
                bail!(
                    "the demo did not finish within {DEADLINE:?} (logs in {})",
                    self.paths.root.display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        view.draw(task::wall_ms());
        let summary = view.summary();
        let global = admin.policy().ok().and_then(|p| {
            p.policy
                .pointer("/global/max_running")
                .and_then(|v| v.as_u64())
        });
        view::print_summary(&summary, view::records_peak(&self.paths), global);
        if json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
        Ok(if summary.unfinished == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}
