#!/usr/bin/env python3
"""A fenced resource: a small server that stands for a datastore.

Every job command of a chaos run connects to it over a Unix socket for as long as it runs,
says who it is, and writes through it. The resource accepts a write to a scope only with a
fencing token at least as new as the newest it has accepted for that scope, and refuses it
otherwise (the write of a holder that lost its lease, after the next holder wrote).

It logs, one JSON object a line, on the host's monotonic clock (nanoseconds):

    {"t": T, "ev": "open",  "conn": N, "job": .., "attempt": .., "token": .., "stage": ..,
     "node": .., "pid": .., "kind": .., "attrs": {..}}
    {"t": T, "ev": "write", "conn": N, "scope": "group=g1", "token": .., "ok": true|false}
    {"t": T, "ev": "close", "conn": N}

"close" is logged when the connection ends, which the kernel does when the command's
process dies, however it dies (SIGKILL included): the open-to-close span of a connection is
a measured upper bound of the time its command ran, taken by one process on one clock.

Usage: fenced.py SOCKET LOG
"""

import json
import os
import socket
import sys
import threading
import time


class Resource:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.log = open(log_path, "a", buffering=1)
        self.newest = {}
        self.next_conn = 0

    def record(self, entry):
        # The time is taken under the lock, so the log is in time order.
        entry = {"t": time.monotonic_ns(), **entry}
        self.log.write(json.dumps(entry, sort_keys=True) + "\n")

    def serve(self, conn):
        with self.lock:
            self.next_conn += 1
            n = self.next_conn
        opened = False
        f = conn.makefile("rwb", buffering=0)
        try:
            for raw in f:
                msg = json.loads(raw)
                with self.lock:
                    if msg.get("op") == "hello" and not opened:
                        opened = True
                        self.record({"ev": "open", "conn": n, **msg["who"]})
                        answer = {"ok": True}
                    elif msg.get("op") == "write" and opened:
                        scope, token = str(msg["scope"]), int(msg["token"])
                        ok = token >= self.newest.get(scope, 0)
                        if ok:
                            self.newest[scope] = token
                        self.record({"ev": "write", "conn": n, "scope": scope, "token": token,
                                     "ok": ok, "newest": self.newest[scope]})
                        answer = {"ok": ok, "newest": self.newest[scope]}
                    else:
                        answer = {"ok": False, "error": "say hello first, then write"}
                f.write((json.dumps(answer) + "\n").encode())
        except (OSError, ValueError, KeyError):
            pass
        finally:
            with self.lock:
                if opened:
                    self.record({"ev": "close", "conn": n})
            conn.close()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: fenced.py SOCKET LOG")
    path, log = sys.argv[1], sys.argv[2]
    if os.path.exists(path):
        os.unlink(path)
    res = Resource(log)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(256)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=res.serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
