//! Job logs (issue 13): the output of a real command (`lockgate run --log`, an agent
//! handler) stored by the server, complete when it ends, visible with `--follow` while it
//! runs, bounded when it prints without end, escaped on a terminal, private to its owner.

use crate::harness::*;
use lockgate_api::{LogBatch, LogLineView, LogStream, Role, SubmitRequest, TokenCreate};
use lockgate_client::Client;
use lockgate_core::policy::Executor;
use lockgate_core::JobState;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every stored line of job `id`, page by page.
fn all_lines(c: &Client, id: u64) -> Vec<LogLineView> {
    let mut out: Vec<LogLineView> = Vec::new();
    let mut after = 0;
    loop {
        let page = c.job_logs(id, after, None).unwrap();
        if page.lines.is_empty() {
            return out;
        }
        after = page.next;
        out.extend(page.lines);
    }
}

fn texts(lines: &[LogLineView], stream: LogStream) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.stream == stream)
        .map(|l| l.text.clone())
        .collect()
}

fn submitter(s: &Srv, name: &str) -> String {
    s.admin()
        .create_token(&TokenCreate {
            name: name.into(),
            role: Role::Submitter,
            node: None,
        })
        .unwrap()
        .token
}

#[test]
fn run_log_stores_every_line_in_order_and_the_terminal_still_gets_them() {
    let s = Srv::start("");
    let script =
        "i=1; while [ $i -le 500 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done";
    let out = s
        .run(&["--log", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want_out: Vec<String> = (1..=500).map(|i| format!("out {i}")).collect();
    let want_err: Vec<String> = (1..=500).map(|i| format!("err {i}")).collect();
    // The command's own output still reaches lockgate run's stdout and stderr.
    let stdout: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(stdout, want_out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let stderr: Vec<String> = stderr
        .lines()
        .filter(|l| l.starts_with("err "))
        .map(String::from)
        .collect();
    assert_eq!(stderr, want_err);
    // Complete when it ends: every line, each stream in order, numbered without gaps.
    let lines = all_lines(&s.admin(), 1);
    assert_eq!(lines.len(), 1000);
    assert_eq!(texts(&lines, LogStream::Stdout), want_out);
    assert_eq!(texts(&lines, LogStream::Stderr), want_err);
    let seqs: Vec<u64> = lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, (1..=1000).collect::<Vec<u64>>());
    assert!(s.admin().job_logs(1, 0, None).unwrap().ended);
    // `job logs` prints the same lines (not a terminal: as they are).
    let printed = s.cli(&["job", "logs", "1"]).output().unwrap();
    assert!(printed.status.success());
    let printed = String::from_utf8(printed.stdout).unwrap();
    let got: Vec<&str> = printed.lines().collect();
    let want: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(got, want);
    // Without --log nothing is sent; with [kinds.NAME].log = true it is.
    assert!(s
        .run(&["--", "echo", "quiet"])
        .output()
        .unwrap()
        .status
        .success());
    assert!(all_lines(&s.admin(), 2).is_empty());
}

#[test]
fn the_kind_default_in_the_policy_turns_logging_on_and_no_log_off() {
    let s = Srv::start("[kinds.backup]\nlog = true\n");
    let out = s.run(&["--", "echo", "from the policy"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        texts(&all_lines(&s.admin(), 1), LogStream::Stdout),
        ["from the policy"]
    );
    let out = s
        .run(&["--no-log", "--", "echo", "kept local"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(all_lines(&s.admin(), 2).is_empty());
}

#[test]
fn follow_shows_a_line_while_the_command_runs_and_returns_when_the_job_ends() {
    let s = Srv::start("");
    let go = s.path("go");
    let script = format!(
        "echo first; while [ ! -e {} ]; do sleep 0.05; done; echo last",
        go.display()
    );
    let mut run = s
        .run(&["--log", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let admin = s.admin();
    assert!(eventually(Duration::from_secs(10), || admin
        .job(1)
        .is_ok_and(|j| j.state == JobState::Running)));
    let mut follow = s
        .cli(&["job", "logs", "1", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let _ = tx.send(l.unwrap());
        }
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "first");
    assert!(
        run.try_wait().unwrap().is_none(),
        "the command is still running"
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "last");
    assert_eq!(run.wait().unwrap().code(), Some(0));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = follow.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "--follow did not return"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
}

#[test]
fn a_command_printing_without_end_stays_under_the_bound_and_the_marker_counts_the_drop() {
    let s = Srv::start("[retention]\njob_log_bytes = \"64KiB\"\njob_logs_total_bytes = \"1MiB\"\n");
    let script = "i=0; while true; do echo \"line $i of a command that never stops printing\"; i=$((i+1)); done";
    let mut run = s
        .run(&["--log", "--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let admin = s.admin();
    let over = eventually(Duration::from_secs(20), || {
        admin.job_logs(1, 0, None).is_ok_and(|p| {
            p.lines
                .first()
                .is_some_and(|l| l.stream == LogStream::Lockgate)
        })
    });
    assert!(over, "the log never went over its bound");
    std::thread::sleep(Duration::from_millis(500));
    // Stopped before the log is read: pages read while lines still arrive and old ones are
    // dropped would add up to more than the log ever held at once.
    admin.cancel(1, false).unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(75));
    let lines = all_lines(&admin, 1);
    let kept: u64 = lines
        .iter()
        .filter(|l| l.stream != LogStream::Lockgate)
        .map(|l| l.text.len() as u64 + lockgate_store::LOG_LINE_OVERHEAD)
        .sum();
    assert!(kept <= 64 * 1024, "{kept} bytes kept");
    let marker = &lines[0];
    let dropped: u64 = marker.text.split(' ').next().unwrap().parse().unwrap();
    assert!(
        dropped > 0 && marker.text.contains("lines dropped"),
        "{}",
        marker.text
    );
    // The kept lines are the newest ones, in order, right after the dropped ones.
    let first: u64 = lines[1].text.split(' ').nth(1).unwrap().parse().unwrap();
    assert_eq!(lines[1].seq, marker.seq + 1);
    assert!(first > 0);
}

#[test]
fn control_characters_are_escaped_on_a_terminal_and_not_with_raw() {
    let s = Srv::start("");
    let out = s
        .run(&["--log", "--", "printf", "plain\\n\\033[31mred\\033[0m\\n"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // `script` gives `job logs` a pseudo-terminal as its stdout.
    let on_tty = |extra: &str| {
        let cmd = format!("{BIN} job logs 1 {extra}");
        let out = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("LOCKGATE_SERVER", s.url())
            .env("LOCKGATE_TOKEN", &s.token)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let escaped = on_tty("");
    assert!(escaped.contains("\\x1b[31mred\\x1b[0m"), "{escaped:?}");
    assert!(!escaped.contains('\x1b'), "{escaped:?}");
    let raw = on_tty("--raw");
    assert!(raw.contains("\x1b[31mred\x1b[0m"), "{raw:?}");
    // Not a terminal (a file, a pipe): as it is.
    let piped = s.cli(&["job", "logs", "1"]).output().unwrap();
    assert_eq!(
        String::from_utf8(piped.stdout).unwrap(),
        "plain\n\x1b[31mred\x1b[0m\n"
    );
}

#[test]
fn a_submitter_cannot_read_another_owners_log_and_only_the_holder_writes_it() {
    let s = Srv::start("");
    let alice = submitter(&s, "alice");
    let bob = submitter(&s, "bob");
    let out = s
        .run(&["--log", "--", "echo", "alice's secret"])
        .env("LOCKGATE_TOKEN", &alice)
        .output()
        .unwrap();
    assert!(out.status.success());
    let a = s.client(Some(alice));
    assert_eq!(
        texts(&all_lines(&a, 1), LogStream::Stdout),
        ["alice's secret"]
    );
    let b = s.client(Some(bob.clone()));
    let e = b.job_logs(1, 0, None).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let cli = s
        .cli(&["job", "logs", "1"])
        .env("LOCKGATE_TOKEN", &bob)
        .output()
        .unwrap();
    assert!(!cli.status.success());
    assert!(!String::from_utf8_lossy(&cli.stdout).contains("secret"));
    // A job that ended takes no more lines, not even from its owner.
    let batch = LogBatch {
        token: 1,
        dropped: 0,
        lines: Vec::new(),
    };
    let e = a.post_logs(1, &batch, Duration::from_secs(5)).unwrap_err();
    assert_eq!(e.code(), Some("lease_lost"), "{e}");
    // A running job's log takes lines only with its current lease token.
    let (job, _) = s
        .admin()
        .submit(&SubmitRequest {
            kind: "backup".into(),
            executor: Some(Executor::Client),
            ..SubmitRequest::default()
        })
        .unwrap();
    let token = job.lease.as_ref().expect("admitted").token;
    let stale = LogBatch {
        token: token + 7,
        ..batch.clone()
    };
    let e = s
        .admin()
        .post_logs(job.id, &stale, Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(e.code(), Some("lease_lost"), "{e}");
    let e = b
        .post_logs(job.id, &LogBatch { token, ..batch }, Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
}

#[test]
fn an_agent_handlers_whole_output_is_stored() {
    let s = Srv::start("");
    let config = "[agent]\ngrace = \"500ms\"\n\n[handlers.chatty]\nrun = [\"sh\", \"-c\", \"i=1; while [ $i -le 60 ]; do echo line $i; i=$((i+1)); done; echo done >&2; exit 3\"]\n";
    let _agent = crate::agent::start_agent(&s, "n1", &[], config);
    let (job, _) = s
        .admin()
        .submit(&SubmitRequest {
            kind: "chatty".into(),
            node_selector: Some(String::new()),
            executor: Some(Executor::Agent),
            ..SubmitRequest::default()
        })
        .unwrap();
    let admin = s.admin();
    assert!(eventually(Duration::from_secs(20), || admin
        .job(job.id)
        .is_ok_and(|j| j.state.is_terminal())));
    assert_eq!(admin.job(job.id).unwrap().state, JobState::Failed);
    let lines = all_lines(&admin, job.id);
    let want: Vec<String> = (1..=60).map(|i| format!("line {i}")).collect();
    assert_eq!(
        texts(&lines, LogStream::Stdout),
        want,
        "all 60 lines, not the last 20"
    );
    assert_eq!(texts(&lines, LogStream::Stderr), ["done"]);
}

#[test]
fn an_agent_handler_gets_its_attempt_and_fencing_token_in_its_environment() {
    let s = Srv::start("");
    let config = "[agent]\ngrace = \"500ms\"\n\n[handlers.fenced]\nrun = [\"sh\", \"-c\", \"echo $LOCKGATE_JOB_ID $LOCKGATE_ATTEMPT $LOCKGATE_FENCING_TOKEN; sleep 30\"]\n";
    let _agent = crate::agent::start_agent(&s, "n1", &[], config);
    let (job, _) = s
        .admin()
        .submit(&SubmitRequest {
            kind: "fenced".into(),
            node_selector: Some(String::new()),
            executor: Some(Executor::Agent),
            ..SubmitRequest::default()
        })
        .unwrap();
    let admin = s.admin();
    assert!(
        eventually(Duration::from_secs(20), || !all_lines(&admin, job.id)
            .is_empty()),
        "the handler's line never reached the job's log"
    );
    let running = admin.job(job.id).unwrap();
    let token = running.lease.as_ref().map(|l| l.token).unwrap();
    let line = texts(&all_lines(&admin, job.id), LogStream::Stdout);
    assert_eq!(
        line,
        [format!("{} {} {token}", job.id, running.attempt)],
        "{running:?}"
    );
    admin.cancel(job.id, false).unwrap();
}
