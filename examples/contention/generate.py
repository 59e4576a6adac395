#!/usr/bin/env python3
"""Writes workload.jsonl: 12 backups of 9000 MB on each of two datastores, all at t=0."""
import json

with open("workload.jsonl", "w") as out:
    for ds in ("ds-a", "ds-b"):
        for vm in range(12):
            job = {"at": 0, "kind": "backup",
                   "attrs": {"datastore": ds, "group": f"vm/{100 + vm}"},
                   "size_mb": 9000, "run_s": 60}
            out.write(json.dumps(job) + "\n")
