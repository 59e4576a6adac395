//! Prints one line per job of a simulated run: `index kind attrs node submit admit start end`.
//! Usage: `cargo run -p lockgate-sim --example trace -- DIR` (DIR holds policy.toml,
//! nodes.json, workload.jsonl).
fn main() {
    let dir = std::env::args().nth(1).expect("usage: trace DIR");
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).expect("readable");
    let policy =
        lockgate_core::Policy::from_toml(&read("policy.toml"), None).expect("valid policy");
    let nodes = lockgate_sim::parse_nodes(&read("nodes.json"), "nodes.json").expect("valid nodes");
    let jobs = lockgate_sim::parse_workload(&read("workload.jsonl"), "workload.jsonl")
        .expect("valid workload");
    let run = lockgate_sim::simulate(&policy, &nodes, &jobs).expect("runs");
    for (i, (j, r)) in jobs.iter().zip(&run.jobs).enumerate() {
        let s = |t: Option<u64>| t.map_or("-".to_string(), |t| format!("{:.1}", t as f64 / 1000.0));
        println!(
            "{i:4} {:8} {:40} {:8} at={:7.1} admit={:>8} start={:>8} end={:>8}",
            j.kind,
            format!("{:?}", j.attrs),
            r.node.as_deref().unwrap_or("-"),
            j.at,
            s(r.admitted_ms),
            s(r.started_ms),
            s(r.finished_ms)
        );
    }
}
