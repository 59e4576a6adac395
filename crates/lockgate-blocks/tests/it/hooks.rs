//! Hooks run as real processes through the exec template; a fake data mover records when
//! snapshots are taken. Every event goes to one log file, in the order it happened.

use crate::fixtures::*;
use lockgate_blocks::{
    BackupConfig, DataMover, ItemRef, MoverError, MoverHandle, Phase, PlanOptions, PodVolumeBackup,
    PvcUpload,
};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"#!/bin/sh
# $1 = namespace/pod, $2 = container, then the hook's own argv.
pod="$1"; container="$2"; shift 2
echo "HOOK $pod $container $*" >> "$LOG"
case "$1" in
  fail) echo "cannot freeze" >&2; exit 7 ;;
  hang) sleep 30 ;;
esac
"#;

struct Env {
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.log");
        std::fs::write(
            dir.path().join("hook.sh"),
            SCRIPT.replace("$LOG", &log.display().to_string()),
        )
        .unwrap();
        Env { dir, log }
    }

    fn config(&self, mover: Arc<dyn DataMover>) -> BackupConfig {
        let mut c = BackupConfig::new("hooked", self.dir.path().join("hooked.tar.gz"), mover);
        c.exec_template = names(&[
            "/bin/sh",
            &self.dir.path().join("hook.sh").display().to_string(),
            "{namespace}/{pod}",
            "{container}",
            "{command}",
        ]);
        let log = self.log.clone();
        c.item_action = Some(Arc::new(move |item: &ItemRef<'_>, _: &mut Value| {
            append(&log, &format!("ITEM {}", item.name));
            Ok(())
        }));
        c
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn append(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// A data mover whose snapshots take `delay`, logging every step.
struct LogMover {
    log: PathBuf,
    delay: Duration,
}

struct LogHandle {
    log: PathBuf,
    what: String,
    delay: Duration,
}

impl MoverHandle for LogHandle {
    fn wait_snapshot_taken(&mut self) -> Result<(), MoverError> {
        std::thread::sleep(self.delay);
        append(&self.log, &format!("SNAPSHOT {}", self.what));
        Ok(())
    }
    fn wait_finished(&mut self) -> Result<(), MoverError> {
        std::thread::sleep(self.delay);
        append(&self.log, &format!("DONE {}", self.what));
        Ok(())
    }
}

impl DataMover for LogMover {
    fn submit_pvc_upload(&self, r: &PvcUpload) -> Result<Box<dyn MoverHandle>, MoverError> {
        append(
            &self.log,
            &format!("SUBMIT {}/{} {}", r.namespace, r.pvc, r.volume_name),
        );
        Ok(Box::new(LogHandle {
            log: self.log.clone(),
            what: r.pvc.clone(),
            delay: self.delay,
        }))
    }
    fn submit_pod_volume_backup(
        &self,
        r: &PodVolumeBackup,
    ) -> Result<Box<dyn MoverHandle>, MoverError> {
        append(
            &self.log,
            &format!(
                "SUBMIT-PVB {}/{} {} on {}",
                r.namespace, r.pod, r.volume, r.node
            ),
        );
        Ok(Box::new(LogHandle {
            log: self.log.clone(),
            what: format!("pvb {}", r.volume),
            delay: self.delay,
        }))
    }
}

fn hooked(pod_value: Value, pre: &str, post: &str) -> Value {
    with_annotations(
        pod_value,
        &[
            ("pre.hook.backup.lockgate.io/command", pre),
            ("post.hook.backup.lockgate.io/command", post),
        ],
    )
}

fn pos(lines: &[String], prefix: &str) -> usize {
    lines
        .iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in {lines:#?}"))
}

#[test]
fn pre_hooks_of_all_pods_run_before_any_item_and_post_hooks_after_snapshots() {
    let env = Env::new();
    let items = [
        hooked(
            pod("app", "writer", &["shared"]),
            r#"["freeze"]"#,
            r#"["unfreeze"]"#,
        ),
        hooked(
            pod("app", "reader", &["shared"]),
            r#"["freeze"]"#,
            r#"["unfreeze"]"#,
        ),
        pvc("app", "shared", Some("pv-shared")),
        pv("pv-shared", "app", "shared"),
    ];
    let plan = load(env.dir.path(), &items, &PlanOptions::default());
    let mover = Arc::new(LogMover {
        log: env.log.clone(),
        delay: Duration::from_millis(150),
    });
    let result = lockgate_blocks::run_to_completion(plan, env.config(mover), 2).unwrap();
    assert_eq!(result.phase, Phase::Completed, "{:#?}", result.reasons);
    let lines = env.lines();
    assert_eq!(
        &lines[..5],
        &names(&[
            "HOOK app/reader main freeze",
            "HOOK app/writer main freeze",
            "ITEM pods/app/reader",
            "ITEM pods/app/writer",
            "ITEM persistentvolumeclaims/app/shared",
        ])[..]
    );
    let snapshot = pos(&lines, "SNAPSHOT shared");
    assert!(pos(&lines, "ITEM persistentvolumes/pv-shared") < snapshot);
    assert_eq!(
        &lines[snapshot + 1..snapshot + 3],
        &names(&[
            "HOOK app/reader main unfreeze",
            "HOOK app/writer main unfreeze"
        ])[..]
    );
    assert_eq!(
        lines.last().unwrap(),
        "DONE shared",
        "the upload finishes after the post-hooks, before the backup ends"
    );
    assert_eq!(result.hooks.len(), 4);
    assert_eq!(result.uploads[0].kind, "data-upload");
    assert!(
        result.uploads[0].snapshot_ms.unwrap() >= 150
            && result.uploads[0].finished_ms.unwrap() >= 300
    );
}

#[test]
fn post_hooks_wait_for_pod_volume_backups_to_finish() {
    let env = Env::new();
    let pod_value = with_annotations(
        hooked(
            pod("app", "db", &["data"]),
            r#"["freeze"]"#,
            r#"["unfreeze"]"#,
        ),
        &[("backup.lockgate.io/backup-volumes", "vol-data")],
    );
    let items = [
        pod_value,
        pvc("app", "data", Some("pv-data")),
        pv("pv-data", "app", "data"),
    ];
    let plan = load(env.dir.path(), &items, &PlanOptions::default());
    let mover = Arc::new(LogMover {
        log: env.log.clone(),
        delay: Duration::from_millis(100),
    });
    let result = lockgate_blocks::run_to_completion(plan, env.config(mover), 1).unwrap();
    assert_eq!(result.phase, Phase::Completed, "{:#?}", result.reasons);
    let lines = env.lines();
    assert!(
        lines.contains(&"SUBMIT-PVB app/db vol-data on node-1".to_string()),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("SUBMIT app/data")),
        "a volume backed up file by file gets no data upload"
    );
    assert!(pos(&lines, "DONE pvb vol-data") < pos(&lines, "HOOK app/db main unfreeze"));
    assert_eq!(result.uploads[0].kind, "pod-volume-backup");
}

#[test]
fn a_failing_fail_hook_skips_its_block_and_partially_fails_the_backup() {
    let env = Env::new();
    let items = [
        hooked(
            pod("app", "bad", &["bad-data"]),
            r#"["fail"]"#,
            r#"["unfreeze"]"#,
        ),
        pvc("app", "bad-data", Some("pv-bad")),
        hooked(pod("app", "good", &[]), r#"["freeze"]"#, r#"["unfreeze"]"#),
    ];
    let plan = load(env.dir.path(), &items, &PlanOptions::default());
    let mover = Arc::new(LogMover {
        log: env.log.clone(),
        delay: Duration::ZERO,
    });
    let result = lockgate_blocks::run_to_completion(plan, env.config(mover), 2).unwrap();
    assert_eq!(result.phase, Phase::PartiallyFailed);
    let reason = &result.reasons[0];
    assert!(
        reason.contains("pre-hook of pod app/bad (container \"main\") failed")
            && reason.contains("exit status: 7"),
        "{reason}"
    );
    let skipped: Vec<&str> = result.items.iter().map(|i| i.item.as_str()).collect();
    assert_eq!(
        skipped,
        ["pods/app/bad", "persistentvolumeclaims/app/bad-data"]
    );
    assert_eq!(result.item_counts.completed, 1);
    let hook = result.hooks.iter().find(|h| h.pod == "app/bad").unwrap();
    assert_eq!(
        (hook.exit_code, hook.stderr.as_str()),
        (Some(7), "cannot freeze\n")
    );
    let lines = env.lines();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("HOOK app/bad main unfreeze")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("ITEM pods/app/bad")));
    assert!(lines.contains(&"HOOK app/good main unfreeze".to_string()));
}

#[test]
fn a_failing_continue_hook_is_only_a_warning() {
    let env = Env::new();
    let p = with_annotations(
        hooked(pod("app", "web", &[]), r#"["fail"]"#, r#"["unfreeze"]"#),
        &[("pre.hook.backup.lockgate.io/on-error", "Continue")],
    );
    let plan = load(env.dir.path(), &[p], &PlanOptions::default());
    let result = lockgate_blocks::run_to_completion(
        plan,
        env.config(Arc::new(lockgate_blocks::NoopMover)),
        1,
    )
    .unwrap();
    assert_eq!(result.phase, Phase::Completed);
    assert!(
        result.warnings[0].contains("(on-error Continue)"),
        "{:?}",
        result.warnings
    );
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout() {
    let env = Env::new();
    let p = with_annotations(
        hooked(pod("app", "stuck", &[]), r#"["hang"]"#, r#"["unfreeze"]"#),
        &[("pre.hook.backup.lockgate.io/timeout", "300ms")],
    );
    let plan = load(env.dir.path(), &[p], &PlanOptions::default());
    let start = Instant::now();
    let result = lockgate_blocks::run_to_completion(
        plan,
        env.config(Arc::new(lockgate_blocks::NoopMover)),
        1,
    )
    .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(result.phase, Phase::PartiallyFailed);
    assert!(
        result.reasons[0].contains("timed out after 300ms; killed"),
        "{:?}",
        result.reasons
    );
    let hook = &result.hooks[0];
    assert!(hook.duration_ms >= 300 && hook.exit_code.is_none());
}
