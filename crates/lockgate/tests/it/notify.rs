//! Notifications end to end: a real `lockgate server` process, a real HTTP receiver on
//! 127.0.0.1 (a small server this file runs) and a real SMTP sink (`python3 -m aiosmtpd`).
//!
//! What is shown: a failed and an expired job notify both targets, signed (the receiver
//! checks the HMAC); a receiver that is down gets the notification once it is back; a
//! kill -9 between the event and its delivery still delivers after the restart; a URL
//! password is served as `***` and a policy put back with it keeps the stored one; a
//! black-hole target does not slow admissions.

use crate::harness::{eventually, free_port, Srv};
use lockgate_api::SubmitRequest;
use lockgate_client::Client;
use lockgate_core::Outcome;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "webhook-secret-42";

/// One request the receiver took.
#[derive(Debug, Clone)]
struct Got {
    headers: BTreeMap<String, String>,
    body: String,
    at: Instant,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// The signature header is the HMAC-SHA256 of the body under [`SECRET`].
    fn signed(&self) -> bool {
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(self.body.as_bytes());
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.headers.get("x-lockgate-signature") == Some(&format!("sha256={hex}"))
    }
}

/// A webhook receiver on 127.0.0.1: answers every POST with 200 and keeps it.
struct Receiver {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start(port: u16, got: Arc<Mutex<Vec<Got>>>) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s) = (got, stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(c) = conn {
                    if let Some(req) = read_request(c) {
                        g.lock().unwrap().push(req);
                    }
                }
            }
        });
        Receiver {
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops listening (the port refuses connections after this).
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.thread.take().unwrap().join().unwrap();
    }
}

fn read_request(mut c: TcpStream) -> Option<Got> {
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut r = BufReader::new(c.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    if !line.starts_with("POST ") {
        return None;
    }
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        .ok()?;
    Some(Got {
        headers,
        body: String::from_utf8(body).ok()?,
        at: Instant::now(),
    })
}

/// `python3 -m aiosmtpd` printing every message it takes to `out`.
struct SmtpSink {
    child: Child,
    out: std::path::PathBuf,
}

impl SmtpSink {
    fn start(port: u16, out: std::path::PathBuf) -> SmtpSink {
        let child = Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m aiosmtpd (pip install aiosmtpd==1.4.6)");
        assert!(
            eventually(Duration::from_secs(20), || TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "aiosmtpd did not listen"
        );
        SmtpSink { child, out }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn submit(c: &Client, kind: &str, max_wait_s: Option<f64>) -> lockgate_api::JobView {
    let mut attrs = BTreeMap::new();
    attrs.insert("group".to_string(), "vm/100".to_string());
    c.submit(&SubmitRequest {
        kind: kind.into(),
        attrs,
        max_wait_s,
        ..SubmitRequest::default()
    })
    .unwrap()
    .0
}

/// Submits a job that is admitted at once and finishes it as `outcome`; its id.
fn run_job(c: &Client, outcome: Outcome) -> u64 {
    let job = submit(c, "backup", None);
    let token = job.lease.as_ref().expect("admitted at once").token;
    c.finish_job(job.id, token, outcome, Some("exit status 2".into()))
        .unwrap();
    job.id
}

/// `GET /metrics` as text.
fn metrics(srv: &Srv) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn policy(hook_port: u16, extra: &str, dir: &std::path::Path) -> String {
    std::fs::write(dir.join("hook.secret"), format!("{SECRET}\n")).unwrap();
    format!(
        r#"[global]
max_running = 1

[[notify]]
name = "hook"
url = "http://127.0.0.1:{hook_port}/lockgate"
secret_file = "{}"
match = "outcome in (failed, lost, expired)"
timeout = "2s"
{extra}"#,
        dir.join("hook.secret").display()
    )
}

fn wait_for(got: &Mutex<Vec<Got>>, n: usize, limit: Duration) -> Vec<Got> {
    eventually(limit, || got.lock().unwrap().len() >= n);
    got.lock().unwrap().clone()
}

#[test]
fn a_failed_and_an_expired_job_notify_a_signed_webhook_and_an_smtp_sink() {
    let (hook_port, smtp_port) = (free_port(), free_port());
    let got = Arc::new(Mutex::new(Vec::new()));
    let receiver = Receiver::start(hook_port, got.clone());
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(smtp_port, tmp.path().join("mail.txt"));
    let mail = format!(
        "\n[[notify]]\nname = \"mail\"\nsmtp = \"smtp://127.0.0.1:{smtp_port}\"\nstarttls = false\n\
         to = [\"ops@example.org\"]\nfrom = \"lockgate@example.org\"\n\
         match = \"outcome in (failed, lost, expired),group=vm/100\"\n"
    );
    let srv = Srv::start(&policy(hook_port, &mail, tmp.path()));
    let c = srv.admin();

    let finished = Instant::now();
    let failed = run_job(&c, Outcome::Failed);
    run_job(&c, Outcome::Succeeded); // not selected: no notification
    let first = wait_for(&got, 1, Duration::from_secs(10));
    let latency = first[0].at - finished;
    eprintln!("failed job: webhook delivered {latency:?} after the finish");
    assert!(latency < Duration::from_secs(1), "{latency:?}");

    // An expired job: it waits behind a running one past its max_wait.
    let blocker = submit(&c, "backup", None);
    let expired = submit(&c, "backup", Some(0.3)).id;
    let got_now = wait_for(&got, 2, Duration::from_secs(10));
    assert_eq!(got_now.len(), 2, "{got_now:?}");
    for (g, id, state) in [
        (&got_now[0], failed, "failed"),
        (&got_now[1], expired, "expired"),
    ] {
        assert!(g.signed(), "HMAC does not verify: {g:?}");
        let ev = g.json();
        assert!(ev["seq"].as_u64().unwrap() > 0);
        assert!(ev["at"].is_string());
        assert_eq!(ev["type"], "job");
        assert_eq!(ev["change"], "finished");
        assert_eq!(ev["job"]["id"], id);
        assert_eq!(ev["job"]["state"], state);
        assert_eq!(ev["job"]["attrs"]["group"], "vm/100");
        // The body is the event exactly as /v1/events serves it, and a failed job's
        // carries its last output lines (none here: it logged nothing).
        let mut ev = ev;
        let tail = ev.as_object_mut().unwrap().remove("log_tail");
        assert_eq!(tail.is_some(), state == "failed", "{ev}");
        let seq = ev["seq"].as_u64().unwrap();
        let served: Value = c
            .call(
                "GET",
                &format!("/v1/events?after={}&limit=1", seq - 1),
                None::<&()>,
            )
            .unwrap();
        assert_eq!(served["events"][0], ev, "{served}");
    }
    assert!(
        eventually(Duration::from_secs(10), || sink
            .text()
            .matches("Subject: ")
            .count()
            >= 2),
        "{}",
        sink.text()
    );
    let text = sink.text();
    assert!(
        text.contains(&format!("Subject: lockgate: job {failed} (backup) failed")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Subject: lockgate: job {expired} (backup) expired"
        )),
        "{text}"
    );
    assert!(text.contains("job.message: exit status 2"), "{text}");
    assert!(text.contains("To: ops@example.org"), "{text}");

    // `lockgate notify test` sends now, through either target.
    let out = srv.cli(&["notify", "test", "hook"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("hook: delivered"));
    let all = wait_for(&got, 3, Duration::from_secs(5));
    assert_eq!(all[2].json()["type"], "notify_test");
    assert!(all[2].signed());
    let out = srv.cli(&["notify", "test", "mail"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = srv.cli(&["notify", "test", "nope"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no [[notify]] target \"nope\""));

    let settled = || {
        let m = metrics(&srv);
        metric(&m, "lockgate_notifications_sent_total{target=\"mail\"}") == Some(2.0)
            && metric(&m, "lockgate_notifications_backlog") == Some(0.0)
    };
    assert!(
        eventually(Duration::from_secs(5), settled),
        "{}",
        metrics(&srv)
    );
    let m = metrics(&srv);
    assert_eq!(
        metric(&m, "lockgate_notifications_sent_total{target=\"hook\"}"),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "lockgate_notifications_sent_total{target=\"mail\"}"),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "lockgate_notifications_failed_total{target=\"hook\"}"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "lockgate_notifications_backlog"),
        Some(0.0),
        "{m}"
    );
    drop(blocker);
    receiver.stop();
}

#[test]
fn a_receiver_that_was_down_and_a_kill_9_before_delivery_still_get_the_notification() {
    let hook_port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let mut srv = Srv::start(&policy(hook_port, "", tmp.path()));
    let got = Arc::new(Mutex::new(Vec::new()));

    // Down for a while: the attempts fail, the notification waits in the outbox.
    let first = run_job(&srv.admin(), Outcome::Failed);
    assert!(eventually(Duration::from_secs(10), || {
        metric(
            &metrics(&srv),
            "lockgate_notifications_failed_total{target=\"hook\"}",
        )
        .is_some_and(|n| n >= 2.0)
    }));
    assert_eq!(
        metric(&metrics(&srv), "lockgate_notifications_backlog"),
        Some(1.0)
    );
    let receiver = Receiver::start(hook_port, got.clone());
    let delivered = wait_for(&got, 1, Duration::from_secs(15));
    assert_eq!(delivered[0].json()["job"]["id"], first);
    receiver.stop();

    // Down again, and the server killed before it could deliver: the restart does.
    let second = run_job(&srv.admin(), Outcome::Failed);
    srv.kill9();
    let receiver = Receiver::start(hook_port, got.clone());
    srv.spawn();
    let delivered = wait_for(&got, 2, Duration::from_secs(15));
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    assert_eq!(delivered[1].json()["job"]["id"], second);
    assert!(delivered[1].signed());
    assert!(eventually(Duration::from_secs(5), || {
        metric(&metrics(&srv), "lockgate_notifications_backlog") == Some(0.0)
    }));
    receiver.stop();
}

#[test]
fn a_url_password_is_served_as_stars_and_a_policy_put_back_with_them_keeps_it() {
    let hook_port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let text = policy(hook_port, "", tmp.path())
        .replace("http://127.0.0.1", "http://lockgate:s3cret-pw@127.0.0.1");
    let srv = Srv::start(&text);
    let c = srv.admin();
    let shown = c.policy().unwrap();
    let json = serde_json::to_string(&shown.policy).unwrap();
    assert!(!json.contains("s3cret-pw"), "{json}");
    assert!(json.contains(&format!(
        "http://lockgate:***@127.0.0.1:{hook_port}/lockgate"
    )));

    // `policy show` prints it with stars; applied back, the stored password stays.
    let out = srv.cli(&["policy", "show"]).output().unwrap();
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(
        toml.contains("lockgate:***@") && !toml.contains("s3cret-pw"),
        "{toml}"
    );
    let answer = c.put_policy(&toml, false, None).unwrap();
    assert!(answer.diff.is_empty(), "{:?}", answer.diff);
    let file = std::fs::read_to_string(srv.path("lockgate.toml")).unwrap();
    assert!(file.contains("lockgate:s3cret-pw@"), "{file}");

    // The kept password is the one sent (HTTP Basic).
    let got = Arc::new(Mutex::new(Vec::new()));
    let receiver = Receiver::start(hook_port, got.clone());
    run_job(&c, Outcome::Failed);
    let g = wait_for(&got, 1, Duration::from_secs(10));
    assert_eq!(
        g[0].headers.get("authorization").map(String::as_str),
        Some("Basic bG9ja2dhdGU6czNjcmV0LXB3"),
        "lockgate:s3cret-pw"
    );
    receiver.stop();

    // Stars where the active policy has no such target: refused, naming the field.
    let other = toml.replace("name = \"hook\"", "name = \"other\"");
    let e = c.put_policy(&other, false, None).unwrap_err().to_string();
    assert!(
        e.contains("notify[0].url") && e.contains("write the password"),
        "{e}"
    );
    // A new password is a change the diff names without showing it.
    let new = file.replace("s3cret-pw", "n3w-pw");
    let answer = c.put_policy(&new, true, None).unwrap();
    assert_eq!(
        answer.diff,
        vec!["notify \"hook\": the URL's password changed".to_string()]
    );

    // `policy check` names the secrets and reads none of them.
    std::fs::write(
        srv.path("check.toml"),
        file.replace(
            &format!(
                "secret_file = \"{}\"",
                tmp.path().join("hook.secret").display()
            ),
            "secret_env = \"HOOK_SECRET\"",
        ),
    )
    .unwrap();
    let out = srv
        .cli(&["policy", "check", "check.toml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("notify \"hook\": webhook http://lockgate:***@127.0.0.1"),
        "{said}"
    );
    assert!(
        said.contains("secret_env HOOK_SECRET and a password in the URL (shown as ***) (not read)"),
        "{said}"
    );
    assert!(!said.contains("s3cret-pw"), "{said}");
}

/// Submit-and-finish cycles: seconds for `n`.
fn cycles(c: &Client, n: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        run_job(c, Outcome::Failed);
    }
    start.elapsed()
}

#[test]
fn a_black_hole_target_does_not_slow_admissions() {
    // Accepts connections (the kernel's backlog) and never answers.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let hole_port = hole.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let srv = Srv::start("[global]\nmax_running = 1\n");
    let c = srv.admin();
    let n = 40;
    cycles(&c, 5);
    let without = cycles(&c, n);
    let with_hole = format!(
        "[global]\nmax_running = 1\n\n[[notify]]\nname = \"hole\"\nurl = \"http://127.0.0.1:{hole_port}/\"\nmatch = \"\"\ntimeout = \"60s\"\n"
    );
    c.put_policy(&with_hole, false, None).unwrap();
    let with = cycles(&c, n);
    let backlog = metric(&metrics(&srv), "lockgate_notifications_backlog").unwrap();
    eprintln!(
        "{n} submit+finish cycles: {:.1} ms each without a target, {:.1} ms with a black-hole target (backlog {backlog})",
        without.as_secs_f64() * 1000.0 / n as f64,
        with.as_secs_f64() * 1000.0 / n as f64
    );
    assert!(
        backlog >= (3 * n) as f64,
        "every event waits for the black hole: {backlog}"
    );
    assert!(
        with < without * 3 + Duration::from_millis(500),
        "{with:?} with the black hole against {without:?} without"
    );
    drop(tmp);
    drop(hole);
}

/// A failed `lockgate run --log` carries the last 20 lines of its command's output
/// (`log_tail`), and a schedule's run that no agent takes expires after its
/// `max_start_delay`: both reach the webhook and the SMTP sink.
#[test]
fn a_failed_run_carries_its_last_lines_and_an_expired_schedule_run_notifies() {
    let (hook_port, smtp_port) = (free_port(), free_port());
    let got = Arc::new(Mutex::new(Vec::new()));
    let _receiver = Receiver::start(hook_port, got.clone());
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(smtp_port, tmp.path().join("mail.txt"));
    let mail = format!(
        "\n[[notify]]\nname = \"mail\"\nsmtp = \"smtp://127.0.0.1:{smtp_port}\"\nstarttls = false\n\
         to = [\"ops@example.org\"]\nfrom = \"lockgate@example.org\"\n\
         match = \"outcome in (failed, expired)\"\n"
    );
    let srv = Srv::start(&policy(hook_port, &mail, tmp.path()));

    let out = srv
        .cli(&[
            "run",
            "--log",
            "--attr",
            "group=vm/7",
            "--",
            "sh",
            "-c",
            "for i in $(seq 1 30); do echo line $i; done; exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let first = wait_for(&got, 1, Duration::from_secs(10));
    let ev = first[0].json();
    assert!(first[0].signed());
    assert_eq!(ev["job"]["state"], "failed", "{ev}");
    let tail: Vec<&str> = ev["log_tail"]
        .as_array()
        .expect("a failed job's notification has log_tail")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let want: Vec<String> = (11..=30).map(|i| format!("line {i}")).collect();
    assert_eq!(tail, want, "{ev}");

    // No agent runs `backup`, so the schedule's run waits and expires.
    let add = srv
        .cli(&[
            "schedule",
            "add",
            "nightly",
            "--when",
            "*:*:0/2",
            "--kind",
            "backup",
            "--attr",
            "group=vm/8",
            "--max-start-delay",
            "1s",
        ])
        .output()
        .unwrap();
    assert!(add.status.success(), "{add:?}");
    let both = wait_for(&got, 2, Duration::from_secs(15));
    let _ = srv.cli(&["schedule", "rm", "nightly"]).output().unwrap();
    let ev = both[1].json();
    assert_eq!(ev["job"]["state"], "expired", "{ev}");
    assert_eq!(ev["job"]["owner"], "schedule:nightly", "{ev}");
    assert_eq!(ev["job"]["attrs"]["group"], "vm/8", "{ev}");
    assert!(
        ev.get("log_tail").is_none(),
        "only failed and lost jobs carry lines: {ev}"
    );
    assert!(both[1].signed());
    // The mail target got both as well, the failed run with its last lines.
    let (failed, expired) = (both[0].json()["job"]["id"].clone(), ev["job"]["id"].clone());
    assert!(
        eventually(Duration::from_secs(10), || sink
            .text()
            .matches("Subject: ")
            .count()
            >= 2),
        "{}",
        sink.text()
    );
    let text = sink.text();
    assert!(
        text.contains(&format!("Subject: lockgate: job {failed} (backup) failed")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Subject: lockgate: job {expired} (backup) expired"
        )),
        "{text}"
    );
    assert!(text.contains("line 30"), "{text}");
}
