//! A throwaway PostgreSQL cluster for tests (cargo feature `testdb`): one per test process,
//! a fresh database per test.
//!
//! [`cluster`] starts it the first time it is called: `initdb` into a temporary directory,
//! then `pg_ctl start` on a free port of 127.0.0.1 with `fsync=on` and
//! `synchronous_commit=on` (durability as in production). The binaries come from
//! `LOCKGATE_PG_BINDIR`, else `PATH`, else the newest `/usr/lib/postgresql/*/bin`. Run as
//! root, they run as the `postgres` user (`runuser -u postgres --`), with the directory
//! chowned to it, because PostgreSQL refuses to run as root.
//!
//! # Invariants
//! - **Nothing outlives the test process**: a process-wide cluster lives in a static, which
//!   is never dropped, so a small watcher (`sh`, in its own session) waits for the test
//!   process to end, however it ends (`kill -9` too), then stops the cluster
//!   (`pg_ctl stop -m fast`) and deletes its directory. A [`TestCluster`] made with
//!   [`TestCluster::start`] and dropped stops at once.
//! - **Databases never collide**: [`TestCluster::database`] names each `lg_<n>` from a
//!   process-wide counter; the cluster is the process's own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A running cluster.
#[derive(Debug)]
pub struct TestCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    stopped: bool,
}

/// The process-wide cluster, started at the first call.
///
/// # Panics
/// When PostgreSQL cannot be found or started (the message says why).
pub fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let c = TestCluster::start().unwrap_or_else(|e| panic!("test PostgreSQL: {e}"));
        c.watch_parent();
        c
    })
}

/// A URL of a fresh, empty database on the process-wide cluster.
pub fn fresh_database() -> String {
    cluster().database()
}

/// Where the PostgreSQL binaries are, if anywhere (see the module docs).
pub fn bindir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("LOCKGATE_PG_BINDIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("initdb").is_file() && d.join("pg_ctl").is_file() {
                // /usr/local/bin/initdb may be a link into the directory with psql.
                let real = d.join("initdb").canonicalize().ok();
                return real
                    .and_then(|r| r.parent().map(Path::to_path_buf))
                    .or(Some(d));
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").is_file())
        .collect();
    found.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

impl TestCluster {
    /// Creates and starts a cluster in a new temporary directory.
    ///
    /// # Errors
    /// What failed, with the tool's output.
    pub fn start() -> Result<TestCluster, String> {
        let bin = bindir().ok_or(
            "no initdb/pg_ctl: install PostgreSQL (15) or set LOCKGATE_PG_BINDIR".to_string(),
        )?;
        let base = std::env::temp_dir().join(format!(
            "lockgate-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        let as_postgres = is_root();
        let mut c = TestCluster {
            bin,
            dir: base,
            port: 0,
            as_postgres,
            stopped: false,
        };
        if as_postgres {
            let out = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&c.dir)
                .output()
                .map_err(|e| format!("chown: {e}"))?;
            check("chown", &out)?;
        }
        let data = c.dir.join("data");
        let out = c
            .tool("initdb")
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        check("initdb", &out)?;
        // A port can be taken between our probe and the start: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            c.port = free_port().map_err(|e| e.to_string())?;
            match c.pg_start(&data) {
                Ok(()) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn pg_start(&self, data: &Path) -> Result<(), String> {
        let opts = format!(
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c fsync=on -c synchronous_commit=on -c max_connections=400 \
             -c shared_buffers=32MB -c log_min_messages=warning",
            self.port,
            self.dir.display()
        );
        let out = self
            .tool("pg_ctl")
            .args(["start", "-w", "-t", "60", "-D"])
            .arg(data)
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &opts])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("pg_ctl: {e}"))?;
        check("pg_ctl start", &out).map_err(|e| {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            format!("{e}\n{log}")
        })
    }

    fn tool(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` on this cluster (user `postgres`, no password).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a fresh database (`lg_<n>`) and returns its URL.
    ///
    /// # Panics
    /// When the cluster does not answer.
    pub fn database(&self) -> String {
        let name = format!("lg_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.sql(&format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs one SQL command on the `postgres` database with `psql`.
    ///
    /// # Panics
    /// When it fails.
    pub fn sql(&self, sql: &str) {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url("postgres"))
            .args(["-c", sql])
            .output()
            .expect("run psql");
        check("psql", &out).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Runs the SQL file `path` on the database `url` with `psql`, in one transaction.
    ///
    /// # Panics
    /// When it fails.
    pub fn sql_file(&self, url: &str, path: &Path) {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "--single-transaction",
                "-d",
                url,
                "-f",
            ])
            .arg(path)
            .output()
            .expect("run psql");
        check("psql", &out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// Stops the cluster (`pg_ctl stop -m fast`), keeping its files: for tests of a lost
    /// database. [`TestCluster::restart`] starts it again on the same port.
    pub fn stop(&self) {
        let _ = self
            .tool("pg_ctl")
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(self.dir.join("data"))
            .output();
    }

    /// Starts a stopped cluster again on its port.
    ///
    /// # Errors
    /// What failed.
    pub fn restart(&self) -> Result<(), String> {
        self.pg_start(&self.dir.join("data"))
    }

    /// Starts the watcher that stops the cluster when this process ends.
    fn watch_parent(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = if self.as_postgres {
            format!("runuser -u postgres -- {}", pg_ctl.display())
        } else {
            pg_ctl.display().to_string()
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {stop} stop -m fast -D '{data}' >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            data = self.dir.join("data").display(),
            dir = self.dir.display(),
        );
        let _ = Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.stop();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

static NEXT: AtomicU64 = AtomicU64::new(1);

fn check(what: &str, out: &std::process::Output) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
