//! `lockgate hook vzdump` driven as vzdump drives its hook script.
//!
//! The contract, from pve-manager's `vzdump-hook-script.pl` and `PVE/VZDump.pm`: vzdump
//! runs the script directly (not through a shell) with the phase as its first argument;
//! `job-init`, `job-start`, `job-end` and `job-abort` alone; `backup-start`, `backup-end`,
//! `backup-abort`, `log-end`, `pre-stop`, `pre-restart` and `post-restart` followed by the
//! mode (stop, suspend, snapshot) and the guest's id. Its environment carries `VMTYPE`
//! (qemu or lxc), `STOREID`, `DUMPDIR` (unset for a PBS storage), the guest's `HOSTNAME`,
//! `TARGET` at `backup-end` and `LOGFILE` at `log-end`. A non-zero exit at
//! `backup-start` fails that guest, and vzdump then runs `backup-abort`. One vzdump worker
//! process runs every guest of a job in turn.
//!
//! The stand-in for vzdump below is a Perl program (vzdump is Perl) doing exactly that,
//! one per simulated PVE node, all at once against one server and one datastore. A node
//! can have a host name of its own: its vzdump then runs in a UTS namespace of its own
//! (`unshare --uts`, as root), so the hook reads that name as a PVE node's hook would.

use crate::harness::*;
use lockgate_core::JobState;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A vzdump job: runs the hook's phases for each guest; a guest's "backup" records its
/// start and end (wall clock, µs) in the log and takes `$ENV{BACKUP_S}` seconds; the guest
/// `$ENV{ABORT_VMID}` fails mid-backup (backup-abort instead of backup-end).
const FAKE_VZDUMP: &str = r#"
use strict;
use warnings;
use Time::HiRes qw(time sleep);
my ($hook, $log, @vmids) = @ARGV;
sub hook { system($hook, @_); return $? >> 8; }
sub note { open(my $f, '>>', $log) or die; printf $f "%s %s %.6f\n", @_, time; close $f; }
hook('job-init') == 0 or die "job-init";
hook('job-start') == 0 or die "job-start";
for my $vmid (@vmids) {
    $ENV{VMTYPE} = ($vmid % 2) ? 'qemu' : 'lxc';
    $ENV{HOSTNAME} = "guest$vmid";
    if (hook('backup-start', 'snapshot', $vmid) != 0) {
        hook('backup-abort', 'snapshot', $vmid);
        note('refused', $vmid);
        next;
    }
    note('start', $vmid);
    sleep($ENV{BACKUP_S});
    note('end', $vmid);
    if (($ENV{ABORT_VMID} // '') eq $vmid) {
        hook('backup-abort', 'snapshot', $vmid);
        next;
    }
    $ENV{TARGET} = "/tmp/vzdump-$vmid.vma";
    hook('backup-end', 'snapshot', $vmid) == 0 or die "backup-end";
    delete $ENV{TARGET};
    $ENV{LOGFILE} = "/tmp/vzdump-$vmid.log";
    hook('log-end', 'snapshot', $vmid) == 0 or die "log-end";
    delete $ENV{LOGFILE};
}
hook('job-end') == 0 or die "job-end";
"#;

const POLICY: &str = "[global]\nmax_running = 10\n[leases]\nttl = \"3s\"\n\n[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 2\n";

/// The hook script as packaged (`packaging/hooks/vzdump-hook`), with this build's binary.
/// Written once: rewriting it while another node's vzdump executes it fails that exec
/// ("Text file busy").
fn hook_script(s: &Srv) -> std::path::PathBuf {
    let path = s.path("vzdump-hook");
    if !path.exists() {
        std::fs::write(&path, format!("#!/bin/sh\nexec {BIN} hook vzdump \"$@\"\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

/// One vzdump job of a PVE node.
#[derive(Clone, Copy)]
struct Job<'a> {
    /// The guests, backed up in turn.
    vmids: &'a [u32],
    /// How long each guest's backup takes.
    backup_s: f64,
    /// The guest that fails mid-backup.
    abort: Option<u32>,
    /// The node's host name (else this machine's).
    node: Option<&'a str>,
    /// The storage backed up to (`STOREID`).
    store: &'a str,
}

impl<'a> Job<'a> {
    fn of(vmids: &'a [u32], backup_s: f64) -> Job<'a> {
        Job {
            vmids,
            backup_s,
            abort: None,
            node: None,
            store: "pbs1",
        }
    }
}

/// Starts `job`; its output (the task log) goes to `out`.
fn vzdump(s: &Srv, log: &Path, out: &Path, job: Job) -> Child {
    let Job {
        vmids,
        backup_s,
        abort,
        node,
        store,
    } = job;
    // Written once, like the hook: another node's perl may be reading it.
    let program = s.path("fake-vzdump.pl");
    if !program.exists() {
        std::fs::write(&program, FAKE_VZDUMP).unwrap();
    }
    let task_log = std::fs::File::create(out).unwrap();
    let base = s.cli(&[]);
    let mut cmd = match node {
        None => Command::new("perl"),
        Some(name) => {
            let mut c = Command::new("unshare");
            c.args([
                "--uts",
                "sh",
                "-c",
                "echo \"$0\" > /proc/sys/kernel/hostname && exec perl \"$@\"",
                name,
            ]);
            c
        }
    };
    cmd.arg(&program)
        .arg(hook_script(s))
        .arg(log)
        .args(vmids.iter().map(u32::to_string))
        .envs(
            base.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("STOREID", store)
        .env("BACKUP_S", backup_s.to_string())
        .env(
            "ABORT_VMID",
            abort.map(|v| v.to_string()).unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stdout(task_log.try_clone().unwrap())
        .stderr(task_log);
    cmd.spawn().unwrap()
}

/// Waits for every vzdump, each of which must succeed; their task logs, joined.
fn wait_all(jobs: Vec<(Child, std::path::PathBuf)>) -> String {
    let mut task_logs = String::new();
    for (mut child, out) in jobs {
        let status = child.wait().unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(status.success(), "a vzdump failed: {text}");
        task_logs.push_str(&text);
    }
    task_logs
}

/// The most guests whose recorded backups overlap at one instant.
fn most_at_once(log: &str) -> usize {
    most_at_once_of(log, |_| true)
}

/// [`most_at_once`] among the guests `which` picks.
fn most_at_once_of(log: &str, which: impl Fn(u32) -> bool) -> usize {
    let mut points: Vec<(f64, i32)> = log
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (what, vmid, t) = (w.next()?, w.next()?, w.next()?.parse::<f64>().ok()?);
            if !which(vmid.parse().ok()?) {
                return None;
            }
            match what {
                "start" => Some((t, 1)),
                "end" => Some((t, -1)),
                _ => None,
            }
        })
        .collect();
    // At equal times an end comes first: a slot given back and taken is not an overlap.
    points.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut now, mut most) = (0, 0);
    for (_, d) in points {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn three_pve_nodes_backing_up_to_one_datastore_never_run_more_guests_than_the_policy_allows() {
    let s = Srv::start(POLICY);
    let log = s.path("backups.log");
    let nodes: Vec<(Child, std::path::PathBuf)> =
        [[101, 102, 103], [201, 202, 203], [301, 302, 303]]
            .iter()
            .enumerate()
            .map(|(i, vmids)| {
                let out = s.path(&format!("task-{i}.log"));
                (vzdump(&s, &log, &out, Job::of(vmids, 0.4)), out)
            })
            .collect();
    let task_logs = wait_all(nodes);
    let record = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        record.lines().filter(|l| l.starts_with("end")).count(),
        9,
        "{record}\n{task_logs}"
    );
    let most = most_at_once(&record);
    assert_eq!(
        most, 2,
        "per-datastore max 2, and both slots used: {record}"
    );
    // The waiting guests said why, into their task logs.
    assert!(
        task_logs.contains("waiting:") && task_logs.contains("limit:per-datastore"),
        "{task_logs}"
    );
    let admin = s.admin();
    let jobs = admin.jobs(&lockgate_api::JobQuery::default()).unwrap().jobs;
    assert_eq!(jobs.len(), 9);
    for j in &jobs {
        assert_eq!(j.state, JobState::Succeeded, "{j:?}");
        assert_eq!(j.attrs.get("datastore").map(String::as_str), Some("pbs1"));
        let vmid = j.attrs.get("vmid").unwrap();
        let kind = if vmid.parse::<u32>().unwrap() % 2 == 1 {
            "vm"
        } else {
            "ct"
        };
        assert_eq!(
            j.attrs.get("group"),
            Some(&format!("{kind}/{vmid}")),
            "{j:?}"
        );
    }
}

/// Two limits at once: two guests per datastore, and one per PVE node through the
/// `client` attribute, which the hook takes from the node's host name. Each node runs two
/// vzdump jobs at once (two datacenter jobs whose times overlap), one per datastore, so
/// only the per-node limit keeps a node to one guest.
const PER_NODE_POLICY: &str = "[global]\nmax_running = 10\n[leases]\nttl = \"3s\"\n\n[[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = 2\n\n[[limit]]\nname = \"per-node\"\nper = [\"client\"]\nmax = 1\n";

#[test]
fn the_client_attribute_is_the_pve_node_so_a_per_node_limit_holds_beside_the_datastore_s() {
    let s = Srv::start(PER_NODE_POLICY);
    let log = s.path("backups.log");
    let nodes: Vec<(Child, std::path::PathBuf)> = (1..=3u32)
        .flat_map(|n| [(n, "pbs1", 0), (n, "pbs2", 10)])
        .map(|(n, store, first)| {
            let out = s.path(&format!("task-{n}-{store}.log"));
            let vmids = [n * 100 + first + 1, n * 100 + first + 2];
            let name = format!("pve{n}");
            let job = Job {
                node: Some(&name),
                store,
                ..Job::of(&vmids, 0.3)
            };
            (vzdump(&s, &log, &out, job), out)
        })
        .collect();
    let task_logs = wait_all(nodes);
    let record = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        record.lines().filter(|l| l.starts_with("end")).count(),
        12,
        "{record}\n{task_logs}"
    );
    for n in 1..=3u32 {
        assert_eq!(
            most_at_once_of(&record, |vmid| vmid / 100 == n),
            1,
            "node pve{n}: one guest at a time: {record}"
        );
    }
    for (store, first) in [("pbs1", 0), ("pbs2", 10)] {
        let on_store = |vmid: u32| vmid % 100 > first && vmid % 100 <= first + 2;
        assert!(
            most_at_once_of(&record, on_store) <= 2,
            "per-datastore max 2 on {store}: {record}"
        );
    }
    assert!(
        task_logs.contains("limit:per-node[client=pve"),
        "a waiting guest names its node's limit: {task_logs}"
    );
    let jobs = s
        .admin()
        .jobs(&lockgate_api::JobQuery::default())
        .unwrap()
        .jobs;
    assert_eq!(jobs.len(), 12);
    for j in &jobs {
        let vmid: u32 = j.attrs["vmid"].parse().unwrap();
        assert_eq!(
            j.attrs.get("client"),
            Some(&format!("pve{}", vmid / 100)),
            "{j:?}"
        );
    }
}

#[test]
fn a_vzdump_killed_mid_backup_returns_its_slot_at_once_and_backup_abort_releases_as_failed() {
    let s = Srv::start(POLICY);
    let admin = s.admin();
    let log = s.path("backups.log");
    let mut killed = vzdump(&s, &log, &s.path("task-k.log"), Job::of(&[101], 60.0));
    assert!(eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start 101"))
    }));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let t = Instant::now();
    assert!(eventually(Duration::from_secs(3), || admin
        .job(1)
        .is_ok_and(|j| j.state == JobState::Failed)));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "slot back after {:?}",
        t.elapsed()
    );

    let mut aborted = vzdump(
        &s,
        &log,
        &s.path("task-a.log"),
        Job {
            abort: Some(102),
            ..Job::of(&[102], 0.1)
        },
    );
    assert!(aborted.wait().unwrap().success());
    let job = admin.job(2).unwrap();
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    assert!(
        job.message
            .as_deref()
            .unwrap_or("")
            .contains("vzdump backup-abort"),
        "{job:?}"
    );

    // An unknown phase fails, as vzdump's example script does.
    let out = s
        .cli(&["hook", "vzdump", "backup-middle", "snapshot", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown phase 'backup-middle'"));
}
