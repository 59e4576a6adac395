//! Issue 10, items 6 to 9: a full disk, idle connections, two servers on one data dir, a
//! damaged or replaced store. Each test is named after what it prevents.
//!
//! Some tests run this test binary again as a child process (the `#[ignore]`d `child_*`
//! tests below, which do nothing unless their environment variable is set): a server to
//! `kill -9`, or a load client whose sockets must not share the server's fd table.

use crate::harness::*;
use lockgate_client::Client;
use lockgate_core::JobState;
use lockgate_server::hardening::Hardening;
use lockgate_server::{Config, Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn config(dir: &Path, hardening: Hardening) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        policy_file: None,
        tls: None,
        hardening,
        backup_input_roots: Vec::new(),
        database_url: None,
    }
}

/// `Server::open` must refuse; its message.
fn refused(dir: &Path) -> String {
    match Server::open(config(dir, Hardening::default())) {
        Ok(_) => panic!("{} started", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn fresh() -> Hardening {
    Hardening {
        start_fresh: true,
        ..Hardening::default()
    }
}

/// This test binary again, running only the ignored test `name` with `env` set.
fn child(name: &str, env: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("spawn the test binary")
}

/// Reads the child's stdout until a line holding `prefix`; returns what follows it.
fn line_from(child: &mut Child, prefix: &str) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "child ended before {prefix}"
        );
        // libtest prints "test NAME ... " on the same line before the child's output.
        if let Some(at) = line.find(prefix) {
            return line[at + prefix.len()..].trim().to_string();
        }
    }
}

/// A server in a child process on `dir`; its URL.
pub(crate) fn spawn_server(dir: &Path) -> (Child, String) {
    let mut c = child(
        "hardening::child_server",
        &[("LOCKGATE_IT_CHILD_DATA_DIR", dir.display().to_string())],
    );
    let url = line_from(&mut c, "URL=");
    (c, url)
}

#[test]
#[ignore = "a child process of the tests above"]
fn child_server() {
    let Some(dir) = std::env::var_os("LOCKGATE_IT_CHILD_DATA_DIR") else {
        return;
    };
    let server = Server::open(config(Path::new(&dir), Hardening::default())).unwrap();
    println!("URL=http://{}", server.local_addr());
    std::io::stdout().flush().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(server.run(std::future::pending())).unwrap();
}

pub(crate) fn admin_of(dir: &Path, url: &str) -> Client {
    let token = std::fs::read_to_string(dir.join("admin.token")).unwrap();
    Client::new(url, Some(token.trim().to_string())).unwrap()
}

// ---- 8: two servers on one data dir ----

#[test]
fn a_second_server_on_the_same_data_dir_refuses_to_start_naming_dir_and_pid() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let text = refused(dir.path());
    assert!(
        text.contains(&dir.path().display().to_string())
            && text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    s.stop();
    // Released with the server.
    TestServer::open(dir.path(), None).stop();
}

#[test]
fn a_server_in_another_process_holds_the_data_dir_until_it_is_killed() {
    let dir = tempdir();
    let (mut c, _url) = spawn_server(dir.path());
    let text = refused(dir.path());
    assert!(text.contains(&format!("pid {}", c.id())), "{text}");
    // kill -9 never leaves a stale lock.
    c.kill().unwrap();
    c.wait().unwrap();
    TestServer::open(dir.path(), None).stop();
}

// ---- 9: a damaged or replaced store ----

/// A data dir with `n` acknowledged jobs, cleanly stopped; the admin token.
fn used_data_dir(dir: &Path, n: usize) -> String {
    let s = TestServer::open(dir, None);
    for _ in 0..n {
        s.admin().submit(&job("backup", &[])).unwrap();
    }
    let admin = s.admin.clone();
    s.stop();
    admin
}

fn remove_store(dir: &Path) {
    for f in ["lockgate.db", "lockgate.db-wal", "lockgate.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
}

#[test]
fn a_deleted_store_is_not_started_as_a_fresh_install() {
    if crate::harness::sqlite_only("the data dir's watermark and the lockgate.db file it guards are SQLite's; a database is kept by PostgreSQL (docs/postgresql.md)") {
        return;
    }
    let dir = tempdir();
    let admin = used_data_dir(dir.path(), 3);
    remove_store(dir.path());
    let text = refused(dir.path());
    assert!(
        text.contains("empty or new")
            && text.contains("--start-fresh")
            && text.contains(&dir.path().display().to_string()),
        "{text}"
    );
    // admin.token is untouched.
    let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    assert_eq!(token.trim(), admin);
}

#[test]
fn a_store_truncated_to_zero_is_not_started_as_a_fresh_install() {
    if crate::harness::sqlite_only("the data dir's watermark and the lockgate.db file it guards are SQLite's; a database is kept by PostgreSQL (docs/postgresql.md)") {
        return;
    }
    let dir = tempdir();
    used_data_dir(dir.path(), 3);
    std::fs::File::create(dir.path().join("lockgate.db")).unwrap();
    let text = refused(dir.path());
    assert!(
        text.contains("empty or new") && text.contains("--start-fresh"),
        "{text}"
    );
}

#[test]
fn a_replaced_or_older_store_is_refused() {
    if crate::harness::sqlite_only("the data dir's watermark and the lockgate.db file it guards are SQLite's; a database is kept by PostgreSQL (docs/postgresql.md)") {
        return;
    }
    let (a, b) = (tempdir(), tempdir());
    used_data_dir(a.path(), 2);
    used_data_dir(b.path(), 2);
    let db = |d: &tempfile::TempDir| d.path().join("lockgate.db");
    let saved = std::fs::read(db(&a)).unwrap();
    // Another data dir's store.
    std::fs::copy(db(&b), db(&a)).unwrap();
    let text = refused(a.path());
    assert!(text.contains("was replaced"), "{text}");
    // An older copy of its own store.
    std::fs::write(db(&a), &saved).unwrap();
    used_data_dir(a.path(), 2);
    std::fs::write(db(&a), &saved).unwrap();
    let text = refused(a.path());
    assert!(
        text.contains("behind what was acknowledged") && text.contains("jobs up to 4"),
        "{text}"
    );
}

#[test]
fn start_fresh_starts_without_reissuing_ids_or_overwriting_admin_token() {
    if crate::harness::sqlite_only("the data dir's watermark and the lockgate.db file it guards are SQLite's; a database is kept by PostgreSQL (docs/postgresql.md)") {
        return;
    }
    let dir = tempdir();
    let old = used_data_dir(dir.path(), 3);
    remove_store(dir.path());
    let s = TestServer::open_with(dir.path(), None, fresh());
    assert_ne!(s.admin, old);
    let (j, _) = s.admin().submit(&job("backup", &[])).unwrap();
    assert_eq!(j.id, 4, "ids continue above the acknowledged ones");
    let aside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("admin.token.replaced-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let kept = std::fs::read_to_string(dir.path().join(&aside[0])).unwrap();
    assert_eq!(kept.trim(), old);
    s.stop();
    // The next start needs no flag.
    TestServer::open(dir.path(), None).stop();
}

/// The names of `admin.token.replaced-*` files in `dir`.
fn replaced_admin_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("admin.token.replaced-"))
        .collect()
}

#[test]
fn a_deleted_or_damaged_admin_token_file_is_recreated_and_the_old_tokens_still_work() {
    if crate::harness::sqlite_only("a data dir owns its admin.token only with its own store; a replica's tokens live in the shared database") {
        return;
    }
    let dir = tempdir();
    let old = used_data_dir(dir.path(), 1);
    // Deleted while the server was stopped.
    std::fs::remove_file(dir.path().join("admin.token")).unwrap();
    let s = TestServer::open(dir.path(), None);
    assert_ne!(s.admin, old, "a new admin token in a new file");
    s.admin().submit(&job("backup", &[])).unwrap();
    s.client(Some(&old)).submit(&job("backup", &[])).unwrap();
    let second = s.admin.clone();
    s.stop();
    // Damaged while the server was stopped: moved aside, a new one written.
    std::fs::write(dir.path().join("admin.token"), "not-a-token\n").unwrap();
    let s = TestServer::open(dir.path(), None);
    assert!(s.admin != old && s.admin != second);
    s.admin().submit(&job("backup", &[])).unwrap();
    s.client(Some(&second)).submit(&job("backup", &[])).unwrap();
    let aside = replaced_admin_files(dir.path());
    assert_eq!(aside.len(), 1, "{aside:?}");
    let kept = std::fs::read_to_string(dir.path().join(&aside[0])).unwrap();
    assert_eq!(
        kept, "not-a-token\n",
        "the damaged file is kept, never overwritten"
    );
    let third = s.admin.clone();
    s.stop();
    // Intact: left alone, no new token.
    let s = TestServer::open(dir.path(), None);
    assert_eq!(s.admin, third);
    assert_eq!(replaced_admin_files(dir.path()).len(), 1);
    s.stop();
}

#[test]
fn garbage_in_the_wal_after_kill_9_is_refused_not_served_as_fewer_jobs() {
    if crate::harness::sqlite_only("the data dir's watermark and the lockgate.db file it guards are SQLite's; a database is kept by PostgreSQL (docs/postgresql.md)") {
        return;
    }
    let dir = tempdir();
    let (mut c, url) = spawn_server(dir.path());
    let admin = admin_of(dir.path(), &url);
    for _ in 0..50 {
        admin.submit(&job("backup", &[])).unwrap();
    }
    // Past the watermark's write interval: every acknowledged job is in the watermark.
    std::thread::sleep(Duration::from_millis(600));
    c.kill().unwrap();
    c.wait().unwrap();
    let wal = dir.path().join("lockgate.db-wal");
    let len = std::fs::metadata(&wal).unwrap().len();
    assert!(len > 64 * 1024, "the jobs are in the WAL ({len} bytes)");
    let mut f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(len / 2)).unwrap();
    f.write_all(&vec![0xA5; 8192]).unwrap();
    drop(f);
    let text = refused(dir.path());
    assert!(
        text.contains("behind what was acknowledged")
            && text.contains("jobs up to 50")
            && text.contains("--start-fresh"),
        "{text}"
    );
    // With the flag: what survived, and ids above the acknowledged ones.
    let s = TestServer::open_with(dir.path(), None, fresh());
    let (j, _) = s.admin().submit(&job("backup", &[])).unwrap();
    assert_eq!(j.id, 51);
}

// ---- 6: a full disk ----

/// A tmpfs of `size` mounted on a temp dir, unmounted on drop.
pub(crate) struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    pub(crate) fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempdir();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs { dir })
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub(crate) fn avail(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_full_disk_refuses_new_submits_with_507_and_keeps_leases_alive() {
    let Some(fs) = SmallFs::mount("16m") else {
        // CI runs as root and must run this test: no silent skip there.
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs under CI: the full-disk test must run there"
        );
        println!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    };
    let data = fs.path().join("data");
    let mark = 4u64 << 20;
    let hardening = Hardening {
        min_free_space: Some(mark),
        ..Hardening::default()
    };
    let s = TestServer::open_with(&data, None, hardening);
    s.admin()
        .put_policy("[global]\nmax_running = 1\n", false, None)
        .unwrap();
    let admin = s.admin();
    let running = admin.submit(&job("backup", &[])).unwrap().0;
    let queued = admin.submit(&job("backup", &[])).unwrap().0;
    let to_cancel = admin.submit(&job("backup", &[])).unwrap().0;
    assert_eq!(running.state, JobState::Running);

    // Fill the filesystem until 2 MiB are left: below the 4 MiB watermark.
    let fill = fs.path().join("fill");
    let left = 2u64 << 20;
    std::fs::write(&fill, vec![1u8; (fs.avail() - left) as usize]).unwrap();
    let body = r#"{"kind": "backup"}"#;
    let start = Instant::now();
    let (status, text) = loop {
        let (status, text) = s.raw(
            "POST",
            "/v1/jobs",
            Some(&s.admin),
            Some(("application/json", body)),
        );
        if status == 507 || start.elapsed() > Duration::from_secs(5) {
            break (status, text);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 507, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], "insufficient_storage", "{text}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("bytes free") && message.contains(&mark.to_string()),
        "{message}"
    );
    for path in ["/v1/schedules", "/v1/backups"] {
        let (status, text) = s.raw(
            "POST",
            path,
            Some(&s.admin),
            Some(("application/json", "{}")),
        );
        assert_eq!(status, 507, "{path}: {text}");
    }

    // What frees space and slots still works.
    let token = running.lease.unwrap().token;
    admin.heartbeat(running.id, token).unwrap();
    assert_eq!(admin.job(queued.id).unwrap().state, JobState::Queued);
    admin.jobs(&Default::default()).unwrap();
    assert_eq!(
        admin.cancel(to_cancel.id, false).unwrap().state,
        JobState::Cancelled
    );
    admin
        .finish_job(running.id, token, lockgate_core::Outcome::Succeeded, None)
        .unwrap();
    assert_eq!(admin.job(queued.id).unwrap().state, JobState::Running);
    assert_eq!(s.raw("GET", "/healthz", None, None).0, 200);

    // Space comes back: the very next submit succeeds, without a restart.
    std::fs::remove_file(&fill).unwrap();
    let (status, text) = s.raw(
        "POST",
        "/v1/jobs",
        Some(&s.admin),
        Some(("application/json", body)),
    );
    assert!(status == 200 || status == 201, "{status} {text}");
    s.stop();
}

// ---- 7: idle connections ----

/// Reads until EOF or `within`; whether the server closed the connection.
fn closed_within(mut stream: &TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn a_connection_that_never_completes_a_request_is_closed_after_the_header_read_timeout() {
    let dir = tempdir();
    let s = TestServer::open_with(
        dir.path(),
        None,
        Hardening {
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            ..Hardening::default()
        },
    );
    let addr = s.url.trim_start_matches("http://").to_string();
    // Nothing sent.
    let mut silent = TcpStream::connect(&addr).unwrap();
    // Half a request head.
    let mut partial = TcpStream::connect(&addr).unwrap();
    partial
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // A complete request, then idle on keep-alive.
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    for (what, stream) in [
        ("silent", &mut silent),
        ("partial", &mut partial),
        ("idle", &mut idle),
    ] {
        assert!(
            closed_within(stream, Duration::from_secs(5)),
            "{what} still open"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    s.stop();
}

#[test]
fn at_the_connection_cap_idle_connections_are_closed_before_long_polls_or_new_clients() {
    let dir = tempdir();
    let s = TestServer::open_with(
        dir.path(),
        None,
        Hardening {
            max_connections: Some(16),
            header_read_timeout: Duration::from_secs(120),
            ..Hardening::default()
        },
    );
    s.admin()
        .put_policy("[global]\nmax_running = 0\n", false, None)
        .unwrap();
    let j = s.admin().submit(&job("backup", &[])).unwrap().0;
    let polls: Vec<_> = (0..4)
        .map(|_| {
            let c = s.admin();
            std::thread::spawn(move || c.wait(j.id, JobState::Queued, 60))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let start = Instant::now();
    assert_eq!(s.raw("GET", "/healthz", None, None).0, 200);
    assert!(start.elapsed() < Duration::from_secs(2));
    let closed = idle
        .iter_mut()
        .filter(|c| closed_within(c, Duration::from_millis(200)))
        .count();
    assert!(
        closed >= 40 - 16,
        "only {closed} of 40 idle connections closed"
    );
    // The long-polls were never evicted: cancelling the job answers every one.
    s.admin().cancel(j.id, false).unwrap();
    for p in polls {
        assert_eq!(p.join().unwrap().unwrap().state, JobState::Cancelled);
    }
    s.stop();
}

const IDLE: usize = 10_000;
const POLLS: usize = 2_000;

#[test]
#[ignore = "a child process of the test below"]
fn child_load_client() {
    let Ok(addr) = std::env::var("LOCKGATE_IT_LOAD_ADDR") else {
        return;
    };
    let token = std::env::var("LOCKGATE_IT_LOAD_TOKEN").unwrap();
    let id = std::env::var("LOCKGATE_IT_LOAD_JOB").unwrap();
    let limit = lockgate_server::listener::raise_fd_limit();
    assert!(limit as usize > IDLE + POLLS + 100, "fd limit {limit}");
    let start = Instant::now();
    let idle: Vec<TcpStream> = (0..IDLE)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let request = format!(
        "GET /v1/jobs/{id}/wait?from=queued&timeout_s=300 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    let mut polls: Vec<TcpStream> = (0..POLLS)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            c.write_all(request.as_bytes()).unwrap();
            c
        })
        .collect();
    println!("READY {:.1}", start.elapsed().as_secs_f64());
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::stdin().read_to_string(&mut rest);
    let polls_open = polls
        .iter_mut()
        .filter(|c| !closed_within(c, Duration::from_millis(1)))
        .count();
    println!("OPEN {polls_open} {}", idle.len());
}

#[test]
fn ten_thousand_idle_connections_and_two_thousand_long_polls_do_not_starve_healthz_or_submits() {
    let dir = tempdir();
    // A long header-read timeout so the idle connections really stay for the whole test.
    let s = TestServer::open_with(
        dir.path(),
        None,
        Hardening {
            header_read_timeout: Duration::from_secs(300),
            ..Hardening::default()
        },
    );
    s.admin()
        .put_policy("[global]\nmax_running = 0\n", false, None)
        .unwrap();
    let j = s.admin().submit(&job("backup", &[])).unwrap().0;
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut c = child(
        "hardening::child_load_client",
        &[
            ("LOCKGATE_IT_LOAD_ADDR", addr),
            ("LOCKGATE_IT_LOAD_TOKEN", s.admin.clone()),
            ("LOCKGATE_IT_LOAD_JOB", j.id.to_string()),
        ],
    );
    let opened_in = line_from(&mut c, "READY ");
    let mut healthz = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(s.raw("GET", "/healthz", None, None).0, 200);
        healthz.push(t.elapsed());
    }
    let t = Instant::now();
    for _ in 0..20 {
        s.admin().submit(&job("backup", &[])).unwrap();
    }
    let submits = t.elapsed();
    healthz.sort();
    println!(
        "{IDLE} idle + {POLLS} long-polls opened in {opened_in} s; /healthz median {:?}, max {:?}; 20 submits in {submits:?}",
        healthz[healthz.len() / 2],
        healthz[healthz.len() - 1]
    );
    assert!(healthz[healthz.len() - 1] < Duration::from_secs(2));
    assert!(submits < Duration::from_secs(10));
    drop(c.stdin.take());
    let open = line_from(&mut c, "OPEN ");
    assert_eq!(
        open.split(' ').next(),
        Some(POLLS.to_string().as_str()),
        "long-polls still open: {open}"
    );
    c.wait().unwrap();
    s.stop();
}
