//! Validation of `[forecast]` and `[[deadline]]`: the same `file:line: field: expected ..,
//! got ..` errors as the rest.

use super::{bad, count, job_selector, keys, name, positive_duration, Checked};
use crate::calendar::Schedule;
use crate::durations::{ForecastPolicy, DEFAULT_SAMPLES};
use crate::policy::locate::FieldPath;
use crate::policy::raw::{RawDeadline, RawForecast};
use crate::policy::Deadline;
use std::collections::BTreeMap;

/// `[forecast]`.
pub(super) fn forecast(raw: Option<&RawForecast>, p: &FieldPath) -> Checked<ForecastPolicy> {
    let Some(f) = raw else {
        return Ok(ForecastPolicy::default());
    };
    let samples = match f.samples {
        None => DEFAULT_SAMPLES,
        Some(n) if n >= 1 => count(n, &p.key("samples"))? as usize,
        Some(n) => {
            return bad(
                &p.key("samples"),
                format!("expected a whole number >= 1, got {n}"),
            )
        }
    };
    Ok(ForecastPolicy {
        key: match &f.key {
            None => crate::durations::default_key(),
            Some(key) => keys(key, &p.key("key"), "`[forecast] key`")?,
        },
        default_run: positive_duration(&f.default_run, &p.key("default_run"))?,
        default_prepare: positive_duration(&f.default_prepare, &p.key("default_prepare"))?,
        samples,
    })
}

/// `[[deadline]]`.
pub(super) fn deadlines(raw: &[RawDeadline], p: &FieldPath) -> Checked<Vec<Deadline>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (i, d) in raw.iter().enumerate() {
        let dp = p.at(i);
        name(&d.name, &dp.key("name"), "deadline")?;
        if let Some(first) = seen.insert(d.name.as_str(), i) {
            return bad(
                &dp.key("name"),
                format!(
                    "deadline name {:?} is already used by deadline[{first}], expected unique names",
                    d.name
                ),
            );
        }
        let by = Schedule::parse(&d.by).or_else(|e| {
            bad(
                &dp.key("by"),
                format!("expected a calendar event such as \"06:00\" or \"mon..fri 06:00\", got {:?}: {e}", d.by),
            )
        })?;
        out.push(Deadline {
            name: d.name.clone(),
            matcher: d
                .r#match
                .as_ref()
                .map(|s| job_selector(s, &dp.key("match")))
                .transpose()?,
            by,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::policy::{PerKey, Policy};
    use std::time::Duration;

    #[test]
    fn forecast_and_deadlines_validate() {
        let p = Policy::from_toml(
            "[forecast]\nkey = [\"group\"]\ndefault_run = \"30m\"\n\n[[deadline]]\nname = \"nightly\"\nmatch = \"kind=backup\"\nby = \"06:00\"\n",
            None,
        )
        .unwrap();
        assert_eq!(p.forecast.key, vec![PerKey::Attr("group".into())]);
        assert_eq!(p.forecast.default_run, Some(Duration::from_secs(1800)));
        assert_eq!(p.forecast.samples, crate::durations::DEFAULT_SAMPLES);
        assert_eq!(p.deadlines[0].name, "nightly");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        for (text, want) in [
            (
                "[forecast]\nsamples = 0\n",
                "p.toml:2: forecast.samples: expected a whole number >= 1, got 0",
            ),
            (
                "[[deadline]]\nname = \"n\"\nby = \"six\"\n",
                "p.toml:3: deadline[0].by: expected a calendar event such as \"06:00\"",
            ),
            (
                "[[deadline]]\nname = \"n\"\nby = \"06:00\"\n[[deadline]]\nname = \"n\"\nby = \"07:00\"\n",
                "p.toml:5: deadline[1].name: deadline name \"n\" is already used by deadline[0]",
            ),
            (
                "[forecast]\ndefault_run = \"soon\"\n",
                "p.toml:2: forecast.default_run:",
            ),
        ] {
            let e = Policy::from_toml(text, Some("p.toml")).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }
}
