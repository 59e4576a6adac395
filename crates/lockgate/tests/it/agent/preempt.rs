//! An agent obeys preemption: the handler is stopped with its `stop_signal` (SIGINT here),
//! the attempt is finished, the job is queued again and the handler runs again.

use super::{movable, serial, start_agent, wait_all_final};
use crate::harness::Srv;
use lockgate_api::SubmitRequest;
use lockgate_core::policy::Executor;
use lockgate_core::JobState;
use std::time::Duration;

#[test]
fn a_preempted_handler_gets_its_stop_signal_and_runs_again() {
    let _serial = serial();
    let srv = Srv::start(
        "[nodes]\nmax_running = 1\n[leases]\nttl = \"1s\"\n\
         [kinds.restore]\npriority = 10\npreempt = true\n",
    );
    let (runs, ints) = (srv.path("runs"), srv.path("ints"));
    let script = format!(
        "echo run >> {runs}; if [ \"$(wc -l < {runs})\" -ge 2 ]; then exit 0; fi; \
         trap 'echo int >> {ints}; exit 3' INT; while :; do sleep 0.1; done",
        runs = runs.display(),
        ints = ints.display()
    );
    let config = format!(
        "[agent]\ngrace = \"5s\"\n\n[handlers.move]\nrun = [\"sh\", \"-c\", {script:?}]\n\
         stop_signal = \"INT\"\n\n[handlers.restore]\nrun = [\"sh\", \"-c\", \"sleep 0.3\"]\n"
    );
    let _agent = start_agent(&srv, "n1", &[], &config);
    let admin = srv.admin();
    let (backup, _) = admin.submit(&movable("move", 0, 0)).unwrap();
    let count = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    assert!(crate::harness::eventually(Duration::from_secs(20), || {
        count(&runs) == 1
    }));
    let (restore, _) = admin
        .submit(&SubmitRequest {
            kind: "restore".into(),
            node_selector: Some(String::new()),
            executor: Some(Executor::Agent),
            ..SubmitRequest::default()
        })
        .unwrap();
    let jobs = wait_all_final(&srv, 2, Duration::from_secs(60));
    let b = jobs.iter().find(|j| j.id == backup.id).unwrap();
    let r = jobs.iter().find(|j| j.id == restore.id).unwrap();
    assert_eq!(r.state, JobState::Succeeded, "{r:?}");
    assert_eq!(
        (b.state, b.attempt, b.preemptions),
        (JobState::Succeeded, 2, 1),
        "{b:?}"
    );
    assert_eq!(count(&ints), 1, "the handler received SIGINT");
    assert_eq!(count(&runs), 2, "the handler ran again");
}
