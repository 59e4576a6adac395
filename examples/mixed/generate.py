#!/usr/bin/env python3
"""Generates the mixed example: one Kubernetes cluster and the hosts around it share one
object store and one uplink.

- Velero-like data movement: three application backups (namespaces shop, crm, analytics)
  as two-stage `data-upload` jobs placed by lockgate (`node_selector`), some restricted to
  one zone; fs-backup (`pod-volume-backup`) jobs pinned to the node of their pod;
- a restore (`data-download`, two-stage, high priority by kind) in the middle of the night;
- PBS/restic-style client jobs without a node (`lockgate run --kind restic ...`), some to
  the archive bucket, which allows only two at once;
- a database node that must not move data (rule `max_running = 0`).

Deterministic (fixed seed): `python3 generate.py` rewrites nodes.json and workload.jsonl.
"""
import json
import random

rng = random.Random(6734)


def node(name, zone, itype, role="worker"):
    return {"name": name, "labels": {"kubernetes.io/hostname": name,
                                     "topology.kubernetes.io/zone": zone,
                                     "node.kubernetes.io/instance-type": itype,
                                     "role": role}}


nodes = [
    node("worker-a1", "eu-1a", "m5.xlarge"),
    node("worker-a2", "eu-1a", "m5.xlarge"),
    node("worker-b1", "eu-1b", "m5.xlarge"),
    node("worker-b2", "eu-1b", "m5.4xlarge"),
    node("db-1", "eu-1a", "r5.2xlarge", role="database"),
]
with open("nodes.json", "w") as f:
    json.dump(nodes, f, indent=2)
    f.write("\n")

jobs = []
# Three application backups, each creating its DataUploads as the snapshots complete.
for ns, start, count, selector in [("shop", 0, 30, ""), ("crm", 600, 20, "topology.kubernetes.io/zone=eu-1a"),
                                   ("analytics", 1200, 40, "")]:
    for i in range(count):
        jobs.append({
            "at": round(start + i * 0.5, 1),
            "kind": "data-upload",
            "attrs": {"namespace": ns, "pvc": f"{ns}-data-{i:02d}", "storage": "s3-main"},
            "owner": "velero",
            "node_selector": selector,
            "prepare_s": round(rng.uniform(5, 20), 1),
            "run_s": round(rng.uniform(60, 240), 1),
        })
# fs-backup of volumes that cannot be snapshotted: pinned to the pod's node.
for i in range(12):
    jobs.append({
        "at": round(300 + i * 2.0, 1),
        "kind": "pod-volume-backup",
        "attrs": {"namespace": "legacy", "pod": f"legacy-{i:02d}", "storage": "s3-main"},
        "owner": "velero",
        "node": ["worker-a1", "worker-a2", "worker-b1", "worker-b2"][i % 4],
        "executor": None,
        "run_s": round(rng.uniform(60, 180), 1),
    })
# A restore of eight volumes into a test namespace.
for i in range(8):
    jobs.append({
        "at": round(900 + i * 0.5, 1),
        "kind": "data-download",
        "attrs": {"namespace": "shop-restore-test", "pvc": f"shop-data-{i:02d}", "storage": "s3-main"},
        "owner": "velero",
        "node_selector": "",
        "prepare_s": round(rng.uniform(5, 15), 1),
        "run_s": round(rng.uniform(60, 180), 1),
    })
# Client jobs on the hosts around the cluster: restic and pg_dump, no node.
for i in range(40):
    archive = i % 5 == 0
    jobs.append({
        "at": round(rng.uniform(0, 1800), 1),
        "kind": "restic",
        "attrs": {"storage": "s3-archive" if archive else "s3-main", "group": f"host-{i % 20:02d}"},
        "owner": f"host-{i % 20:02d}",
        "run_s": round(rng.uniform(60, 300), 1),
    })
for j in jobs:
    j.pop("executor", None)
jobs.sort(key=lambda j: j["at"])
with open("workload.jsonl", "w") as f:
    for j in jobs:
        f.write(json.dumps(j) + "\n")
