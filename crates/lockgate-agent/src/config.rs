//! `agent.toml`: which command runs each job kind on this node (api.md, `lockgate agent`).
//!
//! ```toml
//! [handlers.data-upload]                 # one table per job kind this agent runs
//! prepare = ["/usr/lib/lockgate/expose-snapshot", "{attr.pvc}"]   # two-stage kinds only
//! run = ["kopia", "snapshot", "create", "/mnt/{attr.pvc}"]
//! # allow_dash_values = false          # a value like "--remove-files" may not begin an argument
//! [handlers.verify]
//! run = ["proxmox-backup-client", "verify", "{attr.group}"]
//! [handlers.restic-backup]
//! run = ["restic", "backup", "/srv"]
//! stop_signal = "INT"                  # restic removes its lock only on SIGINT (default TERM)
//! stop_grace = "30s"                   # default: [agent].grace
//!
//! [agent]                                # optional; the defaults are shown
//! grace = "10s"
//! output_lines = 20
//! unreachable_grace = "5m"
//! ```
//!
//! Two phases, as for the policy: [`RawConfig`] is what serde reads (unknown keys are
//! refused), [`AgentConfig::validate`] turns it into the validated type the agent takes, so
//! a bad template or an empty command never reaches a job. Errors name the file, the line
//! where there is one, the key and the value given.

use crate::template::{Template, TemplateError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// `agent.toml` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// One table per job kind.
    #[serde(default)]
    pub handlers: BTreeMap<String, RawHandler>,
    /// Agent settings.
    #[serde(default)]
    pub agent: RawAgent,
}

/// `[handlers.KIND]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHandler {
    /// The prepare step of a two-stage kind.
    pub prepare: Option<Spanned<Vec<String>>>,
    /// The run step (required).
    pub run: Option<Spanned<Vec<String>>>,
    /// See [`Handler::allow_dash_values`]. Default false.
    #[serde(default)]
    pub allow_dash_values: bool,
    /// See [`Handler::stop_signal`]. Default `"TERM"`.
    pub stop_signal: Option<Spanned<String>>,
    /// See [`Handler::stop_grace`]. Default: `[agent].grace`.
    pub stop_grace: Option<Spanned<String>>,
}

/// `[agent]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    /// See [`AgentConfig::grace`].
    pub grace: Option<Spanned<String>>,
    /// See [`AgentConfig::output_lines`].
    pub output_lines: Option<usize>,
    /// See [`AgentConfig::unreachable_grace`].
    pub unreachable_grace: Option<Spanned<String>>,
}

/// The commands of one job kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    /// The prepare step (two-stage jobs). When a two-stage job's kind has none, the agent
    /// reports `prepared` at once and runs `run`.
    pub prepare: Option<Vec<Template>>,
    /// The run step.
    pub run: Vec<Template>,
    /// An attribute value may begin an argument with `-` (default false: such a job fails
    /// unstarted, since the command could read the value as an option). Set it only for a
    /// command that takes such values safely, e.g. after a `--`.
    pub allow_dash_values: bool,
    /// The signal that stops the handler (cancel, preemption, lease lost, agent stopping):
    /// a name (`INT`, `TERM`, `HUP`, `QUIT`, `USR1`, ...) or a number. Default TERM.
    pub stop_signal: lockgate_client::child::Signal,
    /// Time from the stop signal to SIGKILL; `None`: [`AgentConfig::grace`].
    pub stop_grace: Option<Duration>,
}

/// The two steps of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Expose, snapshot, create the backup volume (two-stage jobs).
    Prepare,
    /// Move the data.
    Run,
}

impl Stage {
    /// `prepare` or `run`, as `LOCKGATE_STAGE` and the assignments write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Prepare => "prepare",
            Stage::Run => "run",
        }
    }

    /// Parses `prepare` or `run`.
    pub fn parse(text: &str) -> Option<Stage> {
        match text {
            "prepare" => Some(Stage::Prepare),
            "run" => Some(Stage::Run),
            _ => None,
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Handler {
    /// The argv template of a stage (`None`: a prepare step this kind does not have).
    pub fn argv(&self, stage: Stage) -> Option<&[Template]> {
        match stage {
            Stage::Prepare => self.prepare.as_deref(),
            Stage::Run => Some(&self.run),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Handlers by job kind. The agent registers exactly these kinds and takes no others.
    pub handlers: BTreeMap<String, Handler>,
    /// After SIGTERM to a handler that must stop (cancel requested, lease lost, agent
    /// stopping), wait this long before SIGKILL. Default 10 s: long enough for a backup
    /// tool to close its repository cleanly, short enough that a lost slot is not held.
    pub grace: Duration,
    /// How many of the handler's last output lines (stdout and stderr) go into the job's
    /// finish message. Default 20: enough for an error, small enough for the event log.
    pub output_lines: usize,
    /// How long a handler keeps running while the server cannot be reached. Default 5 min.
    /// The server gives every lease a fresh TTL when it restarts, so a restart does not
    /// cost the work; but a server that is up and cut off from this agent expires the
    /// lease after its TTL and may hand the slot to someone else, so past this bound the
    /// agent stops the handler. Raise it to favour long transfers over exactness during
    /// network partitions; lower it towards the lease TTL for the opposite.
    pub unreachable_grace: Duration,
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            handlers: BTreeMap::new(),
            grace: Duration::from_secs(10),
            output_lines: 20,
            unreachable_grace: Duration::from_secs(300),
        }
    }
}

/// Why `agent.toml` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {file}: {message}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        message: String,
    },
    /// Not TOML, an unknown key, or a value of the wrong type.
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        /// The file.
        file: String,
        /// 1-based line, where known.
        line: Option<usize>,
        /// The parser's message (it names the key).
        message: String,
    },
    /// A value is invalid.
    #[error("{file}{}: {field}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line, where known.
        line: Option<usize>,
        /// The key (`handlers.data-upload.run[1]`).
        field: String,
        /// What was given and what is expected.
        message: String,
    },
}

/// Where `program` is found ([`AgentConfig::check_programs`]); what is wrong otherwise.
fn find_program(program: &str, path: Option<&OsStr>) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match p.try_exists() {
            Ok(true) if executable(&p) => Ok(p),
            Ok(true) => Err(format!("the program {program:?} is not an executable file")),
            _ => Err(format!("the program {program:?} does not exist")),
        };
    }
    let dirs = path.unwrap_or_default();
    std::env::split_paths(dirs)
        .map(|d| d.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| {
            format!(
                "the program {program:?} is not found in PATH ({}): install it, or write its full path",
                dirs.to_string_lossy()
            )
        })
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl AgentConfig {
    /// Reads and validates a file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and key.
    pub fn load(path: &Path) -> Result<AgentConfig, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
        let cfg = AgentConfig::from_toml(&text, &file)?;
        cfg.check_programs(&file, std::env::var_os("PATH").as_deref())?;
        Ok(cfg)
    }

    /// Checks that every handler's program exists on this machine and may be executed, so
    /// that a typo or a tool not yet installed is refused when the agent starts rather than
    /// failing each job it takes. A program with a `/` is a path (a relative one from the
    /// working directory); any other is looked up in `path` (the agent's `PATH`, which its
    /// handlers inherit). A program that is a placeholder (`{attr.tool}`) is not checked.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the handler's key (`handlers.verify.run[0]`), the
    /// program and where it was looked for.
    pub fn check_programs(&self, file: &str, path: Option<&OsStr>) -> Result<(), ConfigError> {
        for (kind, h) in &self.handlers {
            let stages = [("prepare", h.prepare.as_deref()), ("run", Some(&h.run[..]))];
            for (stage, argv) in stages {
                let Some(program) = argv.and_then(|a| a.first()).and_then(Template::literal) else {
                    continue;
                };
                if let Err(message) = find_program(&program, path) {
                    return Err(ConfigError::Invalid {
                        file: file.to_string(),
                        line: None,
                        field: format!("handlers.{kind}.{stage}[0]"),
                        message,
                    });
                }
            }
        }
        Ok(())
    }

    /// Parses and validates a document; `file` names it in errors.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and key.
    pub fn from_toml(text: &str, file: &str) -> Result<AgentConfig, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            line: e.span().map(|s| line_of(text, s.start)),
            message: e.message().to_string(),
        })?;
        AgentConfig::validate(raw, text, file)
    }

    /// Turns the raw document into the validated configuration. `text` (the document)
    /// gives line numbers.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`].
    pub fn validate(raw: RawConfig, text: &str, file: &str) -> Result<AgentConfig, ConfigError> {
        let invalid = |line: Option<usize>, field: String, message: String| ConfigError::Invalid {
            file: file.to_string(),
            line,
            field,
            message,
        };
        let mut cfg = AgentConfig::default();
        for (kind, h) in raw.handlers {
            if kind.is_empty() || kind.contains(|c: char| c.is_whitespace() || c == ',') {
                return Err(invalid(
                    None,
                    format!("handlers.{kind:?}"),
                    format!("invalid job kind {kind:?}: a kind has no whitespace or commas"),
                ));
            }
            let argv = |field: &str, v: &Spanned<Vec<String>>| {
                let line = Some(line_of(text, v.span().start));
                let key = format!("handlers.{kind}.{field}");
                if v.get_ref().is_empty() {
                    return Err(invalid(
                        line,
                        key,
                        "the command is empty: give the program and its arguments, e.g. [\"kopia\", \"snapshot\", \"create\", \"/mnt/{attr.pvc}\"]".into(),
                    ));
                }
                if v.get_ref()[0].trim().is_empty() {
                    return Err(invalid(
                        line,
                        format!("{key}[0]"),
                        format!("the program name {:?} is empty", v.get_ref()[0]),
                    ));
                }
                v.get_ref()
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        Template::parse(a).map_err(|e: TemplateError| {
                            invalid(line, format!("{key}[{i}]"), e.to_string())
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            let Some(run) = &h.run else {
                return Err(invalid(
                    None,
                    format!("handlers.{kind}.run"),
                    "missing: every handler needs a run command (prepare is optional, for two-stage kinds)".into(),
                ));
            };
            let stop_signal = match &h.stop_signal {
                None => lockgate_client::child::Signal::TERM,
                Some(v) => lockgate_client::parse_signal(v.get_ref()).map_err(|m| {
                    invalid(
                        Some(line_of(text, v.span().start)),
                        format!("handlers.{kind}.stop_signal"),
                        m,
                    )
                })?,
            };
            let stop_grace = match &h.stop_grace {
                None => None,
                Some(v) => Some(
                    lockgate_core::time::parse_duration(v.get_ref()).map_err(|m| {
                        invalid(
                            Some(line_of(text, v.span().start)),
                            format!("handlers.{kind}.stop_grace"),
                            format!("{:?}: {m}", v.get_ref()),
                        )
                    })?,
                ),
            };
            let handler = Handler {
                run: argv("run", run)?,
                prepare: h.prepare.as_ref().map(|p| argv("prepare", p)).transpose()?,
                allow_dash_values: h.allow_dash_values,
                stop_signal,
                stop_grace,
            };
            cfg.handlers.insert(kind, handler);
        }
        let duration = |key: &str, v: &Spanned<String>| {
            lockgate_core::time::parse_duration(v.get_ref()).map_err(|m| {
                invalid(
                    Some(line_of(text, v.span().start)),
                    format!("agent.{key}"),
                    format!("{:?}: {m}", v.get_ref()),
                )
            })
        };
        if let Some(g) = &raw.agent.grace {
            cfg.grace = duration("grace", g)?;
        }
        if let Some(g) = &raw.agent.unreachable_grace {
            cfg.unreachable_grace = duration("unreachable_grace", g)?;
        }
        if let Some(n) = raw.agent.output_lines {
            cfg.output_lines = n;
        }
        Ok(cfg)
    }

    /// The kinds this agent has handlers for (what it registers).
    pub fn kinds(&self) -> std::collections::BTreeSet<String> {
        self.handlers.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn reads_the_api_md_example() {
        let cfg = AgentConfig::from_toml(
            r#"
[handlers.data-upload]                 # one table per job kind this agent runs
prepare = ["/usr/lib/lockgate/expose-snapshot", "{attr.pvc}"]   # two-stage kinds only
run = ["kopia", "snapshot", "create", "/mnt/{attr.pvc}"]
[handlers.verify]
run = ["proxmox-backup-client", "verify", "{attr.group}"]
"#,
            "agent.toml",
        )
        .unwrap();
        assert_eq!(
            cfg.kinds().into_iter().collect::<Vec<_>>(),
            ["data-upload", "verify"]
        );
        let up = &cfg.handlers["data-upload"];
        assert_eq!(up.prepare.as_ref().unwrap()[1].source(), "{attr.pvc}");
        assert_eq!(up.run[3].attrs().collect::<Vec<_>>(), ["pvc"]);
        assert!(cfg.handlers["verify"].prepare.is_none());
        assert_eq!(cfg.grace, Duration::from_secs(10));
    }

    #[test]
    fn agent_settings() {
        let cfg = AgentConfig::from_toml(
            "[agent]\ngrace = \"250ms\"\noutput_lines = 3\nunreachable_grace = \"1m\"\n",
            "a.toml",
        )
        .unwrap();
        assert_eq!(cfg.grace, Duration::from_millis(250));
        assert_eq!(cfg.output_lines, 3);
        assert_eq!(cfg.unreachable_grace, Duration::from_secs(60));
        assert!(cfg.handlers.is_empty());
    }

    #[test]
    fn programs_that_do_not_exist_or_cannot_run_are_refused_naming_the_handler() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("notes.txt");
        std::fs::write(&plain, "x").unwrap();
        let dirs = format!("/nonexistent:{}", dir.path().display());
        let check = |toml: &str| {
            AgentConfig::from_toml(toml, "agent.toml")
                .unwrap()
                .check_programs("agent.toml", Some(OsStr::new(&dirs)))
                .map_err(|e| e.to_string())
        };
        // The check reads the PATH it is given: `sh` is not in this one.
        assert_eq!(
            check("[handlers.x]\nrun = [\"sh\"]\n"),
            Err(format!("agent.toml: handlers.x.run[0]: the program \"sh\" is not found in PATH ({dirs}): install it, or write its full path"))
        );
        assert_eq!(
            check("[handlers.x]\nrun = [\"/bin/sh\", \"-c\", \"true\"]\n"),
            Ok(())
        );
        assert_eq!(check("[handlers.x]\nrun = [\"{attr.tool}\"]\n"), Ok(()));
        assert_eq!(
            check("[handlers.backup]\nprepare = [\"/no/such/snapshot\"]\nrun = [\"/bin/sh\"]\n"),
            Err("agent.toml: handlers.backup.prepare[0]: the program \"/no/such/snapshot\" does not exist".into())
        );
        let file = plain.display().to_string();
        assert_eq!(
            check(&format!("[handlers.verify]\nrun = [{file:?}]\n")),
            Err(format!(
                "agent.toml: handlers.verify.run[0]: the program {file:?} is not an executable file"
            ))
        );
    }

    #[rstest]
    #[case(
        "[handlers.x]\nrun = []\n",
        "agent.toml:2: handlers.x.run: the command is empty"
    )]
    #[case(
        "[handlers.x]\nprepare = [\"a\"]\n",
        "agent.toml: handlers.x.run: missing"
    )]
    #[case(
        "[handlers.x]\nrun = [\"\"]\n",
        "agent.toml:2: handlers.x.run[0]: the program name \"\" is empty"
    )]
    #[case(
        "[handlers.x]\n\nrun = [\"cp\", \"{attr.a}\", \"{job.name}\"]\n",
        "agent.toml:3: handlers.x.run[2]: unknown placeholder {job.name}"
    )]
    #[case(
        "[handlers.x]\nrun = [\"cp\"]\nshell = true\n",
        "agent.toml:3: unknown field `shell`"
    )]
    #[case(
        "[handlers.x]\nrun = \"cp a b\"\n",
        "agent.toml:2: invalid type: string \"cp a b\", expected a sequence"
    )]
    #[case("[agent]\ngrace = \"soon\"\n", "agent.toml:2: agent.grace: \"soon\"")]
    #[case(
        "[handler.x]\nrun = [\"cp\"]\n",
        "agent.toml:1: unknown field `handler`"
    )]
    fn refuses(#[case] text: &str, #[case] want: &str) {
        let e = AgentConfig::from_toml(text, "agent.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(want), "{e}\n  does not start with\n{want}");
    }
}
