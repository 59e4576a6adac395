//! `lockgate server --database-url`: a real server process on a PostgreSQL database of the
//! test cluster (`lockgate_store::postgres::testdb`). The database holds the policy: the
//! `--config` file seeds it, SIGHUP applies the file to it, and the file is never written;
//! the URL's password is never shown. Skipped (with a message) where PostgreSQL is not
//! installed, unless `LOCKGATE_TEST_STORE=postgres`.

use crate::harness::*;
use lockgate_store::postgres::testdb;
use std::time::Duration;

fn available() -> bool {
    if std::env::var("LOCKGATE_TEST_STORE").as_deref() == Ok("postgres")
        || testdb::bindir().is_some()
    {
        return true;
    }
    eprintln!("SKIPPED: no PostgreSQL binaries (initdb, pg_ctl) found");
    false
}

/// A fresh database owned by a role with a password; its URL.
fn database_with_password(password: &str) -> String {
    let url = testdb::fresh_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let c = testdb::cluster();
    c.sql(&format!(
        "CREATE ROLE {db}_owner LOGIN PASSWORD '{password}'"
    ));
    c.sql(&format!("ALTER DATABASE {db} OWNER TO {db}_owner"));
    format!(
        "postgres://{db}_owner:{password}@127.0.0.1:{}/{db}",
        c.port()
    )
}

fn max_running(s: &Srv) -> i64 {
    s.admin().policy().unwrap().policy["global"]["max_running"]
        .as_i64()
        .unwrap_or(-1)
}

#[test]
fn the_database_holds_the_policy_the_file_only_seeds_it_and_the_password_never_shows() {
    if !available() {
        return;
    }
    let url = database_with_password("s3cret-pw");
    let mut s = Srv::start_on_database("[global]\nmax_running = 1\n", &url);
    assert_eq!(max_running(&s), 1, "the file seeds the empty database");
    s.admin()
        .put_policy("[global]\nmax_running = 3\n", false, None)
        .unwrap();
    assert_eq!(max_running(&s), 3);
    let file = s.path("lockgate.toml");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[global]\nmax_running = 1\n",
        "a PUT writes the database only"
    );
    // SIGHUP applies the file to the database.
    std::fs::write(&file, "[global]\nmax_running = 2\n").unwrap();
    signal(s.pid(), rustix::process::Signal::HUP);
    assert!(eventually(Duration::from_secs(10), || max_running(&s) == 2));
    // A restart reads the database, not the file.
    std::fs::write(&file, "[global]\nmax_running = 5\n").unwrap();
    assert!(s.terminate().success());
    s.spawn_with(&["--database-url", &url]);
    assert_eq!(max_running(&s), 2, "the stored policy wins over the file");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[global]\nmax_running = 5\n",
        "the file is never written"
    );
    // The job state lives in the database too: a job survives the restart.
    let job = s
        .admin()
        .submit(&lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        })
        .unwrap()
        .0;
    assert!(s.terminate().success());
    s.spawn_with(&["--database-url", &url]);
    assert_eq!(s.admin().job(job.id).unwrap().id, job.id);
    let log = std::fs::read_to_string(s.path("server.log")).unwrap();
    assert!(!log.contains("s3cret-pw"), "{log}");
    assert!(log.contains("_owner:***@127.0.0.1"), "{log}");
}

#[test]
fn a_database_that_is_down_stops_the_start_naming_host_and_port_not_the_password() {
    let port = free_port();
    let out = std::process::Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .env(
            "LOCKGATE_DATABASE_URL",
            format!("postgres://lg:hunter2@127.0.0.1:{port}/lockgate"),
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
