//! `lockgate bench`: measures the server and `lockgate run` on this machine.
//!
//! Starts a server in-process on 127.0.0.1 with a fresh store in a temporary directory and
//! reports: durable cycles per second over HTTP (submit, admitted, finish) with N
//! concurrent clients and the store commits per cycle; release-to-admission latency
//! (p50/p99) with M clients long-polling on one slot; and the wall time of an uncontended
//! `lockgate run -- true` against `flock FILE true`, as a ratio measured in the same run.
//! With `--database-url` the throughput and latency runs are repeated on a server whose
//! store is that (empty) PostgreSQL database, in the same run, so both stores are measured
//! on the same machine under the same load.
//! Nothing here is asserted; the numbers go into docs/benchmarks.md.

mod drain;

use lockgate_api::SubmitRequest;
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments of `lockgate bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Concurrent clients for the throughput run.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Cycles per client in the throughput run.
    #[arg(long, default_value_t = 100)]
    pub cycles: usize,
    /// Clients long-polling on one slot for the latency run.
    #[arg(long, default_value_t = 1000)]
    pub waiters: usize,
    /// Repetitions of `lockgate run -- true` and `flock FILE true`.
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Queued jobs for the drain measure (batched and single-request holders, 3 rounds
    /// each, interleaved); 0 skips it.
    #[arg(long, default_value_t = 20_000)]
    pub drain: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also measure throughput and latency with the store in this PostgreSQL database,
    /// which must be empty (the bench's server creates its tables and its admin token
    /// there; drop the `lockgate_*` tables afterwards).
    #[arg(
        long,
        value_name = "URL",
        env = "LOCKGATE_BENCH_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
}

struct Bench {
    url: String,
    token: String,
    dir: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bench {
    fn start(dir: PathBuf, database_url: Option<String>) -> anyhow::Result<Bench> {
        let on_database = database_url.is_some();
        let server = lockgate_server::Server::open(lockgate_server::Config {
            data_dir: dir.clone(),
            listen: "127.0.0.1:0".parse()?,
            policy_file: None,
            tls: None,
            hardening: Default::default(),
            backup_input_roots: Vec::new(),
            database_url,
        })?;
        let url = format!("http://{}", server.local_addr());
        let token = match std::fs::read_to_string(dir.join(lockgate_host::data_dir::ADMIN_TOKEN_FILE)) {
            Ok(t) => t.trim().to_string(),
            Err(_) if on_database => anyhow::bail!(
                "the --database-url database is not empty (it has an admin token already): give the bench an empty database"
            ),
            Err(e) => return Err(e.into()),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let _ = rt.block_on(server.run(async move {
                let _ = rx.await;
            }));
        });
        Ok(Bench {
            url,
            token,
            dir,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(&self.url, Some(self.token.clone()))?)
    }

    /// Applies one of the bench's own policies (some limit nothing, on purpose).
    fn policy(&self, toml: &str) -> anyhow::Result<()> {
        let opts = lockgate_client::PolicyPut {
            dry_run: false,
            if_match: None,
            allow_unlimited: true,
        };
        self.client()?.put_policy_with(toml, &opts)?;
        Ok(())
    }

    fn commits(&self) -> anyhow::Result<f64> {
        let text: String = ureq::get(&format!("{}/metrics", self.url))
            .call()?
            .into_string()?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("lockgate_store_commit_seconds_count "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0))
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// One durable cycle: submit, wait until admitted, finish.
fn cycle(c: &Client) -> anyhow::Result<()> {
    let req = SubmitRequest {
        kind: "backup".into(),
        ..Default::default()
    };
    let mut job = c.submit(&req)?.0;
    while !job.state.is_admitted() {
        job = c.wait(job.id, job.state, 30)?;
    }
    let token = job.lease.as_ref().map(|l| l.token).unwrap_or_default();
    c.finish_job(job.id, token, Outcome::Succeeded, None)?;
    Ok(())
}

fn throughput(b: &Bench, clients: usize, cycles: usize) -> anyhow::Result<(f64, f64)> {
    b.policy("[global]\nmax_running = 32\n")?;
    let before = b.commits()?;
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let c = b.client();
            std::thread::spawn(move || -> anyhow::Result<()> {
                let c = c?;
                for _ in 0..cycles {
                    cycle(&c)?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a client panicked"))??;
    }
    let secs = start.elapsed().as_secs_f64();
    let n = (clients * cycles) as f64;
    Ok((n / secs, (b.commits()? - before) / n))
}

/// Release-to-admission latency: `waiters` clients wait on one slot; each, once admitted,
/// notes how long ago the previous holder released, then releases in turn.
fn latency(b: &Bench, waiters: usize) -> anyhow::Result<Vec<f64>> {
    b.policy("[global]\nmax_running = 1\n")?;
    let admin = b.client()?;
    let gate = admin
        .submit(&SubmitRequest {
            kind: "gate".into(),
            ..Default::default()
        })?
        .0;
    let released: Arc<Mutex<Option<Instant>>> = Arc::default();
    let samples: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut threads = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..waiters {
        let job = admin
            .submit(&SubmitRequest {
                kind: "backup".into(),
                ..Default::default()
            })?
            .0;
        ids.push(job.id);
        let (c, released, samples) = (b.client()?, released.clone(), samples.clone());
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut job = job;
            while job.state == JobState::Queued {
                job = c.wait(job.id, JobState::Queued, 120)?;
            }
            let now = Instant::now();
            let token = job.lease.as_ref().map(|l| l.token).unwrap_or_default();
            let mut r = released.lock().expect("lock");
            if let Some(at) = *r {
                samples
                    .lock()
                    .expect("lock")
                    .push(now.duration_since(at).as_secs_f64() * 1000.0);
            }
            *r = Some(Instant::now());
            drop(r);
            c.finish_job(job.id, token, Outcome::Succeeded, None)?;
            Ok(())
        }));
    }
    // Every waiter is parked on its long-poll before the first release.
    std::thread::sleep(Duration::from_millis(500 + waiters as u64));
    *released.lock().expect("lock") = Some(Instant::now());
    admin.finish_job(
        gate.id,
        gate.lease.map(|l| l.token).unwrap_or_default(),
        Outcome::Succeeded,
        None,
    )?;
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a waiter panicked"))??;
    }
    let mut s = samples.lock().expect("lock").clone();
    s.sort_by(f64::total_cmp);
    Ok(s)
}

fn time_runs(runs: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    f()?;
    let start = Instant::now();
    for _ in 0..runs {
        f()?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0 / runs as f64)
}

/// The throughput and latency runs on one server: the JSON summary and the text lines.
fn measure(b: &Bench, args: &Args, store: &str) -> anyhow::Result<(serde_json::Value, String)> {
    eprintln!(
        "throughput ({store}): {} clients x {} cycles ...",
        args.clients, args.cycles
    );
    let (cps, commits) = throughput(b, args.clients, args.cycles)?;
    eprintln!("latency ({store}): {} waiting clients ...", args.waiters);
    let lat = latency(b, args.waiters)?;
    // Lines carry the store's name only when two stores are measured.
    let tag = match args.database_url {
        Some(_) => format!("[{store}] "),
        None => String::new(),
    };
    let json = serde_json::json!({
        "throughput": {"clients": args.clients, "cycles": args.clients * args.cycles, "cycles_per_s": cps, "commits_per_cycle": commits},
        "release_to_admission_ms": {"waiters": args.waiters, "samples": lat.len(), "p50": pct(&lat, 0.5), "p99": pct(&lat, 0.99), "max": pct(&lat, 1.0)},
    });
    let text = format!(
        "{tag}durable cycles/s over HTTP ({} clients): {cps:.0}\n\
         {tag}store commits per cycle: {commits:.3}\n\
         {tag}release-to-admission latency with {} waiting clients: p50 {:.2} ms, p99 {:.2} ms",
        args.clients,
        args.waiters,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    Ok((json, text))
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = std::env::temp_dir().join(format!("lockgate-bench-{}", std::process::id()));
    let postgres = match &args.database_url {
        Some(url) => {
            let pg_dir = dir.with_extension("pg");
            let b = Bench::start(pg_dir, Some(url.clone()))?;
            Some(measure(&b, &args, "postgresql")?)
        }
        None => None,
    };
    let b = Bench::start(dir.clone(), None)?;
    let (sqlite, sqlite_text) = measure(&b, &args, "sqlite")?;
    eprintln!("lockgate run vs flock: {} runs each ...", args.runs);
    b.policy("")?;
    let exe = std::env::current_exe()?;
    let lock = dir.join("flock");
    let run_ms = time_runs(args.runs, || {
        let st = Command::new(&exe)
            .args(["run", "--", "true"])
            .env("LOCKGATE_SERVER", &b.url)
            .env("LOCKGATE_TOKEN", &b.token)
            .stdin(Stdio::null())
            .status()?;
        anyhow::ensure!(st.success(), "lockgate run failed: {st}");
        Ok(())
    })?;
    let flock_ms = time_runs(args.runs, || {
        let st = Command::new("flock").arg(&lock).arg("true").status()?;
        anyhow::ensure!(st.success(), "flock failed: {st}");
        Ok(())
    })?;
    let (drain_b, drain_s) = match args.drain {
        0 => (0.0, 0.0),
        n => drain::measure(&b, n, 3)?,
    };
    let mut summary = serde_json::json!({
        "throughput": sqlite["throughput"],
        "release_to_admission_ms": sqlite["release_to_admission_ms"],
        "run_vs_flock": {"runs": args.runs, "lockgate_run_ms": run_ms, "flock_ms": flock_ms, "ratio": run_ms / flock_ms},
    });
    if args.drain > 0 {
        summary["drain_jobs"] = args.drain.into();
        summary["drain_jobs_per_s"] = drain_b.into();
        summary["drain_single_jobs_per_s"] = drain_s.into();
    }
    if let Some((pg, _)) = &postgres {
        summary["postgresql"] = pg.clone();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{sqlite_text}");
        if let Some((_, text)) = &postgres {
            println!("{text}");
        }
        println!("uncontended `lockgate run -- true`: {run_ms:.2} ms; `flock FILE true`: {flock_ms:.2} ms; ratio {:.1}x", run_ms / flock_ms);
        if args.drain > 0 {
            println!("drain of {} queued jobs: batched {drain_b:.0} jobs/s, single requests {drain_s:.0} jobs/s (ratio {:.1}x; medians of 3)", args.drain, drain_b / drain_s);
        }
    }
    Ok(ExitCode::SUCCESS)
}
