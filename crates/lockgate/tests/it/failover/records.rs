//! The commands' own records and the checker that sweeps them.
//!
//! Every command (a `lockgate run` wrapper's `sh -c`, an agent's handler) appends
//! `start KEY DATASTORE NS` when it starts and `end KEY DATASTORE NS` when it ends, NS from
//! `date +%s%N` (CLOCK_REALTIME: one clock for every process on this machine). A line is
//! one `write` to a file opened `O_APPEND`, so lines never interleave.

use std::collections::BTreeMap;
use std::path::Path;

/// One run of one command.
#[derive(Debug, Clone)]
pub struct Span {
    pub key: String,
    pub ds: String,
    pub start: u128,
    pub end: Option<u128>,
}

/// The `sh -c` script of a command that records itself under `key` on `ds` and lasts
/// `secs` (`{...}` placeholders of an agent handler may stand in for key, ds and secs).
pub fn script(record: &Path, key: &str, ds: &str, secs: &str) -> String {
    let r = record.display();
    format!(
        "echo \"start {key} {ds} $(date +%s%N)\" >> {r}; sleep {secs}; \
         echo \"end {key} {ds} $(date +%s%N)\" >> {r}"
    )
}

/// Every span in `record`, by key; a key that started twice is a failure.
pub fn read(record: &Path) -> BTreeMap<String, Span> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    let mut spans: BTreeMap<String, Span> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "bad record line {line:?}");
        let t: u128 = f[3].parse().unwrap();
        match f[0] {
            "start" => {
                let old = spans.insert(
                    f[1].to_string(),
                    Span {
                        key: f[1].into(),
                        ds: f[2].into(),
                        start: t,
                        end: None,
                    },
                );
                assert!(old.is_none(), "{} started twice: {old:?}, {line}", f[1]);
            }
            "end" => {
                let s = spans
                    .get_mut(f[1])
                    .unwrap_or_else(|| panic!("end without start: {line}"));
                assert!(s.end.is_none(), "{} ended twice", f[1]);
                s.end = Some(t);
            }
            other => panic!("bad record kind {other:?} in {line:?}"),
        }
    }
    spans
}

/// The most commands running at once, in all and on one datastore.
#[derive(Debug, PartialEq, Eq)]
pub struct Peaks {
    pub global: i32,
    pub per_datastore: i32,
}

/// Sweeps the spans in time order and asserts no instant over `global` in all or
/// `per` on one datastore (a span ending at t does not overlap one starting at t), and
/// that every span ended. Returns the peaks.
pub fn check_limits(spans: &BTreeMap<String, Span>, global: i32, per: i32) -> Peaks {
    let mut marks: Vec<(u128, i32, &str, &str)> = Vec::new();
    for s in spans.values() {
        let end = s
            .end
            .unwrap_or_else(|| panic!("{} never ended: {s:?}", s.key));
        marks.push((s.start, 1, &s.ds, &s.key));
        marks.push((end, -1, &s.ds, &s.key));
    }
    // Ends before starts at the same instant.
    marks.sort();
    let (mut total, mut peak, mut per_peak) = (0, 0, 0);
    let mut on: BTreeMap<&str, i32> = BTreeMap::new();
    for (t, d, ds, key) in marks {
        total += d;
        let n = on.entry(ds).or_default();
        *n += d;
        assert!(
            total <= global && *n <= per,
            "over a limit at {t} ({key} starting): {total} in all, {n} on {ds}"
        );
        peak = peak.max(total);
        per_peak = per_peak.max(*n);
    }
    Peaks {
        global: peak,
        per_datastore: per_peak,
    }
}

/// Nanoseconds on the records' clock.
pub fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
