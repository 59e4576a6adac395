//! Starts a server in-process (its own runtime on a thread) and stops it gracefully.

use lockgate_client::Client;
use lockgate_server::{Config, Server};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

pub struct TestServer {
    pub url: String,
    pub admin: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Whether the suite runs on PostgreSQL (`LOCKGATE_TEST_STORE=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("LOCKGATE_TEST_STORE").as_deref() == Ok("postgres")
}

/// On PostgreSQL, says why a test that checks the SQLite file itself is not run, and
/// returns true (the caller returns).
pub fn sqlite_only(why: &str) -> bool {
    if on_postgres() {
        eprintln!("SKIPPED on PostgreSQL: {why}");
        return true;
    }
    false
}

/// The store of the server on `dir`, opened directly (the SQLite file, or its database).
pub fn open_store(dir: &Path) -> lockgate_store::AnyStore {
    TestServer::config(dir)
        .store_location()
        .open()
        .expect("the store opens")
}

/// The database of the server on `dir` (made at the first call for it).
fn database_for(dir: &Path) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static BY_DIR: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let mut map = BY_DIR
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.entry(dir.to_path_buf())
        .or_insert_with(lockgate_store::postgres::testdb::fresh_database)
        .clone()
}

/// A temp dir that lives as long as the test needs it.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

impl TestServer {
    /// A server whose store holds `policy` (applied through the API after start).
    pub fn start(dir: &Path, policy: &str) -> TestServer {
        let s = TestServer::open(dir, None);
        if !policy.is_empty() {
            s.admin()
                .put_policy(policy, false, None)
                .expect("policy applies");
        }
        s
    }

    /// A server on `dir`, with a `--config` file when given.
    pub fn open(dir: &Path, config: Option<PathBuf>) -> TestServer {
        TestServer::open_set(dir, config, |_| {})
    }

    /// A server on `dir` with hardening settings.
    pub fn open_with(
        dir: &Path,
        config: Option<PathBuf>,
        hardening: lockgate_server::hardening::Hardening,
    ) -> TestServer {
        TestServer::with_config(Config {
            policy_file: config,
            hardening,
            ..TestServer::config(dir)
        })
    }

    /// A server on `dir`, set up by `set` before it serves.
    pub fn open_set(
        dir: &Path,
        config: Option<PathBuf>,
        set: impl FnOnce(&mut Server),
    ) -> TestServer {
        let config = Config {
            policy_file: config,
            ..TestServer::config(dir)
        };
        TestServer::with_config_set(config, set)
    }

    /// The configuration of a server on `dir` with every default. With
    /// `LOCKGATE_TEST_STORE=postgres` its store is a PostgreSQL database of the test
    /// cluster, one per data dir (a restart on the same dir finds the same database).
    pub fn config(dir: &Path) -> Config {
        Config {
            data_dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            policy_file: None,
            tls: None,
            hardening: Default::default(),
            backup_input_roots: Vec::new(),
            database_url: on_postgres().then(|| database_for(dir)),
        }
    }

    /// A server started with `config` (its data dir holds `admin.token`).
    pub fn with_config(config: Config) -> TestServer {
        TestServer::with_config_set(config, |_| {})
    }

    /// A server started with `config`, set up by `set` before it serves.
    pub fn with_config_set(config: Config, set: impl FnOnce(&mut Server)) -> TestServer {
        let dir = config.data_dir.clone();
        let mut server = Server::open(config).expect("server opens");
        set(&mut server);
        let url = format!("http://{}", server.local_addr());
        let admin = std::fs::read_to_string(dir.join("admin.token"))
            .expect("admin token")
            .trim()
            .to_string();
        let (tx, thread) = serve(server);
        let s = TestServer {
            url,
            admin,
            stop: Some(tx),
            thread: Some(thread),
        };
        s.wait_ready();
        s
    }

    /// Waits until `/readyz` answers 200: at once on SQLite; on PostgreSQL a restarted
    /// server is a replica that may first wait for the previous one's lease and rebuild.
    fn wait_ready(&self) {
        let start = std::time::Instant::now();
        while ureq::get(&format!("{}/readyz", self.url)).call().is_err() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "the server at {} is not ready after 20 s",
                self.url
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    pub fn client(&self, token: Option<&str>) -> Client {
        Client::new(&self.url, token.map(str::to_string)).unwrap()
    }

    pub fn admin(&self) -> Client {
        self.client(Some(&self.admin))
    }

    /// A token of another role.
    pub fn token(&self, name: &str, role: lockgate_api::Role, node: Option<&str>) -> Client {
        let t = self
            .admin()
            .create_token(&lockgate_api::TokenCreate {
                name: name.into(),
                role,
                node: node.map(str::to_string),
            })
            .unwrap();
        self.client(Some(&t.token))
    }

    /// Graceful stop (SIGTERM path): waits until the store is flushed.
    pub fn stop(mut self) {
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

    /// A raw request: status and body text.
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<(&str, &str)>,
    ) -> (u16, String) {
        let agent = ureq::AgentBuilder::new().build();
        let mut req = agent.request(method, &format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        let r = match body {
            Some((ctype, text)) => req.set("Content-Type", ctype).send_string(text),
            None => req.call(),
        };
        match r {
            Ok(resp) => (resp.status(), resp.into_string().unwrap()),
            Err(ureq::Error::Status(s, resp)) => (s, resp.into_string().unwrap()),
            Err(e) => panic!("transport error: {e}"),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A submit request for `kind` with attrs.
pub fn job(kind: &str, attrs: &[(&str, &str)]) -> lockgate_api::SubmitRequest {
    lockgate_api::SubmitRequest {
        kind: kind.into(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// Runs `server` on a thread of its own (a 2-worker runtime) until the sender is used or
/// dropped; the thread ends when the server has stopped.
pub fn serve(server: Server) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(server.run(async move {
            let _ = rx.await;
        }))
        .unwrap();
    });
    (tx, thread)
}
