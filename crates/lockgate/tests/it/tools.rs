//! Real restic and borg through `lockgate run`, against one local repository each.
//!
//! The tools' own repository locks are the independent witness: restic fails any command
//! that needs an exclusive lock while another holds one ("repository is already locked"),
//! and borg fails a second command after `--lock-wait` (1 s by default) on
//! `lock.exclusive`. So every command exiting 0 shows that lockgate never let an exclusive
//! command overlap another on the same repository, and that the shared ones did run side by
//! side where the policy allows it. The tools are installed by `scripts/test` (Debian's
//! restic and borgbackup); a machine without them fails here, it does not skip.

use crate::harness::{eventually, Srv};
use lockgate_core::JobState;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Backups share `repo`; prune and check need it alone (docs/integrations/restic.md).
const RESTIC_POLICY: &str = r#"
[global]
max_running = 8

[[conflict]]
keys = ["repo"]
exclusive = "kind in (prune, check)"
"#;

/// One borg command per repository at a time (docs/integrations/borg.md).
pub const BORG_POLICY: &str = r#"
[global]
max_running = 8

[[conflict]]
keys = ["repo"]
"#;

pub fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed: scripts/test installs it (apt-get install restic borgbackup borgmatic)"))
}

/// A source tree of `files` files of `kib` KiB of incompressible bytes each.
pub fn source(dir: &Path, files: usize, kib: usize, seed: u64) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in 0..files {
        let mut data = Vec::with_capacity(kib * 1024);
        while data.len() < kib * 1024 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.extend_from_slice(&x.to_le_bytes());
        }
        std::fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
    dir.to_path_buf()
}

fn restic_env(c: &mut Command, repo: &Path, home: &Path) {
    c.env("RESTIC_REPOSITORY", repo)
        .env("RESTIC_PASSWORD", "lockgate-test")
        .env("RESTIC_CACHE_DIR", home.join("restic-cache"))
        .env("HOME", home);
}

fn borg_env(c: &mut Command, repo: &Path, home: &Path) {
    c.env("BORG_REPO", repo)
        .env("BORG_BASE_DIR", home)
        .env("BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK", "yes")
        .env("BORG_RELOCATED_REPO_ACCESS_IS_OK", "yes")
        .env("HOME", home);
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `lockgate run --kind KIND --attr repo=main -- ARGS`, with the tool's environment.
fn wrapped(
    s: &Srv,
    kind: &str,
    env: fn(&mut Command, &Path, &Path),
    repo: &Path,
    args: &[&str],
) -> Child {
    wrapped_stopping(s, kind, env, repo, "INT", args)
}

/// [`wrapped`] with another `--stop-signal`.
fn wrapped_stopping(
    s: &Srv,
    kind: &str,
    env: fn(&mut Command, &Path, &Path),
    repo: &Path,
    stop: &str,
    args: &[&str],
) -> Child {
    let mut run_args = vec![
        "--kind",
        kind,
        "--attr",
        "repo=main",
        "--stop-signal",
        stop,
        "--",
    ];
    run_args.extend_from_slice(args);
    let mut c = s.run(&run_args);
    env(&mut c, repo, s.dir.path());
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn restic_backups_share_the_repository_and_prune_and_check_run_alone() {
    tool("restic");
    let s = Srv::start(RESTIC_POLICY);
    let repo = s.path("restic-repo");
    let mut init = Command::new("restic");
    init.args(["init"]);
    restic_env(&mut init, &repo, s.dir.path());
    ok(&init.output().unwrap(), "restic init");
    let sources: Vec<PathBuf> = (0..4)
        .map(|i| source(&s.path(&format!("src{i}")), 8, 2048, i))
        .collect();
    // A first snapshot so that forget --prune and check have something to work on.
    ok(
        &wrapped(
            &s,
            "backup",
            restic_env,
            &repo,
            &["restic", "backup", "-q", sources[0].to_str().unwrap()],
        )
        .wait_with_output()
        .unwrap(),
        "the first restic backup",
    );
    // Four backups, then a prune and a check, then two more backups, all submitted at once.
    let mut children: Vec<(String, Child)> = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let child = wrapped(
            &s,
            "backup",
            restic_env,
            &repo,
            &["restic", "backup", "-q", src.to_str().unwrap()],
        );
        children.push((format!("restic backup #{i}"), child));
    }
    let prune = &["restic", "forget", "-q", "--keep-last", "3", "--prune"];
    children.push((
        "restic forget --prune".into(),
        wrapped(&s, "prune", restic_env, &repo, prune),
    ));
    children.push((
        "restic check".into(),
        wrapped(&s, "check", restic_env, &repo, &["restic", "check", "-q"]),
    ));
    for (i, src) in sources.iter().take(2).enumerate() {
        let child = wrapped(
            &s,
            "backup",
            restic_env,
            &repo,
            &["restic", "backup", "-q", src.to_str().unwrap()],
        );
        children.push((format!("restic backup #{} (after the prune)", i + 4), child));
    }
    for (what, child) in children {
        ok(&child.wait_with_output().unwrap(), &what);
    }
    // The repository is whole and unlocked afterwards.
    let mut check = Command::new("restic");
    check.args(["check", "-q"]);
    restic_env(&mut check, &repo, s.dir.path());
    ok(&check.output().unwrap(), "restic check afterwards");
    let jobs = s.admin().jobs(&Default::default()).unwrap();
    assert_eq!(jobs.jobs.len(), 9, "every command was a job");
    assert!(
        jobs.jobs.iter().all(|j| j.state == JobState::Succeeded),
        "{:?}",
        jobs.jobs
    );
}

#[test]
fn a_restic_backup_stopped_with_sigint_leaves_no_stale_lock() {
    tool("restic");
    // A short lease: the holder renews every second, so the cancel reaches it at once.
    let s = Srv::start(&format!("{RESTIC_POLICY}\n[leases]\nttl = \"3s\"\n"));
    let repo = s.path("restic-repo");
    let mut init = Command::new("restic");
    init.args(["init"]);
    restic_env(&mut init, &repo, s.dir.path());
    ok(&init.output().unwrap(), "restic init");
    // A backup of a stream that stalls after its first MiB: restic holds its lock, waiting
    // for more, until it is stopped.
    let id_file = s.path("job-id");
    let script = format!(
        "echo $LOCKGATE_JOB_ID > {}; (head -c 1048576 /dev/urandom; sleep 120) | restic backup -q --stdin --stdin-filename stream",
        id_file.display(),
    );
    let locks = repo.join("locks");
    let (id, out) = cancel_once_locked(&s, &repo, "INT", &script, &id_file);
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(&locks).unwrap().collect();
    assert!(left.is_empty(), "restic left a lock behind: {left:?}");
    assert_eq!(s.admin().job(id).unwrap().state, JobState::Cancelled);
    // The next exclusive command finds the repository unlocked.
    let prune = wrapped(
        &s,
        "prune",
        restic_env,
        &repo,
        &["restic", "forget", "-q", "--keep-last", "1", "--prune"],
    );
    ok(
        &prune.wait_with_output().unwrap(),
        "restic forget --prune after the cancel",
    );
    // The contrast that makes the signal matter: stopped with SIGTERM (the default),
    // restic 0.14 leaves its lock behind.
    std::fs::remove_file(&id_file).unwrap();
    let (_, out) = cancel_once_locked(&s, &repo, "TERM", &script, &id_file);
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = std::fs::read_dir(&locks).unwrap().count();
    assert_eq!(
        left, 1,
        "with SIGTERM restic leaves its lock (the reason for --stop-signal INT)"
    );
}

/// Runs `script` (which writes its job id into `id_file`) as a restic backup stopped with
/// `stop`, cancels the job once restic holds its lock, and returns the id and the output.
fn cancel_once_locked(
    s: &Srv,
    repo: &Path,
    stop: &str,
    script: &str,
    id_file: &Path,
) -> (u64, Output) {
    let backup = wrapped_stopping(s, "backup", restic_env, repo, stop, &["sh", "-c", script]);
    let locks = repo.join("locks");
    assert!(
        eventually(Duration::from_secs(60), || {
            std::fs::read_dir(&locks).is_ok_and(|mut d| d.next().is_some()) && id_file.exists()
        }),
        "restic never took its lock"
    );
    let id: u64 = std::fs::read_to_string(id_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A backup under way, not one a few milliseconds old: restic 0.14 writes its lock file
    // before it registers the lock for removal on SIGINT, and the cancel reaches it within
    // about 0.1 s now.
    std::thread::sleep(Duration::from_secs(1));
    s.admin().cancel(id, false).unwrap();
    (id, backup.wait_with_output().unwrap())
}

#[test]
fn borg_creates_and_a_prune_on_one_repository_all_succeed() {
    tool("borg");
    let s = Srv::start(BORG_POLICY);
    let repo = s.path("borg-repo");
    let mut init = Command::new("borg");
    init.args(["init", "--encryption", "none"]);
    borg_env(&mut init, &repo, s.dir.path());
    ok(&init.output().unwrap(), "borg init");
    let sources: Vec<PathBuf> = (0..4)
        .map(|i| source(&s.path(&format!("src{i}")), 8, 2048, 100 + i))
        .collect();
    let mut children: Vec<(String, Child)> = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let archive = format!("::a{i}");
        let child = wrapped(
            &s,
            "backup",
            borg_env,
            &repo,
            &["borg", "create", &archive, src.to_str().unwrap()],
        );
        children.push((format!("borg create {archive}"), child));
    }
    let prune = &["borg", "prune", "--keep-last", "2"];
    children.push((
        "borg prune".into(),
        wrapped(&s, "prune", borg_env, &repo, prune),
    ));
    let child = wrapped(
        &s,
        "backup",
        borg_env,
        &repo,
        &["borg", "create", "::a4", sources[0].to_str().unwrap()],
    );
    children.push(("borg create ::a4".into(), child));
    for (what, child) in children {
        ok(&child.wait_with_output().unwrap(), &what);
    }
    let mut list = Command::new("borg");
    list.args(["list", "--short"]);
    borg_env(&mut list, &repo, s.dir.path());
    let out = list.output().unwrap();
    ok(&out, "borg list");
    let archives = String::from_utf8_lossy(&out.stdout).lines().count();
    // Five creates and one prune that kept the last two of those before it: 2..=5 remain,
    // depending on where the prune was ranked among the creates.
    assert!((2..=5).contains(&archives), "{archives} archives");
}

/// One tool's part in [`stale_lock_recovered`].
struct LockingTool {
    name: &'static str,
    env: fn(&mut Command, &Path, &Path),
    /// The environment `env` sets, as `K=V` words for `env` in an agent handler.
    env_words: fn(&Path, &Path) -> Vec<String>,
    init: &'static [&'static str],
    /// A backup of the command's stdin (a stream that never ends here).
    backup: &'static [&'static str],
    /// Whether the repository is locked now.
    locked: fn(&Path) -> bool,
    recover: &'static [&'static str],
    prune: &'static [&'static str],
}

const RESTIC: LockingTool = LockingTool {
    name: "restic",
    env: restic_env,
    env_words: |repo, home| {
        vec![
            format!("RESTIC_REPOSITORY={}", repo.display()),
            "RESTIC_PASSWORD=lockgate-test".into(),
            format!("RESTIC_CACHE_DIR={}", home.join("restic-cache").display()),
            format!("HOME={}", home.display()),
        ]
    },
    init: &["restic", "init"],
    backup: &[
        "restic",
        "backup",
        "-q",
        "--stdin",
        "--stdin-filename",
        "stream",
    ],
    locked: |repo| std::fs::read_dir(repo.join("locks")).is_ok_and(|d| d.count() > 0),
    recover: &["restic", "unlock", "--remove-all"],
    prune: &["restic", "forget", "-q", "--keep-last", "1", "--prune"],
};

const BORG: LockingTool = LockingTool {
    name: "borg",
    env: borg_env,
    env_words: |repo, home| {
        vec![
            format!("BORG_REPO={}", repo.display()),
            format!("BORG_BASE_DIR={}", home.display()),
            "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes".into(),
            "BORG_RELOCATED_REPO_ACCESS_IS_OK=yes".into(),
            format!("HOME={}", home.display()),
        ]
    },
    init: &["borg", "init", "--encryption", "none"],
    backup: &["borg", "create", "::stream", "-"],
    locked: |repo| repo.join("lock.exclusive").exists(),
    recover: &["borg", "break-lock"],
    prune: &["borg", "prune", "--keep-last", "1"],
};

/// A holder whose host vanished while the tool held its repository's lock (the wrapper
/// frozen, the tool killed with SIGKILL, then the wrapper gone): the lock stays; once the
/// lease runs out the server queues the conflict's recovery, an agent runs it alone, and
/// the next prune through lockgate succeeds with no manual step. (A plain `kill -9` of the
/// wrapper gives the tool its stop signal: `run.rs` shows it.)
fn stale_lock_recovered(t: &LockingTool) {
    tool(t.name);
    let _serial = crate::agent::serial();
    let kind = format!("{}-recover", t.name);
    let s = Srv::start(&format!(
        "[global]\nmax_running = 8\n[leases]\nttl = \"2s\"\n[[conflict]]\nkeys = [\"repo\"]\nexclusive = \"kind in (prune, check, {kind})\"\nrecover = \"{kind}\"\n"
    ));
    let repo = s.path("repo");
    let mut init = Command::new(t.init[0]);
    init.args(&t.init[1..]);
    (t.env)(&mut init, &repo, s.dir.path());
    ok(&init.output().unwrap(), "init");
    // An agent that can reach the repository runs the recovery kind.
    let mut words = vec!["env".to_string()];
    words.extend((t.env_words)(&repo, s.dir.path()));
    words.extend(t.recover.iter().map(|w| w.to_string()));
    let handler = format!(
        "[handlers.{kind}]\nrun = {}\n",
        serde_json::to_string(&words).unwrap()
    );
    let _agent = crate::agent::start_agent(&s, "n1", &[], &handler);
    // The tool (exec'd by a shell that records its pid) reads a stream that never ends:
    // it holds its lock until it dies.
    let pidfile = s.path("tool.pid");
    let script = format!("echo $$ > {}; exec \"$@\"", pidfile.display());
    let mut args = vec![
        "--kind",
        "backup",
        "--attr",
        "repo=main",
        "--stop-signal",
        "INT",
        "--",
        "sh",
        "-c",
        &script,
        "sh",
    ];
    args.extend_from_slice(t.backup);
    let mut c = s.run(&args);
    (t.env)(&mut c, &repo, s.dir.path());
    let mut wrapper = c
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut feed = wrapper.stdin.take().unwrap();
    std::io::Write::write_all(&mut feed, &[7u8; 1 << 20]).unwrap();
    let locked = || (t.locked)(&repo);
    assert!(
        eventually(Duration::from_secs(20), locked),
        "{} took its lock",
        t.name
    );
    // The host vanishes: the wrapper freezes, the tool dies of SIGKILL, the wrapper is gone.
    let pid = crate::harness::read_pid(&pidfile).expect("the tool's pid");
    crate::harness::signal(wrapper.id(), rustix::process::Signal::STOP);
    lockgate_client::child::signal_group(pid, rustix::process::Signal::KILL);
    assert!(eventually(Duration::from_secs(5), || crate::harness::gone(
        pid
    )));
    wrapper.kill().unwrap();
    wrapper.wait().unwrap();
    drop(feed);
    std::thread::sleep(Duration::from_millis(200));
    assert!(locked(), "the stale lock is left behind");
    let admin = s.admin();
    let recovered = || {
        admin
            .jobs(&Default::default())
            .unwrap()
            .jobs
            .into_iter()
            .find(|j| j.kind == kind && j.is_final())
    };
    assert!(
        eventually(Duration::from_secs(30), || recovered().is_some()),
        "no recovery ran: {:?}",
        admin.jobs(&Default::default()).unwrap().jobs
    );
    let rec = recovered().unwrap();
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    assert_eq!(rec.owner, lockgate_core::engine::RECOVER_OWNER);
    assert_eq!(rec.attrs.get("repo").map(String::as_str), Some("main"));
    let lost = admin.job(1).unwrap();
    assert_eq!(lost.state, JobState::Lost);
    let at = |v: &Option<String>| lockgate_api::time::parse(v.as_deref().unwrap()).unwrap();
    assert!(
        at(&rec.started_at) >= at(&lost.finished_at),
        "after the loss"
    );
    assert!(!locked(), "the recovery removed the stale lock");
    // The next exclusive command through lockgate succeeds without a manual unlock.
    let prune = wrapped(&s, "prune", t.env, &repo, t.prune);
    ok(
        &prune.wait_with_output().unwrap(),
        "the prune after the recovery",
    );
}

#[test]
fn a_killed_wrapper_s_stale_restic_lock_is_recovered_alone_before_the_next_prune() {
    stale_lock_recovered(&RESTIC);
}

#[test]
fn a_killed_wrapper_s_stale_borg_lock_is_broken_alone_before_the_next_prune() {
    stale_lock_recovered(&BORG);
}
