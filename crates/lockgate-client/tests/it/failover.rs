//! Several servers behind one client: a standby's `not_leader` answer is followed to the
//! leader it names, a server that refuses connections is passed over, and a holder keeps
//! its lease across a change of leader shorter than the TTL.

use crate::fake::{Fake, Mode};
use lockgate_client::child::{Launcher, Supervised};
use lockgate_client::{hold, Client, Ending, JustHold, LeaseKeeper, WhileUnreachable};
use std::net::TcpListener;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(900);

/// A URL on which nothing listens (the port was free a moment ago).
fn closed_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

#[test]
fn a_refused_connection_moves_on_to_the_next_server_and_stays_there() {
    let leader = Fake::start(Mode::Renew, TTL);
    let c = Client::new(&format!("{},{}", closed_url(), leader.url()), None).unwrap();
    let job = c.heartbeat(1, 7).expect("the second server answers");
    assert_eq!(job.id, 1);
    assert_eq!(
        c.base(),
        leader.url(),
        "later calls start at the server that answered"
    );
    c.clone().heartbeat(1, 7).unwrap();
    assert_eq!(leader.renewals(), 2);
}

#[test]
fn a_standby_is_followed_to_the_leader_it_names_in_either_order() {
    let leader = Fake::start(Mode::Renew, TTL);
    let standby = Fake::start(Mode::NotLeader, TTL);
    standby.name_leader(&format!("{}/", leader.url()));
    for list in [
        format!("{},{}", standby.url(), leader.url()),
        format!("{},{}", leader.url(), standby.url()),
        // Only the standby given: its named leader is still tried.
        standby.url().to_string(),
    ] {
        let c = Client::new(&list, None).unwrap();
        c.heartbeat(1, 7).unwrap_or_else(|e| panic!("{list}: {e}"));
        assert_eq!(c.base(), leader.url(), "{list}");
    }
    assert_eq!(leader.renewals(), 3);
}

#[test]
fn standbys_without_a_leader_give_a_temporary_not_leader_error() {
    let a = Fake::start(Mode::NotLeader, TTL);
    let b = Fake::start(Mode::NotLeader, TTL);
    let c = Client::new(&format!("{},{}", a.url(), b.url()), None).unwrap();
    let start = Instant::now();
    let e = c.heartbeat(1, 7).unwrap_err();
    assert_eq!(e.code(), Some("not_leader"), "{e}");
    assert!(e.is_temporary(), "callers retry it");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(8),
        "went round for FOLLOW_LIMIT, then gave the answer back: {took:?}"
    );
}

#[test]
fn a_holder_keeps_its_lease_when_the_leader_stops_answering_and_a_standby_takes_over() {
    let old = Fake::start(Mode::Renew, TTL);
    let new = Fake::start(Mode::NotLeader, TTL);
    new.name_leader(old.url());
    let client = Client::new(&format!("{},{}", old.url(), new.url()), None).unwrap();
    let mut lease = LeaseKeeper::new(client, 1, 7, TTL, WhileUnreachable::StopBeforeExpiry);
    let argv = ["sh".to_string(), "-c".into(), "sleep 2.7".into()];
    let mut child = Supervised::new(Launcher::direct().command(&argv).spawn().unwrap());
    let (o, n) = (old.clone(), new.clone());
    std::thread::spawn(move || {
        std::thread::sleep(TTL);
        // The leader pauses (accepts, never answers); a standby takes over within TTL/3.
        o.set(Mode::Silent);
        std::thread::sleep(TTL / 4);
        n.set(Mode::Renew);
    });
    let held = hold(
        &mut child,
        &mut lease,
        Duration::from_secs(1),
        &mut JustHold,
    );
    assert_eq!(held.ending, Ending::Exited, "the lease was kept throughout");
    assert!(held.status.success());
    assert!(old.renewals() >= 2, "{}", old.renewals());
    assert!(new.renewals() >= 2, "{}", new.renewals());
}
