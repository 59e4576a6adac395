//! The controller in virtual time against modelled datastores: a knee at 3 and at 8, a
//! plateau, a link that degrades past its knee, a noisy one. Each interval the model admits
//! up to the number (the queue is always deep), lets one job end when the scope is over it
//! (a lowered number drains, nothing is stopped), and reports the total rate of the jobs
//! running.

use super::*;

/// A deterministic noise source (xorshift), so every run is the same.
struct Noise(u64);

impl Noise {
    /// A factor in `1 ± amplitude`.
    fn factor(&mut self, amplitude: f64) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + amplitude * (2.0 * unit - 1.0)
    }
}

/// What one run of the model showed.
struct Run {
    /// The number after each interval.
    values: Vec<u32>,
    steps: Vec<Step>,
}

impl Run {
    /// The numbers taken over the last `n` intervals.
    fn last(&self, n: usize) -> Vec<u32> {
        let mut v: Vec<u32> = self.values[self.values.len() - n..].to_vec();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The share of the last `n` intervals spent at `value`.
    fn share_at(&self, n: usize, value: u32) -> f64 {
        let tail = &self.values[self.values.len() - n..];
        tail.iter().filter(|&&v| v == value).count() as f64 / n as f64
    }
}

fn run(config: AutoConfig, rate: impl Fn(u32) -> f64, noise: f64, intervals: usize) -> Run {
    let mut ctl = AutoLimit::new(config, config.min);
    let mut noise_source = Noise(0x9E37_79B9_7F4A_7C15);
    let mut running = 0u32;
    let mut values = Vec::new();
    let mut steps = Vec::new();
    for _ in 0..intervals {
        let number = ctl.value();
        let before = running;
        if running > number {
            running -= 1;
        } else {
            running = number;
        }
        assert!(
            running <= before || running <= number,
            "admitted over the number: {before} -> {running} at {number}"
        );
        let measured = rate(running) * noise_source.factor(noise);
        if let Some(s) = ctl.observe(measured, running == number) {
            assert_eq!(s.from.abs_diff(s.to), 1, "one step at a time: {s:?}");
            steps.push(s);
        }
        let v = ctl.value();
        assert!(
            (config.min..=config.max).contains(&v),
            "{v} outside the range"
        );
        values.push(v);
    }
    Run { values, steps }
}

fn knee(k: u32) -> impl Fn(u32) -> f64 {
    move |n| 100.0 * f64::from(n.min(k))
}

#[test]
fn it_settles_at_a_knee_of_3_and_of_8_within_one_step() {
    for k in [3, 8] {
        let r = run(AutoConfig::throughput(1, 12), knee(k), 0.0, 600);
        let tail = r.last(300);
        assert!(
            tail.iter().all(|&v| v == k || v == k + 1),
            "knee {k}: took {tail:?}"
        );
        assert!(r.share_at(300, k) > 0.7, "knee {k}: {:?}", r.values);
    }
}

#[test]
fn a_plateau_keeps_the_lowest_number() {
    let r = run(AutoConfig::throughput(1, 12), |_| 500.0, 0.0, 400);
    assert_eq!(r.last(300), vec![1, 2]);
    assert!(r.share_at(300, 1) > 0.7);
}

#[test]
fn a_link_that_degrades_past_its_knee_is_stepped_back_from() {
    let degrading = |n: u32| {
        if n <= 5 {
            100.0 * f64::from(n)
        } else {
            500.0 - 60.0 * f64::from(n - 5)
        }
    };
    let r = run(AutoConfig::throughput(1, 12), degrading, 0.0, 600);
    assert!(
        r.last(300).iter().all(|&v| v == 5 || v == 6),
        "{:?}",
        r.last(300)
    );
    assert!(
        r.steps
            .iter()
            .any(|s| s.why == StepReason::Fell && s.from == 6),
        "{:?}",
        r.steps
    );
}

#[test]
fn a_noisy_datastore_settles_within_one_step_of_its_knee() {
    let r = run(AutoConfig::throughput(1, 12), knee(6), 0.05, 1200);
    let tail = r.last(600);
    assert!(tail.iter().all(|&v| (5..=7).contains(&v)), "{tail:?}");
    let spread = tail.iter().max().unwrap() - tail.iter().min().unwrap();
    assert!(spread <= 1, "{tail:?}");
    assert!(
        r.share_at(600, 6) + r.share_at(600, 7) > 0.8,
        "{:?}",
        r.values
    );
}

#[test]
fn the_range_holds_on_both_ends() {
    // A knee above the range: it climbs to the top and stays.
    let r = run(AutoConfig::throughput(2, 4), knee(8), 0.0, 300);
    assert_eq!(r.last(200), vec![4]);
    // A knee below the range: it never goes under the bottom.
    let r = run(AutoConfig::throughput(3, 12), knee(1), 0.0, 300);
    assert_eq!(r.last(200), vec![3, 4]);
    assert!(r.values.iter().all(|&v| v >= 3));
}

#[test]
fn only_full_intervals_count_and_a_lowered_number_drains() {
    let mut ctl = AutoLimit::new(AutoConfig::throughput(1, 12), 4);
    // Not full: nothing is learnt, nothing moves.
    for _ in 0..50 {
        assert_eq!(ctl.observe(400.0, false), None);
    }
    assert_eq!((ctl.value(), ctl.rate_at(4)), (4, None));
    // The model drains a lowered scope one job at a time: its intervals are not full
    // until it is down to the number, so no decision is taken on them.
    let r = run(AutoConfig::throughput(1, 12), knee(3), 0.0, 200);
    for s in r.steps.iter().filter(|s| s.to < s.from) {
        assert!(
            s.rate_below.is_some(),
            "a step back names the rate below: {s:?}"
        );
    }
    assert!(ctl.observe(f64::NAN, true).is_none());
}

#[test]
fn without_the_hold_it_would_swing_around_the_knee() {
    // The check above is not one that cannot fail: with no hold (a planted bug), half the
    // time goes to probing one step over the knee.
    let mut config = AutoConfig::throughput(1, 12);
    config.hold = 0;
    let r = run(config, knee(3), 0.0, 600);
    assert!(r.share_at(300, 3) < 0.7, "{:?}", r.last(300));
}

#[test]
fn a_memory_guard_takes_slots_away_under_pressure_and_gives_them_back_once_it_eases() {
    // Memory pressure grows with the handlers running past 4 (a node whose handlers need
    // much memory): 15% at 5, 30% at 6.
    let pressure = |n: u32| f64::from(n.saturating_sub(4)) * 15.0;
    let limits = GuardLimits {
        memory: Some(20.0),
        ..GuardLimits::default()
    };
    let mut guard = Guard::new(limits, 8);
    let mut running = 0;
    let mut seen = Vec::new();
    for _ in 0..60 {
        let number = guard.value();
        running = if running > number {
            running - 1
        } else {
            number
        };
        guard.observe(Pressure {
            memory: Some(pressure(running)),
            ..Pressure::default()
        });
        seen.push(guard.value());
    }
    let tail: Vec<u32> = seen[40..].to_vec();
    assert!(tail.iter().all(|&v| v == 5), "{seen:?}");
    // The pressure eases (the other load went away): the slots come back, one at a time.
    let mut back = Vec::new();
    for _ in 0..30 {
        guard.observe(Pressure {
            memory: Some(0.0),
            ..Pressure::default()
        });
        back.push(guard.value());
    }
    assert_eq!(*back.last().unwrap(), 8, "{back:?}");
    assert!(back.windows(2).all(|w| w[1] <= w[0] + 1), "{back:?}");
    // Never below one slot.
    let mut g = Guard::new(limits, 2);
    for _ in 0..10 {
        g.observe(Pressure {
            memory: Some(99.0),
            ..Pressure::default()
        });
    }
    assert_eq!(g.value(), 1);
}
