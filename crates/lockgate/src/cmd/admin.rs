//! `lockgate admin`: the server's own state: `backup-db` copies the SQLite store while the
//! server runs, `restore-db` puts a copy back into a stopped server's data dir
//! (docs/operations.md, "Backing up the store" and "Restoring it").
//!
//! Both work on the files of the data dir, on the server's host and as its user; neither
//! talks to the server. With PostgreSQL the store is the database: `pg_dump` is its backup.

use super::output::{self, print_json};
use crate::GlobalArgs;
use lockgate_store::copy::{self, Summary};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `lockgate admin`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Copy the SQLite store into FILE while the server runs: one consistent snapshot,
    /// checked (SQLite's integrity check, jobs and events counted) before it is reported.
    /// FILE must not exist.
    BackupDb {
        /// Where the copy goes (a new file).
        file: PathBuf,
        /// The server's data dir (default: the server's default).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Put a copy made by backup-db into a stopped server's data dir (created if missing).
    /// Refuses while a server runs there, and refuses a file that is not a lockgate store,
    /// is damaged or is from a newer lockgate. The store it replaces is moved aside, never
    /// deleted; ids acknowledged after the copy was made are not given again.
    RestoreDb {
        /// The copy to restore.
        file: PathBuf,
        /// The data dir to restore into (default: the server's default).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
}

/// Runs the subcommand.
///
/// # Errors
/// A refusal or failure, with the file it concerns.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::BackupDb { file, data_dir } => {
            if std::env::var_os("LOCKGATE_DATABASE_URL").is_some_and(|u| !u.is_empty()) {
                anyhow::bail!(
                    "LOCKGATE_DATABASE_URL is set: that store is a PostgreSQL database; back it up with pg_dump (docs/operations.md, \"Backing up the store\")"
                );
            }
            let dir = data_dir.unwrap_or_else(lockgate_host::data_dir::default_data_dir);
            let source = dir.join(lockgate_host::data_dir::DB_FILE);
            let started = std::time::Instant::now();
            let summary = copy::backup(&source, &file)?;
            if output::json(global) {
                print_json(&summary);
            } else {
                println!(
                    "copied {} to {} in {:.1} s, checked:",
                    source.display(),
                    file.display(),
                    started.elapsed().as_secs_f64()
                );
                print_summary(&summary);
            }
        }
        Sub::RestoreDb { file, data_dir } => {
            let dir = data_dir.unwrap_or_else(lockgate_host::data_dir::default_data_dir);
            let done = lockgate_server::restore_db::restore(&dir, &file)?;
            if output::json(global) {
                print_json(&done);
            } else {
                println!("restored {} into {}:", file.display(), dir.display());
                print_summary(&done.summary);
                match &done.moved_aside {
                    Some(p) => println!(
                        "the store it replaced is kept as {} (remove it once the server runs as it should)",
                        p.display()
                    ),
                    None => println!("the data dir had no store before"),
                }
                println!(
                    "new job ids continue above {}; start the server on {}",
                    done.watermark.max_job_id,
                    dir.display()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(s: &Summary) {
    println!("  file            {} ({} bytes)", s.path.display(), s.bytes);
    println!("  schema version  {}", s.schema_version);
    println!(
        "  jobs            {} ({} queued or running), ids up to {}",
        s.jobs, s.live_jobs, s.max_job_id
    );
    println!("  events          {} kept, up to {}", s.events, s.event_seq);
    println!("  tokens          {}", s.tokens);
    println!("  schedules       {}", s.schedules);
}
