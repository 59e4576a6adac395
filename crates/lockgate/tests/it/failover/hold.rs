//! A hold on several servers: `hold acquire` and its keeper follow the leader from the
//! comma-separated server list. The leader is killed with `kill -9` while one hold holds
//! and another waits; the keeper renews on the new leader (the slot stays taken past the
//! TTL), the release finishes the job there, and the waiting acquire is admitted.

use super::replicas::Replicas;
use crate::harness::BIN;
use lockgate_client::Client;
use lockgate_core::JobState;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const TTL_S: u64 = 3;

/// `lockgate hold ARGS` against every replica.
fn hold(r: &Replicas, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("hold")
        .args(args)
        .env("LOCKGATE_SERVER", r.servers())
        .env("LOCKGATE_TOKEN", &r.token)
        .env("LOCKGATE_HOLDS", r.path("holds"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn acquire(r: &Replicas, name: &str, tool: &Child) -> Command {
    let pid = tool.id().to_string();
    hold(
        r,
        &[
            "acquire",
            "--name",
            name,
            "--pid",
            &pid,
            "--attr",
            "datastore=ds1",
        ],
    )
}

fn release(r: &Replicas, name: &str) -> Output {
    hold(r, &["release", "--name", name, "--exit-code", "0"])
        .output()
        .unwrap()
}

fn said(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn state(admin: &Client, id: u64) -> Option<JobState> {
    admin.job(id).ok().map(|j| j.state)
}

#[test]
fn a_hold_follows_the_leader_when_the_leader_is_killed() {
    let _serial = crate::agent::serial();
    let policy = format!("[global]\nmax_running = 1\n[leases]\nttl = \"{TTL_S}s\"\n");
    let mut r = Replicas::start(3, &policy);
    let admin = r.admin();
    let mut tools: Vec<Child> = (0..2)
        .map(|_| Command::new("sleep").arg("120").spawn().unwrap())
        .collect();
    let out = acquire(&r, "vm-1", &tools[0]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}\n{}", said(&out), r.logs());
    let waiting = acquire(&r, "vm-2", &tools[1]).spawn().unwrap();
    assert!(crate::harness::eventually(Duration::from_secs(10), || {
        state(&admin, 2) == Some(JobState::Queued)
    }));

    let old = r.leader(None).expect("a leader");
    r.reps[old].kill9();
    r.wait_leader(Duration::from_secs(20), Some(old));
    // Well past the TTL on the new leader: the keeper's renewals reached it.
    std::thread::sleep(Duration::from_secs(3 * TTL_S));
    assert_eq!(state(&admin, 1), Some(JobState::Running), "{}", r.logs());
    assert_eq!(state(&admin, 2), Some(JobState::Queued), "{}", r.logs());

    let out = release(&r, "vm-1");
    assert_eq!(out.status.code(), Some(0), "{}\n{}", said(&out), r.logs());
    assert_eq!(state(&admin, 1), Some(JobState::Succeeded));
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", said(&waited));
    assert_eq!(state(&admin, 2), Some(JobState::Running));
    let out = release(&r, "vm-2");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(state(&admin, 2), Some(JobState::Succeeded));
    for t in &mut tools {
        t.kill().unwrap();
        t.wait().unwrap();
    }
}
