//! How the CLI behaves as a Unix command: a reader that goes away, the token advice, exit
//! codes, logs without colour codes, agent handlers whose programs are missing.

use crate::harness::*;
use lockgate_api::SubmitRequest;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Waits for `child` for at most `limit`; its exit status.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < limit, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads one line of `child`'s stdout, closes the pipe and returns the rest of stderr.
fn read_one_line_then_close(child: &mut std::process::Child) -> String {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "one line");
    drop(out);
    first
}

fn big_jobs(s: &Srv, n: usize) {
    let admin = s.admin();
    let attrs: std::collections::BTreeMap<String, String> = (0..8)
        .map(|i| (format!("a{i}"), "x".repeat(1000)))
        .collect();
    for _ in 0..n {
        admin
            .submit(&SubmitRequest {
                kind: "backup".into(),
                attrs: attrs.clone(),
                ..SubmitRequest::default()
            })
            .unwrap();
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_command_with_exit_0_not_a_panic() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    // 20 jobs of 8 KB each: more than a pipe holds, so `job ls` writes after the close.
    big_jobs(&s, 20);
    for args in [
        &["job", "ls"][..],
        &["-o", "json", "job", "ls"],
        &["events"],
    ] {
        let mut c = s
            .cli(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        read_one_line_then_close(&mut c);
        let status = wait_exit(&mut c, Duration::from_secs(20));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!((status.code(), err.as_str()), (Some(0), ""), "{args:?}");
    }

    // `events --follow`: the first line is read, the pipe closed, then a new event comes.
    let mut c = s
        .cli(&["events", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_one_line_then_close(&mut c);
    std::thread::sleep(Duration::from_millis(200));
    big_jobs(&s, 1);
    let status = wait_exit(&mut c, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));

    // And through a shell pipeline, as users write it.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{BIN} job ls | head -1 >/dev/null; echo \"${{PIPESTATUS[0]}}\""
        ))
        .env("LOCKGATE_SERVER", s.url())
        .env("LOCKGATE_TOKEN", &s.token)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_missing_token_is_explained_with_the_flag_the_variable_and_the_file() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let home = tempfile::tempdir().unwrap();
    let out = s
        .cli(&["job", "ls"])
        .env_remove("LOCKGATE_TOKEN")
        .env_remove("XDG_DATA_HOME")
        .env("HOME", home.path())
        .output()
        .unwrap();
    let err =
        String::from_utf8_lossy(&out.stderr).replace(&home.path().display().to_string(), "HOME");
    assert_eq!(out.status.code(), Some(77));
    insta::assert_snapshot!(err, @"lockgate: no token: pass --token TOKEN or set LOCKGATE_TOKEN; without them lockgate reads the admin token file HOME/.local/share/lockgate/admin.token ($XDG_DATA_HOME/lockgate/admin.token, else ~/.local/share/lockgate/admin.token; the server writes it to <data-dir>/admin.token), and there is none there");

    // With XDG_DATA_HOME the file is looked for there.
    let out = s
        .cli(&["job", "ls"])
        .env_remove("LOCKGATE_TOKEN")
        .env("XDG_DATA_HOME", home.path().join("xdg"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}/xdg/lockgate/admin.token",
            home.path().display()
        )),
        "{err}"
    );
    // A token that the server does not know: the server's word, and where it came from.
    let out = s
        .cli(&["job", "ls"])
        .env("LOCKGATE_TOKEN", "wrong")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77));
    assert!(err.contains("given by --token or LOCKGATE_TOKEN"), "{err}");
    assert!(!err.contains("Authorization"), "{err}");
}

#[test]
fn job_wait_exits_with_how_the_job_ended() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let admin = s.admin();
    let submit = || {
        admin
            .submit(&SubmitRequest {
                kind: "backup".into(),
                ..SubmitRequest::default()
            })
            .unwrap()
            .0
    };
    let wait = |id: u64| {
        s.cli(&["job", "wait", &id.to_string()])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .code()
    };
    let finished = |outcome| {
        let j = submit();
        let token = j.lease.expect("admitted").token;
        admin.finish_job(j.id, token, outcome, None).unwrap();
        j.id
    };
    assert_eq!(wait(finished(lockgate_core::Outcome::Succeeded)), Some(0));
    assert_eq!(wait(finished(lockgate_core::Outcome::Failed)), Some(1));
    assert_eq!(wait(finished(lockgate_core::Outcome::Cancelled)), Some(75));
    // Expired: a job that waits past its max_wait behind a running one.
    let blocker = submit();
    let j = admin
        .submit(&SubmitRequest {
            kind: "backup".into(),
            max_wait_s: Some(0.2),
            ..SubmitRequest::default()
        })
        .unwrap()
        .0;
    assert_eq!(wait(j.id), Some(75));
    assert_eq!(
        admin.job(j.id).unwrap().state,
        lockgate_core::JobState::Expired
    );
    // A wait that ends first (--timeout) is not a failure.
    let queued = submit();
    let out = s
        .cli(&["job", "wait", &queued.id.to_string(), "--timeout", "1s"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(out.code(), Some(0));
    drop(blocker);
}

#[test]
fn a_priority_the_owner_may_not_use_is_a_refused_request_not_a_refused_token() {
    let s = Srv::start("[global]\nmax_running = 1\n\n[owners.ci]\nmax_priority = 5\n");
    let t = s
        .admin()
        .create_token(&lockgate_api::TokenCreate {
            name: "ci".into(),
            role: lockgate_api::Role::Submitter,
            node: None,
        })
        .unwrap()
        .token;
    let out = s
        .run(&["--priority", "9", "--", "true"])
        .env("LOCKGATE_TOKEN", &t)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("max_priority"), "{err}");
    let ok = s
        .run(&["--priority", "5", "--", "true"])
        .env("LOCKGATE_TOKEN", &t)
        .status()
        .unwrap();
    assert_eq!(ok.code(), Some(0));
    // The same refusal from `job submit`: a failure (1), not 77 either.
    let out = s
        .cli(&["job", "submit", "--kind", "backup", "--priority", "9"])
        .env("LOCKGATE_TOKEN", &t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // A client command that cannot reach the server: 69, as for `lockgate run`.
    let out = s
        .cli(&["job", "ls"])
        .env("LOCKGATE_SERVER", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
}

#[test]
fn server_logs_to_a_file_carry_no_colour_codes_and_say_listening_once() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(BIN)
        .args([
            "server",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .env("LOCKGATE_LOG", "debug")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let c = lockgate_client::Client::new(&url, None).unwrap();
    assert!(eventually(Duration::from_secs(20), || c
        .call::<serde_json::Value>("GET", "/readyz", None::<&()>)
        .is_ok()));
    signal(child.id(), rustix::process::Signal::TERM);
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\u{1b}'), "{text}");
    assert_eq!(text.matches("listening").count(), 1, "{text}");
    assert!(
        text.contains("DEBUG") || text.contains("INFO"),
        "logs at all: {text}"
    );
    drop(s);
}

#[test]
fn an_agent_refuses_handlers_whose_programs_are_missing() {
    let s = Srv::start("[global]\nmax_running = 1\n");
    let cfg = s.path("agent.toml");
    std::fs::write(
        &cfg,
        "[handlers.verify]\nrun = [\"proxmox-backup-client-typo\", \"verify\"]\n",
    )
    .unwrap();
    let out = s
        .cli(&["agent", "--node", "n1", "--config"])
        .arg(&cfg)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("handlers.verify.run[0]")
            && err.contains("\"proxmox-backup-client-typo\" is not found in PATH (/usr/bin:/bin)"),
        "{err}"
    );
    std::fs::write(
        &cfg,
        "[handlers.backup]\nrun = [\"/opt/restic/bin/restic\", \"backup\"]\n",
    )
    .unwrap();
    let out = s
        .cli(&["agent", "--node", "n1", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "handlers.backup.run[0]: the program \"/opt/restic/bin/restic\" does not exist"
        ),
        "{err}"
    );
    assert!(
        s.admin().nodes().unwrap().nodes.is_empty(),
        "nothing registered"
    );
}

/// docs/schedules.md's `schedule add nightly ...` makes a schedule whose runs an agent takes; a
/// run with no agent for its kind waits and `job explain` says so; `--executor client` is
/// refused naming why.
#[test]
fn the_readme_schedule_add_makes_runs_an_agent_takes() {
    let s = Srv::start("[leases]\nttl = \"120s\"\n");
    let out = s
        .cli(&[
            "-o",
            "json",
            "schedule",
            "add",
            "nightly",
            "--when",
            "mon..fri 02:00",
            "--kind",
            "backup",
            "--attr",
            "datastore=ds1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s
        .cli(&[
            "schedule",
            "add",
            "by-hand",
            "--when",
            "daily",
            "--kind",
            "backup",
            "--executor",
            "client",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("job.executor") && err.contains("no client would hold it"),
        "{err}"
    );

    // A run two seconds from now: it waits for an agent with a `backup` handler.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    // `2026-12-01T02:00:00Z` as a calendar event: `2026-12-01 02:00:00 UTC`.
    let when = lockgate_api::time::format(lockgate_core::Timestamp(at * 1000))
        .replace('T', " ")
        .replace('Z', " UTC");
    let out = s
        .cli(&[
            "schedule", "add", "soon", "--when", &when, "--kind", "backup",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let admin = s.admin();
    let mut id = None;
    assert!(eventually(Duration::from_secs(20), || {
        id = admin
            .schedule("soon", 10)
            .unwrap()
            .history
            .iter()
            .find_map(|r| r.job);
        id.is_some()
    }));
    let id = id.unwrap().to_string();
    let out = s.cli(&["job", "explain", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no ready agent has a handler for kind backup"),
        "{text}"
    );
    let shown = s.cli(&["-o", "json", "job", "show", &id]).output().unwrap();
    let job: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        (job["executor"].as_str(), job["state"].as_str()),
        (Some("agent"), Some("queued"))
    );
}
