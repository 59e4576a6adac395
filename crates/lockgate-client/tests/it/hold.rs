//! The safety invariant: the child is dead before the server can hand its slot to someone
//! else. And the other ways a held child ends: by itself, cancel requested, lease lost.

use crate::fake::{Fake, Mode};
use lockgate_client::child::{exit_code, Launcher, Supervised};
use lockgate_client::{hold, Client, Ending, Held, JustHold, LeaseKeeper, WhileUnreachable};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(600);

/// A child in its own process group running `script` under `sh`.
fn child(script: &str) -> Supervised {
    let argv = ["sh".to_string(), "-c".into(), script.into()];
    Supervised::new(Launcher::direct().command(&argv).spawn().unwrap())
}

fn keeper(fake: &Fake, policy: WhileUnreachable) -> LeaseKeeper {
    let client = Client::new(fake.url(), None).unwrap();
    LeaseKeeper::new(client, 1, 7, TTL, policy)
}

/// Holds `script` while the server renews for `healthy`, then answers in `then`; returns
/// how it ended, when `hold` returned, and when the server-side lease ran out.
fn hold_then(
    script: &str,
    healthy: Duration,
    then: Mode,
    grace: Duration,
) -> (Held, Instant, Instant) {
    let fake = Fake::start(Mode::Renew, TTL);
    let mut lease = keeper(&fake, WhileUnreachable::StopBeforeExpiry);
    let mut c = child(script);
    let f = fake.clone();
    std::thread::spawn(move || {
        std::thread::sleep(healthy);
        f.set(then);
    });
    let held = hold(&mut c, &mut lease, grace, &mut JustHold);
    let returned = Instant::now();
    let expiry = fake.last_renewal().expect("some renewal got through") + TTL;
    (held, returned, expiry)
}

/// Slack for the waiter thread to see the exit after the SIGKILL (2 busy cores).
const SLACK: Duration = Duration::from_millis(100);

#[test]
fn a_server_that_stops_answering_gets_the_child_killed_before_its_lease_can_run_out() {
    // The child ignores SIGTERM: only the SIGKILL at the lease's expiry ends it. Before the
    // keeper bounded its renewal call, this waited out the 30 s call timeout.
    let (held, returned, expiry) = hold_then(
        "trap '' TERM; sleep 30",
        Duration::from_millis(700),
        Mode::Silent,
        Duration::from_secs(10),
    );
    assert!(matches!(held.ending, Ending::Lost(_)), "{:?}", held.ending);
    assert_eq!(exit_code(held.status), 128 + 9);
    assert!(
        returned <= expiry + SLACK,
        "the child outlived its lease by {:?}",
        returned - expiry
    );
}

#[test]
fn a_server_that_goes_away_gets_the_child_terminated_before_its_lease_can_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("term");
    let script = format!(
        "trap 'echo > {}; exit 0' TERM; while :; do sleep 0.02; done",
        marker.display()
    );
    let (held, returned, expiry) = hold_then(
        &script,
        Duration::from_millis(500),
        Mode::Close,
        Duration::from_secs(10),
    );
    let Ending::Lost(why) = &held.ending else {
        panic!("{:?}", held.ending)
    };
    assert!(why.contains("may run out on the server"), "{why}");
    assert!(marker.exists(), "SIGTERM came first");
    assert!(returned <= expiry + SLACK, "{:?} late", returned - expiry);
}

#[test]
fn a_refused_renewal_stops_the_child_and_renews_no_more() {
    let fake = Fake::start(Mode::Refuse, TTL);
    let mut lease = keeper(&fake, WhileUnreachable::StopBeforeExpiry);
    let mut c = child("sleep 30");
    let held = hold(&mut c, &mut lease, Duration::from_secs(5), &mut JustHold);
    let Ending::Lost(why) = &held.ending else {
        panic!("{:?}", held.ending)
    };
    assert!(why.contains("lease_lost"), "{why}");
    assert_eq!(exit_code(held.status), 128 + 15);
}

#[test]
fn cancel_requested_stops_the_child_and_the_lease_is_held_meanwhile() {
    let fake = Fake::start(Mode::CancelRequested, TTL);
    let mut lease = keeper(&fake, WhileUnreachable::StopBeforeExpiry);
    // Ignores SIGTERM: the grace runs out, renewals go on meanwhile. The cancel is learnt
    // from the watch's first poll, before the first renewal is due.
    let mut c = child("trap '' TERM; sleep 30");
    let start = Instant::now();
    let held = hold(
        &mut c,
        &mut lease,
        Duration::from_millis(700),
        &mut JustHold,
    );
    assert_eq!(held.ending, Ending::Cancelled);
    assert_eq!(exit_code(held.status), 128 + 9);
    assert!(
        start.elapsed() >= Duration::from_millis(700),
        "{:?}",
        start.elapsed()
    );
    assert!(
        fake.renewals() >= 2,
        "renewed during the grace: {}",
        fake.renewals()
    );
}

#[test]
fn a_child_that_exits_by_itself_keeps_its_status_and_its_lease() {
    let fake = Fake::start(Mode::Renew, TTL);
    let mut lease = keeper(&fake, WhileUnreachable::StopBeforeExpiry);
    let mut c = child("sleep 0.5; exit 3");
    let held = hold(&mut c, &mut lease, Duration::from_secs(5), &mut JustHold);
    assert_eq!((held.ending, exit_code(held.status)), (Ending::Exited, 3));
    assert!(fake.renewals() >= 2, "{}", fake.renewals());
}

#[test]
fn an_agent_holds_past_the_ttl_for_its_unreachable_grace() {
    let fake = Fake::start(Mode::Close, TTL);
    let mut lease = keeper(
        &fake,
        WhileUnreachable::HoldFor(Duration::from_millis(1500)),
    );
    let mut c = child("sleep 30");
    let start = Instant::now();
    let held = hold(&mut c, &mut lease, Duration::from_secs(5), &mut JustHold);
    let took = start.elapsed();
    let Ending::Lost(why) = &held.ending else {
        panic!("{:?}", held.ending)
    };
    assert!(why.contains("unreachable_grace"), "{why}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "{took:?}"
    );
}
