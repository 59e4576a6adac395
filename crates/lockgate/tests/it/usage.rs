//! What a job used, measured by `lockgate run` from the kernel and kept by the server: the
//! known bytes of a command and its children in the job's record, the rates while it runs,
//! the throughput per node and scope in `/metrics`, and a report without the lease refused.

use crate::harness::*;
use lockgate_api::{JobView, LeaseRequest};
use lockgate_core::{JobState, Usage};
use std::time::Duration;

const MIB: u64 = 1 << 20;
/// What the shells read and write beside the data.
const SLACK: u64 = 256 << 10;

const POLICY: &str = "[leases]\nttl = \"300ms\"\n\n[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 2\n";

fn running(s: &Srv, id: u64) -> JobView {
    let admin = s.admin();
    assert!(
        eventually(Duration::from_secs(10), || admin
            .job(id)
            .is_ok_and(|j| j.state == JobState::Running)),
        "job {id} never ran"
    );
    admin.job(id).unwrap()
}

#[test]
fn a_run_records_the_bytes_its_command_and_children_wrote_and_shows_the_rates() {
    let s = Srv::start(POLICY);
    let dir = s.path("data");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    let gate = s.path("gate");
    // 6 MiB, then a pause in which renewals report, then 2 MiB more by a grandchild; it
    // ends when the test says so.
    let script = format!(
        "head -c {} /dev/zero > {d}/a; while [ ! -e {g} ]; do sleep 0.05; done; \
         sh -c 'head -c {} /dev/zero > {d}/b'",
        6 * MIB,
        2 * MIB,
        g = gate.display()
    );
    let mut holder = s
        .run(&["--attr", "datastore=ds1", "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    running(&s, 1);
    let admin = s.admin();
    // Two renewals after the first 6 MiB: the totals and a rate (0 between them).
    assert!(
        eventually(Duration::from_secs(10), || admin.job(1).is_ok_and(|j| j
            .usage
            .is_some_and(
                |u| u.totals.written_bytes >= 6 * MIB && u.written_per_s.is_some()
            ))),
        "no usage while it ran: {:?}",
        admin.job(1).unwrap().usage
    );
    let live = admin.job(1).unwrap().usage.unwrap();
    assert!(live.totals.processes >= 1, "{live:?}");
    assert!(live.totals.rss_bytes > 0, "{live:?}");
    let metrics = admin.metrics().unwrap();
    assert!(
        metrics.contains(
            "lockgate_scope_written_bytes_per_second{scope=\"limit:per-datastore[datastore=ds1]\"}"
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("bytes_per_second"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::write(&gate, "").unwrap();
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    let done = admin.job(1).unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    let u = done.usage.expect("the finish carried the totals");
    let want = 8 * MIB;
    assert!(
        (want..want + SLACK).contains(&u.totals.written_bytes),
        "written {} for {want}",
        u.totals.written_bytes
    );
    assert_eq!(u.totals.processes, 0);
    assert!(u.totals.peak_rss_bytes >= live.totals.rss_bytes);
    assert!(u.mean_written_per_s > 0);
    assert_eq!(u.written_per_s, None, "an ended job has no current rate");
    // People read it in `job show`.
    let out = s.cli(&["job", "show", "1"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Usage:") && text.contains("written 8.0 MiB"),
        "{text}"
    );
    assert!(text.contains("Rate:"), "{text}");
}

#[test]
fn a_report_without_the_lease_is_refused_and_changes_nothing() {
    let s = Srv::start(POLICY);
    let mut holder = s.run(&["--", "sleep", "30"]).spawn().unwrap();
    let job = running(&s, 1);
    let token = job.lease.as_ref().unwrap().token;
    let admin = s.admin();
    let forged = Usage {
        elapsed_ms: 1_000,
        written_bytes: 1 << 40,
        ..Usage::default()
    };
    let report = |token| LeaseRequest {
        usage: Some(forged),
        ..LeaseRequest::new(token)
    };
    let refused = admin
        .heartbeat_within(1, &report(token + 1), Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(refused.status(), Some(409), "{refused}");
    let after = admin.job(1).unwrap();
    assert!(
        after
            .usage
            .as_ref()
            .is_none_or(|u| u.totals.written_bytes < 1 << 30),
        "{:?}",
        after.usage
    );
    // The same report with the lease is taken (and never lowered by a later one).
    let taken = admin
        .heartbeat_within(1, &report(token), Duration::from_secs(5))
        .unwrap();
    assert_eq!(taken.usage.unwrap().totals.written_bytes, 1 << 40);
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn renewals_carry_the_nodes_pressure_and_network_counters() {
    let s = Srv::start(POLICY);
    let admin = s.admin();
    admin
        .register_node("n1", &lockgate_api::NodeRegister::default())
        .unwrap();
    let mut holder = s
        .run(&["--node", "n1", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    running(&s, 1);
    assert!(
        eventually(Duration::from_secs(10), || admin
            .node("n1")
            .is_ok_and(|n| n.sample.is_some_and(|v| v.net_rx_per_s.is_some()))),
        "no sample of n1: {:?}",
        admin.node("n1").unwrap().sample
    );
    let sample = admin.node("n1").unwrap().sample.unwrap();
    assert!(sample.sample.net_rx_bytes.is_some(), "{sample:?}");
    let psi = std::path::Path::new("/proc/pressure/io").exists();
    assert_eq!(sample.sample.io_some.is_some(), psi, "{sample:?}");
    let metrics = admin.metrics().unwrap();
    assert!(
        metrics.contains("lockgate_node_network_bytes_per_second{node=\"n1\",direction=\"rx\"}"),
        "{metrics}"
    );
    if psi {
        assert!(
            metrics.contains("lockgate_node_pressure{node=\"n1\",resource=\"io\",kind=\"some\"}"),
            "{metrics}"
        );
    }
    let out = s.cli(&["node", "show", "n1"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Pressure: cpu "), "{text}");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn a_running_job_of_a_learned_size_shows_when_it_ends_at_its_own_rate() {
    let s = Srv::start(&POLICY.replace("max = 2", "max = 1"));
    let dir = s.path("data");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    // The history: one run that moved 8 MiB and succeeded.
    let once = format!("head -c {} /dev/zero > {d}/once", 8 * MIB);
    let first = s
        .run(&["--attr", "datastore=ds1", "--", "sh", "-c", &once])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    // The next one writes 64 KiB every 0.1 s (about 0.6 MiB/s) until the test says so.
    let gate = s.path("gate");
    let slow = format!(
        "while [ ! -e {g} ]; do head -c 65536 /dev/zero >> {d}/slow; sleep 0.1; done",
        g = gate.display()
    );
    let mut holder = s
        .run(&["--attr", "datastore=ds1", "--", "sh", "-c", &slow])
        .spawn()
        .unwrap();
    running(&s, 2);
    let admin = s.admin();
    let ends = || {
        admin
            .job(2)
            .ok()
            .and_then(|j| j.expected)
            .and_then(|e| e.end_at)
    };
    assert!(
        eventually(Duration::from_secs(10), || ends().is_some()),
        "no end estimate: {:?}",
        admin.job(2).unwrap().expected
    );
    let expected = admin.job(2).unwrap().expected.unwrap();
    let size = expected.size.expect("the first run's size");
    assert!(
        (8 * MIB..8 * MIB + SLACK).contains(&size.p50_bytes),
        "{size:?}"
    );
    assert_eq!(size.samples, 1);
    // At about 0.6 MiB/s with at most 8 MiB left: ahead of now, within a minute or so.
    let end = lockgate_api::time::parse(&ends().unwrap()).unwrap();
    let now = lockgate_api::time::parse(&admin.job(2).unwrap().submitted_at).unwrap();
    let ahead = end.since(now);
    assert!(
        (1_000..120_000).contains(&ahead),
        "ends {ahead} ms after its submit"
    );
    let out = s.cli(&["job", "show", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Exp size:") && text.contains("at its own rate"),
        "{text}"
    );
    let why = admin.explain(2).unwrap().text;
    assert!(
        why.starts_with("running") && why.contains("moved ") && why.contains("at its own rate"),
        "{why}"
    );
    // A job behind it is forecast to start when it ends at its own rate, not when its
    // learned run time (a fraction of a second) says.
    let queued = lockgate_api::SubmitRequest {
        kind: "backup".into(),
        attrs: [("datastore".to_string(), "ds1".to_string())].into(),
        executor: Some(lockgate_core::policy::Executor::Client),
        ..lockgate_api::SubmitRequest::default()
    };
    let behind = admin.submit(&queued).unwrap().0.id;
    let starts = || {
        let e = admin.explain(behind).ok()?.estimate?;
        lockgate_api::time::parse(&e.start_p50?).ok()
    };
    let submitted = lockgate_api::time::parse(&admin.job(behind).unwrap().submitted_at).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || starts()
            .is_some_and(|t| t.since(submitted) >= 1_000)),
        "forecast start {:?}, own end {:?}",
        admin.explain(behind).unwrap().estimate,
        ends()
    );
    std::fs::write(&gate, "").unwrap();
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    // Ended: no estimate of its end.
    assert_eq!(admin.job(2).unwrap().expected.unwrap().end_at, None);
}
