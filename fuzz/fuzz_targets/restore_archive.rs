//! A restore of a hostile archive (`lockgate_blocks::restore`): the input is the archive's
//! tar stream, after decompression.
//!
//! Properties checked for every input:
//! - reading never panics, and stays within the caps it is given;
//! - every item read has a name made of its path's segments, none empty, `.` or `..`, and
//!   a resource of lowercase letters, digits, `.` and `-`;
//! - a plan of what was read (under a namespace mapping) never panics, restores each item
//!   once, and names only phase files `NNN-<resource>.json` of the resources it restores;
//! - its result counts every item exactly once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgate_blocks::restore::{read, RestoreOptions, RestorePlan};
use lockgate_blocks::names::is_resource_name;
use lockgate_blocks::InputLimits;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let limits = InputLimits {
        max_file_bytes: 1 << 16,
        max_total_bytes: 1 << 20,
        max_items: 1_000,
        ..InputLimits::default()
    };
    let Ok(archive) = read::read_tar(data, Path::new("fuzz.tar.gz"), &limits) else {
        return;
    };
    assert!(archive.items.len() + archive.bad.len() <= limits.max_items);
    for i in &archive.items {
        let ok_segment = |s: &str| !s.is_empty() && s != "." && s != "..";
        assert!(i.name.split('/').all(ok_segment), "{}", i.name);
        assert!(is_resource_name(&i.resource), "{}", i.resource);
    }
    let mut options = RestoreOptions::default();
    options
        .namespace_mappings
        .insert("app".into(), "app-copy".into());
    let plan = RestorePlan::new(&archive, &options).expect("a valid mapping plans");
    let files = plan.file_names();
    for (f, p) in files.iter().zip(&plan.phases) {
        let (n, rest) = f.split_once('-').expect("NNN-resource.json");
        assert!(n.len() >= 3 && n.bytes().all(|b| b.is_ascii_digit()), "{f}");
        assert_eq!(rest, format!("{}.json", p.resource), "{f}");
        assert!(!f.contains('/'), "{f}");
    }
    let result = plan.result("r");
    let c = result.counts;
    assert_eq!(c.restored + c.skipped + c.failed, result.items.len());
    assert_eq!(c.restored, plan.item_count());
    assert_eq!(result.items.len(), archive.items.len() + archive.bad.len());
});
