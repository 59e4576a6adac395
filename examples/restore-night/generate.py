#!/usr/bin/env python3
"""Generates the restore-night example: a night of backups that keeps every slot busy
(400 volume backups queued at once on three nodes), and four restores of one volume each,
asked for one hour apart while the queue is still hundreds deep.

Deterministic (fixed seed): run `python3 generate.py` in this directory to rewrite
nodes.json and workload.jsonl. policy.toml and assert.toml are written by hand.
"""
import json
import random

rng = random.Random(20261207)

nodes = [
    {"name": f"node-{n}", "labels": {"kubernetes.io/hostname": f"node-{n}"}}
    for n in (1, 2, 3)
]
with open("nodes.json", "w") as f:
    json.dump(nodes, f, indent=2)
    f.write("\n")

with open("workload.jsonl", "w") as f:
    for i in range(400):
        job = {
            "at": round(i * 0.5, 1),
            "kind": "data-upload",
            "attrs": {"namespace": f"team-{i % 20:02d}", "pvc": f"data-{i:03d}"},
            "owner": "backup:nightly",
            "node_selector": "",
            "two_stage": True,
            # Snapshot and expose, then move the data (5 to 30 minutes a volume).
            "prepare_s": round(rng.uniform(10, 30), 1),
            "run_s": round(rng.uniform(300, 1800), 1),
        }
        f.write(json.dumps(job) + "\n")
    for r in range(4):
        job = {
            "at": 3600.0 * (r + 1),
            "kind": "data-download",
            "attrs": {"namespace": f"restore-{r}", "pvc": "data"},
            "owner": f"restore:r{r}",
            "node_selector": "",
            "two_stage": True,
            "prepare_s": 20.0,
            "run_s": 600.0,
        }
        f.write(json.dumps(job) + "\n")
