//! The machine's local time zone, for calendar times written without one.

use lockgate_core::calendar::Schedule;

/// Whether the calendar knows the zone `name` (its bundled IANA database).
pub fn zone_known(name: &str) -> bool {
    Schedule::parse("daily")
        .map(|s| s.next_after(0, name).is_ok())
        .unwrap_or(false)
}

/// The machine's local zone as an IANA name, as systemd reads it: `TZ` (a zone name such
/// as `Europe/Vienna`, `:Europe/Vienna` or a path into a zoneinfo directory), else the
/// zone `/etc/localtime` names; `UTC` when neither gives a zone the calendar knows (a POSIX
/// `TZ` rule such as `CET-1CEST` is not supported). The second value says why it fell back.
pub fn local_zone_checked() -> (String, Option<String>) {
    match jiff::tz::TimeZone::try_system() {
        Ok(z) => match z.iana_name() {
            Some(name) if zone_known(name) => (name.to_string(), None),
            Some(name) => (
                "UTC".into(),
                Some(format!(
                    "the local zone {name:?} is not in lockgate's zone database; using UTC"
                )),
            ),
            None => (
                "UTC".into(),
                Some("the local zone has no IANA name (set TZ=Area/City); using UTC".into()),
            ),
        },
        Err(e) => (
            "UTC".into(),
            Some(format!("cannot determine the local zone ({e}); using UTC")),
        ),
    }
}

/// [`local_zone_checked`] without the reason.
pub fn local_zone() -> String {
    local_zone_checked().0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calendar_knows_real_zones_only() {
        assert!(zone_known("UTC") && zone_known("Europe/Vienna") && !zone_known("Mars/Olympus"));
    }
}
