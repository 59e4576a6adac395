//! Engine time: the wall clock, kept safe for leases when the wall clock is set.
//!
//! The engine counts every lease, node TTL and schedule in wall-clock milliseconds, so that
//! times it shows and schedules it fires are calendar times. The wall clock can be set,
//! though (an NTP step, `date -s`, a VM resumed with a stale clock), and a lease must not
//! run out because the calendar moved: a holder counts its lease on its own monotonic
//! clock and would still be running when the server handed its slot on.
//!
//! So each reading of the wall clock is compared with the time elapsed on the monotonic
//! clock since the last one:
//! - the wall clock **stepped forward** (by more than [`STEP_TOLERANCE`]): engine time takes
//!   the step at once (calendar times stay true), and the loop moves every lease and node
//!   TTL forward by the step (`Engine::clock_stepped`), so each still has the time it had;
//! - the wall clock **stepped back**: engine time never goes back; it runs on at half the
//!   monotonic rate until the wall clock meets it. A lease then lasts up to twice its TTL
//!   (late, never early), and a step back of an hour is absorbed in two.
//!
//! # Invariants
//! - Engine time never goes backwards.
//! - Between two readings, engine time advances by at most the monotonic time elapsed plus
//!   [`STEP_TOLERANCE`], except by a step that [`EngineClock::read`] reports; so a lease
//!   whose deadline is moved by every reported step never runs out earlier than its TTL
//!   of monotonic time, give or take the tolerance.
//!
//! The monotonic clock here is `CLOCK_BOOTTIME`: it also counts a suspended machine's
//! sleep, like the wall clock, so a resume is not taken for a step.

use std::time::Duration;

/// A forward difference the engine takes without moving leases: readings of the two
/// clocks are not taken at one instant, and this covers the gap on a loaded machine. It
/// is well inside the margin a holder keeps (`lockgate_client::guard::KILL_MARGIN`).
pub const STEP_TOLERANCE: Duration = Duration::from_millis(5);

/// `CLOCK_BOOTTIME` now.
pub fn boot_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Wall-clock time since the Unix epoch.
pub fn wall_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Engine time, fed with readings of the wall and monotonic clocks.
#[derive(Debug, Clone)]
pub struct EngineClock {
    /// Engine time at the last reading, since the Unix epoch.
    at: Duration,
    /// The monotonic clock at the last reading.
    mono: Duration,
    /// Whether the wall clock is behind engine time (a step back not yet run out).
    behind: bool,
}

/// One reading of engine time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Engine time now, since the Unix epoch.
    pub now: Duration,
    /// Set when the wall clock stepped forward since the last reading: by how much every
    /// lease and node TTL must move so that none runs out early.
    pub stepped: Option<Duration>,
    /// Set when the wall clock stepped back since the last reading, by how much (reported
    /// once; engine time runs at half speed until the wall clock meets it).
    pub stepped_back: Option<Duration>,
}

impl EngineClock {
    /// A clock that starts at `wall`, read together with `mono`.
    pub fn new(wall: Duration, mono: Duration) -> EngineClock {
        EngineClock {
            at: wall,
            mono,
            behind: false,
        }
    }

    /// Engine time at these readings of the wall and monotonic clocks.
    pub fn read(&mut self, wall: Duration, mono: Duration) -> Reading {
        let elapsed = mono.saturating_sub(self.mono);
        self.mono = self.mono.max(mono);
        let free = self.at + elapsed;
        let (mut stepped, mut stepped_back) = (None, None);
        self.at = if wall >= free {
            let ahead = wall - free;
            if ahead > STEP_TOLERANCE {
                stepped = Some(ahead);
            }
            self.behind = false;
            wall
        } else {
            let back = free - wall;
            if back > STEP_TOLERANCE && !self.behind {
                stepped_back = Some(back);
                self.behind = true;
            }
            // Behind: never back, and toward the wall clock at half speed.
            wall.max(self.at + elapsed / 2)
        };
        Reading {
            now: self.at,
            stepped,
            stepped_back,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_steady_wall_clock_is_engine_time() {
        let mut c = EngineClock::new(s(1000), s(5));
        for i in 1..=10 {
            let r = c.read(s(1000) + ms(i * 100), s(5) + ms(i * 100));
            assert_eq!(r.now, s(1000) + ms(i * 100));
            assert_eq!((r.stepped, r.stepped_back), (None, None));
        }
    }

    #[test]
    fn jitter_within_the_tolerance_is_not_a_step() {
        let mut c = EngineClock::new(s(1000), s(5));
        let r = c.read(s(1001) + ms(4), s(6));
        assert_eq!(r.stepped, None);
        assert_eq!(r.now, s(1001) + ms(4));
    }

    #[test]
    fn a_forward_step_is_taken_at_once_and_reported() {
        let mut c = EngineClock::new(s(1000), s(5));
        let r = c.read(s(1000 + 1 + 3600), s(6));
        assert_eq!(r.now, s(4601));
        assert_eq!(r.stepped, Some(s(3600)));
        // Only once: the next reading is steady again.
        let r = c.read(s(4602), s(7));
        assert_eq!((r.now, r.stepped), (s(4602), None));
    }

    #[test]
    fn a_step_back_is_run_out_at_half_speed_and_never_goes_back() {
        let mut c = EngineClock::new(s(1000), s(0));
        // The wall clock goes back 10 s.
        let r = c.read(s(991), s(1));
        assert_eq!(r.now, s(1000) + ms(500));
        assert_eq!(r.stepped_back, Some(s(10)), "reported once");
        let mut last = r.now;
        let mut mono = s(1);
        let mut wall = s(991);
        // Engine time runs at half speed until the wall clock meets it (20 s later).
        while wall < s(1021) {
            mono += s(1);
            wall += s(1);
            let r = c.read(wall, mono);
            assert!(r.now >= last, "never back");
            assert!(r.now - last <= ms(1000), "never faster than real time");
            assert_eq!((r.stepped, r.stepped_back), (None, None));
            last = r.now;
        }
        assert_eq!(last, wall, "caught up");
        let r = c.read(wall + s(1), mono + s(1));
        assert_eq!(r.now, wall + s(1));
    }

    #[test]
    fn a_monotonic_clock_that_does_not_move_adds_nothing() {
        let mut c = EngineClock::new(s(1000), s(5));
        let r = c.read(s(999), s(5));
        assert_eq!(r.now, s(1000));
    }
}
