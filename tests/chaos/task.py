#!/usr/bin/env python3
"""The command of every chaos job: it leaves evidence of what it did.

It reads who it is from the environment lockgate gives a job's command (LOCKGATE_JOB_ID,
LOCKGATE_ATTEMPT, LOCKGATE_FENCING_TOKEN, LOCKGATE_STAGE, LOCKGATE_NODE, and an agent
handler's LOCKGATE_ATTR_*; a wrapper's attributes come as --attr), connects to the fenced
resource for as long as it runs, writes to its group's scope every 50 ms with its fencing
token, and appends a start and an end line to the record file, on the monotonic clock.

A refused write (a newer holder wrote meanwhile) ends it with status 3, as a datastore
error would. SIGTERM ends it with 143 after recording the end.

Usage: task.py --socket S --record FILE --ms N [--attr K=V ...] [--kind K]
"""

import argparse
import json
import os
import signal
import socket
import sys
import time


def append(path, entry):
    # One write per line with O_APPEND: lines of concurrent commands stay whole.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--ms", type=int, required=True)
    p.add_argument("--kind", default=os.environ.get("LOCKGATE_JOB_KIND", "-"))
    p.add_argument("--attr", action="append", default=[])
    a = p.parse_args()
    attrs = {k[len("LOCKGATE_ATTR_"):].lower(): v for k, v in os.environ.items()
             if k.startswith("LOCKGATE_ATTR_")}
    attrs.update(dict(kv.split("=", 1) for kv in a.attr))
    env = os.environ.get
    who = {
        "job": int(env("LOCKGATE_JOB_ID", "0")),
        "attempt": int(env("LOCKGATE_ATTEMPT", "0")),
        "token": int(env("LOCKGATE_FENCING_TOKEN", "0")),
        "stage": env("LOCKGATE_STAGE", "run"),
        "node": env("LOCKGATE_NODE", "-"),
        "pid": os.getpid(),
        "kind": a.kind,
        "attrs": attrs,
    }
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(a.socket)
    f = conn.makefile("rwb", buffering=0)

    def call(msg):
        f.write((json.dumps(msg) + "\n").encode())
        line = f.readline()
        if not line:
            raise OSError("the fenced resource closed the connection")
        return json.loads(line)

    call({"op": "hello", "who": who})
    append(a.record, {"ev": "start", "t": time.monotonic_ns(), **who})

    def stopped(signum, _frame):
        append(a.record, {"ev": "end", "t": time.monotonic_ns(), "pid": who["pid"],
                          "job": who["job"], "how": f"signal {signum}"})
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    end = time.monotonic() + a.ms / 1000
    scope = "group=" + attrs.get("group", "-")
    status = 0
    while True:
        answer = call({"op": "write", "scope": scope, "token": who["token"]})
        if not answer["ok"]:
            status = 3
            break
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.05, left))
    append(a.record, {"ev": "end", "t": time.monotonic_ns(), "pid": who["pid"],
                      "job": who["job"], "how": "refused" if status else "done"})
    sys.exit(status)


if __name__ == "__main__":
    main()
