//! `lockgate run`: signals, exit codes, and no leaked slots.

use crate::harness::*;
use lockgate_api::JobView;
use lockgate_core::JobState;
use rustix::process::Signal;
use std::process::Stdio;
use std::time::Duration;

const ONE_SLOT: &str = "[global]\nmax_running = 1\n[leases]\nttl = \"300ms\"\n";

fn wait_state(s: &Srv, id: u64, state: JobState) -> JobView {
    let admin = s.admin();
    assert!(
        eventually(Duration::from_secs(10), || admin.job(id).is_ok()),
        "job {id} was never submitted"
    );
    let mut job = admin.job(id).unwrap();
    for _ in 0..100 {
        if job.state == state {
            return job;
        }
        job = admin.wait(id, job.state, 5).unwrap();
    }
    panic!("job {id} never became {state}: {job:?}");
}

fn report(s: &Srv, name: &str) -> JobView {
    serde_json::from_str(&std::fs::read_to_string(s.path(name)).unwrap()).unwrap()
}

#[test]
fn kill_9_of_a_run_client_kills_its_command_and_frees_the_slot_after_the_ttl() {
    let s = Srv::start(ONE_SLOT);
    let pidfile = s.path("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut holder = s.run(&["--", "sh", "-c", &script]).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || read_pid(&pidfile).is_some()));
    let child = read_pid(&pidfile).unwrap();
    let mut next = s
        .run(&["--report", "next.json", "--", "true"])
        .spawn()
        .unwrap();
    wait_state(&s, 2, JobState::Queued);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(5), || gone(child)),
        "PR_SET_PDEATHSIG took the command down"
    );
    assert_eq!(
        wait_state(&s, 1, JobState::Lost)
            .message
            .as_deref()
            .unwrap_or(""),
        s.admin().job(1).unwrap().message.as_deref().unwrap_or("")
    );
    assert_eq!(next.wait().unwrap().code(), Some(0));
    assert_eq!(report(&s, "next.json").state, JobState::Succeeded);
}

#[test]
fn sigterm_while_running_reaches_the_commands_whole_process_group() {
    let s = Srv::start(ONE_SLOT);
    let pidfile = s.path("grandchild");
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let mut holder = s.run(&["--", "sh", "-c", &script]).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || read_pid(&pidfile).is_some()));
    let grandchild = read_pid(&pidfile).unwrap();
    signal(holder.id(), Signal::TERM);
    assert_eq!(holder.wait().unwrap().code(), Some(128 + 15));
    assert!(
        eventually(Duration::from_secs(5), || gone(grandchild)),
        "the command's own child got the forwarded SIGTERM"
    );
}

#[test]
fn sigint_while_waiting_cancels_the_job_and_exits_130() {
    let s = Srv::start(ONE_SLOT);
    let mut holder = s.run(&["--", "sleep", "30"]).spawn().unwrap();
    wait_state(&s, 1, JobState::Running);
    let mut waiter = s
        .run(&["--report", "r.json", "--", "true"])
        .spawn()
        .unwrap();
    wait_state(&s, 2, JobState::Queued);
    signal(waiter.id(), Signal::INT);
    assert_eq!(waiter.wait().unwrap().code(), Some(130));
    assert_eq!(s.admin().job(2).unwrap().state, JobState::Cancelled);
    assert_eq!(report(&s, "r.json").state, JobState::Cancelled);
    // SIGTERM to the holder is forwarded; the child dies of it and the slot is released.
    // An operator's interrupt cancels the job: it is not recorded as a failed backup.
    signal(holder.id(), Signal::TERM);
    assert_eq!(holder.wait().unwrap().code(), Some(128 + 15));
    let j = s.admin().job(1).unwrap();
    assert_eq!(j.state, JobState::Cancelled, "{j:?}");
    assert!(
        j.message.as_deref().unwrap_or("").contains("SIGTERM"),
        "{j:?}"
    );
}

#[test]
fn sigint_while_running_is_forwarded_and_the_slot_released_when_the_child_exits() {
    let s = Srv::start(ONE_SLOT);
    let marker = s.path("trapped");
    let ready = s.path("ready");
    let script = format!(
        "trap 'echo trapped > {}; exit 3' INT; touch {}; while :; do sleep 0.05; done",
        marker.display(),
        ready.display()
    );
    let mut holder = s.run(&["--", "sh", "-c", &script]).spawn().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || ready.exists()),
        "the trap is set"
    );
    let mut next = s.run(&["--", "true"]).spawn().unwrap();
    wait_state(&s, 2, JobState::Queued);
    signal(holder.id(), Signal::INT);
    assert_eq!(
        holder.wait().unwrap().code(),
        Some(3),
        "the child's own exit status"
    );
    assert!(marker.exists(), "the child got the SIGINT");
    let j = s.admin().job(1).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(
        (j.state, j.message.unwrap()),
        (
            JobState::Cancelled,
            format!(
                "interrupted on host {} (SIGINT to lockgate run); command exited with exit status 3",
                host.trim()
            )
        )
    );
    assert_eq!(next.wait().unwrap().code(), Some(0));
}

#[test]
fn a_lost_lease_or_a_cancel_request_stops_the_command_with_75() {
    let s = Srv::start(ONE_SLOT);
    // Force-cancel revokes the lease: the next heartbeat gets 409 and the child is stopped.
    let mut a = s
        .run(&["--grace", "1s", "--report", "a.json", "--", "sleep", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_state(&s, 1, JobState::Running);
    s.admin().cancel(1, true).unwrap();
    assert_eq!(a.wait().unwrap().code(), Some(75));
    assert_eq!(report(&s, "a.json").state, JobState::Cancelled);
    // A plain cancel sets cancel_requested: the job ends cancelled, lockgate exits 75.
    let mut b = s
        .run(&["--grace", "1s", "--", "sleep", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_state(&s, 2, JobState::Running);
    s.admin().cancel(2, false).unwrap();
    assert_eq!(b.wait().unwrap().code(), Some(75));
    let j = s.admin().job(2).unwrap();
    assert_eq!(j.state, JobState::Cancelled, "{j:?}");
}

#[test]
fn the_command_gets_its_job_id_attempt_and_fencing_token_in_its_environment() {
    let s = Srv::start(ONE_SLOT);
    let env = s.path("env");
    let script = format!(
        "echo $LOCKGATE_JOB_ID $LOCKGATE_ATTEMPT $LOCKGATE_FENCING_TOKEN > {}.tmp; mv {0}.tmp {0}; sleep 30",
        env.display()
    );
    let mut run = s.run(&["--", "sh", "-c", &script]).spawn().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || env.exists()),
        "the command never wrote its environment"
    );
    let text = std::fs::read_to_string(&env).unwrap();
    let got: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let job = s.admin().job(got[0]).unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(got[1], u64::from(job.attempt));
    assert_eq!(Some(got[2]), job.lease.as_ref().map(|l| l.token), "{job:?}");
    signal(run.id(), Signal::TERM);
    run.wait().unwrap();
}

/// A grant that reaches the wrapper after its lease ran out (the wrapper paused here; a
/// network partition that delays the answer does the same, as the chaos harness found)
/// must not start the command: by then the slot may be someone else's.
#[test]
fn a_grant_read_after_its_lease_ran_out_does_not_start_the_command() {
    let s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"1s\"\n");
    let admin = s.admin();
    let (holder, _) = admin
        .submit(&lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        })
        .unwrap();
    let token = holder.lease.as_ref().unwrap().token;
    let ran = s.path("ran");
    let script = format!("touch {}", ran.display());
    let waiter = s
        .run(&["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = || jobs_in(&admin, "queued");
    assert!(eventually(Duration::from_secs(10), || waiting().len() == 1));
    let id = waiting()[0].id;
    // Let the wrapper's long-poll reach the server, then pause it: the admission is
    // answered into its socket and waits there.
    std::thread::sleep(Duration::from_millis(200));
    signal(waiter.id(), Signal::STOP);
    // Sends SIGCONT however the test ends, so a failure never leaves it stopped.
    struct Resume(u32);
    impl Drop for Resume {
        fn drop(&mut self) {
            if let Some(pid) = rustix::process::Pid::from_raw(self.0 as i32) {
                let _ = rustix::process::kill_process(pid, Signal::CONT);
            }
        }
    }
    let _resume = Resume(waiter.id());
    admin
        .finish_job(holder.id, token, lockgate_core::Outcome::Succeeded, None)
        .unwrap();
    let lost = wait_state(&s, id, JobState::Lost);
    assert_eq!(lost.attempt, 1);
    signal(waiter.id(), Signal::CONT);
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("the command was not started"), "{stderr}");
    assert!(!ran.exists(), "the command ran on a lease that had run out");
}

#[test]
fn exit_codes_follow_the_contract() {
    let s = Srv::start(ONE_SLOT);
    let code = |c: &mut std::process::Command| c.stderr(Stdio::null()).status().unwrap().code();
    assert_eq!(code(&mut s.run(&["--", "sh", "-c", "exit 7"])), Some(7));
    assert_eq!(
        code(&mut s.run(&["--", "sh", "-c", "kill -TERM $$"])),
        Some(128 + 15)
    );
    assert_eq!(code(&mut s.run(&["--", "/nonexistent/command"])), Some(127));
    assert_eq!(
        code(s.run(&["--", "true"]).env("LOCKGATE_TOKEN", "wrong")),
        Some(77)
    );
    assert_eq!(
        code(
            s.run(&["--connect-timeout", "300ms", "--", "true"])
                .env("LOCKGATE_SERVER", "http://127.0.0.1:9")
        ),
        Some(69)
    );
    assert_eq!(code(&mut s.run(&["--bogus-flag", "--", "true"])), Some(2));
    assert_eq!(
        code(&mut s.run(&["--attr", "owner=x", "--", "true"])),
        Some(2),
        "the server refused the job"
    );
    // --max-wait: the job expires while the slot is held.
    let mut holder = s.run(&["--", "sleep", "30"]).spawn().unwrap();
    assert!(eventually(Duration::from_secs(5), || jobs_in(
        &s.admin(),
        "running"
    )
    .len()
        == 1));
    assert_eq!(
        code(&mut s.run(&["--max-wait", "200ms", "--report", "x.json", "--", "true"])),
        Some(75)
    );
    assert_eq!(report(&s, "x.json").state, JobState::Expired);
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn sigint_while_the_server_is_unreachable_exits_130_without_waiting_out_the_timeout() {
    let s = Srv::start(ONE_SLOT);
    let mut c = s
        .run(&["--connect-timeout", "60s", "--", "true"])
        .env("LOCKGATE_SERVER", "http://127.0.0.1:9")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(c.id(), Signal::INT);
    assert_eq!(c.wait().unwrap().code(), Some(130));
}

#[test]
fn run_takes_a_negative_priority() {
    // Regression: `lockgate run --priority -1` was refused by the argument parser.
    let s = Srv::start(ONE_SLOT);
    let out = s
        .run(&["--priority", "-1", "--report", "p.json", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = report(&s, "p.json");
    assert_eq!((job.priority, job.state), (-1, JobState::Succeeded));
}

/// A cancel request's latency to a running `lockgate run`: from the cancel call to the job
/// ended `cancelled` (the wrapper stopped its command and finished the job). With a 30 s
/// TTL the first renewal is 10 s away, so only the push can end a run sooner.
fn cancel_latencies(rounds: usize) -> Vec<Duration> {
    let s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"30s\"\n");
    let admin = s.admin();
    (1..=rounds as u64)
        .map(|id| {
            let mut run = s
                .run(&["--grace", "5s", "--", "sleep", "60"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            wait_state(&s, id, JobState::Running);
            // The watch's first poll is on the server once the run is admitted; give it a
            // moment so the measurement is of a cancel on a settled hold.
            std::thread::sleep(Duration::from_millis(100));
            let t = std::time::Instant::now();
            admin.cancel(id, false).unwrap();
            let job = wait_state(&s, id, JobState::Cancelled);
            let took = t.elapsed();
            assert_eq!(run.wait().unwrap().code(), Some(75), "{job:?}");
            took
        })
        .collect()
}

#[test]
fn a_cancel_reaches_a_running_wrapper_at_once_not_at_its_next_renewal() {
    for took in cancel_latencies(3) {
        // 10 s is the first renewal: anything well below it came by the push.
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}

/// The measurement behind docs/benchmarks.md ("Cancel latency"):
/// `cargo test --release -p lockgate --test it cancel_latency_over_50 -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run by hand"]
fn cancel_latency_over_50() {
    let mut ms: Vec<f64> = cancel_latencies(50)
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    println!(
        "cancel to cancelled over {} runs: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        ms[ms.len() - 1]
    );
    assert!(at(0.99) < 1000.0, "p99 {:.1} ms", at(0.99));
}

#[test]
fn job_cancel_says_cancel_requested_and_with_wait_prints_the_outcome() {
    // A long TTL: the command ends by the push, not at a renewal.
    let s = Srv::start("[global]\nmax_running = 2\n[leases]\nttl = \"30s\"\n");
    // A command that ignores SIGTERM for a moment: the cancel is seen pending.
    let slow = "trap 'sleep 1; exit 0' TERM; while :; do sleep 0.05; done";
    let mut a = s
        .run(&["--", "sh", "-c", slow])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut b = s
        .run(&["--", "sleep", "60"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_state(&s, 1, JobState::Running);
    wait_state(&s, 2, JobState::Running);
    let out = s.cli(&["job", "cancel", "1"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("running (cancel requested)"), "{text}");
    let out = s.cli(&["job", "cancel", "--wait", "2"]).output().unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(err.contains("job 2: cancel requested"), "{err}");
    assert!(text.contains("State:       cancelled"), "{text}");
    assert_eq!(
        out.status.code(),
        Some(75),
        "a cancelled job did not run to its end"
    );
    assert_eq!(b.wait().unwrap().code(), Some(75));
    assert_eq!(a.wait().unwrap().code(), Some(75));
    assert_eq!(s.admin().job(1).unwrap().state, JobState::Cancelled);
    // The record names who cancelled it.
    let msg = s.admin().job(2).unwrap().message.unwrap_or_default();
    assert!(msg.starts_with("cancelled by admin token"), "{msg}");
}

#[test]
fn if_unreachable_run_runs_the_command_and_the_run_is_on_record_once_the_server_is_back() {
    let mut s = Srv::start(ONE_SLOT);
    s.kill9();
    let marker = s.path("ran");
    let script = format!("echo ran > {}; exit 3", marker.display());
    // The default: the command does not run, exit 69.
    let out = s
        .run(&["--connect-timeout", "300ms", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        !marker.exists(),
        "the command ran although the default is fail"
    );
    // --if-unreachable run: it runs after the bounded wait, says so, and keeps the report.
    let t = std::time::Instant::now();
    let out = s
        .run(&[
            "--connect-timeout",
            "300ms",
            "--if-unreachable",
            "run",
            "--attr",
            "repo=r1",
            "--idempotency-key",
            "night-1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the command's own code: {err}");
    assert!(marker.exists(), "{err}");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "the bounded wait came first"
    );
    assert!(err.contains("WITHOUT admission"), "{err}");
    let kept = s.path("spool/night-1.json");
    assert!(kept.exists(), "{err}");

    // The server is back: the next lockgate run sends the kept report.
    s.spawn();
    let out = s.run(&["--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("sent a run kept while the server was away"),
        "{err}"
    );
    assert!(!kept.exists());
    let admin = s.admin();
    let jobs = admin.jobs(&lockgate_api::JobQuery::default()).unwrap().jobs;
    let ran = jobs
        .iter()
        .find(|j| j.unadmitted)
        .expect("the run is on record");
    assert_eq!(ran.state, JobState::Failed, "{ran:?}");
    assert_eq!(ran.attrs.get("repo").map(String::as_str), Some("r1"));
    assert!(ran.started_at.is_some() && ran.finished_at.is_some());
    let msg = ran.message.as_deref().unwrap_or("");
    assert!(msg.contains("ran without admission on host"), "{msg}");
    assert!(msg.contains("exit status 3"), "{msg}");
    // Sent twice (a lost answer), recorded once.
    let again = lockgate_api::UnadmittedReport {
        job: lockgate_api::SubmitRequest {
            kind: "backup".into(),
            idempotency_key: Some("night-1".into()),
            ..Default::default()
        },
        started_at: ran.started_at.clone().unwrap(),
        finished_at: ran.finished_at.clone().unwrap(),
        outcome: lockgate_core::Outcome::Failed,
        message: None,
    };
    let (same, created) = admin.report_unadmitted(&again).unwrap();
    assert_eq!((same.id, created), (ran.id, false));
    let metrics = admin.metrics().unwrap();
    assert!(
        metrics.contains("lockgate_unadmitted_runs_total{kind=\"other\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_kind_the_policy_runs_if_unreachable_runs_without_the_flag_from_what_the_wrapper_last_saw() {
    let mut s = Srv::start(
        "[global]\nmax_running = 1\n[kinds.backup]\nif_unreachable = \"run\"\n[kinds.prune]\nif_unreachable = \"fail\"\n",
    );
    // One reachable run of each kind: the submit answers carry the policy's choice.
    for kind in ["backup", "prune"] {
        let out = s.run(&["--kind", kind, "--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let cache = std::fs::read_to_string(s.path("spool/kinds.cache")).unwrap();
    assert!(cache.contains("\"backup\": true"), "{cache}");
    s.kill9();
    let marker = s.path("ran");
    let script = format!("echo ran > {}", marker.display());
    // prune: the policy says fail, so the command does not run.
    let out = s
        .run(&[
            "--kind",
            "prune",
            "--connect-timeout",
            "300ms",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    assert!(!marker.exists());
    // backup: no flag, and it runs, saying whose choice that was.
    let out = s
        .run(&[
            "--kind",
            "backup",
            "--connect-timeout",
            "300ms",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(marker.exists(), "{err}");
    assert!(
        err.contains("if_unreachable = \"run\" for kind backup"),
        "{err}"
    );
    // The flag still wins over the policy.
    std::fs::remove_file(&marker).unwrap();
    let out = s
        .run(&[
            "--kind",
            "backup",
            "--connect-timeout",
            "300ms",
            "--if-unreachable",
            "fail",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    assert!(!marker.exists());
    // Back: the run is on record, unadmitted.
    s.spawn();
    let out = s.run(&["--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let jobs = s
        .admin()
        .jobs(&lockgate_api::JobQuery::default())
        .unwrap()
        .jobs;
    let ran: Vec<_> = jobs.iter().filter(|j| j.unadmitted).collect();
    assert_eq!(ran.len(), 1, "{jobs:?}");
    assert_eq!(ran[0].kind, "backup");
    assert_eq!(ran[0].state, JobState::Succeeded);
}

#[test]
fn a_killed_wrapper_gives_its_command_the_stop_signal_and_kills_the_whole_group_before_the_lease_can_run_out(
) {
    let s = Srv::start("[global]\nmax_running = 1\n[leases]\nttl = \"2s\"\n");
    let (marker, inner) = (s.path("got-int"), s.path("inner"));
    // The shell records the stop signal; its child ignores INT and TERM, so only SIGKILL
    // ends it, and it is not the wrapper's own child (PR_SET_PDEATHSIG never reaches it).
    let script = format!(
        "trap 'echo INT > {}' INT; sh -c 'trap \"\" INT TERM; echo $$ > {}; sleep 60' & wait; wait",
        marker.display(),
        inner.display()
    );
    let mut wrapper = s
        .run(&[
            "--stop-signal",
            "INT",
            "--grace",
            "60s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || read_pid(&inner).is_some()));
    let inner = read_pid(&inner).unwrap();
    wrapper.kill().unwrap();
    wrapper.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(5), || marker.exists()),
        "the command got its stop signal, not SIGKILL"
    );
    // The whole group is dead by the time the server may give the slot away, although the
    // grace (60 s) is far longer: the guard kills by the lease's first possible expiry.
    let admin = s.admin();
    let mut lost = false;
    for _ in 0..500 {
        if admin.job(1).unwrap().state == JobState::Lost {
            lost = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(lost, "the lease ran out");
    assert!(gone(inner), "a process of the command outlived the lease");
}
