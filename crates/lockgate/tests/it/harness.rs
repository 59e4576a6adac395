//! Spawns `lockgate server` and `lockgate run` processes.

use lockgate_client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_lockgate");

pub struct Srv {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub token: String,
    /// Serve HTTPS with the fixture certificate.
    pub tls: bool,
    /// More environment for the server process.
    pub env: Vec<(String, String)>,
    child: Option<Child>,
}

/// TLS fixtures: `cert.pem`/`key.pem` (CN=localhost, IP 127.0.0.1) signed by the test CA
/// `ca.pem`; valid for 100 years.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures")
        .join(name)
}

/// A port nothing listens on now (for a server or receiver the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Srv {
    /// A server with `policy` as its `--config` file.
    pub fn start(policy: &str) -> Srv {
        Srv::start_with(policy, false)
    }

    /// A server, with TLS when `tls`.
    pub fn start_with(policy: &str, tls: bool) -> Srv {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lockgate.toml"), policy).unwrap();
        let mut s = Srv {
            dir,
            port: free_port(),
            token: String::new(),
            tls,
            env: Vec::new(),
            child: None,
        };
        s.spawn();
        s.token = std::fs::read_to_string(s.dir.path().join("data/admin.token"))
            .unwrap()
            .trim()
            .to_string();
        s
    }

    /// A server with `policy` as its `--config` file and its store in the database `url`
    /// (`--database-url`).
    pub fn start_on_database(policy: &str, url: &str) -> Srv {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lockgate.toml"), policy).unwrap();
        let mut s = Srv {
            dir,
            port: free_port(),
            token: String::new(),
            tls: false,
            env: Vec::new(),
            child: None,
        };
        s.spawn_with(&["--database-url", url]);
        s.token = std::fs::read_to_string(s.dir.path().join("data/admin.token"))
            .unwrap()
            .trim()
            .to_string();
        s
    }

    /// A server not started yet on `dir` (its data dir `dir/data`), `policy` as its
    /// `--config` file and `token` as the token its clients use.
    pub fn unstarted(dir: tempfile::TempDir, policy: &str, token: &str) -> Srv {
        std::fs::write(dir.path().join("lockgate.toml"), policy).unwrap();
        Srv {
            dir,
            port: free_port(),
            token: token.to_string(),
            tls: false,
            env: Vec::new(),
            child: None,
        }
    }

    /// The `--config` the server gets: the directory `conf.d` when the test made one (a
    /// policy split over files), else `lockgate.toml`.
    pub fn config(&self) -> PathBuf {
        let dir = self.path("conf.d");
        if dir.is_dir() {
            dir
        } else {
            self.path("lockgate.toml")
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Starts the server process and waits until `/readyz` answers.
    pub fn spawn(&mut self) {
        self.spawn_with(&[]);
    }

    /// [`Srv::spawn`] with more `lockgate server` flags.
    pub fn spawn_with(&mut self, extra: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("server.log"))
            .unwrap();
        let mut cmd = Command::new(BIN);
        if self.tls {
            cmd.arg("server")
                .arg("--tls-cert")
                .arg(fixture("cert.pem"))
                .arg("--tls-key")
                .arg(fixture("key.pem"));
        } else {
            cmd.arg("server");
        }
        let child = cmd
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--data-dir")
            .arg(self.path("data"))
            .arg("--config")
            .arg(self.config())
            .args(extra)
            .env("LOCKGATE_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        let c = self.client(None);
        loop {
            if c.call::<serde_json::Value>("GET", "/readyz", None::<&()>)
                .is_ok()
            {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "server exited with {status}: {}",
                    std::fs::read_to_string(self.path("server.log")).unwrap()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "server not ready"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

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

    /// SIGTERM and wait: the graceful path.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        signal(c.id(), rustix::process::Signal::TERM);
        c.wait().unwrap()
    }

    pub fn client(&self, token: Option<String>) -> Client {
        let ca = fixture("ca.pem");
        let ca = self.tls.then(|| ca.to_str().unwrap().to_string());
        Client::with_ca(&self.url(), token, ca.as_deref()).unwrap()
    }

    pub fn admin(&self) -> Client {
        self.client(Some(self.token.clone()))
    }

    /// `lockgate ARGS` (any subcommand) against this server.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("LOCKGATE_SERVER", self.url())
            .env("LOCKGATE_TOKEN", &self.token)
            .env("LOCKGATE_SPOOL", self.path("spool"))
            .env("LOCKGATE_HOLDS", self.path("holds"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        if self.tls {
            c.env("LOCKGATE_CA_CERT", fixture("ca.pem"));
        }
        c
    }

    /// `lockgate run ARGS` against this server.
    pub fn run(&self, args: &[&str]) -> Command {
        let mut c = self.cli(&["run"]);
        c.args(args);
        c
    }
}

impl Drop for Srv {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// Polls `f` every 10 ms until it is true or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// Whether a process is gone (or a zombie).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

pub fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The last `n` lines of the file at `path` under a `--- PATH` heading, for failure
/// messages (an unreadable file shows only the heading).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = format!("--- {} (last lines)\n", path.display());
    for l in &lines[lines.len().saturating_sub(n)..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The server's jobs in `state` (the first page).
pub fn jobs_in(c: &Client, state: &str) -> Vec<lockgate_api::JobView> {
    c.jobs(&lockgate_api::JobQuery {
        state: Some(state.into()),
        ..Default::default()
    })
    .unwrap()
    .jobs
}

/// A new agent token bound to `node` (`agent-NODE`), made with the admin client.
pub fn agent_token(admin: &Client, node: &str) -> String {
    admin
        .create_token(&lockgate_api::TokenCreate {
            name: format!("agent-{node}"),
            role: lockgate_api::Role::Agent,
            node: Some(node.into()),
        })
        .unwrap()
        .token
}
