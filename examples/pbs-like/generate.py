#!/usr/bin/env python3
"""Generates the PBS-like example: 20 Proxmox VE hosts back up 200 VMs to 10 datastores
of one Proxmox Backup Server at night (the PBS scheduler RFC), plus the maintenance jobs
that compete with them: verify, prune and garbage collection.

- backup: one `lockgate run --priority P --kind backup --node <host> --attr datastore=.. --attr
  group=vm/<id> -- vzdump <id> ...` per VM, pinned to its host (client jobs); each host's
  nightly vzdump job fires at 01:00 with up to two minutes of jitter;
- prune: per group, right after the backups are scheduled (conflicts with the group's
  backup: same datastore and group);
- verify: "verify new snapshots" of four datastores, 20 minutes in, on the PBS host (no
  node), 4 threads each;
- gc: garbage collection of three datastores, 30 minutes in.

Deterministic (fixed seed): `python3 generate.py` rewrites nodes.json and workload.jsonl.
"""
import json
import random

rng = random.Random(3086)

HOSTS = [f"pve-{i:02d}" for i in range(1, 21)]
BIG = {"pve-01", "pve-02", "pve-03", "pve-04"}
DATASTORES = [f"ds-{i:02d}" for i in range(1, 11)]

nodes = [
    {"name": h, "labels": {"role": "pve", "rack": "r1" if i < 10 else "r2",
                           "class": "big" if h in BIG else "standard"}}
    for i, h in enumerate(HOSTS)
]
with open("nodes.json", "w") as f:
    json.dump(nodes, f, indent=2)
    f.write("\n")

jobs = []
jitter = {h: round(rng.uniform(0, 120), 1) for h in HOSTS}
vms = []
for n in range(200):
    vmid = 100 + n
    host = HOSTS[n % len(HOSTS)]
    ds = DATASTORES[rng.randrange(len(DATASTORES))]
    vms.append((vmid, host, ds))
    # Incremental backups with dirty bitmaps: mostly minutes, a few big ones.
    run = rng.uniform(60, 420) if rng.random() < 0.85 else rng.uniform(420, 900)
    jobs.append({
        "at": jitter[host],
        "kind": "backup",
        "attrs": {"datastore": ds, "group": f"vm/{vmid}"},
        "owner": f"host-{host}",
        # The admin tags VMs by size and the host's wrapper maps the tag to
        # `--priority`: big VMs first (0), then medium (-1), then small (-2). Negative,
        # so the hosts' tokens need no `max_priority`. lockgate does not know run times;
        # without this the night ends with a few big VMs running alone.
        "priority": 0 if run > 600 else (-1 if run > 300 else -2),
        "node": host,
        "run_s": round(run, 1),
    })
for vmid, host, ds in rng.sample(vms, 20):
    jobs.append({
        "at": 130.0,
        "kind": "prune",
        "attrs": {"datastore": ds, "group": f"vm/{vmid}"},
        "owner": "pbs",
        "run_s": round(rng.uniform(5, 30), 1),
    })
for ds in DATASTORES[:4]:
    jobs.append({
        "at": 1200.0,
        "kind": "verify",
        "attrs": {"datastore": ds},
        "owner": "pbs",
        "run_s": round(rng.uniform(300, 600), 1),
    })
for ds in DATASTORES[:3]:
    jobs.append({
        "at": 1800.0,
        "kind": "gc",
        "attrs": {"datastore": ds},
        "owner": "pbs",
        "run_s": round(rng.uniform(120, 300), 1),
    })
jobs.sort(key=lambda j: j["at"])
with open("workload.jsonl", "w") as f:
    for j in jobs:
        f.write(json.dumps(j) + "\n")
