//! `lockgate restore`: turn a backup's archive back into manifests to apply, on the
//! server's host (create, or --dry-run; ls; describe).
//!
//! A restore reads `<data-dir>/backups/<BACKUP>.tar.gz` (or an archive path) and writes
//! `<data-dir>/restores/<NAME>/`: one JSON `List` per phase, numbered in the order to
//! apply them, and `metadata/result.json` (`lockgate-blocks`' `restore` module; docs/restores.md).
//! It needs no server: it reads and writes the data dir directly.

use super::flags::ItemFilters;
use super::output::{self, print_json, table};
use crate::GlobalArgs;
use anyhow::{bail, Context};
use lockgate_blocks::restore::{
    self, ExistingPolicy, Priorities, RestoreItemStatus, RestoreOptions, RestorePlan, RestoreResult,
};
use lockgate_blocks::{InputLimits, Plan, PlanOptions};
use lockgate_host::data_dir::{BACKUPS_DIR, RESTORES_DIR};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `lockgate restore`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Restore a backup's manifests into `<data-dir>/restores/NAME/`, one file per phase.
    Create(Box<CreateArgs>),
    /// List the restores of the data dir.
    Ls {
        /// The data dir (default: the server's default).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// A restore's files, counts and per-item status (`-o json`: its metadata/result.json).
    Describe {
        /// Restore name.
        name: String,
        /// The data dir (default: the server's default).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Restore name (unique; a-z, 0-9, '-', '.', '_').
    name: String,
    /// The backup to restore: its name (the archive `<data-dir>/backups/NAME.tar.gz`) or the
    /// path of an archive.
    #[arg(long, value_name = "BACKUP|FILE")]
    from: String,
    /// The data dir (default: the server's default).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Which items of the backup (namespaces as the backup names them).
    #[command(flatten)]
    filters: ItemFilters,
    /// Restore namespace SOURCE into TARGET (`a:b,c:d`).
    #[arg(long, value_name = "SOURCE:TARGET,..")]
    namespace_mappings: Option<String>,
    /// What the target already has: a `kubectl get -A -o json` List or a directory of
    /// manifests (for instance an earlier restore's directory). Default: nothing.
    #[arg(long, value_name = "FILE|DIR")]
    existing: Option<PathBuf>,
    /// An item the target has: `none` leaves it out, `update` writes it again.
    #[arg(long, default_value = "none", value_name = "none|update")]
    existing_resource_policy: ExistingPolicy,
    /// Keep each item's status (default: removed; the cluster sets it again).
    #[arg(long)]
    restore_status: bool,
    /// Keep Services' node ports (default: removed; the cluster assigns free ones).
    #[arg(long)]
    preserve_nodeports: bool,
    /// The order of the phases: resources first, then `-`, then resources last (default:
    /// Velero's order; docs/restores.md).
    #[arg(long, value_name = "RESOURCE,..,-,..")]
    restore_resource_priorities: Option<String>,
    /// Print what would be written (the result, as JSON) and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `lockgate restore`.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Create(a) => create(global, *a),
        Sub::Ls { data_dir } => ls(global, &data_dir_or_default(data_dir)),
        Sub::Describe { name, data_dir } => {
            let dir = data_dir_or_default(data_dir).join(RESTORES_DIR).join(&name);
            lockgate_api::check_name("restore", &name).map_err(anyhow::Error::msg)?;
            if !dir.is_dir() {
                bail!(
                    "no restore {name:?} in {}",
                    dir.parent().unwrap_or(&dir).display()
                );
            }
            let result = restore::read_result(&dir)?;
            if output::json(global) {
                print_json(&result);
            } else {
                describe(&result, &dir);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn data_dir_or_default(d: Option<PathBuf>) -> PathBuf {
    d.unwrap_or_else(lockgate_host::data_dir::default_data_dir)
}

/// The archive `--from` names: a path when it has a `/` or ends in `.tar.gz`, else the
/// backup of that name in the data dir.
fn archive_path(from: &str, data_dir: &Path) -> anyhow::Result<PathBuf> {
    if from.contains('/') || from.ends_with(".tar.gz") {
        return Ok(PathBuf::from(from));
    }
    lockgate_api::check_backup_name(from).map_err(|e| anyhow::anyhow!("--from: {e}"))?;
    Ok(data_dir.join(BACKUPS_DIR).join(format!("{from}.tar.gz")))
}

fn options(a: &CreateArgs) -> anyhow::Result<RestoreOptions> {
    let namespace_mappings = match &a.namespace_mappings {
        Some(text) => restore::parse_mappings(text)
            .map_err(|e| anyhow::anyhow!("--namespace-mappings: {e}"))?,
        None => Default::default(),
    };
    let priorities = match &a.restore_resource_priorities {
        Some(text) => Priorities::parse(text)
            .map_err(|e| anyhow::anyhow!("--restore-resource-priorities: {e}"))?,
        None => Priorities::default(),
    };
    let existing = match &a.existing {
        Some(path) => existing(path).with_context(|| format!("--existing {}", path.display()))?,
        None => Vec::new(),
    };
    Ok(RestoreOptions {
        filters: a.filters.filters()?,
        namespace_mappings,
        existing_policy: a.existing_resource_policy,
        restore_status: a.restore_status,
        preserve_node_ports: a.preserve_nodeports,
        priorities,
        existing,
    })
}

/// The manifests of `--existing`: a List file or a directory of manifests; of an earlier
/// restore's directory, its phase files.
fn existing(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let inputs = match restore::read_result(path) {
        Ok(r) if path.is_dir() => r.files.iter().map(|f| path.join(f)).collect(),
        _ => vec![path.to_path_buf()],
    };
    let mut out = Vec::new();
    for input in inputs {
        let plan = Plan::load(&input, &PlanOptions::default())?;
        if let Some(e) = plan.input_errors().first() {
            bail!("{e}");
        }
        for i in 0..plan.item_count() {
            out.push(plan.load_item(i).map_err(anyhow::Error::msg)?);
        }
    }
    Ok(out)
}

fn create(global: &GlobalArgs, a: CreateArgs) -> anyhow::Result<ExitCode> {
    lockgate_api::check_name("restore", &a.name).map_err(anyhow::Error::msg)?;
    let data_dir = data_dir_or_default(a.data_dir.clone());
    let archive_path = archive_path(&a.from, &data_dir)?;
    let options = options(&a)?;
    let started = std::time::Instant::now();
    eprintln!("lockgate: reading {}", archive_path.display());
    let archive = restore::read::read(&archive_path, &InputLimits::default())?;
    let plan = RestorePlan::new(&archive, &options)?;
    eprintln!(
        "lockgate: {} items read ({} unusable), {} to restore in {} files, in {:.1} s",
        archive.items.len(),
        archive.bad.len(),
        plan.item_count(),
        plan.phases.len(),
        started.elapsed().as_secs_f64()
    );
    let dir = data_dir.join(RESTORES_DIR).join(&a.name);
    let result = if a.dry_run {
        plan.result(&a.name)
    } else {
        plan.write(&a.name, &dir)?
    };
    if a.dry_run || output::json(global) {
        print_json(&result);
    } else {
        describe(&result, &dir);
        if result.files.is_empty() {
            println!("nothing to apply");
        } else {
            println!("apply in order: kubectl apply -f {}", dir.display());
        }
    }
    Ok(if result.counts.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn describe(r: &RestoreResult, dir: &Path) {
    let c = r.counts;
    println!(
        "restore {} of backup {}: {:?} ({} restored, {} skipped, {} failed) in {}",
        r.restore,
        r.backup,
        r.phase,
        c.restored,
        c.skipped,
        c.failed,
        dir.display()
    );
    let mut per_file: std::collections::HashMap<&str, usize> = Default::default();
    for f in r.items.iter().filter_map(|i| i.file.as_deref()) {
        *per_file.entry(f).or_default() += 1;
    }
    let rows: Vec<Vec<String>> = r
        .files
        .iter()
        .map(|f| {
            vec![
                f.clone(),
                per_file.get(f.as_str()).unwrap_or(&0).to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        table(&["FILE", "ITEMS"], &rows);
    }
    for i in r
        .items
        .iter()
        .filter(|i| i.status != RestoreItemStatus::Restored)
    {
        let why = i.error.as_deref().or(i.note.as_deref()).unwrap_or("");
        println!("{:?} {}: {why}", i.status, i.item);
    }
}

/// A restore being written (`.<name>.<pid>-<n>.partial`), or anything else hidden.
fn is_hidden(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

fn ls(global: &GlobalArgs, data_dir: &Path) -> anyhow::Result<ExitCode> {
    let root = data_dir.join(RESTORES_DIR);
    let mut results = Vec::new();
    if root.is_dir() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
            .with_context(|| root.display().to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && !is_hidden(p))
            .collect();
        dirs.sort();
        for d in dirs {
            match restore::read_result(&d) {
                Ok(r) => results.push(r),
                Err(e) => eprintln!("lockgate: {e}"),
            }
        }
    }
    if output::json(global) {
        print_json(&results);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.restore.clone(),
                r.backup.clone(),
                format!("{:?}", r.phase),
                r.counts.restored.to_string(),
                r.counts.skipped.to_string(),
                r.counts.failed.to_string(),
            ]
        })
        .collect();
    table(
        &["NAME", "BACKUP", "PHASE", "RESTORED", "SKIPPED", "FAILED"],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}
