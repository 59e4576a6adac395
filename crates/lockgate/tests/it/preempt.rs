//! Stop signals and preemption with real processes: `lockgate run --stop-signal INT`
//! delivers SIGINT to a command that traps it, on cancel and on preemption, and a
//! preempted `lockgate run` runs its command again (same job, next attempt) and exits 0.

use crate::harness::*;
use lockgate_api::SubmitRequest;
use lockgate_core::{JobState, Outcome};
use std::process::Stdio;
use std::time::Duration;

const POLICY: &str = "[global]\nmax_running = 1\n[leases]\nttl = \"1s\"\n\
                      [kinds.restore]\npriority = 10\npreempt = true\n";

/// A command that records each start in `runs`, and SIGINT in `ints`; from its second
/// start on it exits 0 at once.
fn script(s: &Srv) -> String {
    let (runs, ints) = (s.path("runs"), s.path("ints"));
    format!(
        "echo run >> {runs}; if [ \"$(wc -l < {runs})\" -ge 2 ]; then exit 0; fi; \
         trap 'echo int >> {ints}; exit 3' INT; while :; do sleep 0.1; done",
        runs = runs.display(),
        ints = ints.display()
    )
}

fn lines(s: &Srv, name: &str) -> usize {
    std::fs::read_to_string(s.path(name))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_cancelled_command_gets_the_stop_signal_it_asked_for() {
    let s = Srv::start(POLICY);
    let mut run = s
        .run(&[
            "--stop-signal",
            "INT",
            "--stop-grace",
            "5s",
            "--",
            "sh",
            "-c",
            &script(&s),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || lines(&s, "runs") == 1));
    s.admin().cancel(1, false).unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(75));
    assert_eq!(lines(&s, "ints"), 1, "the command received SIGINT");
    assert_eq!(s.admin().job(1).unwrap().state, JobState::Cancelled);
}

#[test]
fn a_preempted_run_stops_with_its_signal_runs_again_and_exits_0() {
    let s = Srv::start(POLICY);
    let mut run = s
        .run(&["--stop-signal", "SIGINT", "--", "sh", "-c", &script(&s)])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || lines(&s, "runs") == 1));
    let admin = s.admin();
    let (restore, _) = admin
        .submit(&SubmitRequest {
            kind: "restore".into(),
            ..SubmitRequest::default()
        })
        .unwrap();
    assert_eq!(restore.state, JobState::Queued);
    // The backup is asked to stop with reason `preempted`; lockgate sends SIGINT, finishes
    // the attempt, and the engine queues the job again; the restore runs.
    assert!(eventually(Duration::from_secs(10), || {
        admin
            .job(restore.id)
            .is_ok_and(|j| j.state == JobState::Running)
    }));
    assert_eq!(lines(&s, "ints"), 1, "the command received SIGINT");
    let backup = admin.job(1).unwrap();
    assert_eq!(
        (backup.state, backup.attempt),
        (JobState::Queued, 2),
        "{backup:?}"
    );
    assert_eq!(backup.preemptions, 1);
    let r = admin.job(restore.id).unwrap();
    let token = r.lease.unwrap().token;
    admin
        .finish_job(restore.id, token, Outcome::Succeeded, None)
        .unwrap();
    // The same job runs again: the command starts a second time and exits 0.
    assert_eq!(run.wait().unwrap().code(), Some(0));
    assert_eq!(lines(&s, "runs"), 2);
    let done = admin.job(1).unwrap();
    assert_eq!((done.state, done.attempt), (JobState::Succeeded, 2));
}
