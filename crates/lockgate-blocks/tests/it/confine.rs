//! Input confinement and walk limits, with real files, symlinks, FIFOs, sockets, /dev/zero
//! and /proc: a confined caller reads only inside its roots and learns nothing about paths
//! outside them; no input can hang, loop or exhaust the planner.

use crate::fixtures::*;
use lockgate_blocks::{
    run_to_completion, BackupConfig, Cancel, Confinement, HookPolicy, InputLimits, InputRefused,
    InputRoots, ItemStatus, LoadError, NoopMover, Plan, PlanOptions,
};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A root with one manifest, and a directory outside it with a secret manifest.
struct Roots {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Roots {
    fn new() -> Roots {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("app")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        write_list(&root.join("app"), &[configmap("app", "mine")]);
        std::fs::write(
            outside.join("secret.json"),
            list(&[configmap("app", "secret")]),
        )
        .unwrap();
        Roots {
            _dir: dir,
            root,
            outside,
        }
    }

    fn confined(&self) -> PlanOptions {
        let roots = InputRoots::new([&self.root]).unwrap();
        PlanOptions {
            confinement: Confinement::submitter(roots, ["app"], HookPolicy::Refuse),
            ..PlanOptions::default()
        }
    }
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Runs `f` on a thread and fails the test if it takes longer than `limit` (a hang).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}: it hangs"))
}

fn refused(path: &Path, opts: &PlanOptions) -> LoadError {
    Plan::load(path, opts).expect_err("must be refused")
}

#[test]
fn outside_path_gets_the_same_answer_whether_or_not_it_exists() {
    let r = Roots::new();
    let opts = r.confined();
    let secret = r.outside.join("secret.json");
    let unreadable = r.outside.join("unreadable.json");
    std::fs::write(&unreadable, "{}").unwrap();
    std::fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    let escape = r.root.join("app/escape.json");
    symlink(&secret, &escape).unwrap();
    let dangling = r.root.join("app/dangling.json");
    symlink(r.outside.join("missing.json"), &dangling).unwrap();
    let dotdot = r.root.join("app/../../outside/secret.json");
    let dotdot_missing = r.root.join("app/../../outside/missing.json");
    let cases: Vec<PathBuf> = vec![
        secret.clone(),
        r.outside.join("missing.json"),
        unreadable,
        r.outside.clone(),
        r.outside.join("secret.json/below"),
        "/etc/passwd".into(),
        "/no/such/file".into(),
        "/root".into(),
        "/dev/zero".into(),
        "/proc/self/root/etc/passwd".into(),
        escape,
        dangling,
        dotdot,
        dotdot_missing,
        r.root.join("app/missing.json"),
    ];
    let mut texts = Vec::new();
    for case in &cases {
        let err = refused(case, &opts);
        assert_eq!(
            err,
            LoadError::Refused(InputRefused::Outside { from: case.clone() }),
            "{}",
            case.display()
        );
        texts.push(err.to_string().replace(&case.display().to_string(), "FROM"));
    }
    assert!(texts.iter().all(|t| *t == texts[0]), "{texts:#?}");
    assert_eq!(
        texts[0],
        "backup input FROM is refused: it is not an existing path inside a backup input root (the roots are set by the server's admin)"
    );
    // The very same path, before and after the file exists: the same error value.
    let before = refused(&r.outside.join("later.json"), &opts);
    std::fs::write(r.outside.join("later.json"), "{}").unwrap();
    assert_eq!(refused(&r.outside.join("later.json"), &opts), before);
}

#[test]
fn an_outside_fifo_is_refused_without_opening_it() {
    let r = Roots::new();
    let fifo = r.outside.join("pipe.json");
    mkfifo(&fifo);
    let opts = r.confined();
    let err = within(Duration::from_secs(10), move || Plan::load(&fifo, &opts));
    assert!(matches!(
        err,
        Err(LoadError::Refused(InputRefused::Outside { .. }))
    ));
}

#[test]
fn a_confined_caller_without_roots_is_refused_everything() {
    let r = Roots::new();
    let opts = PlanOptions {
        confinement: Confinement::submitter(InputRoots::none(), ["app"], HookPolicy::Run),
        ..PlanOptions::default()
    };
    for path in [r.root.join("app/cluster.json"), r.root.clone(), "/".into()] {
        assert_eq!(
            refused(&path, &opts),
            LoadError::Refused(InputRefused::NoRoots)
        );
    }
    let relative = r.confined();
    assert!(matches!(
        refused(Path::new("app/cluster.json"), &relative),
        LoadError::Refused(InputRefused::NotAbsolute { .. })
    ));
}

#[test]
fn inside_paths_are_read_through_symlinks_that_stay_inside() {
    let r = Roots::new();
    std::fs::create_dir(r.root.join("other")).unwrap();
    write_list(&r.root.join("other"), &[configmap("app", "other")]);
    symlink(r.root.join("other"), r.root.join("app/link-to-other")).unwrap();
    let opts = r.confined();
    let plan = Plan::load(&r.root.join("app"), &opts).unwrap();
    assert_eq!(
        blocks(&plan).concat(),
        names(&["configmaps/app/mine", "configmaps/app/other"])
    );
    assert!(plan.input_errors().is_empty(), "{:?}", plan.input_errors());
    // A `..` that stays inside resolves; the alias of a root through a symlink works too.
    let plan = Plan::load(&r.root.join("other/../app/cluster.json"), &opts).unwrap();
    assert_eq!(plan.item_count(), 1);
    let alias = r.root.with_file_name("alias");
    symlink(&r.root, &alias).unwrap();
    let aliased = PlanOptions {
        confinement: Confinement::submitter(
            InputRoots::new([&alias]).unwrap(),
            ["app"],
            HookPolicy::Run,
        ),
        ..PlanOptions::default()
    };
    assert_eq!(
        Plan::load(&alias.join("app"), &aliased)
            .unwrap()
            .item_count(),
        2
    );
}

#[test]
fn a_symlink_inside_a_root_does_not_lead_out() {
    let r = Roots::new();
    let app = r.root.join("app");
    symlink(r.outside.join("secret.json"), app.join("escape.json")).unwrap();
    symlink(r.outside.join("missing.json"), app.join("dangling.json")).unwrap();
    symlink(&r.outside, app.join("escape-dir")).unwrap();
    symlink("/proc/self/root", app.join("host")).unwrap();
    let plan = Plan::load(&app, &r.confined()).unwrap();
    assert_eq!(blocks(&plan).concat(), names(&["configmaps/app/mine"]));
    let errors: Vec<(String, String)> = plan
        .input_errors()
        .iter()
        .map(|e| {
            (
                e.file.file_name().unwrap().to_string_lossy().into_owned(),
                e.message.clone(),
            )
        })
        .collect();
    let not_followed = "symbolic link not followed: it does not lead to an existing path inside a backup input root";
    assert_eq!(
        errors,
        vec![
            ("dangling.json".to_string(), not_followed.to_string()),
            ("escape.json".to_string(), not_followed.to_string()),
        ]
    );
    let notes = plan.warnings().join("\n");
    assert!(
        notes.contains("escape-dir: symbolic link not followed"),
        "{notes}"
    );
    assert!(
        notes.contains("host: symbolic link not followed"),
        "{notes}"
    );
    assert!(!notes.contains("secret"), "{notes}");
}

#[test]
fn walk_does_not_follow_a_symlink_loop() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::create_dir_all(a.join("b")).unwrap();
    write_list(&a.join("b"), &[configmap("app", "x")]);
    symlink(".", a.join("self")).unwrap();
    symlink("../..", a.join("b/up")).unwrap();
    symlink(dir.path(), a.join("b/abs")).unwrap();
    let plan = within(Duration::from_secs(20), move || {
        Plan::load(&a, &PlanOptions::default()).unwrap()
    });
    assert_eq!(blocks(&plan).concat(), names(&["configmaps/app/x"]));
    assert!(plan.input_errors().is_empty(), "{:?}", plan.input_errors());
    let notes = plan.warnings().join("\n");
    assert!(notes.contains("self: directory already walked"), "{notes}");
}

#[test]
fn proc_self_root_is_walked_at_most_once_and_within_the_entry_cap() {
    let dir = tempfile::tempdir().unwrap();
    symlink("/proc/self/root", dir.path().join("host")).unwrap();
    symlink("/proc/self/root", dir.path().join("host-again")).unwrap();
    let path = dir.path().to_path_buf();
    let opts = PlanOptions {
        limits: InputLimits {
            max_entries: 20_000,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    let err = within(Duration::from_secs(60), move || Plan::load(&path, &opts));
    match err {
        Err(LoadError::Limit { cap, value, .. }) => {
            assert_eq!((cap, value), ("max_entries", 20_000));
        }
        // A machine with fewer than 20,000 entries on its root file system walks it once.
        Ok(plan) => assert!(plan.warnings().join("\n").contains("already walked")),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn dev_zero_is_refused_without_reading() {
    let err = within(Duration::from_secs(10), || {
        Plan::load(Path::new("/dev/zero"), &PlanOptions::default())
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot read input /dev/zero: it is a character device, not a regular file or a directory; only regular files are read"
    );
    let dir = tempfile::tempdir().unwrap();
    symlink("/dev/zero", dir.path().join("zero.json")).unwrap();
    symlink("/dev/zero", dir.path().join("zero")).unwrap();
    write_list(dir.path(), &[configmap("app", "a")]);
    let path = dir.path().to_path_buf();
    let plan = within(Duration::from_secs(10), move || {
        Plan::load(&path, &PlanOptions::default()).unwrap()
    });
    assert_eq!(plan.item_count(), 1);
    assert_eq!(plan.input_errors().len(), 1);
    assert_eq!(
        plan.input_errors()[0].message,
        "a character device, not a regular file; not read (only regular files are read)"
    );
    assert!(plan
        .warnings()
        .join("\n")
        .contains("zero: a character device; not read"));
}

#[test]
fn fifo_does_not_hang_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe.json"));
    mkfifo(&dir.path().join("pipe.yaml"));
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock.json")).unwrap();
    write_list(dir.path(), &[configmap("app", "a")]);
    let path = dir.path().to_path_buf();
    let plan = within(Duration::from_secs(10), move || {
        Plan::load(&path, &PlanOptions::default()).unwrap()
    });
    assert_eq!(plan.item_count(), 1);
    let errors: Vec<String> = plan.input_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].ends_with(
        "pipe.json: a FIFO, not a regular file; not read (only regular files are read)"
    ));
    assert!(errors[2].contains("sock.json: a socket"));
    let fifo = dir.path().join("pipe.json");
    let err = within(Duration::from_secs(10), move || {
        Plan::load(&fifo, &PlanOptions::default())
    });
    assert!(matches!(
        err,
        Err(LoadError::NotRegular { kind: "FIFO", .. })
    ));
}

#[test]
fn a_file_larger_than_max_file_bytes_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse 3 GiB YAML file: reading it would take seconds and gigabytes.
    let big = std::fs::File::create(dir.path().join("big.yaml")).unwrap();
    big.set_len(3 << 30).unwrap();
    write_list(dir.path(), &[configmap("app", "a")]);
    let start = Instant::now();
    let plan = Plan::load(dir.path(), &PlanOptions::default()).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(plan.item_count(), 1);
    assert_eq!(
        plan.input_errors()[0].message,
        "3221225472 bytes, larger than max_file_bytes = 64 MiB; not read"
    );
}

#[test]
fn an_item_of_a_list_larger_than_max_file_bytes_is_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let mut cm = configmap("app", "huge");
    cm["data"]["k"] = serde_json::json!("x".repeat(10_000));
    let path = write_list(dir.path(), &[configmap("app", "a"), cm]);
    let opts = PlanOptions {
        limits: InputLimits {
            max_file_bytes: 4096,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    let plan = Plan::load(&path, &opts).unwrap();
    assert_eq!(blocks(&plan).concat(), names(&["configmaps/app/a"]));
    let err = plan.input_errors()[0].to_string();
    assert!(err.contains("larger than max_file_bytes = 4 KiB"), "{err}");
}

#[test]
fn an_input_larger_than_max_total_bytes_stops_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::write(
            dir.path().join(format!("{i}.json")),
            list(&[configmap("app", &format!("c{i}"))]),
        )
        .unwrap();
    }
    let opts = PlanOptions {
        limits: InputLimits {
            max_total_bytes: 600,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    let err = Plan::load(dir.path(), &opts).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Limit {
                cap: "max_total_bytes",
                value: 600,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("input exceeds max_total_bytes = 600: more than 600 bytes read"),
        "{err}"
    );
}

#[test]
fn more_items_than_max_items_stops_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<_> = (0..50)
        .map(|i| configmap("app", &format!("c{i}")))
        .collect();
    let path = write_list(dir.path(), &items);
    let opts = |max_items| PlanOptions {
        limits: InputLimits {
            max_items,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    assert_eq!(Plan::load(&path, &opts(50)).unwrap().item_count(), 50);
    let err = Plan::load(&path, &opts(49)).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Limit {
                cap: "max_items",
                value: 49,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("[blocks] max_items"), "{err}");
}

#[test]
fn more_entries_than_max_entries_stops_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        std::fs::write(dir.path().join(format!("note-{i}.txt")), "not a manifest").unwrap();
    }
    let opts = PlanOptions {
        limits: InputLimits {
            max_entries: 25,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    let err = Plan::load(dir.path(), &opts).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Limit {
                cap: "max_entries",
                value: 25,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_canceled_plan_stops_soon() {
    let dir = tempfile::tempdir().unwrap();
    write_list(dir.path(), &[configmap("app", "a")]);
    let cancel = Cancel::new();
    cancel.cancel();
    let opts = PlanOptions {
        cancel: cancel.clone(),
        ..PlanOptions::default()
    };
    assert_eq!(
        Plan::load(dir.path(), &opts).unwrap_err(),
        LoadError::Canceled
    );
    // A walk over the whole host (through /proc/self/root) stops when its guard is dropped.
    let host = tempfile::tempdir().unwrap();
    symlink("/proc/self/root", host.path().join("host")).unwrap();
    let cancel = Cancel::new();
    let guard = cancel.on_drop();
    let opts = PlanOptions {
        cancel,
        limits: InputLimits {
            max_entries: usize::MAX,
            ..InputLimits::default()
        },
        ..PlanOptions::default()
    };
    let path = host.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Plan::load(&path, &opts));
    });
    std::thread::sleep(Duration::from_millis(100));
    let dropped = Instant::now();
    drop(guard);
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Err(LoadError::Canceled)) => {}
        // The walk may have ended before the cancel on a tiny root file system.
        Ok(Ok(_)) => eprintln!("the host walk ended before its cancel"),
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the plan did not stop within 10 s of its cancel"),
    }
    assert!(dropped.elapsed() < Duration::from_secs(10));
}

fn backup(plan: Plan, dir: &Path) -> lockgate_blocks::BackupResult {
    let config = BackupConfig::new("b", dir.join("b.tar.gz"), Arc::new(NoopMover));
    run_to_completion(plan, config, 2).unwrap()
}

#[test]
fn a_manifest_replaced_by_a_fifo_after_planning_fails_its_item_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(
        input.join("a.json"),
        serde_json::to_string(&configmap("app", "a")).unwrap(),
    )
    .unwrap();
    std::fs::write(
        input.join("b.json"),
        serde_json::to_string(&configmap("app", "b")).unwrap(),
    )
    .unwrap();
    let plan = Plan::load(&input, &PlanOptions::default()).unwrap();
    std::fs::remove_file(input.join("a.json")).unwrap();
    mkfifo(&input.join("a.json"));
    let out = dir.path().to_path_buf();
    let result = within(Duration::from_secs(20), move || backup(plan, &out));
    let failed: Vec<_> = result
        .items
        .iter()
        .filter(|i| i.status == ItemStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", result.items);
    assert_eq!(failed[0].item, "configmaps/app/a");
    assert!(
        failed[0].error.as_deref().unwrap().contains("now a FIFO"),
        "{:?}",
        failed[0]
    );
    assert_eq!(result.item_counts.completed, 1);
}

#[test]
fn a_manifest_rewritten_into_another_namespace_after_planning_is_not_backed_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cm.json");
    let text = serde_json::to_string(&configmap("app", "a")).unwrap();
    std::fs::write(&path, &text).unwrap();
    let plan = Plan::load(&path, &PlanOptions::default()).unwrap();
    // Same length, same inode, another namespace.
    std::fs::write(&path, text.replace("\"app\"", "\"kub\"")).unwrap();
    let result = backup(plan, dir.path());
    assert_eq!(result.items.len(), 1);
    let err = result.items[0].error.as_deref().unwrap();
    assert!(err.contains("changed since it was planned"), "{err}");
}

#[test]
fn dotdot_through_an_outside_directory_does_not_tell_whether_it_exists() {
    let r = Roots::new();
    std::fs::create_dir(r.outside.join("exists")).unwrap();
    let opts = r.confined();
    let app = r.root.join("app");
    // realpath(3) would succeed through `exists/..` and fail through `missing/..`.
    let via = |dir: &str| {
        PathBuf::from(format!(
            "{}/../../outside/{dir}/../../root/app/cluster.json",
            app.display()
        ))
    };
    for dir in ["exists", "missing"] {
        assert_eq!(
            refused(&via(dir), &opts),
            LoadError::Refused(InputRefused::Outside { from: via(dir) })
        );
    }
    // The same through symlinks the tenant made inside its root.
    symlink(
        "../../outside/exists/../../root/app",
        app.join("probe-exists"),
    )
    .unwrap();
    symlink(
        "../../outside/missing/../../root/app",
        app.join("probe-missing"),
    )
    .unwrap();
    for probe in ["probe-exists", "probe-missing"] {
        let from = app.join(probe).join("cluster.json");
        assert_eq!(
            refused(&from, &opts),
            LoadError::Refused(InputRefused::Outside { from: from.clone() })
        );
    }
    let plan = Plan::load(&app, &opts).unwrap();
    assert_eq!(plan.item_count(), 1);
    let notes = plan.warnings().join("\n");
    assert_eq!(
        notes.matches("symbolic link not followed").count(),
        2,
        "{notes}"
    );
    // An absolute symlink back into the root, and a relative one that stays inside, are
    // followed.
    symlink(app.join("cluster.json"), app.join("abs.json")).unwrap();
    symlink("./cluster.json", app.join("rel.json")).unwrap();
    assert_eq!(
        Plan::load(&app.join("abs.json"), &opts)
            .unwrap()
            .item_count(),
        1
    );
    assert_eq!(
        Plan::load(&app.join("rel.json"), &opts)
            .unwrap()
            .item_count(),
        1
    );
}

#[test]
fn a_symlink_chain_that_never_ends_is_refused() {
    let r = Roots::new();
    let app = r.root.join("app");
    symlink("b.json", app.join("a.json")).unwrap();
    symlink("a.json", app.join("b.json")).unwrap();
    let from = app.join("a.json");
    assert_eq!(
        refused(&from, &r.confined()),
        LoadError::Refused(InputRefused::Outside { from: from.clone() })
    );
    let plan = Plan::load(&app, &r.confined()).unwrap();
    assert_eq!(plan.item_count(), 1);
    assert_eq!(plan.input_errors().len(), 2);
}
