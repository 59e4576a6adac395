//! `lockgate backup`: create (or dry-run), list, describe and cancel item-block backups.
//!
//! `create --dry-run` plans locally with `lockgate-blocks` and needs no server: it prints the
//! blocks as JSON (the JSON of `metadata/blocks.json`, without times) and runs nothing.
//! Everything else talks to the server, which reads `--from` from **its own** filesystem
//! (the path is sent as an absolute path).

use super::flags::ItemFilters;
use super::output::{self, or_dash, print_json, table};
use super::session;
use crate::GlobalArgs;
use anyhow::{bail, Context};
use lockgate_api::{BackupCounts, BackupProgress, BackupRequest, BackupState, BackupView};
use lockgate_blocks::{BackupResult, HookResult, ItemResult, Plan, UploadResult};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `lockgate backup`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Back up Kubernetes manifests in item blocks, on the server's shared worker pool.
    Create(Box<CreateArgs>),
    /// List backups.
    Ls,
    /// Phase, per-item status and hook results (`-o json`: the backup's
    /// metadata/result.json once it has finished).
    Describe {
        /// Backup name.
        name: String,
    },
    /// Cancel a backup: no new block starts; running blocks finish or stop at their next
    /// check; its queued data-movement jobs are cancelled.
    Cancel {
        /// Backup name.
        name: String,
    },
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Backup name (unique; a-z, 0-9, '-', '.', '_').
    name: String,
    /// A `kubectl get -A -o json` List file or a directory of .json/.yaml manifests. The
    /// server reads it from its own filesystem; the path is sent as an absolute path.
    #[arg(long, value_name = "FILE|DIR")]
    from: PathBuf,
    #[command(flatten)]
    filters: ItemFilters,
    /// An item whose block runs first, one at a time in the given order (repeatable).
    #[arg(long = "ordered", value_name = "RESOURCE/NS/NAME")]
    ordered: Vec<String>,
    /// Wait for the end, with a progress bar on stderr (Ctrl-C stops waiting, not the
    /// backup). Exit status 0 only when the backup is Completed.
    #[arg(long)]
    wait: bool,
    /// Print the blocks as JSON and run nothing (planned locally, no server needed).
    #[arg(long, conflicts_with = "wait")]
    dry_run: bool,
    /// With --dry-run: the policy file whose `[blocks]` section (rules, volume-group label)
    /// forms the blocks, as the server's policy would. Default: the built-in defaults.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    policy: Option<PathBuf>,
}

/// `metadata/result.json`: the result, then every item's status (the library's layout,
/// so printing it again gives the same document).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ResultDoc {
    /// The archive's format (absent in archives of format 1 written before it was named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    format: Option<u64>,
    #[serde(flatten)]
    result: BackupResult,
    item_status: Vec<ItemResult>,
}

/// Runs `lockgate backup`.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Create(a) if a.dry_run => dry_run(*a),
        Sub::Create(a) => create(global, *a),
        Sub::Ls => ls(global),
        Sub::Describe { name } => describe(global, &name),
        Sub::Cancel { name } => {
            let v = session::client(global)?.cancel_backup(&name)?;
            if output::json(global) {
                print_json(&v);
            } else {
                println!("backup {name}: cancel requested ({})", v.state);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn request(a: &CreateArgs) -> anyhow::Result<BackupRequest> {
    let from =
        std::path::absolute(&a.from).with_context(|| format!("--from {}", a.from.display()))?;
    Ok(BackupRequest {
        name: a.name.clone(),
        from: from.display().to_string(),
        include_namespaces: a.filters.include_namespaces.clone(),
        exclude_namespaces: a.filters.exclude_namespaces.clone(),
        include_resources: a.filters.include_resources.clone(),
        exclude_resources: a.filters.exclude_resources.clone(),
        include_cluster_resources: a.filters.include_cluster_resources,
        selector: a.filters.selector.clone(),
        ordered: a.ordered.clone(),
        dry_run: false,
    })
}

fn dry_run(a: CreateArgs) -> anyhow::Result<ExitCode> {
    lockgate_api::check_backup_name(&a.name).map_err(anyhow::Error::msg)?;
    let blocks = match &a.policy {
        Some(path) => {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).with_context(|| format!("--policy {shown}"))?;
            lockgate_core::Policy::from_toml(&text, Some(&shown))?.blocks
        }
        None => lockgate_core::policy::BlocksPolicy::default(),
    };
    let options = lockgate_blocks::PlanOptions {
        filters: a.filters.filters()?,
        ordered: a.ordered.clone(),
        ..lockgate_blocks::PlanOptions::from_policy(&blocks)
    };
    let plan = Plan::load(&a.from, &options)?;
    println!("{}", plan.blocks_json());
    for w in plan.warnings() {
        eprintln!("lockgate: warning: {w}");
    }
    let errors = plan.input_errors();
    if errors.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for e in errors {
        eprintln!("lockgate: {e}");
    }
    eprintln!(
        "lockgate: {} bad items or files in the input: the server would refuse this backup",
        errors.len()
    );
    Ok(ExitCode::from(1))
}

fn create(global: &GlobalArgs, a: CreateArgs) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let view = client.create_backup(&request(&a)?)?;
    if !a.wait {
        show(global, &[view]);
        return Ok(ExitCode::SUCCESS);
    }
    let view = wait(&client, view)?;
    show(global, std::slice::from_ref(&view));
    match view.phase.as_deref() {
        Some("Completed") => Ok(ExitCode::SUCCESS),
        phase => {
            eprintln!(
                "lockgate: backup {} ended {}: {}",
                view.name,
                phase.unwrap_or("without a phase"),
                view.reasons.join("; ")
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// Polls the backup until it has finished, drawing a progress bar on stderr: redrawn in
/// place on a terminal, one line per change (at most one a second) otherwise.
fn wait(client: &lockgate_client::Client, mut view: BackupView) -> anyhow::Result<BackupView> {
    let tty = std::io::stderr().is_terminal();
    let mut last_line = String::new();
    let mut last_print = Instant::now() - Duration::from_secs(10);
    let mut why = String::new();
    let mut why_at = Instant::now() - Duration::from_secs(10);
    loop {
        if view.state == BackupState::Queued && why_at.elapsed() >= Duration::from_secs(1) {
            why_at = Instant::now();
            why = match view.job.map(|id| client.explain(id)) {
                Some(Ok(e)) if !e.reasons.is_empty() => {
                    format!(": {}", e.text.trim_start_matches("queued, "))
                }
                _ => String::new(),
            };
        }
        let line = progress_line(&view, &why);
        let finished = view.is_finished();
        if line != last_line && (tty || finished || last_print.elapsed() >= Duration::from_secs(1))
        {
            let mut err = std::io::stderr().lock();
            if tty {
                let _ = write!(err, "\r{line}\x1b[K");
                if finished {
                    let _ = writeln!(err);
                }
            } else {
                let _ = writeln!(err, "{line}");
            }
            let _ = err.flush();
            last_line = line;
            last_print = Instant::now();
        }
        if finished {
            return Ok(view);
        }
        std::thread::sleep(Duration::from_millis(200));
        view = client.backup(&view.name)?;
    }
}

fn progress_line(v: &BackupView, why: &str) -> String {
    let p = v.progress;
    const WIDTH: usize = 24;
    let full = if v.is_finished() { WIDTH } else { 0 };
    let filled = (p.blocks_done * WIDTH)
        .checked_div(p.blocks_total)
        .unwrap_or(full)
        .min(WIDTH);
    let state = match (v.state, v.phase.as_deref()) {
        (BackupState::Queued, _) => format!("queued{why}"),
        (_, Some(phase)) => phase.to_string(),
        (s, None) => s.to_string(),
    };
    format!(
        "{} [{}{}] blocks {}/{}  items {}/{}  {state}",
        v.name,
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        p.blocks_done,
        p.blocks_total,
        p.items_done,
        p.items_total,
    )
}

fn done_of(p: &BackupProgress, blocks: bool) -> String {
    if blocks {
        format!("{}/{}", p.blocks_done, p.blocks_total)
    } else {
        format!("{}/{}", p.items_done, p.items_total)
    }
}

fn show(global: &GlobalArgs, views: &[BackupView]) {
    if output::json(global) {
        match views {
            [one] => print_json(one),
            many => print_json(&serde_json::json!({ "backups": many })),
        }
        return;
    }
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.state.to_string(),
                or_dash(v.phase.as_ref()),
                done_of(&v.progress, true),
                done_of(&v.progress, false),
                or_dash(v.job),
                output::time(&v.created_at),
                output::time_or_dash(v.finished_at.as_ref()),
            ]
        })
        .collect();
    table(
        &[
            "NAME", "STATE", "PHASE", "BLOCKS", "ITEMS", "JOB", "CREATED", "FINISHED",
        ],
        &rows,
    );
}

fn ls(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let list = session::client(global)?.backups()?;
    if output::json(global) {
        print_json(&list);
    } else {
        show(global, &list.backups);
    }
    Ok(ExitCode::SUCCESS)
}

fn counts(c: Option<BackupCounts>, p: &str) -> String {
    match c {
        Some(c) => format!(
            "{p} done (completed {}, failed {}, skipped {})",
            c.completed, c.failed, c.skipped
        ),
        None => format!("{p} done"),
    }
}

fn describe(global: &GlobalArgs, name: &str) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    let view = client.backup(name)?;
    let result = finished_result(&client, name, &view)?;
    if output::json(global) {
        match &result {
            Some(r) => print_json(r),
            None => print_json(&view),
        }
        return Ok(ExitCode::SUCCESS);
    }
    print_summary(name, &view);
    if let Some(doc) = result {
        print_result(&doc);
    }
    Ok(ExitCode::SUCCESS)
}

/// The backup's `metadata/result.json` once it has finished; `None` while it runs or when
/// the server has no result for it (404).
fn finished_result(
    client: &lockgate_client::Client,
    name: &str,
    view: &BackupView,
) -> anyhow::Result<Option<ResultDoc>> {
    if !view.is_finished() {
        return Ok(None);
    }
    match client.backup_result::<ResultDoc>(name) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.status() == Some(404) => Ok(None),
        Err(e) => bail!(e),
    }
}

/// The `Field:  value` lines of `describe`, from the server's view of the backup.
fn print_summary(name: &str, view: &BackupView) {
    let field = |k: &str, v: String| println!("{k:<12} {v}");
    field("Name:", view.name.clone());
    field("State:", view.state.to_string());
    field("Phase:", or_dash(view.phase.as_ref()));
    field(
        "Job:",
        format!(
            "{} (resource-backup, owner backup:{name})",
            or_dash(view.job)
        ),
    );
    field("Namespaces:", view.namespaces.join(","));
    field("From:", view.request.from.clone());
    field("Archive:", view.archive.clone());
    field("Created:", output::time(&view.created_at));
    field("Started:", output::time_or_dash(view.started_at.as_ref()));
    field("Finished:", output::time_or_dash(view.finished_at.as_ref()));
    field(
        "Blocks:",
        counts(view.blocks, &done_of(&view.progress, true)),
    );
    field(
        "Items:",
        counts(view.items, &done_of(&view.progress, false)),
    );
    if view.cancel_requested {
        field("Cancel:", "requested".into());
    }
    for (i, r) in view.reasons.iter().enumerate() {
        field(if i == 0 { "Reasons:" } else { "" }, r.clone());
    }
}

/// The tables of a finished backup: items, then hooks and uploads when there were any,
/// then input errors and warnings.
fn print_result(doc: &ResultDoc) {
    println!();
    print_items(&doc.item_status);
    let r = &doc.result;
    if !r.hooks.is_empty() {
        println!();
        print_hooks(&r.hooks);
    }
    if !r.uploads.is_empty() {
        println!();
        print_uploads(&r.uploads);
    }
    for e in &r.input_errors {
        println!("input error: {e}");
    }
    for w in &r.warnings {
        println!("warning: {w}");
    }
}

fn print_items(items: &[ItemResult]) {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            vec![
                i.item.clone(),
                format!("{:?}", i.status),
                i.error
                    .clone()
                    .or_else(|| i.note.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(&["ITEM", "STATUS", "ERROR/NOTE"], &rows);
}

fn print_hooks(hooks: &[HookResult]) {
    print!("{}", render_hooks(hooks));
}

/// The hooks table, then the start of each hook's stderr (as `result.json` keeps it),
/// indented under a line naming the hook: the table has no room for it and a failed hook's
/// stderr is usually why it failed.
fn render_hooks(hooks: &[HookResult]) -> String {
    let phase = |h: &HookResult| format!("{:?}", h.phase).to_lowercase();
    let rows: Vec<Vec<String>> = hooks
        .iter()
        .map(|h| {
            vec![
                h.block.to_string(),
                h.pod.clone(),
                phase(h),
                h.container.clone(),
                or_dash(h.exit_code),
                format!("{}ms", h.duration_ms),
                h.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut text = output::render_table(
        &["BLOCK", "POD", "HOOK", "CONTAINER", "EXIT", "TIME", "ERROR"],
        &rows,
    );
    for h in hooks.iter().filter(|h| !h.stderr.trim().is_empty()) {
        text.push_str(&format!(
            "\nstderr of the {} hook in {} ({}), block {}:\n",
            phase(h),
            output::escape(&h.pod),
            output::escape(&h.container),
            h.block
        ));
        for l in h.stderr.trim_end().lines() {
            text.push_str(&format!("  {}\n", output::escape(l)));
        }
    }
    text
}

fn print_uploads(uploads: &[UploadResult]) {
    let ms = |v: Option<u64>| v.map(|v| format!("{v}ms"));
    let rows: Vec<Vec<String>> = uploads
        .iter()
        .map(|u| {
            vec![
                u.item.clone(),
                u.kind.clone(),
                or_dash(u.volume.as_ref()),
                or_dash(ms(u.snapshot_ms)),
                or_dash(ms(u.finished_ms)),
                u.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &["ITEM", "KIND", "VOLUME", "SNAPSHOT", "FINISHED", "ERROR"],
        &rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_shows_the_hooks_stderr() {
        let hook = |block: usize, phase: &str, exit: Option<i32>, stderr: &str| {
            serde_json::from_value::<HookResult>(serde_json::json!({
                "block": block, "pod": "app/db-0", "phase": phase, "container": "postgres",
                "command": ["pg_ctl", "stop"], "on_error": "Fail", "exit_code": exit,
                "duration_ms": 120, "stderr": stderr,
                "error": exit.filter(|c| *c != 0).map(|c| format!("exit code {c}")),
            }))
            .expect("a hook result")
        };
        let hooks = [
            hook(0, "pre", Some(0), ""),
            hook(
                0,
                "post",
                Some(3),
                "pg_ctl: no server running\nhint: is \u{1b}[31mPGDATA set?\n",
            ),
        ];
        insta::assert_snapshot!(render_hooks(&hooks));
    }
}
