//! `lockgate server` guards its data dir, as real processes.

use crate::harness::*;

fn second_server(s: &Srv, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .arg("server")
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(s.path("data"))
        .args(extra)
        .env("LOCKGATE_LOG", "error")
        .output()
        .unwrap()
}

#[test]
fn a_second_lockgate_server_on_the_same_data_dir_refuses_naming_dir_and_pid() {
    let mut s = Srv::start("[global]\nmax_running = 1\n");
    let out = second_server(&s, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&s.path("data").display().to_string())
            && err.contains(&format!("pid {}", s.pid())),
        "{err}"
    );
    // An emptied store is refused, naming the flag that starts fresh; after a kill -9 no
    // stale lock is left.
    s.kill9();
    std::fs::remove_file(s.path("data/lockgate.db")).unwrap();
    let _ = std::fs::remove_file(s.path("data/lockgate.db-wal"));
    let out = second_server(&s, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--start-fresh"),
        "{err}"
    );
    s.spawn_with(&["--start-fresh"]);
}

/// The chaos harness's planted bugs exist only in a build with the plants feature: this
/// build refuses to start when asked for one, so no harness can run without the bug it
/// asked for, and no setting turns one on in a release.
#[test]
fn a_server_without_the_planted_bugs_refuses_to_start_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .arg("server")
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("LOCKGATE_LOG", "error")
        .env("LOCKGATE_PLANT", "ack-before-commit")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("carries no planted bugs"), "{err}");
    assert!(
        !dir.path().join("data").exists(),
        "refused before touching the data dir"
    );
}
