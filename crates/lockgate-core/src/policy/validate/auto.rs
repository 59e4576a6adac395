//! A limit's automatic number (`max = { auto = .. }`) and a node rule's pressure guard
//! (`guard = { .. }`), checked into the controllers' configurations (`crate::auto`).

use super::{bad, count, positive_duration, Checked};
use crate::auto::{AutoConfig, GuardLimits};
use crate::policy::locate::FieldPath;
use crate::policy::raw::{RawGuard, RawMax};
use std::time::Duration;

/// How often an automatic number is judged unless `interval` says otherwise.
const DEFAULT_AUTO_INTERVAL: Duration = Duration::from_secs(10);

/// A limit's `max`: the number (for `auto`, the range's `min`), the controller's
/// configuration and its interval.
pub(super) fn limit_max(
    raw: Option<&RawMax>,
    p: &FieldPath,
) -> Checked<(Option<u32>, Option<AutoConfig>, Duration)> {
    let a = match raw {
        None => return Ok((None, None, DEFAULT_AUTO_INTERVAL)),
        Some(RawMax::Number(n)) => return Ok((Some(count(*n, p)?), None, DEFAULT_AUTO_INTERVAL)),
        Some(RawMax::Auto(a)) => a,
    };
    if a.auto != "throughput" {
        return bad(
            &p.key("auto"),
            format!(
                "expected \"throughput\" (the goal a number sets itself for), got {:?}",
                a.auto
            ),
        );
    }
    let min = count(a.min, &p.key("min"))?;
    if min == 0 {
        return bad(
            &p.key("min"),
            "expected a whole number >= 1 (a number that sets itself never shuts its scope), got 0",
        );
    }
    let max = count(a.max, &p.key("max"))?;
    if max < min {
        return bad(
            &p.key("max"),
            format!("expected a number >= min ({min}), got {max}"),
        );
    }
    let mut config = AutoConfig::throughput(min, max);
    if let Some(g) = a.gain {
        if !(1..=100).contains(&g) {
            return bad(
                &p.key("gain"),
                format!("expected a percentage from 1 to 100, got {g}"),
            );
        }
        config.gain = g as f64 / 100.0;
    }
    if let Some(pin) = a.pin {
        let n = count(pin, &p.key("pin"))?;
        if !(min..=max).contains(&n) {
            return bad(
                &p.key("pin"),
                format!("expected a number from min to max ({min}-{max}), got {n}"),
            );
        }
        config.pin = Some(n);
    }
    let interval = match &a.interval {
        Some(_) => {
            positive_duration(&a.interval, &p.key("interval"))?.unwrap_or(DEFAULT_AUTO_INTERVAL)
        }
        None => DEFAULT_AUTO_INTERVAL,
    };
    Ok((Some(min), Some(config), interval))
}

/// A node rule's `guard`: each pressure a percentage from 1 to 100.
pub(super) fn guard(raw: Option<&RawGuard>, p: &FieldPath) -> Checked<Option<GuardLimits>> {
    let Some(g) = raw else {
        return Ok(None);
    };
    let pct = |v: Option<i64>, name: &str| -> Checked<Option<f64>> {
        match v {
            None => Ok(None),
            Some(v) if (1..=100).contains(&v) => Ok(Some(v as f64)),
            Some(v) => bad(
                &p.key(name),
                format!("expected a pressure in percent from 1 to 100, got {v}"),
            ),
        }
    };
    let limits = GuardLimits {
        cpu: pct(g.cpu, "cpu")?,
        io: pct(g.io, "io")?,
        memory: pct(g.memory, "memory")?,
    };
    if limits == GuardLimits::default() {
        return bad(p, "expected at least one of cpu, io or memory");
    }
    Ok(Some(limits))
}
