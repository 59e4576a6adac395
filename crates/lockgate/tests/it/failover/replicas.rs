//! N replicas: real `lockgate server` processes on one database of the test's own
//! PostgreSQL cluster, each on a free port with its own data dir and `--advertise-url`.

use super::own_cluster;
use crate::harness::{eventually, free_port, signal, BIN};
use lockgate_api::ClusterView;
use lockgate_client::Client;
use lockgate_store::postgres::testdb::TestCluster;
use rustix::process::Signal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One replica process.
pub struct Replica {
    pub port: u16,
    pub data: PathBuf,
    child: Option<Child>,
}

impl Replica {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What it says of the cluster (`GET /v1/cluster`); never ask a paused one (a
    /// stopped process's socket still accepts, and the call waits out its timeout).
    pub fn view(&self, token: &str) -> Option<ClusterView> {
        let c = Client::new(&self.url(), Some(token.to_string())).ok()?;
        c.cluster().ok()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The database and the replicas on it.
pub struct Replicas {
    /// Dropped first (fields drop in order): the replicas die before the cluster.
    pub reps: Vec<Replica>,
    pub dir: tempfile::TempDir,
    pub token: String,
    pub database_url: String,
    /// The test's own cluster, stopped when this is dropped (after the replicas).
    _pg: TestCluster,
}

impl Replicas {
    /// `n` replicas with `policy` as their `--config` (the first seeds the empty database
    /// and writes `admin.token`); returns once one of them leads.
    pub fn start(n: usize, policy: &str) -> Replicas {
        let pg = own_cluster();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lockgate.toml"), policy).unwrap();
        let mut r = Replicas {
            reps: Vec::new(),
            token: String::new(),
            database_url: pg.database(),
            dir,
            _pg: pg,
        };
        for i in 0..n {
            let rep = Replica {
                port: free_port(),
                data: r.dir.path().join(format!("data{i}")),
                child: None,
            };
            r.reps.push(rep);
            r.spawn(i);
            if i == 0 {
                let file = r.reps[0].data.join("admin.token");
                assert!(
                    eventually(Duration::from_secs(20), || file.exists()),
                    "no admin.token from the first replica:\n{}",
                    r.logs()
                );
                r.token = std::fs::read_to_string(file).unwrap().trim().to_string();
            }
        }
        r.wait_leader(Duration::from_secs(20), None);
        r
    }

    /// Starts (again) replica `i` and waits until `/healthz` answers.
    pub fn spawn(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("server{i}.log")))
            .unwrap();
        let url = self.reps[i].url();
        let child = Command::new(BIN)
            .args(["server", "--database-url", &self.database_url])
            .arg("--data-dir")
            .arg(&self.reps[i].data)
            .args(["--listen", &format!("127.0.0.1:{}", self.reps[i].port)])
            .args(["--advertise-url", &url])
            .arg("--config")
            .arg(self.dir.path().join("lockgate.toml"))
            .env("LOCKGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.reps[i].child = Some(child);
        let c = Client::new(&url, None).unwrap();
        let up = eventually(Duration::from_secs(20), || {
            c.call::<serde_json::Value>("GET", "/healthz", None::<&()>)
                .is_ok()
        });
        assert!(up, "replica {i} not up:\n{}", self.logs());
    }

    /// Every replica's URL, comma-separated (`LOCKGATE_SERVER`).
    pub fn servers(&self) -> String {
        let urls: Vec<String> = self.reps.iter().map(Replica::url).collect();
        urls.join(",")
    }

    /// An admin client that follows the leader.
    pub fn admin(&self) -> Client {
        Client::new(&self.servers(), Some(self.token.clone())).unwrap()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn work(&self) -> &Path {
        self.dir.path()
    }

    /// The replica that says it leads, among those not in `skip` (each asked once).
    pub fn leader(&self, skip: Option<usize>) -> Option<usize> {
        (0..self.reps.len())
            .filter(|&i| Some(i) != skip && self.reps[i].child.is_some())
            .find(|&i| {
                self.reps[i]
                    .view(&self.token)
                    .is_some_and(|v| v.role == "leader")
            })
    }

    /// Waits until a replica other than `skip` leads; its index.
    pub fn wait_leader(&self, limit: Duration, skip: Option<usize>) -> usize {
        let start = Instant::now();
        loop {
            if let Some(i) = self.leader(skip) {
                return i;
            }
            assert!(
                start.elapsed() < limit,
                "no leader after {limit:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGSTOP / SIGCONT replica `i`.
    pub fn pause(&self, i: usize, on: bool) {
        let sig = if on { Signal::STOP } else { Signal::CONT };
        signal(self.reps[i].pid(), sig);
    }

    /// The work dir's files ending in `.ext`.
    fn files(&self, ext: &str) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect()
    }

    /// The last lines of every server log in the work dir and of the last three wrappers
    /// started (the likeliest to be stuck), for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let mut paths = self.files("log");
        paths.sort();
        let mut wrappers = self.files("err");
        wrappers.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.created()).ok());
        paths.extend(wrappers.into_iter().rev().take(3));
        for p in paths {
            out.push_str(&crate::harness::tail(&p, 25));
        }
        out
    }
}
