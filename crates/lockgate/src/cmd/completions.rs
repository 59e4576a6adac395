//! What packages ship beside the binary, generated from the same clap definition the
//! binary parses with: `lockgate completions SHELL` (shell completions on stdout),
//! `lockgate __man DIR` (hidden: one man page per subcommand) and the Markdown CLI
//! reference `docs/cli.md`.
//!
//! Invariant: the three outputs are a function of the clap definition alone. Nothing the
//! environment holds leaks in: env values are hidden (`LOCKGATE_SERVER=...` would otherwise
//! show whatever the generating shell had set) and the help is rendered at a fixed width,
//! so `docs/cli.md` is the same on every machine and a test can require it to be fresh
//! (`UPDATE_CLI_DOCS=1 cargo test -p lockgate cli_reference` rewrites it).

use crate::Cli;
use anyhow::Context as _;
use clap::CommandFactory as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The width the reference and man pages are rendered at.
const WIDTH: usize = 100;

/// Arguments of `lockgate completions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to write completions for (bash, zsh, fish; elvish and powershell too).
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of the hidden `lockgate __man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write `lockgate.1`, `lockgate-job.1`, `lockgate-job-submit.1`, ... into
    /// (created when missing).
    pub dir: PathBuf,
}

/// The clap command every generator starts from: hidden env values, fixed width.
pub fn command() -> clap::Command {
    fn settle(cmd: clap::Command) -> clap::Command {
        cmd.term_width(WIDTH)
            .mut_args(|a| a.hide_env_values(true))
            .mut_subcommands(settle)
    }
    settle(Cli::command())
}

/// Writes the completion script for `args.shell` to stdout.
///
/// # Errors
/// None in practice; the signature matches the other subcommands.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut cmd = command();
    clap_complete::generate(args.shell, &mut cmd, "lockgate", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Writes one man page (section 1) per visible command into `args.dir`.
///
/// # Errors
/// The directory cannot be created or a page cannot be written (the message names the
/// directory).
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    clap_mangen::generate_to(command(), &args.dir)
        .with_context(|| format!("cannot write man pages into {}", args.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// The Markdown CLI reference: one section per visible command, depth first, each with
/// its long `--help` (written by the test that keeps `docs/cli.md` fresh).
#[cfg(test)]
pub fn markdown() -> String {
    use std::fmt::Write as _;
    let mut cmd = command().disable_help_subcommand(true);
    cmd.build();
    let mut out = String::from(
        "# CLI reference\n\n\
         Generated from the clap definition by `UPDATE_CLI_DOCS=1 cargo test -p lockgate \
         cli_reference`; a test fails when this page is stale. The same definition gives \
         the man pages (`lockgate __man DIR`) and the shell completions (`lockgate \
         completions bash|zsh|fish`).\n\n",
    );
    let mut sections = Vec::new();
    collect(&cmd, "lockgate", &mut sections);
    out.push_str("Commands:\n\n");
    for (path, cmd) in &sections {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(out, "- [`{path}`](#{}): {about}", anchor(path));
    }
    for (path, mut cmd) in sections {
        let help = cmd.render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        let _ = write!(
            out,
            "\n## {path}\n\n```text\n{}\n```\n",
            help.join("\n").trim()
        );
    }
    out
}

/// `path`'s visible commands, depth first, with their full names.
#[cfg(test)]
fn collect(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_string(), cmd.clone()));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// GitHub's heading anchor for a command path (`lockgate job submit` -> `lockgate-job-submit`).
#[cfg(test)]
fn anchor(path: &str) -> String {
    path.replace(' ', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/cli.md` is what the clap definition gives today; `UPDATE_CLI_DOCS=1` rewrites it.
    #[test]
    fn cli_reference_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
        let want = markdown();
        if std::env::var_os("UPDATE_CLI_DOCS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/cli.md is stale: regenerate it with `UPDATE_CLI_DOCS=1 cargo test -p lockgate cli_reference`"
        );
    }

    #[test]
    fn the_reference_names_every_visible_subcommand_and_no_hidden_one() {
        let md = markdown();
        for sub in [
            "job submit",
            "policy check",
            "agent",
            "completions",
            "server",
        ] {
            assert!(md.contains(&format!("\n## lockgate {sub}\n")), "{sub}");
        }
        assert!(!md.contains("## lockgate __") && !md.contains("__exec"));
        // No environment value leaks in.
        assert!(md.contains("[env: LOCKGATE_SERVER]"), "{md}");
    }

    #[test]
    fn man_pages_one_per_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        man(ManArgs {
            dir: dir.path().join("man1"),
        })
        .unwrap();
        for page in [
            "lockgate.1",
            "lockgate-job.1",
            "lockgate-job-submit.1",
            "lockgate-agent.1",
        ] {
            let text = std::fs::read_to_string(dir.path().join("man1").join(page)).unwrap();
            assert!(
                text.starts_with(".ie"),
                "{page}: {}",
                &text[..40.min(text.len())]
            );
            assert!(text.contains(".SH SYNOPSIS"), "{page}");
        }
        assert!(!dir.path().join("man1/lockgate-__exec.1").exists());
    }

    #[test]
    fn completions_name_the_subcommands() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut command(), "lockgate", &mut buf);
            let text = String::from_utf8(buf).unwrap();
            assert!(
                text.contains("schedule") && text.contains("server"),
                "{shell}"
            );
        }
    }
}
