//! Pod hooks: Velero-style annotations, run through an exec template as an argv.
//!
//! A pod's hook for phase `pre` (or `post`, or `restore`: `post.hook.restore.lockgate.io`, run
//! once a restore's data is back) comes from the annotations
//! `pre.hook.backup.lockgate.io/command` (a JSON array, or a plain string taken as a
//! one-element command), `.../container` (default: the pod's first container),
//! `.../on-error` (`Continue` or `Fail`, default `Fail`) and `.../timeout` (a Go-style
//! duration such as `30s` or `1m30s`, default [`DEFAULT_HOOK_TIMEOUT`]).
//!
//! Invariants:
//! - a hook never runs through a shell: the template's elements are the argv, with
//!   `{namespace}`, `{pod}` and `{container}` replaced inside elements, and an element that
//!   is exactly `{command}` replaced by the hook's own argv elements;
//! - a hook runs in its own process group; at its timeout the whole group is killed, so a
//!   shell's children do not outlive it;
//! - a hook's output is kept only up to [`OUTPUT_LIMIT`] bytes per stream.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Timeout of a hook whose annotations give none (Velero's default).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of stdout and of stderr kept per hook.
pub const OUTPUT_LIMIT: usize = 4096;
/// The exec template used when none is configured.
pub const DEFAULT_EXEC_TEMPLATE: &[&str] = &[
    "kubectl",
    "exec",
    "-n",
    "{namespace}",
    "{pod}",
    "-c",
    "{container}",
    "--",
    "{command}",
];

/// Before or after the block's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookPhase {
    /// Before any item of the block.
    Pre,
    /// After the block's snapshots are taken and pod-volume backups finished.
    Post,
    /// After a restore's files are written and its volumes' data is back
    /// (`post.hook.restore.lockgate.io`, Velero's `post.hook.restore.velero.io`).
    Restore,
}

impl HookPhase {
    /// The annotation prefix of this phase (`pre.hook.backup.lockgate.io`).
    pub fn annotation_prefix(self) -> &'static str {
        self.prefix()
    }

    fn prefix(self) -> &'static str {
        match self {
            HookPhase::Pre => "pre.hook.backup.lockgate.io",
            HookPhase::Post => "post.hook.backup.lockgate.io",
            HookPhase::Restore => "post.hook.restore.lockgate.io",
        }
    }
}

/// What a failing hook does to its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnError {
    /// Record the failure and go on.
    Continue,
    /// Skip the rest of the block and mark the backup `PartiallyFailed`.
    Fail,
}

/// One pod's hook for one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Phase.
    pub phase: HookPhase,
    /// Container to run in.
    pub container: String,
    /// The hook's argv.
    pub command: Vec<String>,
    /// What a failure does.
    pub on_error: OnError,
    /// Killed after this long.
    pub timeout: Duration,
}

/// A pod's hook for `phase`, `Ok(None)` when it has none.
///
/// # Errors
/// A message naming the malformed annotation and what was expected; `on_error` of the
/// error is the annotation's (default `Fail`) so the caller can honour it.
pub fn pod_hook(pod: &Value, phase: HookPhase) -> Result<Option<Hook>, (String, OnError)> {
    let ann = &pod["metadata"]["annotations"];
    let get = |key: &str| ann[format!("{}/{key}", phase.prefix())].as_str();
    let Some(command) = get("command") else {
        return Ok(None);
    };
    let on_error = match get("on-error") {
        None | Some("Fail") => OnError::Fail,
        Some("Continue") => OnError::Continue,
        Some(other) => {
            let msg = format!(
                "annotation {}/on-error is {other:?}: expected \"Continue\" or \"Fail\"",
                phase.prefix()
            );
            return Err((msg, OnError::Fail));
        }
    };
    let bad = |key: &str, msg: String| {
        (
            format!("annotation {}/{key}: {msg}", phase.prefix()),
            on_error,
        )
    };
    let command = parse_command(command).map_err(|m| bad("command", m))?;
    let timeout = match get("timeout") {
        Some(t) => parse_go_duration(t).map_err(|m| bad("timeout", m))?,
        None => DEFAULT_HOOK_TIMEOUT,
    };
    let container = match get("container") {
        Some(c) => c.to_string(),
        None => pod["spec"]["containers"][0]["name"]
            .as_str()
            .ok_or_else(|| {
                bad(
                    "container",
                    "not given and the pod has no containers".into(),
                )
            })?
            .to_string(),
    };
    Ok(Some(Hook {
        phase,
        container,
        command,
        on_error,
        timeout,
    }))
}

fn parse_command(text: &str) -> Result<Vec<String>, String> {
    let t = text.trim();
    if !t.starts_with('[') {
        return if t.is_empty() {
            Err("empty command".into())
        } else {
            Ok(vec![t.to_string()])
        };
    }
    let argv: Vec<String> = serde_json::from_str(t)
        .map_err(|e| format!("{t:?} is not a JSON array of strings: {e}"))?;
    if argv.is_empty() {
        return Err("empty command array".into());
    }
    Ok(argv)
}

/// Parses a Go-style duration: `30s`, `1m30s`, `500ms`, `2h`; a bare number is seconds.
///
/// # Errors
/// A message giving the text and the expected form.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let expected =
        || format!("invalid duration {text:?}: expected e.g. \"30s\", \"1m30s\", \"500ms\"");
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let num: f64 = rest[..digits].parse().map_err(|_| expected())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(expected()),
        };
        total += Duration::from_secs_f64(num * scale);
        rest = &rest[unit_len..];
    }
    if t.is_empty() {
        return Err(expected());
    }
    Ok(total)
}

/// Expands an exec template for one hook.
pub fn expand_template(
    template: &[String],
    namespace: &str,
    pod: &str,
    container: &str,
    command: &[String],
) -> Vec<String> {
    let mut argv = Vec::with_capacity(template.len() + command.len());
    for part in template {
        if part == "{command}" {
            argv.extend(command.iter().cloned());
        } else {
            argv.push(
                part.replace("{namespace}", namespace)
                    .replace("{pod}", pod)
                    .replace("{container}", container)
                    .replace("{command}", &command.join(" ")),
            );
        }
    }
    argv
}

/// How a hook process ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookRun {
    /// Exit code, `None` when killed or not started.
    pub exit_code: Option<i32>,
    /// `None` when the hook succeeded, else why not.
    pub error: Option<String>,
    /// Wall time.
    pub duration: Duration,
    /// First [`OUTPUT_LIMIT`] bytes of stdout.
    pub stdout: String,
    /// First [`OUTPUT_LIMIT`] bytes of stderr.
    pub stderr: String,
}

/// Runs `argv` with a timeout, killing its process group when it expires.
pub fn run(argv: &[String], timeout: Duration) -> HookRun {
    let start = Instant::now();
    let mut out = HookRun::default();
    let Some((program, args)) = argv.split_first() else {
        out.error = Some("empty exec template".into());
        return out;
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(format!("cannot start {program:?}: {e}"));
            return out;
        }
    };
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_until(&mut child, start + timeout);
    out.duration = start.elapsed();
    match status {
        Some(Ok(s)) => {
            out.exit_code = s.code();
            if !s.success() {
                out.error = Some(format!("{program:?} exited with {s}"));
            }
        }
        Some(Err(e)) => out.error = Some(format!("cannot wait for {program:?}: {e}")),
        None => out.error = Some(format!("timed out after {timeout:?}; killed")),
    }
    out.stdout = stdout
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_default();
    out.stderr = stderr
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_default();
    out
}

/// Waits for the child until `deadline`; `None` when it had to be killed.
fn wait_until(
    child: &mut std::process::Child,
    deadline: Instant,
) -> Option<std::io::Result<std::process::ExitStatus>> {
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(Ok(s)),
            Err(e) => return Some(Err(e)),
            Ok(None) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_child(child),
                rustix::process::Signal::KILL,
            );
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Reads a stream to its end on a thread, keeping the first [`OUTPUT_LIMIT`] bytes.
fn reader(stream: Option<impl Read + Send + 'static>) -> crossbeam_channel::Receiver<String> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    if let Some(mut s) = stream {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            let _ = tx.send(String::from_utf8_lossy(&kept).into_owned());
        });
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case("30s", 30_000)]
    #[case("1m30s", 90_000)]
    #[case("500ms", 500)]
    #[case("2h", 7_200_000)]
    #[case("10", 10_000)]
    #[case("1.5s", 1_500)]
    fn go_durations_parse(#[case] text: &str, #[case] ms: u128) {
        assert_eq!(parse_go_duration(text).unwrap().as_millis(), ms);
    }

    #[rstest]
    #[case("")]
    #[case("ten")]
    #[case("5 weeks")]
    #[case("3d")]
    fn bad_go_durations_say_what_was_expected(#[case] text: &str) {
        assert!(parse_go_duration(text).unwrap_err().contains("expected"));
    }

    #[test]
    fn hook_from_annotations_with_defaults() {
        let pod = json!({"metadata": {"annotations": {
            "pre.hook.backup.lockgate.io/command": "[\"/sbin/fsfreeze\", \"--freeze\", \"/data\"]"}},
            "spec": {"containers": [{"name": "db"}, {"name": "sidecar"}]}});
        let hook = pod_hook(&pod, HookPhase::Pre).unwrap().unwrap();
        assert_eq!(hook.container, "db");
        assert_eq!(hook.command, vec!["/sbin/fsfreeze", "--freeze", "/data"]);
        assert_eq!(hook.on_error, OnError::Fail);
        assert_eq!(hook.timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(pod_hook(&pod, HookPhase::Post).unwrap(), None);
    }

    #[test]
    fn malformed_hook_annotation_names_the_annotation() {
        let pod = json!({"metadata": {"annotations": {
            "post.hook.backup.lockgate.io/command": "[\"unterminated",
            "post.hook.backup.lockgate.io/on-error": "Continue"}}});
        let (msg, on_error) = pod_hook(&pod, HookPhase::Post).unwrap_err();
        assert!(
            msg.contains("post.hook.backup.lockgate.io/command"),
            "{msg}"
        );
        assert_eq!(on_error, OnError::Continue);
    }

    #[test]
    fn template_expands_command_as_separate_arguments() {
        let t: Vec<String> = DEFAULT_EXEC_TEMPLATE
            .iter()
            .map(|s| s.to_string())
            .collect();
        let argv = expand_template(
            &t,
            "app",
            "web-0",
            "db",
            &["sh".into(), "-c".into(), "sync; echo ok".into()],
        );
        assert_eq!(
            argv,
            [
                "kubectl",
                "exec",
                "-n",
                "app",
                "web-0",
                "-c",
                "db",
                "--",
                "sh",
                "-c",
                "sync; echo ok"
            ]
        );
    }

    #[test]
    fn run_reports_exit_code_and_output() {
        let ok = run(
            &["sh".into(), "-c".into(), "echo hi; exit 3".into()],
            Duration::from_secs(5),
        );
        assert_eq!(ok.exit_code, Some(3));
        assert_eq!(ok.stdout, "hi\n");
        assert!(ok.error.unwrap().contains("exit"));
        let missing = run(&["/no/such/program".into()], Duration::from_secs(5));
        assert!(missing.error.unwrap().contains("cannot start"));
    }

    #[test]
    fn run_kills_the_process_group_at_the_timeout() {
        let r = run(
            &["sh".into(), "-c".into(), "sleep 30; echo late".into()],
            Duration::from_millis(200),
        );
        assert!(r.error.unwrap().contains("timed out"));
        assert!(r.duration < Duration::from_secs(5), "{:?}", r.duration);
    }
}
