//! Benchmarks of lockgate-blocks, printed as tables (run, not asserted):
//!
//! - `throughput`: 2,000 independent blocks whose item action sleeps 20 ms, on a pool of 1, 4,
//!   16 and 32 workers; speedup against 1 worker. The 1-worker run uses 200 blocks (it would
//!   take 40 s with 2,000) and the speedup compares blocks per second.
//! - `memory`: peak RSS (`VmHWM` from `/proc/self/status`, in a fresh child process) of
//!   planning and of a whole backup (NoopMover, no item action) of 20,000 and 200,000
//!   generated items, minus the process's RSS before loading; reported per item.
//!
//! `cargo bench -p lockgate-blocks --bench blocks [-- throughput|memory]`

use lockgate_blocks::{
    BackupConfig, ItemRef, NoopMover, Plan, PlanOptions, PoolConfig, WorkerPool,
};
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "LOCKGATE_BLOCKS_BENCH_CHILD";

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return memory_child(&spec);
    }
    let which: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let all = which.is_empty();
    if all || which.iter().any(|w| w == "throughput") {
        throughput();
    }
    if all || which.iter().any(|w| w == "memory") {
        memory();
    }
}

fn throughput() {
    let dir = tempfile::tempdir().expect("tempdir");
    println!("## throughput: independent blocks, item action sleeps 20 ms");
    println!("| workers | blocks | wall time | blocks/s | speedup vs 1 worker |");
    println!("|---:|---:|---:|---:|---:|");
    let mut base = 0.0;
    for workers in [1usize, 4, 16, 32] {
        let blocks = if workers == 1 { 200 } else { 2000 };
        let path = dir.path().join(format!("cm-{blocks}.json"));
        if !path.exists() {
            write_list(
                &path,
                (0..blocks).map(|i| configmap(&format!("ns-{}", i % 10), &format!("cm-{i:05}"))),
            );
        }
        let plan = Plan::load(&path, &PlanOptions::default()).expect("plan");
        assert_eq!(plan.block_count(), blocks);
        let pool = WorkerPool::new(PoolConfig {
            workers,
            channel_capacity: workers,
        });
        let mut config = BackupConfig::new(
            "bench",
            dir.path().join(format!("w{workers}.tar.gz")),
            Arc::new(NoopMover),
        );
        config.item_action = Some(Arc::new(|_: &ItemRef<'_>, _: &mut Value| {
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        }));
        let t = Instant::now();
        let result = pool.start(plan, config).expect("start").wait();
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(result.item_counts.completed, blocks);
        let rate = blocks as f64 / secs;
        if workers == 1 {
            base = rate;
        }
        println!(
            "| {workers} | {blocks} | {secs:.2} s | {rate:.1} | {:.2}x |",
            rate / base
        );
    }
}

fn memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    println!("\n## memory: peak RSS above the process baseline (VmHWM), generated items");
    println!("| items | blocks | input size | plan time | plan peak | plan bytes/item | backup time | backup peak | backup bytes/item |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in [20_000usize, 200_000] {
        let path = dir.path().join(format!("gen-{n}.json"));
        write_list(&path, generated(n));
        let size = std::fs::metadata(&path).expect("input").len();
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .env(CHILD_ENV, format!("{}:{n}", path.display()))
            .output()
            .expect("child");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = line
            .split_whitespace()
            .map(|x| x.parse().expect("number"))
            .collect();
        let (blocks, plan_s, plan_kb, run_s, run_kb) = (f[0], f[1], f[2], f[3], f[4]);
        println!(
            "| {n} | {blocks} | {:.1} MB | {plan_s:.2} s | {:.1} MB | {:.0} | {run_s:.2} s | {:.1} MB | {:.0} |",
            size as f64 / 1e6,
            plan_kb / 1024.0,
            plan_kb * 1024.0 / n as f64,
            run_kb / 1024.0,
            run_kb * 1024.0 / n as f64
        );
        std::fs::remove_file(&path).ok();
    }
}

/// In a fresh process: plan and back up, printing
/// `blocks plan_secs plan_peak_kb backup_secs backup_peak_kb` (peaks above the baseline).
fn memory_child(spec: &str) {
    let (path, n) = spec.rsplit_once(':').expect("path:n");
    let n: usize = n.parse().expect("n");
    let base = status_kb("VmRSS");
    let t = Instant::now();
    let plan = Plan::load(Path::new(path), &PlanOptions::default()).expect("plan");
    let plan_s = t.elapsed().as_secs_f64();
    assert_eq!(plan.item_count(), n, "{:?}", plan.input_errors().first());
    let plan_peak = status_kb("VmHWM") - base;
    let blocks = plan.block_count();
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = WorkerPool::new(PoolConfig {
        workers: 4,
        channel_capacity: 4,
    });
    let t = Instant::now();
    let config = BackupConfig::new("mem", dir.path().join("mem.tar.gz"), Arc::new(NoopMover));
    let result = pool.start(plan, config).expect("start").wait();
    let run_s = t.elapsed().as_secs_f64();
    assert_eq!(result.item_counts.completed, n, "{:?}", result.reasons);
    let run_peak = status_kb("VmHWM") - base;
    println!("{blocks} {plan_s} {plan_peak} {run_s} {run_peak}");
}

fn status_kb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .expect("field");
    line.split_whitespace()
        .nth(1)
        .expect("value")
        .parse()
        .expect("kB")
}

fn write_list(path: &Path, items: impl Iterator<Item = Value>) {
    let mut w = BufWriter::new(std::fs::File::create(path).expect("create"));
    w.write_all(b"{\"apiVersion\": \"v1\", \"items\": [\n")
        .expect("write");
    for (i, item) in items.enumerate() {
        if i > 0 {
            w.write_all(b",\n").expect("write");
        }
        serde_json::to_writer(&mut w, &item).expect("write");
    }
    w.write_all(b"\n], \"kind\": \"List\", \"metadata\": {\"resourceVersion\": \"\"}}\n")
        .expect("write");
    w.flush().expect("flush");
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "uid": format!("0b3c-{name}"), "resourceVersion": "4711",
                        "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}},
           "data": {"settings.yaml": "log_level: info\nworkers: 4\n"}})
}

/// `n` items of a realistic mix, in units of 10: a Deployment, a Service, a ConfigMap, a
/// Secret, two pods each with a PVC bound to a PV.
fn generated(n: usize) -> impl Iterator<Item = Value> {
    (0..n).map(|i| {
        let (unit, k) = (i / 10, i % 10);
        let ns = format!("tenant-{:03}", unit / 100);
        let app = format!("app-{unit:05}");
        match k {
            0 => json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": app, "namespace": ns, "labels": {"app": app}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                         "template": {"metadata": {"labels": {"app": app}},
                                      "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1.4.2"}]}}}}),
            1 => json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": app, "namespace": ns},
                "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}}),
            2 => configmap(&ns, &format!("{app}-config")),
            3 => json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{app}-tls"), "namespace": ns},
                "type": "kubernetes.io/tls", "data": {"tls.crt": "LS0tLS1CRUdJTi...", "tls.key": "LS0tLS1CRUdJTi..."}}),
            4 | 5 => {
                let p = format!("{app}-{}", k - 4);
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": p, "namespace": ns, "labels": {"app": app}},
                    "spec": {"nodeName": format!("node-{}", unit % 50),
                             "containers": [{"name": "main", "image": "registry.example.com/app:1.4.2",
                                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                             "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{p}")}}]},
                    "status": {"phase": "Running", "podIP": "10.0.0.1"}})
            }
            6 | 7 => {
                let p = format!("{app}-{}", k - 6);
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": format!("data-{p}"), "namespace": ns},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-rbd",
                             "resources": {"requests": {"storage": "10Gi"}}, "volumeName": format!("pv-{ns}-{p}")},
                    "status": {"phase": "Bound"}})
            }
            _ => {
                let p = format!("{app}-{}", k - 8);
                json!({"apiVersion": "v1", "kind": "PersistentVolume",
                    "metadata": {"name": format!("pv-{ns}-{p}")},
                    "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                             "claimRef": {"namespace": ns, "name": format!("data-{p}")},
                             "csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": format!("0001-{p}")}}})
            }
        }
    })
}
