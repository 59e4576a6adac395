//! `lockgate hold acquire` / `hold release`: a slot taken by one process and given back by
//! another, bound to the life of the tool that took it (docs/api.md, "lockgate hold").

use crate::harness::*;
use lockgate_core::JobState;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const POLICY: &str = "[global]\nmax_running = 1\n[leases]\nttl = \"3s\"\n";

/// A stand-in for the tool that runs the hooks (vzdump, borgmatic): a process of its own.
fn tool() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

fn acquire(s: &Srv, name: &str, pid: u32) -> Command {
    let pid = pid.to_string();
    let mut c = s.cli(&[
        "hold",
        "acquire",
        "--name",
        name,
        "--pid",
        &pid,
        "--attr",
        "datastore=ds1",
    ]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn release(s: &Srv, name: &str, code: i32) -> Output {
    s.cli(&[
        "hold",
        "release",
        "--name",
        name,
        "--exit-code",
        &code.to_string(),
    ])
    .output()
    .unwrap()
}

/// The pid of the keeper of hold `name`.
fn keeper_pid(s: &Srv, name: &str) -> u32 {
    std::fs::read_to_string(s.path(&format!("holds/{name}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_hold_outlives_its_acquire_is_given_back_by_release_and_returns_at_once_when_its_tool_dies() {
    let s = Srv::start(POLICY);
    let admin = s.admin();
    let mut tool_a = tool();
    let out = acquire(&s, "vm-100", tool_a.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    assert_eq!(admin.job(1).unwrap().state, JobState::Running);

    // The same name again: refused before anything is submitted.
    let again = acquire(&s, "vm-100", tool_a.id()).output().unwrap();
    assert_eq!(again.status.code(), Some(75), "{}", err(&again));
    assert!(
        err(&again).contains("already taken by job 1"),
        "{}",
        err(&again)
    );
    assert!(admin.job(2).is_err(), "a refused acquire submitted a job");

    // A second guest waits, and says why.
    let mut tool_b = tool();
    let waiting = acquire(&s, "vm-101", tool_b.id()).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || admin
        .job(2)
        .is_ok_and(|j| j.state == JobState::Queued)));
    // The keeper holds the lease past its TTL (3 s) with the acquire long gone.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(admin.job(1).unwrap().state, JobState::Running);

    let out = release(&s, "vm-100", 0);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    assert!(err(&out).contains("job 1 succeeded"), "{}", err(&out));
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", err(&waited));
    assert!(
        err(&waited).contains("waiting: 1st in line"),
        "{}",
        err(&waited)
    );
    assert_eq!(admin.job(2).unwrap().state, JobState::Running);

    // The second tool dies without a release: its slot returns at once, not after the TTL.
    tool_b.kill().unwrap();
    tool_b.wait().unwrap();
    let t = Instant::now();
    assert!(eventually(Duration::from_secs(3), || admin
        .job(2)
        .is_ok_and(|j| j.state == JobState::Failed)));
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the slot came back after {took:?}"
    );
    let msg = admin.job(2).unwrap().message.unwrap_or_default();
    assert!(msg.contains("ended without a release"), "{msg}");

    // Releases that find no holder: a defined answer, exit 75.
    let twice = release(&s, "vm-100", 0);
    assert_eq!(twice.status.code(), Some(75), "{}", err(&twice));
    assert!(err(&twice).contains("had already ended"), "{}", err(&twice));
    let never = release(&s, "vm-999", 0);
    assert_eq!(never.status.code(), Some(75), "{}", err(&never));
    assert!(
        err(&never).contains("no hold named vm-999"),
        "{}",
        err(&never)
    );

    // A tool already gone at acquire: nothing is submitted.
    let pid = tool_a.id();
    tool_a.kill().unwrap();
    tool_a.wait().unwrap();
    let late = acquire(&s, "vm-102", pid).output().unwrap();
    assert_eq!(late.status.code(), Some(75), "{}", err(&late));
    assert!(err(&late).contains("already gone"), "{}", err(&late));
    assert!(admin.job(3).is_err());

    // A failed backup releases as failed.
    let mut tool_c = tool();
    let out = acquire(&s, "vm-103", tool_c.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let out = release(&s, "vm-103", 5);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let job = admin.job(3).unwrap();
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    assert!(job.message.unwrap_or_default().contains("exit code 5"));
    tool_c.kill().unwrap();
    tool_c.wait().unwrap();
}

#[test]
fn a_hold_survives_a_server_restart_while_it_holds() {
    let mut s = Srv::start(POLICY);
    let mut tool_a = tool();
    let out = acquire(&s, "vm-200", tool_a.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    s.kill9();
    std::thread::sleep(Duration::from_secs(2));
    s.spawn();
    // Past the TTL after the restart: the keeper's renewals found the server again.
    std::thread::sleep(Duration::from_secs(4));
    let admin = s.admin();
    assert_eq!(admin.job(1).unwrap().state, JobState::Running);
    let out = release(&s, "vm-200", 0);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    assert_eq!(admin.job(1).unwrap().state, JobState::Succeeded);
    tool_a.kill().unwrap();
    tool_a.wait().unwrap();
}

#[test]
fn a_waiting_acquire_rides_out_a_server_restart_and_a_killed_keeper_loses_its_slot_within_the_ttl()
{
    let mut s = Srv::start(POLICY);
    let mut tool_a = tool();
    let out = acquire(&s, "vm-300", tool_a.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let mut tool_b = tool();
    let waiting = acquire(&s, "vm-301", tool_b.id()).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || s
        .admin()
        .job(2)
        .is_ok_and(|j| j.state == JobState::Queued)));
    // The server goes away and comes back while one holds and one waits.
    s.kill9();
    std::thread::sleep(Duration::from_secs(1));
    s.spawn();
    let admin = s.admin();
    // The holder's keeper is killed: nothing releases, and the lease runs out (TTL 3 s,
    // with the restart's grace) before the waiting acquire is admitted.
    let keeper = keeper_pid(&s, "vm-300");
    signal(keeper, rustix::process::Signal::KILL);
    let t = Instant::now();
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", err(&waited));
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "admitted {took:?} after the keeper died"
    );
    assert_eq!(admin.job(1).unwrap().state, JobState::Lost);
    assert_eq!(admin.job(2).unwrap().state, JobState::Running);
    // Its release finds no keeper: said, exit 75.
    let out = release(&s, "vm-300", 0);
    assert_eq!(out.status.code(), Some(75), "{}", err(&out));
    let out = release(&s, "vm-301", 0);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    for t in [&mut tool_a, &mut tool_b] {
        t.kill().unwrap();
        t.wait().unwrap();
    }
}

#[test]
fn a_keeper_told_to_stop_keeps_the_slot_while_its_tool_runs_and_returns_it_when_the_tool_ends() {
    let s = Srv::start(POLICY);
    let admin = s.admin();
    let mut tool_a = tool();
    let out = acquire(&s, "vm-400", tool_a.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let keeper = keeper_pid(&s, "vm-400");
    // A shutdown's SIGTERM (and a stray SIGHUP): the tool still runs, so the slot stays
    // taken past the lease's TTL (3 s) and nothing else is admitted.
    signal(keeper, rustix::process::Signal::TERM);
    signal(keeper, rustix::process::Signal::HUP);
    let mut tool_b = tool();
    let waiting = acquire(&s, "vm-401", tool_b.id()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(admin.job(1).unwrap().state, JobState::Running);
    assert_eq!(admin.job(2).unwrap().state, JobState::Queued);
    let log = std::fs::read_to_string(s.path("holds/vm-400.log")).unwrap();
    assert!(
        log.contains("a stop signal; the hold goes on until process"),
        "{log}"
    );
    // The tool ends (the same shutdown stopped it): the slot returns at once.
    tool_a.kill().unwrap();
    tool_a.wait().unwrap();
    let t = Instant::now();
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", err(&waited));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "admitted {:?} after the tool ended",
        t.elapsed()
    );
    assert_eq!(admin.job(1).unwrap().state, JobState::Failed);
    let out = release(&s, "vm-401", 0);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    tool_b.kill().unwrap();
    tool_b.wait().unwrap();
}

#[test]
fn a_hold_reports_what_its_tool_did_while_it_held_and_not_before() {
    const MIB: u64 = 1 << 20;
    let s = Srv::start(POLICY);
    let admin = s.admin();
    let dir = s.path("data");
    std::fs::create_dir_all(&dir).unwrap();
    let (d, gate) = (dir.display(), s.path("gate"));
    // The tool writes 5 MiB before its hook takes the slot, 3 MiB (by a child) after.
    let script = format!(
        "head -c {} /dev/zero > {d}/before; while [ ! -e {g} ]; do sleep 0.05; done; \
         sh -c 'head -c {} /dev/zero > {d}/during'; sleep 60",
        5 * MIB,
        3 * MIB,
        g = gate.display()
    );
    let mut tool = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || std::fs::metadata(
        dir.join("before")
    )
    .is_ok_and(|m| m.len() == 5 * MIB)));
    let out = acquire(&s, "vm-100", tool.id()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    std::fs::write(&gate, "").unwrap();
    assert!(
        eventually(Duration::from_secs(15), || admin.job(1).is_ok_and(|j| j
            .usage
            .is_some_and(|u| u.totals.written_bytes >= 3 * MIB))),
        "the renewals never carried the tool's 3 MiB: {:?}",
        admin.job(1).unwrap().usage
    );
    let done = release(&s, "vm-100", 0);
    assert_eq!(done.status.code(), Some(0), "{}", err(&done));
    let u = admin.job(1).unwrap().usage.unwrap().totals;
    assert!(
        (3 * MIB..4 * MIB).contains(&u.written_bytes),
        "only what the tool wrote while it held: {u:?}"
    );
    tool.kill().unwrap();
    tool.wait().unwrap();
}
