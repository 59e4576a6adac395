//! A server whose wall clock is set while it runs (libfaketime): a lease held on a
//! monotonic clock is never handed on early, and a step back stops nothing.

use crate::harness::*;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// libfaketime's multi-threaded library (Debian's `faketime`, which scripts/test installs).
fn libfaketime() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .find(|p| p.exists());
    found.expect("libfaketimeMT.so.1 not found under /usr/lib/*/faketime: install faketime")
}

/// A server whose wall clock is the real one offset by what `clock` holds ("+3600"),
/// re-read at most every second; its monotonic clocks are left alone, as a real clock
/// step leaves them.
fn server_with_a_settable_clock(policy: &str) -> (Srv, PathBuf) {
    let mut s = Srv::unstarted(tempfile::tempdir().unwrap(), policy, "");
    let clock = s.path("clock");
    std::fs::write(&clock, "+0\n").unwrap();
    let lib = libfaketime().display().to_string();
    s.env = vec![
        ("LD_PRELOAD".into(), lib),
        (
            "FAKETIME_TIMESTAMP_FILE".into(),
            clock.display().to_string(),
        ),
        ("FAKETIME_CACHE_DURATION".into(), "1".into()),
        ("DONT_FAKE_MONOTONIC".into(), "1".into()),
    ];
    s.spawn();
    s.token = std::fs::read_to_string(s.path("data/admin.token"))
        .unwrap()
        .trim()
        .to_string();
    (s, clock)
}

#[test]
fn a_wall_clock_step_never_hands_a_held_slot_on() {
    let (s, clock) =
        server_with_a_settable_clock("[global]\nmax_running = 1\n[leases]\nttl = \"2s\"\n");
    // `lockgate run --kind backup -- sh -c SCRIPT`, its stderr kept.
    let run_sh = |script: &str| {
        s.run(&["--kind", "backup", "--", "sh", "-c", script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let ended = s.path("first-ended");
    let first = run_sh(&format!("sleep 5; touch {}", ended.display()));
    let admin = s.admin();
    assert!(eventually(Duration::from_secs(10), || {
        jobs_in(&admin, "running").len() == 1
    }));
    let early = s.path("second-early");
    let second = run_sh(&format!(
        "test -e {} || touch {}",
        ended.display(),
        early.display()
    ));
    std::thread::sleep(Duration::from_millis(500));
    // The server's wall clock jumps an hour ahead while the first holds the only slot.
    set_clock(&clock, "+3600");
    let out = first.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the first lost its lease: {stderr}"
    );
    let out = second.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !early.exists(),
        "the second started while the first still ran: the slot was handed on early"
    );
    let log = std::fs::read_to_string(s.path("server.log")).unwrap();
    assert!(log.contains("the wall clock stepped forward"), "{log}");

    // And back: engine time never goes back, the step is said, and work goes on. The
    // server reads its clock file at most once a second, and sees the step at the next
    // reading of engine time after that: jobs are run until it has (on a loaded machine,
    // a second is not always enough).
    set_clock(&clock, "+0");
    let said_back = || {
        let code = s
            .run(&["--kind", "backup", "--", "true"])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .code();
        assert_eq!(code, Some(0), "a job after the step back");
        let log = std::fs::read_to_string(s.path("server.log")).unwrap();
        log.contains("the wall clock stepped back")
    };
    assert!(
        eventually(Duration::from_secs(30), said_back),
        "{}",
        std::fs::read_to_string(s.path("server.log")).unwrap()
    );
}

/// Sets the server's clock offset, as one rename (never a half-written file).
fn set_clock(clock: &std::path::Path, offset: &str) {
    let new = clock.with_extension("new");
    std::fs::write(&new, format!("{offset}\n")).unwrap();
    std::fs::rename(&new, clock).unwrap();
}
