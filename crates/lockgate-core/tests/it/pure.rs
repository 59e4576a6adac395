//! The core stays pure (ARCHITECTURE.md): it reads no clock, file, environment variable,
//! process, network or random source; the server passes `now` in and resolves what the
//! policy only names (a notification target's secret).

use std::path::Path;

/// What no source file of the core may name.
const FORBIDDEN: [&str; 10] = [
    "std::fs",
    "std::env",
    "std::process",
    "std::net",
    "std::thread",
    "SystemTime",
    "Instant::now",
    "getrandom",
    "rand::",
    "tokio",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_core_reads_no_clock_file_environment_or_random_source() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(
        files.len() > 20,
        "found the core's sources under {}",
        src.display()
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for word in FORBIDDEN.iter().filter(|w| line.contains(*w)) {
                let at = file.strip_prefix(&src).unwrap().display();
                found.push(format!("src/{at}:{}: {word}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the core must stay pure:\n{}",
        found.join("\n")
    );
}
