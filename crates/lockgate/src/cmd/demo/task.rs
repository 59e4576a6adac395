//! `lockgate __demo-task`: the handler program of `lockgate demo` and of the agent tests.
//!
//! It does something small but real (copies a file, or checksums one into another) and
//! lasts at least `--ms` milliseconds, and it keeps its own record: one line when it
//! starts and one when it ends, appended to `--record FILE` with wall-clock milliseconds,
//! so tests and the demo can check concurrency from the handlers' side, independently of
//! what the server reports:
//!
//! ```text
//! start <ms> <job> <node> <stage> <pid> <label>
//! end <ms> <job> <node> <stage> <pid> <label> <status>
//! ```
//!
//! `<job>`, `<node>` and `<stage>` come from `LOCKGATE_JOB_ID`, `LOCKGATE_NODE` and
//! `LOCKGATE_STAGE`; `<label>` is `--label` (the agent fills in its template), `-` if none.

use anyhow::Context as _;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of the hidden `lockgate __demo-task`.
#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    /// Last at least this long.
    #[arg(long, default_value_t = 0)]
    pub ms: u64,
    /// Append start and end lines to this file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Copy SRC to DST.
    #[arg(long, num_args = 2, value_names = ["SRC", "DST"])]
    pub copy: Option<Vec<PathBuf>>,
    /// Write the FNV-1a checksum of SRC to DST.
    #[arg(long, num_args = 2, value_names = ["SRC", "DST"])]
    pub checksum: Option<Vec<PathBuf>>,
    /// Exit with this status at the end.
    #[arg(long, default_value_t = 0)]
    pub exit: u8,
    /// Free text recorded with each line (a template the agent filled in).
    #[arg(long)]
    pub label: Option<String>,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn append(path: &PathBuf, line: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open the record file {}", path.display()))?;
    // One write per line: O_APPEND keeps lines from concurrent handlers whole.
    f.write_all(format!("{line}\n").as_bytes())?;
    Ok(())
}

/// FNV-1a, 64 bits.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Runs the task.
///
/// # Errors
/// A file that cannot be read or written.
pub fn run(args: TaskArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| "-".into());
    let who = format!(
        "{} {} {} {} {}",
        env("LOCKGATE_JOB_ID"),
        env("LOCKGATE_NODE"),
        env("LOCKGATE_STAGE"),
        std::process::id(),
        args.label
            .as_deref()
            .unwrap_or("-")
            .replace(char::is_whitespace, "_"),
    );
    if let Some(r) = &args.record {
        append(r, &format!("start {} {who}", wall_ms()))?;
    }
    if let Some(v) = &args.copy {
        std::fs::copy(&v[0], &v[1])
            .with_context(|| format!("cannot copy {} to {}", v[0].display(), v[1].display()))?;
        println!("copied {} to {}", v[0].display(), v[1].display());
    }
    if let Some(v) = &args.checksum {
        let mut data = Vec::new();
        std::fs::File::open(&v[0])
            .and_then(|mut f| f.read_to_end(&mut data))
            .with_context(|| format!("cannot read {}", v[0].display()))?;
        let sum = format!("{:016x}  {}\n", fnv1a(&data), v[0].display());
        std::fs::write(&v[1], &sum).with_context(|| format!("cannot write {}", v[1].display()))?;
        print!("fnv1a {sum}");
    }
    let left = Duration::from_millis(args.ms).saturating_sub(started.elapsed());
    std::thread::sleep(left);
    if let Some(r) = &args.record {
        append(r, &format!("end {} {who} {}", wall_ms(), args.exit))?;
    }
    Ok(ExitCode::from(args.exit))
}
