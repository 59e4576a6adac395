//! `[queue] order = "window"`: the order among equal priority, FIFO untouched without it,
//! the explain of a waiting job, and the setting's errors.

use crate::common::*;
use lockgate_core::job::Outcome;
use lockgate_core::Timestamp;
use std::time::Duration;

const POLICY: &str = "[global]\nmax_running = 1\n[queue]\n";

/// Submits four jobs behind a running one, hints three, and returns the order they run in.
fn run_order(queue: &str) -> Vec<u64> {
    let mut e = engine(&format!("{POLICY}{queue}"));
    let first = submit(&mut e, spec("backup", &[]), 1_000);
    let ids: Vec<_> = (0..4)
        .map(|i| submit(&mut e, spec("backup", &[]), 2_000 + i))
        .collect();
    // Hints: 60 s, none, 600 s, 120 s.
    for (&id, secs) in ids.iter().zip([Some(60), None, Some(600), Some(120)]) {
        if let Some(s) = secs {
            e.set_expected_run(id, Duration::from_secs(s), Timestamp(3_000));
        }
    }
    let mut order = Vec::new();
    let mut running = first;
    let mut now = 10_000;
    loop {
        e.finish(
            running,
            token(&e, running),
            Outcome::Succeeded,
            None,
            Timestamp(now),
        )
        .unwrap();
        now += 1_000;
        match ids
            .iter()
            .find(|&&id| state(&e, id).is_some_and(|s| s.is_admitted()))
        {
            Some(&id) => {
                order.push(ids.iter().position(|&x| x == id).unwrap() as u64);
                running = id;
            }
            None => break,
        }
    }
    order
}

#[test]
fn window_runs_the_longest_hinted_first_and_the_unhinted_last() {
    assert_eq!(run_order("order = \"window\"\n"), vec![2, 3, 0, 1]);
}

#[test]
fn fifo_ignores_the_hints() {
    assert_eq!(run_order(""), vec![0, 1, 2, 3]);
    assert_eq!(run_order("order = \"fifo\"\n"), vec![0, 1, 2, 3]);
}

#[test]
fn a_later_arrival_never_overtakes_beyond_the_horizon() {
    let mut e = engine(&format!(
        "[leases]\nttl = \"1h\"\n{POLICY}order = \"window\"\nwindow_horizon = \"1m\"\n"
    ));
    let first = submit(&mut e, spec("backup", &[]), 1_000);
    let short = submit(&mut e, spec("backup", &[]), 2_000);
    e.set_expected_run(short, Duration::from_secs(1), Timestamp(2_000));
    // Arrives 2 minutes later with a far longer run: its planned start is still later.
    let long = submit(&mut e, spec("backup", &[]), 122_000);
    e.set_expected_run(long, Duration::from_secs(3_600), Timestamp(122_000));
    e.finish(
        first,
        token(&e, first),
        Outcome::Succeeded,
        None,
        Timestamp(130_000),
    )
    .unwrap();
    assert!(state(&e, short).unwrap().is_admitted());
}

#[test]
fn explain_gives_the_place_in_the_window_plan() {
    let mut e = engine(&format!("{POLICY}order = \"window\"\n"));
    submit(&mut e, spec("backup", &[]), 1_000);
    let a = submit(&mut e, spec("backup", &[]), 2_000);
    let b = submit(&mut e, spec("backup", &[]), 2_000);
    e.set_expected_run(b, Duration::from_secs(300), Timestamp(2_000));
    let text = e.explain(b, Timestamp(3_000)).unwrap().text;
    // Epoch 2 s (the first hint); `global` ends at 2 + 300 s, so the tail is 302 + 300 / 2
    // s, rounded down to the minute: 420 s; planned start 2 * 2 + 4 h - 420 s = 13 984 s.
    assert!(
        text.contains("window plan: 1st of 2 at its priority, planned start 1970-01-01T03:53:04Z, expected run 300s"),
        "{text}"
    );
    let text = e.explain(a, Timestamp(3_000)).unwrap().text;
    assert!(
        text.contains("window plan: 2nd of 2 at its priority"),
        "{text}"
    );
    assert!(text.contains("no expected run (by arrival)"), "{text}");
}

#[test]
fn fifo_explain_says_nothing_of_a_plan() {
    let mut e = engine(POLICY);
    submit(&mut e, spec("backup", &[]), 1_000);
    let a = submit(&mut e, spec("backup", &[]), 2_000);
    assert!(!e
        .explain(a, Timestamp(3_000))
        .unwrap()
        .text
        .contains("window plan"));
}

#[test]
fn an_unknown_order_names_the_field() {
    let err = lockgate_core::Policy::from_toml("[queue]\norder = \"lifo\"\n", None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("queue.order"), "{err}");
    assert!(
        err.contains("expected \"fifo\" or \"window\", got \"lifo\""),
        "{err}"
    );
}

#[test]
fn a_job_whose_scope_comes_to_end_last_is_rescored_ahead() {
    // Two run slots, one per datastore; both slots busy, so everything below waits.
    let mut e = engine(
        "[global]\nmax_running = 2\n[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 1\n[queue]\norder = \"window\"\n",
    );
    submit(&mut e, spec("backup", &[("datastore", "z1")]), 1_000);
    submit(&mut e, spec("backup", &[("datastore", "z2")]), 1_000);
    let b = submit(&mut e, spec("backup", &[("datastore", "y")]), 2_000);
    e.set_expected_run(b, Duration::from_secs(60), Timestamp(2_000));
    let a = submit(&mut e, spec("backup", &[("datastore", "x")]), 2_500);
    e.set_expected_run(a, Duration::from_secs(60), Timestamp(2_500));
    // Equal tails (the same minute): by arrival.
    let place = |e: &lockgate_core::Engine, id| e.window_place(id).unwrap().place;
    assert!(place(&e, b) < place(&e, a));
    // 100 minutes of work arrive on `x`: its projected end is now the latest of all, so
    // `a` (scored again with its scope) goes before `b`, whose scopes end 50 minutes sooner.
    for _ in 0..10 {
        let j = submit(&mut e, spec("backup", &[("datastore", "x")]), 3_000);
        e.set_expected_run(j, Duration::from_secs(600), Timestamp(3_000));
    }
    assert!(
        place(&e, a) < place(&e, b),
        "{} {}",
        place(&e, a),
        place(&e, b)
    );
    // The longer jobs on `x` still go first on it (longest first on one scope).
    assert_eq!(place(&e, a), 11);
}
