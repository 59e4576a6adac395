//! `lockgate restore`: turn a backup's archive back into manifests to apply (create, or
//! --dry-run; ls; describe; cancel; bind a restored pod to its node).
//!
//! A restore reads a backup's archive `<data-dir>/backups/<BACKUP>.tar.gz` and writes
//! `<data-dir>/restores/<NAME>/`: one JSON `List` per phase, numbered in the order to
//! apply them, and `metadata/result.json` (`lockgate-blocks`' `restore` module;
//! docs/restores.md).
//!
//! By default the server makes it: it queues the restore's `resource-restore` job (ahead
//! of backups, behind an overlapping restore) and writes the files once it is admitted;
//! `--existing` is read from the server's filesystem (sent as an absolute path). With
//! `--data-dir`, the restore is made here, at once, without a server (an archive file can
//! then be named by its path).

use super::flags::ItemFilters;
use super::output::{self, print_json, table};
use super::session;
use crate::GlobalArgs;
use anyhow::{bail, Context};
use lockgate_api::{BackupState, ExistingResourcePolicy, RestoreRequest, RestoreView};
use lockgate_blocks::restore::{
    self, ExistingPolicy, Priorities, RestoreItemStatus, RestoreOptions, RestorePlan, RestoreResult,
};
use lockgate_blocks::{InputLimits, PlanOptions};
use lockgate_host::data_dir::{BACKUPS_DIR, RESTORES_DIR};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `lockgate restore`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Restore a backup's manifests into `<data-dir>/restores/NAME/`, one file per phase:
    /// through the server's queue, or here with `--data-dir`.
    Create(Box<CreateArgs>),
    /// List the restores (the server's; with `--data-dir`, that data dir's).
    Ls {
        /// Read this data dir instead of asking the server.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// A restore's state, files, counts and per-item status (`-o json`: its
    /// metadata/result.json once it has finished).
    Describe {
        /// Restore name.
        name: String,
        /// Read this data dir instead of asking the server.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Cancel a restore the server has not started writing (a running one's files are
    /// written whole or not at all).
    Cancel {
        /// Restore name.
        name: String,
    },
    /// Tell a running restore the node a restored pod was scheduled to, so the volumes a
    /// file-system backup copied are copied back there (`pod-volume-restore` jobs); the
    /// wait container of `[blocks].restore_wait_image` runs it in the pod.
    Bind {
        /// Restore name.
        name: String,
        /// The pod, as the restore wrote it.
        #[arg(long, value_name = "NAMESPACE/POD")]
        pod: String,
        /// The node the pod was scheduled to (its `spec.nodeName`).
        #[arg(long)]
        node: String,
        /// Wait until the pod's volumes are copied back (exit status 0 only when every
        /// job succeeded).
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Restore name (unique; a-z, 0-9, '-', '.', '_').
    name: String,
    /// The backup to restore: its name; with `--data-dir` also the path of an archive.
    #[arg(long, value_name = "BACKUP|FILE")]
    from: String,
    /// Make the restore here, in this data dir, without a server.
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
    /// Through the server: wait for the end (exit status 0 only when Completed).
    #[arg(long, conflicts_with_all = ["dry_run", "data_dir"])]
    wait: bool,
    /// Through the server: how long to wait for each restored pod's node (`restore
    /// bind`) before its pod volumes count as failed (default 4h).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::duration)]
    pod_volume_timeout: Option<Duration>,
}

/// Runs `lockgate restore`.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Create(a) if a.data_dir.is_some() => create(global, *a),
        Sub::Create(a) => create_on_server(global, *a),
        Sub::Ls { data_dir: Some(d) } => ls(global, &d),
        Sub::Ls { data_dir: None } => ls_on_server(global),
        Sub::Describe {
            name,
            data_dir: Some(d),
        } => {
            let dir = d.join(RESTORES_DIR).join(&name);
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
        Sub::Describe {
            name,
            data_dir: None,
        } => describe_on_server(global, &name),
        Sub::Bind {
            name,
            pod,
            node,
            wait,
        } => bind(global, &name, &pod, &node, wait),
        Sub::Cancel { name } => {
            let v = session::client(global)?.cancel_restore(&name)?;
            if output::json(global) {
                print_json(&v);
            } else {
                println!("restore {name}: cancel requested ({})", v.state);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The request of a restore through the server.
fn request(a: &CreateArgs) -> anyhow::Result<RestoreRequest> {
    if a.from.contains('/') || a.from.ends_with(".tar.gz") {
        bail!(
            "--from {}: the server restores its own backups by name; an archive file is restored here with --data-dir DIR",
            a.from
        );
    }
    let existing = match &a.existing {
        Some(p) => Some(
            std::path::absolute(p)
                .with_context(|| format!("--existing {}", p.display()))?
                .display()
                .to_string(),
        ),
        None => None,
    };
    Ok(RestoreRequest {
        name: a.name.clone(),
        backup: a.from.clone(),
        include_namespaces: a.filters.include_namespaces.clone(),
        exclude_namespaces: a.filters.exclude_namespaces.clone(),
        include_resources: a.filters.include_resources.clone(),
        exclude_resources: a.filters.exclude_resources.clone(),
        include_cluster_resources: a.filters.include_cluster_resources,
        selector: a.filters.selector.clone(),
        namespace_mappings: match &a.namespace_mappings {
            Some(text) => restore::parse_mappings(text)
                .map_err(|e| anyhow::anyhow!("--namespace-mappings: {e}"))?,
            None => Default::default(),
        },
        existing,
        existing_resource_policy: match a.existing_resource_policy {
            ExistingPolicy::None => ExistingResourcePolicy::None,
            ExistingPolicy::Update => ExistingResourcePolicy::Update,
        },
        restore_status: a.restore_status,
        preserve_node_ports: a.preserve_nodeports,
        restore_resource_priorities: a.restore_resource_priorities.clone(),
        dry_run: a.dry_run,
        pod_volume_timeout_s: a.pod_volume_timeout.map(|d| d.as_secs().max(1)),
    })
}

/// `restore bind`: the pod's node told to the restore; with `wait`, until its jobs end.
fn bind(
    global: &GlobalArgs,
    name: &str,
    pod: &str,
    node: &str,
    wait: bool,
) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let bound = client.bind_restore_pod(name, pod, node)?;
    let ids: Vec<String> = bound.jobs.iter().map(u64::to_string).collect();
    eprintln!(
        "restore {name}: pod {pod} on node {node}: pod-volume-restore jobs {}",
        ids.join(", ")
    );
    let mut failed = Vec::new();
    if wait {
        for &id in &bound.jobs {
            let mut job = client.job(id)?;
            while !job.is_final() {
                job = client.wait(id, job.state, 30)?;
            }
            if job.state != lockgate_core::JobState::Succeeded {
                failed.push(format!("job {id} {}", job.state));
            }
        }
    }
    if output::json(global) {
        print_json(&bound);
    }
    if !failed.is_empty() {
        eprintln!("restore {name}: pod {pod}: {}", failed.join(", "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn create_on_server(global: &GlobalArgs, a: CreateArgs) -> anyhow::Result<ExitCode> {
    lockgate_api::check_name("restore", &a.name).map_err(anyhow::Error::msg)?;
    let req = request(&a)?;
    let client = session::client(global)?;
    if a.dry_run {
        let result: RestoreResult = client.dry_run_restore(&req)?;
        print_json(&result);
        return Ok(exit_of(&result));
    }
    let mut view = client.create_restore(&req)?;
    if !a.wait {
        show(global, &[view]);
        return Ok(ExitCode::SUCCESS);
    }
    let mut last = String::new();
    while !view.is_finished() {
        let line = match (view.state, view.job) {
            (BackupState::Queued, Some(id)) => match client.explain(id) {
                Ok(e) => format!("restore {}: {}", view.name, e.text),
                Err(_) => format!("restore {}: queued", view.name),
            },
            _ => format!("restore {}: {}", view.name, view.state),
        };
        if line != last {
            eprintln!("{line}");
            last = line;
        }
        std::thread::sleep(Duration::from_millis(200));
        view = client.restore(&view.name)?;
    }
    describe_view(global, &client, &view)?;
    Ok(if view.phase.as_deref() == Some("Completed") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn show(global: &GlobalArgs, views: &[RestoreView]) {
    if output::json(global) {
        print_json(&views);
        return;
    }
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.backup.clone(),
                v.state.to_string(),
                v.phase.clone().unwrap_or_else(|| "-".into()),
                v.job.map_or_else(|| "-".into(), |j| j.to_string()),
                v.items.restored.to_string(),
                v.items.skipped.to_string(),
                v.items.failed.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "NAME", "BACKUP", "STATE", "PHASE", "JOB", "RESTORED", "SKIPPED", "FAILED",
        ],
        &rows,
    );
}

fn ls_on_server(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let list = session::client(global)?.restores()?;
    show(global, &list.restores);
    Ok(ExitCode::SUCCESS)
}

fn describe_on_server(global: &GlobalArgs, name: &str) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let view = client.restore(name)?;
    describe_view(global, &client, &view)?;
    Ok(ExitCode::SUCCESS)
}

/// A restore of the server: its state, and once finished its files and items.
fn describe_view(
    global: &GlobalArgs,
    client: &lockgate_client::Client,
    view: &RestoreView,
) -> anyhow::Result<()> {
    // A restore that wrote its directory (even with nothing to apply) has a result.
    let result: Option<RestoreResult> = if view.is_finished() && view.started_at.is_some() {
        client.restore_result(&view.name).ok()
    } else {
        None
    };
    if output::json(global) {
        match &result {
            Some(r) => print_json(r),
            None => print_json(view),
        }
        return Ok(());
    }
    match &result {
        Some(r) => describe(r, Path::new(&view.directory)),
        None => println!(
            "restore {} of backup {}: {}{}",
            view.name,
            view.backup,
            view.state,
            view.phase
                .as_deref()
                .map(|p| format!(" {p}"))
                .unwrap_or_default()
        ),
    }
    if !view.data_jobs.is_empty() {
        let jobs: Vec<String> = view.data_jobs.iter().map(u64::to_string).collect();
        println!("data jobs: {}", jobs.join(", "));
    }
    // A restore the server stopped keeps the pods it waited for in its record.
    if !view.pods_waiting.is_empty() && !view.is_finished() {
        println!(
            "waiting for the node of pods (lockgate restore bind): {}",
            view.pods_waiting.join(", ")
        );
    }
    for h in &view.hooks {
        let how = match (&h.error, h.exit_code) {
            (Some(e), _) => format!("failed ({}): {e}", h.on_error),
            (None, code) => format!("exit {}", code.unwrap_or_default()),
        };
        println!(
            "post-restore hook of {}: {how} in {} ms",
            h.pod, h.duration_ms
        );
    }
    for why in &view.reasons {
        println!("  {why}");
    }
    for r in &view.refused {
        println!("refused {}: {}", r.item, r.reason);
    }
    match &result {
        Some(r) if r.files.is_empty() => println!("nothing to apply"),
        Some(_) => println!("apply in order: kubectl apply -f {}", view.directory),
        None => {}
    }
    Ok(())
}

fn exit_of(result: &RestoreResult) -> ExitCode {
    if result.counts.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
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
        Some(path) => restore::read_existing(path, &PlanOptions::default())
            .map_err(|e| anyhow::anyhow!("--existing {}: {e}", path.display()))?,
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

fn create(global: &GlobalArgs, a: CreateArgs) -> anyhow::Result<ExitCode> {
    lockgate_api::check_name("restore", &a.name).map_err(anyhow::Error::msg)?;
    let data_dir = a.data_dir.clone().unwrap_or_default();
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
    Ok(exit_of(&result))
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
