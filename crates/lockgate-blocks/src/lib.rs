//! lockgate-blocks: the item-block backup engine (design `item-blocks.md`).
//!
//! A backup of a Kubernetes namespace is thousands of small items (manifests) and a few
//! slow ones (volume snapshots, pod hooks). Related items form a *block* (a pod, its PVCs and
//! their PVs; pods sharing a volume; a volume group; items a configured rule groups) that
//! runs as a unit: pre-hooks, items, snapshots, post-hooks. Blocks run in parallel on a
//! worker pool shared by all backups of the server.
//!
//! The main types:
//! - [`Plan`]: reads the input (a `kubectl get -A -o json` `List` or a directory of
//!   manifests) with [`PlanOptions`] ([`Filters`], rules, ordered items) into blocks;
//!   [`Plan::blocks_json`] is the dry run. It keeps names and file offsets only; manifests
//!   are read again when their block runs.
//! - [`WorkerPool`]: one per server; [`WorkerPool::start`] runs a [`Plan`] with a
//!   [`BackupConfig`] (archive path, exec template, [`DataMover`], optional [`ItemAction`]
//!   and progress callback) and returns a [`BackupHandle`] (progress, cancel, wait).
//! - [`BackupResult`]: phase, reasons, per-item status, hooks, uploads, refused items; also
//!   written to the archive as `metadata/result.json` next to `metadata/blocks.json`.
//! - [`Confinement`] (in [`PlanOptions::confinement`]): who the backup is for. An admin is
//!   unconfined ([`Confinement::admin`], the default); anyone else reads only inside
//!   [`InputRoots`] (a path outside gets one [`InputRefused`] answer whether or not it
//!   exists), takes only its [`NamespaceScope`] and runs hooks only under
//!   [`HookPolicy::Run`]; refused items are named ([`Plan::refused`],
//!   [`BackupResult::refused`]).
//! - [`restore::RestorePlan`]: a finished backup's archive ([`restore::read::read`]) turned
//!   back into manifests to apply, cleaned and namespace-mapped, one file per phase in
//!   restore order ([`restore::RestorePlan::write`]).
//! - [`InputLimits`] and [`Cancel`] (in [`PlanOptions`]): regular files only, no endless
//!   walks, caps on bytes per file, total bytes, items and directory entries, and a
//!   cancellation token checked while the input is read.
//!
//! ```no_run
//! use lockgate_blocks::{BackupConfig, NoopMover, Plan, PlanOptions, PoolConfig, WorkerPool};
//! use std::sync::Arc;
//!
//! let plan = Plan::load("cluster.json".as_ref(), &PlanOptions::default())?;
//! println!("{}", plan.blocks_json()); // --dry-run
//! let pool = WorkerPool::new(PoolConfig { workers: 8, channel_capacity: 8 });
//! let config = BackupConfig::new("nightly", "/var/lib/lockgate/backups/nightly.tar.gz", Arc::new(NoopMover));
//! let result = pool.start(plan, config)?.wait();
//! println!("{:?}", result.phase);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod archive;
mod backup;
mod block;
pub mod confine;
pub mod filter;
pub mod hooks;
pub mod limits;
pub mod mover;
pub mod names;
pub mod plan;
mod pool;
mod report;
pub mod restore;
pub mod result;
pub mod source;

pub use archive::partial as partial_archive;
pub use backup::{BackupConfig, BackupHandle, ProgressFn, StartError};
pub use block::BACKUP_VOLUMES_ANNOTATION;
pub use confine::{
    Confinement, HookPolicy, InputRefused, InputRoots, InputScope, NamespaceScope, RefusalReason,
    RefusedItem, RootError,
};
pub use filter::Filters;
pub use limits::{Cancel, CancelOnDrop, InputLimits};
pub use mover::{
    DataMover, ItemAction, MoverError, MoverHandle, NoopMover, PodVolumeBackup, PvcUpload,
};
pub use plan::{DryBlock, DryRunReport, ItemRef, Plan, PlanOptions, DEFAULT_VOLUME_GROUP_LABEL};
pub use pool::{run_to_completion, PoolConfig, WorkerPool};
pub use result::{
    BackupResult, BlockRun, Counts, HookResult, ItemResult, ItemStatus, Phase, Progress,
    UploadResult,
};
pub use source::{InputError, LoadError};

/// Reads `input` and returns the blocks as JSON, running nothing (`--dry-run`).
///
/// # Errors
/// See [`Plan::load`].
pub fn dry_run(input: &std::path::Path, options: &PlanOptions) -> Result<String, LoadError> {
    Ok(Plan::load(input, options)?.blocks_json())
}
