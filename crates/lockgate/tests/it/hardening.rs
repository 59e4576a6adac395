//! `lockgate server` guards its data dir (issue 10, items 8 and 9), as real processes.

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
