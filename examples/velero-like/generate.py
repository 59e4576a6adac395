#!/usr/bin/env python3
"""Generates the Velero-like example: one application with 100 PVCs backed up with CSI
snapshot data movement (Velero issue 8344), on three nodes whose loadConcurrency differs
(node-3 is a bigger instance type with a per-node rule).

Deterministic (fixed seed): run `python3 generate.py` in this directory to rewrite
nodes.json and workload.jsonl. policy.toml is written by hand.
"""
import json
import random

rng = random.Random(8344)

nodes = [
    {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1",
                                  "node.kubernetes.io/instance-type": "Standard_D4s_v5"}},
    {"name": "node-2", "labels": {"kubernetes.io/hostname": "node-2",
                                  "node.kubernetes.io/instance-type": "Standard_D4s_v5"}},
    {"name": "node-3", "labels": {"kubernetes.io/hostname": "node-3",
                                  "node.kubernetes.io/instance-type": "Standard_D8s_v5"}},
]
with open("nodes.json", "w") as f:
    json.dump(nodes, f, indent=2)
    f.write("\n")

with open("workload.jsonl", "w") as f:
    for i in range(100):
        job = {
            # The backup snapshots the PVCs one after another; each DataUpload is created
            # as soon as its snapshot is taken.
            "at": round(i * 0.3, 1),
            "kind": "data-upload",
            "attrs": {"namespace": "shop", "pvc": f"data-{i:03d}"},
            "owner": "velero",
            "node_selector": "",
            "two_stage": True,
            # Expose: restore a PVC from the snapshot and start the data-mover pod.
            "prepare_s": round(rng.uniform(8, 20), 1),
            # Data movement (kopia upload), by volume size.
            "run_s": round(rng.uniform(60, 180), 1),
        }
        f.write(json.dumps(job) + "\n")
