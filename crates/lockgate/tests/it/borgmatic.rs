//! borgmatic (the distribution's, with real borg) gated by `lockgate hold` in its command
//! hooks, as docs/integrations/borg.md configures it: two hosts' borgmatic runs and a
//! prune on one repository are serialised by the policy, and none fails on borg's lock.
//!
//! borgmatic 1.7 runs `before_backup` and `after_backup` around `borg create`, and
//! `before_prune` and `after_prune` around `borg prune`, for each repository (with
//! `{repository}` interpolated), through a shell; `on_error` runs after a failed action.

use crate::harness::{Srv, BIN};
use crate::tools::{source, tool, BORG_POLICY};
use lockgate_core::JobState;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// One host's borgmatic configuration: `name` prefixes its holds.
fn config(s: &Srv, name: &str, repo: &Path, src: &Path) -> std::path::PathBuf {
    let hold = |action: &str, kind: &str| {
        format!("{BIN} hold acquire --name {name}-{action} --kind {kind} --attr repo=main")
    };
    let release = |action: &str, code: u8| {
        format!("{BIN} hold release --name {name}-{action} --exit-code {code}")
    };
    let text = format!(
        r#"location:
    source_directories:
        - {src}
    repositories:
        - {repo}
storage:
    lock_wait: 1
retention:
    keep_daily: 1
hooks:
    before_backup:
        - {before_backup}
    after_backup:
        - {after_backup}
    before_prune:
        - {before_prune}
    after_prune:
        - {after_prune}
    on_error:
        - "{fail_backup} || true"
        - "{fail_prune} || true"
"#,
        src = src.display(),
        repo = repo.display(),
        before_backup = hold("backup", "backup"),
        after_backup = release("backup", 0),
        before_prune = hold("prune", "prune"),
        after_prune = release("prune", 0),
        fail_backup = release("backup", 1),
        fail_prune = release("prune", 1),
    );
    let path = s.path(&format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn borgmatic(s: &Srv, config: &Path, actions: &[&str], out: &Path) -> Child {
    let base = s.cli(&[]);
    let log = std::fs::File::create(out).unwrap();
    Command::new(tool("borgmatic"))
        .args(["--syslog-verbosity", "-1", "--config"])
        .arg(config)
        .args(actions)
        .envs(
            base.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("BORG_BASE_DIR", s.path("borg-base"))
        .env("BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK", "yes")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

#[test]
fn two_borgmatic_runs_and_a_prune_on_one_repository_are_serialised_and_none_fails_on_borgs_lock() {
    let s = Srv::start(BORG_POLICY);
    let repo = s.path("repo");
    let init = Command::new(tool("borg"))
        .args(["init", "-e", "none"])
        .arg(&repo)
        .env("BORG_BASE_DIR", s.path("borg-base"))
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    // Enough data that one create holds borg's lock well past another's 1 s lock_wait.
    let a = config(&s, "host-a", &repo, &source(&s.path("src-a"), 8, 4096, 1));
    let b = config(&s, "host-b", &repo, &source(&s.path("src-b"), 8, 4096, 2));
    let runs = [
        (borgmatic(&s, &a, &["create"], &s.path("a.log")), "a.log"),
        (borgmatic(&s, &b, &["create"], &s.path("b.log")), "b.log"),
        (borgmatic(&s, &a, &["prune"], &s.path("p.log")), "p.log"),
    ];
    for (mut child, log) in runs {
        let status = child.wait().unwrap();
        let text = std::fs::read_to_string(s.path(log)).unwrap();
        assert!(status.success(), "borgmatic {log} failed:\n{text}");
        assert!(
            !text.contains("Failed to create/acquire the lock"),
            "{text}"
        );
    }
    let jobs = s
        .admin()
        .jobs(&lockgate_api::JobQuery::default())
        .unwrap()
        .jobs;
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let mut spans: Vec<(String, String)> = jobs
        .iter()
        .map(|j| {
            assert_eq!(j.state, JobState::Succeeded, "{j:?}");
            (
                j.started_at.clone().unwrap(),
                j.finished_at.clone().unwrap(),
            )
        })
        .collect();
    // One at a time on the repository: each starts after the one before it finished.
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[1].0 >= w[0].1, "overlap: {spans:?}");
    }
}
