//! Automatic limits in the engine: a partition starts at its range's `min`, a number set
//! by the controller admits at once when raised and drains when lowered (nothing stopped),
//! stays within the range, leaves fixed `values` alone, survives a policy change and
//! travels to the engine a forecast plays.

use crate::common::*;
use lockgate_core::job::{JobState, Outcome};
use lockgate_core::{Engine, Timestamp};

const POLICY: &str = "[leases]\nttl = \"7d\"\n[queue]\nreserve_after = \"7d\"\n\n[[limit]]\nname = \"ds\"\nper = [\"datastore\"]\nmax = { auto = \"throughput\", min = 1, max = 4 }\nvalues = { fixed = 2 }\n";
const DS1: &str = "limit:ds[datastore=ds1]";

fn running_in(e: &Engine, ds: &str) -> usize {
    e.jobs()
        .filter(|j| j.state == JobState::Running && j.attrs.get("datastore") == Some(ds))
        .count()
}

#[test]
fn a_set_number_admits_at_once_drains_when_lowered_and_keeps_its_range() {
    let mut e = engine(POLICY);
    let ids: Vec<u64> = (0..6)
        .map(|_| submit(&mut e, spec("backup", &[("datastore", "ds1")]), 0))
        .collect();
    for _ in 0..3 {
        submit(&mut e, spec("backup", &[("datastore", "fixed")]), 0);
    }
    assert_eq!(running_in(&e, "ds1"), 1, "a partition starts at min");
    assert_eq!(running_in(&e, "fixed"), 2, "a fixed value is not automatic");
    let scopes = e.auto_scopes();
    assert_eq!(scopes.len(), 1, "{scopes:?}");
    assert_eq!((scopes[0].scope.as_str(), scopes[0].limit), (DS1, 1));

    assert_eq!(e.set_auto_limit(DS1, 3, Timestamp(10)), Some(3));
    assert_eq!(running_in(&e, "ds1"), 3, "a raised number admits at once");
    assert_eq!(
        e.set_auto_limit(DS1, 99, Timestamp(20)),
        Some(4),
        "clamped to max"
    );
    assert_eq!(running_in(&e, "ds1"), 4);
    assert_eq!(
        e.set_auto_limit("limit:ds[datastore=fixed]", 4, Timestamp(20)),
        None
    );

    assert_eq!(e.set_auto_limit(DS1, 2, Timestamp(30)), Some(2));
    assert_eq!(running_in(&e, "ds1"), 4, "lowering stops nothing");
    let t = token(&e, ids[0]);
    e.finish(ids[0], t, Outcome::Succeeded, None, Timestamp(40))
        .unwrap();
    assert_eq!(
        running_in(&e, "ds1"),
        3,
        "it drains: nothing admitted over 2"
    );
    e.check_invariants().unwrap();

    // A policy change keeps the number; the engine a forecast plays has it too.
    e.apply_policy(policy(POLICY), Timestamp(50));
    assert_eq!(e.auto_limits().get(DS1), Some(&2));
    assert_eq!(e.auto_scopes()[0].limit, 2);
    let played = Engine::from_shared(e.share(), Timestamp(60));
    assert_eq!(played.auto_limits().get(DS1), Some(&2));
}

#[test]
fn a_pin_holds_the_number_and_its_removal_goes_back_to_the_learned_one() {
    let mut e = engine(POLICY);
    for _ in 0..6 {
        submit(&mut e, spec("backup", &[("datastore", "ds1")]), 0);
    }
    e.set_auto_limit(DS1, 2, Timestamp(10));
    assert_eq!(running_in(&e, "ds1"), 2);
    let pinned = POLICY.replace("max = 4 }", "max = 4, pin = 4 }");
    e.apply_policy(policy(&pinned), Timestamp(20));
    assert_eq!(e.auto_scopes()[0].limit, 4);
    assert_eq!(
        running_in(&e, "ds1"),
        4,
        "a pin above the number admits at once"
    );
    assert_eq!(
        e.auto_limits().get(DS1),
        Some(&2),
        "what was learned is kept"
    );
    e.apply_policy(policy(POLICY), Timestamp(30));
    assert_eq!(
        e.auto_scopes()[0].limit,
        2,
        "released: the learned number again (the scope drains to it)"
    );
    e.check_invariants().unwrap();
}

#[test]
fn a_guard_leaves_a_node_fewer_slots_which_drain_and_come_back() {
    let mut e = engine(
        "[leases]\nttl = \"7d\"\n[queue]\nreserve_after = \"7d\"\n[nodes]\n[[nodes.rule]]\nselector = \"\"\nmax_running = 4\nguard = { memory = 20 }\n",
    );
    node(&mut e, "n1", &[], &["backup"], 0);
    let mut pinned = spec("backup", &[]);
    pinned.node = Some("n1".into());
    let ids: Vec<u64> = (0..6).map(|_| submit(&mut e, pinned.clone(), 0)).collect();
    let on_n1 = |e: &Engine| e.jobs().filter(|j| j.state == JobState::Running).count();
    assert_eq!(on_n1(&e), 4);
    assert_eq!(e.node_guard("n1").map(|(_, n)| n), Some(4));
    assert!(e.set_node_guard("n1", Some(2), Timestamp(10)));
    assert_eq!(on_n1(&e), 4, "nothing is stopped");
    for &id in &ids[..3] {
        let t = token(&e, id);
        e.finish(id, t, Outcome::Succeeded, None, Timestamp(20))
            .unwrap();
    }
    assert_eq!(
        on_n1(&e),
        2,
        "it drained to the guard's 2, then admitted up to it"
    );
    e.check_invariants().unwrap();
    assert!(e.set_node_guard("n1", None, Timestamp(30)));
    assert_eq!(
        on_n1(&e),
        3,
        "the rule's number again: the rest is admitted"
    );
    assert!(!e.set_node_guard("nowhere", Some(1), Timestamp(40)));
}
