//! `lockgate hook vzdump`: the hook script of Proxmox VE's vzdump (`script:` in
//! `/etc/vzdump.conf`, or `--script`), gating each guest's backup through a hold
//! ([`super::hold`]). docs/integrations/pbs.md, "Gating the datacenter's backup jobs".
//!
//! The contract is pve-manager's (`vzdump-hook-script.pl`, `PVE/VZDump.pm`): vzdump runs
//! the script with the phase as its first argument. `job-init`, `job-start`, `job-end` and
//! `job-abort` come alone; `backup-start`, `backup-end`, `backup-abort`, `log-end`,
//! `pre-stop`, `pre-restart` and `post-restart` come with the mode (stop, suspend,
//! snapshot) and the guest's id. The environment names the guest's type (`VMTYPE`, qemu or
//! lxc), the storage (`STOREID`; unset when `--dumpdir` is given), `DUMPDIR` (unset for a
//! PBS storage) and the guest's `HOSTNAME`. A non-zero exit at `backup-start` fails that
//! guest's backup; an unknown phase fails, as the example script does.
//!
//! Here: `backup-start` acquires the hold `vzdump-VMID` (kind `backup` unless `--kind`,
//! `datastore` = STOREID, else DUMPDIR, `group` = `vm/VMID` or `ct/VMID`, `vmid`, `mode`,
//! and `client` = this PVE node's hostname; an `--attr` given wins) and prints why it waits
//! into the task log;
//! `backup-end` releases it succeeded, `backup-abort` failed. The hold is bound to the
//! vzdump worker that ran the hook: a vzdump killed mid-backup gives its slot back at
//! once. Every other phase passes.

use super::exit::Exit;
use super::flags::ClientJobFlags;
use super::hold::{self, AcquireArgs, ReleaseArgs};
use crate::GlobalArgs;
use std::process::ExitCode;

/// `lockgate hook`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// vzdump's hook script: `script: /usr/share/lockgate/vzdump-hook` in /etc/vzdump.conf
    /// (that script runs `lockgate hook vzdump "$@"`).
    Vzdump(VzdumpArgs),
}

/// Arguments of `lockgate hook vzdump`.
#[derive(Debug, clap::Args)]
pub struct VzdumpArgs {
    #[command(flatten)]
    wait: ClientJobFlags,
    /// The phase vzdump names (job-start, backup-start, backup-end, backup-abort, ...).
    phase: String,
    /// The backup mode (stop, suspend, snapshot), for the guest phases.
    mode: Option<String>,
    /// The guest's id, for the guest phases.
    vmid: Option<String>,
}

/// Runs `lockgate hook`.
pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Vzdump(a) => vzdump(global, a),
    }
}

const PASS: [&str; 8] = [
    "job-init",
    "job-start",
    "job-end",
    "job-abort",
    "log-end",
    "pre-stop",
    "pre-restart",
    "post-restart",
];

fn vzdump(global: &GlobalArgs, mut args: VzdumpArgs) -> anyhow::Result<ExitCode> {
    let phase = args.phase.as_str();
    if PASS.contains(&phase) {
        return Ok(ExitCode::SUCCESS);
    }
    if !matches!(phase, "backup-start" | "backup-end" | "backup-abort") {
        eprintln!("lockgate: got unknown phase '{phase}'");
        return Ok(Exit::Usage.into());
    }
    let (Some(mode), Some(vmid)) = (args.mode.clone(), args.vmid.clone()) else {
        eprintln!("lockgate: vzdump phase {phase} without its mode and guest id");
        return Ok(Exit::Usage.into());
    };
    anyhow::ensure!(
        !vmid.is_empty() && vmid.chars().all(|c| c.is_ascii_digit()),
        "vzdump guest id {vmid:?} is not a number"
    );
    let name = format!("vzdump-{vmid}");
    match phase {
        "backup-start" => {
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let kind = if env("VMTYPE").as_deref() == Some("lxc") {
                "ct"
            } else {
                "vm"
            };
            let datastore = env("STOREID")
                .or_else(|| env("DUMPDIR"))
                .unwrap_or_else(|| "local".into());
            let attrs = &mut args.wait.job.attrs;
            for (k, v) in [
                ("datastore", datastore),
                ("group", format!("{kind}/{vmid}")),
                ("vmid", vmid.clone()),
                ("mode", mode),
                ("client", super::run::host()),
            ] {
                if !attrs.iter().any(|(given, _)| given == k) {
                    attrs.push((k.to_string(), v));
                }
            }
            hold::acquire(
                global,
                AcquireArgs {
                    name,
                    pid: None,
                    wait: args.wait,
                },
            )
        }
        _ => {
            let aborted = phase == "backup-abort";
            // A guest whose backup ended is never failed for lockgate's bookkeeping: a
            // release that found no hold (its start was refused) says so on stderr only.
            hold::release(ReleaseArgs {
                name,
                exit_code: i32::from(aborted),
                message: Some(format!("vzdump {phase}")),
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
