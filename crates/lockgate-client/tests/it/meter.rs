//! Measurement from the kernel against real processes (`meter.rs`): a command's known
//! bytes in its totals, its children counted, a process that exits between samples
//! losing nothing already reported, and the totals carried by the renewals and the finish.

use crate::fake::{Fake, Mode};
use lockgate_client::child::{group_alive, Launcher, Supervised};
use lockgate_client::meter::{scan, GroupMeter};
use lockgate_client::{hold, Client, Ending, JustHold, LeaseKeeper, WhileUnreachable};
use lockgate_core::{Outcome, Usage};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// What the shell itself reads and writes beside the data (its script, `head`'s loading).
const SLACK: u64 = 256 << 10;

fn child(script: &str) -> Supervised {
    let argv = ["sh".to_string(), "-c".into(), script.into()];
    Supervised::new(Launcher::direct().command(&argv).spawn().unwrap())
}

/// A directory on the build's own disk (not a tmpfs, where the kernel counts no storage
/// writes).
fn scratch() -> tempfile::TempDir {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&root).unwrap();
    tempfile::tempdir_in(root).unwrap()
}

fn wait_exit(c: &mut Supervised) {
    assert!(
        c.wait_timeout(Duration::from_secs(20)).is_some(),
        "the command did not exit"
    );
}

#[test]
fn a_command_that_writes_a_known_number_of_bytes_shows_them_with_its_childrens() {
    let dir = scratch();
    let d = dir.path().display();
    // 8 MiB by a child of the shell, 1 MiB by a grandchild (through a second shell).
    let mut c = child(&format!(
        "head -c {} /dev/zero > {d}/a; sh -c 'head -c {} /dev/zero > {d}/b'",
        8 * MIB,
        MIB
    ));
    let mut meter = GroupMeter::new(c.pid());
    wait_exit(&mut c);
    let u = meter.finish(c.usage_at_exit());
    let want = 9 * MIB;
    assert!(
        (want..want + SLACK).contains(&u.written_bytes),
        "written {} for {want}: {u:?}",
        u.written_bytes
    );
    assert!(
        (want..want + SLACK).contains(&u.disk_written_bytes),
        "sent to storage {} for {want}: {u:?}",
        u.disk_written_bytes
    );
    assert!(u.elapsed_ms > 0);
    assert_eq!(
        (u.processes, u.rss_bytes),
        (0, 0),
        "nothing is left running"
    );
}

#[test]
fn a_process_that_exits_between_samples_loses_nothing_already_reported() {
    let dir = scratch();
    let d = dir.path().display();
    // The leader exits at once; its background child (an orphan from then on, reaped
    // outside the group) writes 3 MiB and lives a little longer. This process takes the
    // orphan over (a subreaper, as an init would) and reaps it once it has exited, so its
    // totals leave the group's files for good.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut c = child(&format!(
        "(head -c {} /dev/zero > {d}/a; sleep 1) & exit 0",
        3 * MIB
    ));
    let pgid = c.pid();
    let mut meter = GroupMeter::new(pgid);
    wait_exit(&mut c);
    let deadline = Instant::now() + Duration::from_secs(20);
    let seen = loop {
        let s = meter.sample();
        if s.written_bytes >= 3 * MIB || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(seen.written_bytes >= 3 * MIB, "{seen:?}");
    assert!(
        seen.processes >= 1,
        "the orphan was sampled alive: {seen:?}"
    );
    while group_alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!group_alive(pgid), "the orphan did not exit");
    let group = rustix::process::Pid::from_raw(pgid as i32);
    rustix::process::waitid(
        rustix::process::WaitId::Pgid(group),
        rustix::process::WaitIdOptions::EXITED,
    )
    .unwrap();
    let raw = scan(pgid);
    assert_eq!(
        raw.written_bytes, 0,
        "the reaped orphan's totals are gone: {raw:?}"
    );
    let after = meter.sample();
    assert!(
        after.written_bytes >= seen.written_bytes,
        "reported {} then {} (the group's members now sum to {})",
        seen.written_bytes,
        after.written_bytes,
        raw.written_bytes
    );
    assert_eq!(after.processes, 0);
}

#[test]
fn renewals_and_the_finish_carry_the_totals() {
    let dir = scratch();
    let d = dir.path().display();
    let ttl = Duration::from_millis(300);
    let fake = Fake::start(Mode::Renew, ttl);
    let client = Client::new(fake.url(), None).unwrap();
    let mut lease = LeaseKeeper::new(client, 1, 7, ttl, WhileUnreachable::StopBeforeExpiry);
    let mut c = child(&format!(
        "head -c {} /dev/zero > {d}/a; sleep 0.6; sh -c 'head -c {} /dev/zero > {d}/b'; sleep 0.3",
        2 * MIB,
        2 * MIB
    ));
    let held = hold(&mut c, &mut lease, Duration::from_secs(5), &mut JustHold);
    assert_eq!(held.ending, Ending::Exited);
    let want = 4 * MIB;
    assert!(
        (want..want + SLACK).contains(&held.usage.written_bytes),
        "{:?}",
        held.usage
    );
    let reports: Vec<Usage> = fake
        .bodies()
        .iter()
        .filter_map(|b| serde_json::from_value(b.get("usage")?.clone()).ok())
        .collect();
    assert!(reports.len() >= 3, "{} reports", reports.len());
    for pair in reports.windows(2) {
        assert!(pair[1].written_bytes >= pair[0].written_bytes, "{pair:?}");
        assert!(pair[1].elapsed_ms >= pair[0].elapsed_ms, "{pair:?}");
    }
    assert!(
        reports
            .iter()
            .any(|r| r.written_bytes >= 2 * MIB && r.processes >= 1),
        "a renewal while it ran carried the first 2 MiB: {reports:?}"
    );
    let finish = lease.finish_request(Outcome::Succeeded, None);
    assert_eq!(finish.usage, Some(held.usage));
}

#[test]
fn a_server_older_than_the_report_keeps_the_lease() {
    let ttl = Duration::from_millis(300);
    let fake = Fake::start(Mode::Old, ttl);
    let client = Client::new(fake.url(), None).unwrap();
    let mut lease = LeaseKeeper::new(client, 1, 7, ttl, WhileUnreachable::StopBeforeExpiry);
    let mut c = child("sleep 0.8");
    let held = hold(&mut c, &mut lease, Duration::from_secs(5), &mut JustHold);
    assert_eq!(
        held.ending,
        Ending::Exited,
        "the refused field cost the lease"
    );
    let bodies = fake.bodies();
    let with: Vec<bool> = bodies.iter().map(|b| b.get("usage").is_some()).collect();
    assert_eq!(with.first(), Some(&true), "{bodies:?}");
    assert!(
        with[1..].iter().all(|w| !w),
        "only the first renewal carries it: {with:?}"
    );
    assert!(fake.renewals() >= 2, "{bodies:?}");
    let finish = lease.finish_request(Outcome::Succeeded, None);
    assert_eq!(finish.usage, None, "not sent to a server that refused it");
}
