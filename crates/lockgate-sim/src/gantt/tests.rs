//! The Gantt writer's small helpers: bar text colours, clock labels, ticks, steps.

use super::*;

#[test]
fn bar_names_are_dark_on_light_colours() {
    let light: Vec<&str> = PALETTE.iter().copied().filter(|c| is_light(c)).collect();
    let dark = ["#4e79a7", "#9c755f"];
    let expected: Vec<&str> = PALETTE
        .iter()
        .copied()
        .filter(|c| !dark.contains(c))
        .collect();
    assert_eq!(light, expected);
    assert!(!is_light("#4e79a7") && is_light("#ffffff") && !is_light("#000000"));
}

#[test]
fn clock_labels() {
    assert_eq!(clock(0), "0");
    assert_eq!(clock(250), "250ms");
    assert_eq!(clock(45_000), "45s");
    assert_eq!(clock(1_500), "1.5s");
    assert_eq!(clock(750_000), "12m30s");
    assert_eq!(clock(7_500_000), "2h05m");
}

#[test]
fn ticks_give_about_ten_labels() {
    for span in [3, 900, 5_000, 61_000, 3_600_000, 86_400_000, 700_000_000] {
        let n = span / tick_step(span);
        assert!((1..=10).contains(&n), "span {span}: {n} ticks");
    }
}

#[test]
fn steps_count_overlaps() {
    let s = steps([(0, 10, 1), (5, 15, 2), (20, 20, 1)].into_iter());
    assert_eq!(s, vec![(0, 1), (5, 3), (10, 2), (15, 0)]);
}
