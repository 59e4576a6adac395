#!/usr/bin/env python3
"""lockgate's chaos harness: a real cluster under faults, judged by check.py.

It starts, each in a network namespace of its own on a bridge this harness makes
(10.231.77.0/24, torn down at the end; nothing is sent anywhere else):

- the PostgreSQL configuration: one PostgreSQL server, three `lockgate server` replicas on
  it, three `lockgate agent` nodes and two hosts of `lockgate run` wrappers;
- the SQLite configuration: one `lockgate server` on a SQLite file (its data directory on
  a small tmpfs, so the disk can be filled), the same agents and wrappers.

A steady mixed workload runs against a policy with several limits at once (global,
per datastore, per kind, per node, prepare bounds, an exclusive group conflict, a
shared/exclusive datastore conflict, a preempting kind, retries); every job's command is
tests/chaos/task.py, which writes through the fenced resource (tests/chaos/fenced.py) and
keeps a record. A nemesis with a seed injects faults, each logged with its start and heal.
At the end the faults stop, the queue drains, the job list is dumped, and check.py, which
shares no code with lockgate, reads the evidence and prints its table.

Run it as root through scripts/chaos (see docs/reliability.md).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
# Network N (--net) is the bridge lgcbrN on 10.231.(77+N).0/24, its namespaces lgc-HOST
# (lgcN-HOST for N > 0), so runs on different networks can go at once.
TTL_S = 3.0

# Fault kinds per configuration. Each is applied, held, then healed.
FAULTS = {
    "postgres": [
        "kill-leader", "kill-standby", "pause-leader", "partition-leader-db",
        "kill-database", "restart-database", "kill-agent", "restart-agent",
        "partition-agent", "kill-wrapper", "partition-wrappers", "clock-jump",
    ],
    "sqlite": [
        "kill-server", "pause-server", "full-disk", "kill-agent", "restart-agent",
        "partition-agent", "kill-wrapper", "partition-wrappers", "clock-jump",
    ],
}
# One fault's cycle: held 1 to 2 TTLs, then a gap of 2 to 4 s: at most 10 s.
CYCLE_S = 2 * TTL_S + 4.0

# Planted bugs: a mode of the cluster that breaks one promise. The checker must report a
# violation for each.
PLANTS = {
    "agent-outlives-lease": {
        "about": "agents keep their handlers running for 60 s without a renewal "
                 "(unreachable_grace = 60s, past the 3 s TTL), and the nemesis partitions "
                 "agents from the servers",
        "configs": ["postgres", "sqlite"],
        "faults": ["partition-agent"],
        "server": False,
        "long_commands": True,
    },
    "ack-before-commit": {
        "about": "a finish answered before the batch that records it is committed (a "
                 "server built with the plants feature), and the nemesis cuts the leader "
                 "from the database and kills it",
        "configs": ["postgres"],
        "faults": ["partition-leader-db", "kill-leader"],
        "server": True,
        "long_commands": False,
    },
}

POLICY = """\
[global]
max_running = 6

[leases]
ttl = "3s"

[[limit]]
name = "per-datastore"
per = ["datastore"]
max = 3

[[limit]]
name = "per-kind"
per = ["kind"]
values = { backup = 4, prune = 1, verify = 2, upload = 2, restore = 2 }

[[conflict]]                    # one holder per group: the fenced resource's scope
keys = ["group"]

[[conflict]]                    # backups share a datastore, a prune needs it alone
keys = ["datastore"]
match = "kind in (backup, prune)"
exclusive = "kind=prune"

[nodes]
max_running = 2
prepare_queue = 1

[kinds.upload]
two_stage = true
retry = { times = 2, interval = "1s" }

[kinds.verify]
retry = { times = 2, interval = "1s" }

[kinds.restore]
priority = 10
preempt = true
"""

# What check.py holds the records to: the policy's limits, as counts of commands running
# at once. A two-stage job holds its limits from prepare on, so a count of running
# commands can never exceed them either.
SPEC = {
    "ttl_s": TTL_S,
    "limits": [
        {"name": "global", "per": [], "max": 6},
        {"name": "per-datastore", "per": ["datastore"], "max": 3},
        {"name": "per-kind", "per": ["kind"], "values": {
            "backup": 4, "prune": 1, "verify": 2, "upload": 2, "restore": 2}},
        {"name": "conflict:group", "per": ["group"], "max": 1},
        {"name": "node (prepare and run)", "per": ["node"], "max": 3, "agents_only": True},
        {"name": "node (run)", "per": ["node"], "max": 2, "agents_only": True,
         "stage": "run"},
    ],
    "exclusive": [{"name": "conflict:datastore", "key": "datastore",
                   "kinds": ["backup", "prune"], "exclusive_kinds": ["prune"]}],
    "retried_kinds": ["upload", "verify"],
    "heal_bound_s": 20.0,
}

DATASTORES = ["ds1", "ds2"]
GROUPS = [f"g{i}" for i in range(1, 7)]


def log(msg):
    print(f"chaos: {msg}", flush=True)


def libfaketime():
    """libfaketime's multi-threaded library (Debian's faketime), or None."""
    for d in sorted(os.listdir("/usr/lib")):
        p = os.path.join("/usr/lib", d, "faketime", "libfaketimeMT.so.1")
        if os.path.exists(p):
            return p
    return None


def sh(*args, check=True, quiet=False):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    if not quiet and r.returncode != 0:
        log(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number and s, m or h (90s, 3m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


# ---------------------------------------------------------------------------------------
# The network: one namespace per host on one bridge.

class Net:
    def __init__(self, n=0):
        self.hosts = {}
        self.subnet = f"10.231.{77 + n}"
        self.bridge = f"lgcbr{n}"
        self.ns_prefix = "lgc-" if n == 0 else f"lgc{n}-"
        self.veth_prefix = "lgc" if n == 0 else f"lg{n}"

    def ns(self, name):
        return self.ns_prefix + name

    def veth(self, name):
        return self.veth_prefix + name

    def cleanup_leftovers(self):
        for line in sh("ip", "netns", "list", quiet=True).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.ns_prefix):
                sh("ip", "netns", "del", name, check=False, quiet=True)
        sh("ip", "link", "del", self.bridge, check=False, quiet=True)

    def up(self):
        self.cleanup_leftovers()
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")

    def add(self, name, octet):
        ns, veth = self.ns(name), self.veth(name)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
        sh("ip", "link", "set", f"{veth}p", "netns", ns)
        sh("ip", "-n", ns, "link", "set", f"{veth}p", "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{self.subnet}.{octet}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "set", veth, "master", self.bridge, "up")
        self.hosts[name] = f"{self.subnet}.{octet}"
        return self.hosts[name]

    def link(self, name, up):
        sh("ip", "link", "set", self.veth(name), "up" if up else "down")

    def cut(self, a, b, cut):
        """Drops traffic between hosts a and b both ways (blackhole routes on each)."""
        verb = "add" if cut else "del"
        sh("ip", "-n", self.ns(a), "route", verb, "blackhole", f"{self.hosts[b]}/32",
           check=cut)
        sh("ip", "-n", self.ns(b), "route", verb, "blackhole", f"{self.hosts[a]}/32",
           check=cut)

    def down(self):
        for name in list(self.hosts):
            sh("ip", "netns", "del", self.ns(name), check=False, quiet=True)
        sh("ip", "link", "del", self.bridge, check=False, quiet=True)
        self.hosts.clear()

    def exec(self, name, argv):
        """argv run in host name's namespace."""
        return ["ip", "netns", "exec", self.ns(name), *argv]


# ---------------------------------------------------------------------------------------
# The API, from the root namespace (the bridge reaches every host).

class Api:
    def __init__(self, urls, token):
        self.urls = urls
        self.token = token

    def call(self, method, path, body=None, timeout=5.0):
        """Tries the servers in turn until one answers other than 5xx (a standby answers
        503 not_leader). Returns (status, json); raises when none answers."""
        last = None
        for url in self.urls:
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(url + path, data=data, method=method)
            req.add_header("Authorization", f"Bearer {self.token}")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    return r.status, json.loads(r.read() or b"null")
            except urllib.error.HTTPError as e:
                text = e.read()
                try:
                    v = json.loads(text)
                except ValueError:
                    v = {"error": {"code": "?", "message": text.decode(errors="replace")}}
                if e.code in (502, 503, 504, 507):
                    last = (e.code, v)
                    continue
                return e.code, v
            except (OSError, ValueError) as e:
                last = (0, {"error": {"code": "transport", "message": str(e)}})
        raise ConnectionError(f"{method} {path}: no server answered: {last}")

    def all_jobs(self):
        jobs, after = [], 0
        while True:
            status, page = self.call("GET", f"/v1/jobs?limit=1000&after={after}", timeout=10)
            if status != 200:
                raise ConnectionError(f"GET /v1/jobs: {status} {page}")
            jobs += page["jobs"]
            if page.get("next") is None:
                return jobs
            after = page["next"]


def wait_until(what, within, f, step=0.2):
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            v = f()
            if v:
                return v
        except (OSError, ValueError, ConnectionError, KeyError):
            pass
        time.sleep(step)
    raise RuntimeError(f"{what}: not within {within:.0f} s")


# ---------------------------------------------------------------------------------------
# One configuration's run.

class Run:
    def __init__(self, cfg, args, out):
        self.cfg = cfg
        self.args = args
        self.out = out
        self.rng = random.Random(f"{args.seed}-{cfg}")
        self.net = Net(args.net)
        self.procs = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.wrappers = {}
        self.wrapper_seq = 0
        self.events = open(os.path.join(out, "harness.jsonl"), "a", buffering=1)
        self.pg_dir = None
        self.bin = args.bin
        self.plant = args.plant
        # With some planted bugs, commands last longer than the TTL, so a holder the bug
        # keeps going still runs one when the server hands its slot on.
        long = bool(args.plant) and PLANTS[args.plant]["long_commands"]
        self.agent_ms = (5000, 9000) if long else (300, 1500)

    def note(self, entry):
        with self.lock:
            self.events.write(json.dumps({"t": time.monotonic_ns(), **entry}) + "\n")

    def path(self, *p):
        return os.path.join(self.out, *p)

    # --- processes --------------------------------------------------------------------

    def spawn(self, name, host, argv, env=None, logname=None):
        logf = open(self.path(f"{logname or name}.log"), "ab")
        full_env = dict(os.environ)
        full_env.update(env or {})
        p = subprocess.Popen(self.net.exec(host, argv), stdin=subprocess.DEVNULL,
                             stdout=logf, stderr=logf, env=full_env, start_new_session=True)
        self.procs[name] = p
        return p

    def kill(self, name, sig=signal.SIGKILL, group=False):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return False
        try:
            if group:
                os.killpg(p.pid, sig)
            else:
                os.kill(p.pid, sig)
        except ProcessLookupError:
            return False
        if sig in (signal.SIGKILL, signal.SIGINT, signal.SIGTERM):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return True

    # --- PostgreSQL -------------------------------------------------------------------

    def pg_bin(self, tool):
        for d in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
            p = f"/usr/lib/postgresql/{d}/bin/{tool}"
            if os.path.exists(p):
                return p
        found = shutil.which(tool)
        if not found:
            raise RuntimeError(f"{tool} not found: install PostgreSQL's server binaries")
        return found

    def pg_init(self):
        # Its own directory under /tmp, whatever --out's permissions: PostgreSQL runs as the
        # postgres user and must reach it.
        self.pg_dir = tempfile.mkdtemp(prefix="lockgate-chaos-pg-")
        os.chmod(self.pg_dir, 0o700)
        shutil.chown(self.pg_dir, "postgres", "postgres")
        os.chmod(self.pg_dir, 0o700)
        sh("setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups",
           self.pg_bin("initdb"), "-D", self.pg_dir, "-U", "postgres", "-A", "trust",
           "--no-sync")
        with open(os.path.join(self.pg_dir, "pg_hba.conf"), "a") as f:
            f.write(f"host all all {self.net.subnet}.0/24 trust\n")

    def pg_start(self):
        self.spawn("postgres", "db", [
            "setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups",
            self.pg_bin("postgres"), "-D", self.pg_dir,
            "-c", f"listen_addresses={self.net.hosts['db']}",
            "-c", f"unix_socket_directories={self.pg_dir}", "-c", "max_connections=100",
        ])
        wait_until("PostgreSQL accepts connections", 60, lambda: sh(
            self.pg_bin("pg_isready"), "-q", "-h", self.net.hosts["db"], "-p", "5432",
            check=False, quiet=True).returncode == 0)

    # --- lockgate ---------------------------------------------------------------------

    def server_urls(self):
        return [f"http://{self.net.hosts[r]}:7400" for r in self.replicas]

    def start_replica(self, r):
        data = self.path(r)
        os.makedirs(data, exist_ok=True)
        argv = [self.bin, "server", "--config", self.path("policy.toml"), "--data-dir", data,
                "--listen", f"{self.net.hosts[r]}:7400"]
        if self.cfg == "postgres":
            argv += ["--advertise-url", f"http://{self.net.hosts[r]}:7400", "--database-url",
                     f"postgres://postgres@{self.net.hosts['db']}:5432/lockgate",
                     "--replica-id", r]
        else:
            argv += ["--min-free-space", "1000000"]
        env = {"LOCKGATE_LOG": "info"}
        if self.plant and PLANTS[self.plant]["server"]:
            env["LOCKGATE_PLANT"] = self.plant
        if "clock-jump" in self.faults:
            # Each server's wall clock is the host's offset by what its clock file holds
            # (re-read at most every second); its monotonic clocks are left alone, as a
            # real step of the clock leaves them.
            clock = self.path(f"{r}.clock")
            if not os.path.exists(clock):
                with open(clock, "w") as f:
                    f.write("+0\n")
            env.update({"LD_PRELOAD": libfaketime(), "FAKETIME_TIMESTAMP_FILE": clock,
                        "FAKETIME_CACHE_DURATION": "1", "DONT_FAKE_MONOTONIC": "1"})
        self.spawn(r, r, argv, env=env)

    def start_agent(self, a):
        self.spawn(a, a, [self.bin, "agent", "--node", a, "--config", self.path("agent.toml")],
                   env={"LOCKGATE_SERVER": ",".join(self.server_urls()),
                        "LOCKGATE_TOKEN": self.agent_tokens[a], "LOCKGATE_LOG": "info"})

    def agent_config(self):
        task = ["python3", os.path.join(HERE, "task.py"), "--socket", self.path("fenced.sock"),
                "--record", self.path("records.jsonl")]
        grace = "60s" if self.plant == "agent-outlives-lease" else "2s"
        q = json.dumps
        return (f'[agent]\ngrace = "500ms"\nunreachable_grace = "{grace}"\n\n'
                f'[handlers.verify]\nrun = {q(task + ["--ms", "{attr.ms}"])}\n\n'
                f'[handlers.restore]\nrun = {q(task + ["--ms", "{attr.ms}"])}\n\n'
                f'[handlers.upload]\nprepare = {q(task + ["--ms", "{attr.prepare_ms}"])}\n'
                f'run = {q(task + ["--ms", "{attr.ms}"])}\n')

    def leader(self):
        """The replica that leads now, by its own word (None when none does); of two that
        say so, the one with the newer term."""
        best = None
        for r in self.replicas:
            try:
                url = f"http://{self.net.hosts[r]}:7400/v1/cluster"
                with urllib.request.urlopen(url, timeout=1) as resp:
                    v = json.loads(resp.read())
                    if v.get("role") == "leader" and (best is None or v["term"] > best[1]):
                        best = (r, v["term"])
            except (OSError, ValueError, KeyError):
                pass
        return best and best[0]

    def setup(self):
        with open(self.path("policy.toml"), "w") as f:
            f.write(POLICY)
        with open(self.path("spec.json"), "w") as f:
            json.dump({**SPEC, "config": self.cfg, "plant": self.plant}, f, indent=1)
        self.net.up()
        if self.cfg == "postgres":
            self.replicas = ["r1", "r2", "r3"]
            self.net.add("db", 2)
        else:
            self.replicas = ["s1"]
        for i, r in enumerate(self.replicas):
            self.net.add(r, 11 + i)
        self.agents = ["a1", "a2", "a3"]
        for i, a in enumerate(self.agents):
            self.net.add(a, 21 + i)
        self.wrapper_hosts = ["w1", "w2"]
        for i, w in enumerate(self.wrapper_hosts):
            self.net.add(w, 31 + i)
        self.fenced = subprocess.Popen(
            ["python3", os.path.join(HERE, "fenced.py"), self.path("fenced.sock"),
             self.path("fenced.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        assert self.fenced.stdout.readline().strip() == "ready"
        if self.cfg == "postgres":
            self.pg_init()
            self.pg_start()
            sh(self.pg_bin("psql"), "-X", "-q", "-h", self.net.hosts["db"], "-U", "postgres",
               "-c", "CREATE DATABASE lockgate")
        else:
            # The SQLite server's data directory on a small tmpfs, so full-disk can fill it.
            os.makedirs(self.path("s1"))
            sh("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", self.path("s1"))
            self.tmpfs = self.path("s1")
        self.start_replica(self.replicas[0])
        token_file = self.path(self.replicas[0], "admin.token")
        first = self.procs[self.replicas[0]]

        def token_written():
            if first.poll() is not None:
                raise RuntimeError(f"the first server exited ({first.returncode}): see "
                                 f"{self.path(self.replicas[0] + '.log')}")
            return os.path.exists(token_file) and open(token_file).read().strip()

        wait_until("the first server writes admin.token", 60, token_written)
        self.token = open(token_file).read().strip()
        self.api = Api(self.server_urls(), self.token)
        wait_until("the first server is ready", 60,
                   lambda: self.api.call("GET", "/readyz")[0] == 200)
        for r in self.replicas[1:]:
            self.start_replica(r)
        self.agent_tokens = {}
        for a in self.agents:
            status, v = self.api.call("POST", "/v1/tokens",
                                      {"name": f"agent-{a}", "role": "agent", "node": a})
            if status != 201 and status != 200:
                raise RuntimeError(f"token for {a}: {status} {v}")
            self.agent_tokens[a] = v["token"]
        with open(self.path("agent.toml"), "w") as f:
            f.write(self.agent_config())
        for a in self.agents:
            self.start_agent(a)
        wait_until("every agent's node is ready", 60, lambda: all(
            self.api.call("GET", f"/v1/nodes/{a}")[1].get("state") == "ready"
            for a in self.agents))
        log(f"{self.cfg}: {len(self.replicas)} server(s), {len(self.agents)} agents, "
            f"{len(self.wrapper_hosts)} wrapper hosts up")

    # --- workload ---------------------------------------------------------------------

    def wrapper_loop(self, n):
        rng = random.Random(f"{self.args.seed}-{self.cfg}-wrapper-{n}")
        while not self.stop.is_set():
            kind = "prune" if rng.random() < 0.2 else "backup"
            ds = rng.choice(DATASTORES)
            group = rng.choice(GROUPS)
            ms = rng.randint(300, 1500)
            host = self.wrapper_hosts[n % len(self.wrapper_hosts)]
            with self.lock:
                self.wrapper_seq += 1
                seq = self.wrapper_seq
            report = self.path("reports", f"w{seq}.json")
            argv = [self.bin, "run", "--kind", kind, "--attr", f"datastore={ds}",
                    "--attr", f"group={group}", "--priority", str(rng.randint(0, 3)),
                    "--report", report, "--connect-timeout", "20s", "--stop-grace", "1s",
                    "--", "python3", os.path.join(HERE, "task.py"),
                    "--socket", self.path("fenced.sock"), "--record",
                    self.path("records.jsonl"), "--ms", str(ms), "--kind", kind,
                    "--attr", f"datastore={ds}", "--attr", f"group={group}"]
            logf = open(self.path("wrappers.log"), "ab")
            p = subprocess.Popen(
                self.net.exec(host, argv), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env={**os.environ, "LOCKGATE_SERVER": ",".join(self.server_urls()),
                     "LOCKGATE_TOKEN": self.token}, start_new_session=True)
            with self.lock:
                self.wrappers[seq] = (p, host)
            try:
                rc = p.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = p.wait()
            with self.lock:
                self.wrappers.pop(seq, None)
            rep = None
            if os.path.exists(report):
                try:
                    rep = json.load(open(report))
                except ValueError:
                    rep = None
            self.note({"ev": "wrapper-exit", "seq": seq, "rc": rc, "report": rep})
            time.sleep(rng.uniform(0.05, 0.3))

    def submit_loop(self):
        rng = random.Random(f"{self.args.seed}-{self.cfg}-submit")
        n = 0
        while not self.stop.is_set():
            time.sleep(rng.uniform(0.2, 0.5))
            r = rng.random()
            kind = "restore" if r < 0.12 else "upload" if r < 0.45 else "verify"
            n += 1
            key = f"{self.cfg}-{self.args.seed}-{n}"
            body = {"kind": kind, "node_selector": "", "executor": "agent",
                    "idempotency_key": key,
                    "attrs": {"datastore": rng.choice(DATASTORES),
                              "group": rng.choice(GROUPS),
                              "ms": str(rng.randint(*self.agent_ms)),
                              "prepare_ms": str(rng.randint(100, 500))}}
            # The same key until an answer: a resubmit returns the job the first made.
            for _ in range(40):
                if self.stop.is_set():
                    break
                try:
                    status, v = self.api.call("POST", "/v1/jobs", body, timeout=5)
                except ConnectionError:
                    time.sleep(0.5)
                    continue
                if status in (200, 201):
                    self.note({"ev": "submit-ack", "key": key, "id": v["id"], "kind": kind})
                    break
                if status == 429:
                    time.sleep(1)
                    continue
                self.note({"ev": "submit-refused", "key": key, "status": status, "answer": v})
                break
            # Keep the queue short: wait while many agent jobs are queued.
            while not self.stop.is_set():
                try:
                    status, v = self.api.call(
                        "GET", "/v1/jobs?active=true&limit=1000", timeout=5)
                    if status == 200 and len(v["jobs"]) < 16:
                        break
                except ConnectionError:
                    pass
                time.sleep(0.5)

    def snapshot_loop(self):
        while not self.stop.wait(2.0):
            try:
                jobs = self.api.all_jobs()
            except Exception:
                continue
            self.note({"ev": "snapshot", "jobs": [
                {"id": j["id"], "state": j["state"], "attempt": j["attempt"]} for j in jobs]})

    # --- nemesis ----------------------------------------------------------------------

    def fault(self, kind):
        """Applies one fault; returns (target, heal) or None when it cannot apply now."""
        rng = self.rng
        if kind in ("kill-leader", "kill-standby", "kill-server"):
            lead = self.leader()
            if kind == "kill-standby":
                pool = [r for r in self.replicas if r != lead and self.alive(r)]
                target = rng.choice(pool) if pool else None
            else:
                target = lead
            if target is None:
                return None
            self.kill(target)
            return target, lambda: self.start_replica(target)
        if kind in ("pause-leader", "pause-server"):
            target = self.leader()
            if target is None:
                return None
            self.kill(target, signal.SIGSTOP)
            return target, lambda: self.kill(target, signal.SIGCONT)
        if kind == "partition-leader-db":
            target = self.leader()
            if target is None:
                return None
            self.net.cut(target, "db", True)
            return target, lambda: self.net.cut(target, "db", False)
        if kind == "kill-database":
            self.kill("postgres", signal.SIGKILL, group=True)
            return "postgres", self.pg_start
        if kind == "restart-database":
            self.kill("postgres", signal.SIGINT)
            self.pg_start()
            return "postgres", lambda: None
        if kind == "restart-agent":
            # kill -9 and started again at once, well within a TTL: the new process must
            # never run the old one's leases.
            target = rng.choice(self.agents)
            self.kill(target)
            self.start_agent(target)
            return target, lambda: None
        if kind == "kill-agent":
            target = rng.choice(self.agents)
            self.kill(target)
            return target, lambda: self.start_agent(target)
        if kind == "partition-agent":
            target = rng.choice(self.agents)
            self.net.link(target, False)
            return target, lambda: self.net.link(target, True)
        if kind == "kill-wrapper":
            with self.lock:
                running = list(self.wrappers.items())
            if not running:
                return None
            seq, (p, _) = rng.choice(running)
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                return None
            return f"wrapper {seq}", lambda: None
        if kind == "partition-wrappers":
            target = rng.choice(self.wrapper_hosts)
            self.net.link(target, False)
            return target, lambda: self.net.link(target, True)
        if kind == "clock-jump":
            # The serving replica's wall clock jumps ahead by one to ten minutes; the heal
            # sets it back, a step back of the same size.
            target = self.leader() if self.cfg == "postgres" else self.replicas[0]
            if target is None:
                return None
            jump = self.rng.randint(60, 600)
            clock = self.path(f"{target}.clock")

            def set_clock(offset):
                with open(clock + ".new", "w") as f:
                    f.write(f"+{offset}\n")
                os.replace(clock + ".new", clock)

            set_clock(jump)
            return f"{target} +{jump}s", lambda: set_clock(0)
        if kind == "full-disk":
            filler = os.path.join(self.tmpfs, "filler")
            st = os.statvfs(self.tmpfs)
            free = st.f_bavail * st.f_frsize
            with open(filler, "wb") as f:
                f.truncate(0)
                chunk = b"\0" * (1 << 20)
                left = max(0, free - 200_000)
                while left > 0:
                    try:
                        f.write(chunk[: min(len(chunk), left)])
                    except OSError:
                        break
                    left -= len(chunk)
            return "s1", lambda: os.unlink(filler)
        raise ValueError(kind)

    def alive(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def nemesis(self, until):
        kinds = list(self.faults)
        plan = kinds[:]
        self.rng.shuffle(plan)
        while time.monotonic() < until and not self.stop.is_set():
            time.sleep(self.rng.uniform(2.0, 4.0))
            kind = plan.pop(0) if plan else self.rng.choice(kinds)
            hold = self.rng.uniform(TTL_S, 2 * TTL_S)
            if self.plant == "agent-outlives-lease" and kind == "partition-agent":
                hold = 4 * TTL_S
            start = time.monotonic_ns()
            try:
                applied = self.fault(kind)
            except Exception as e:
                self.note({"ev": "fault-error", "fault": kind, "error": str(e)})
                log(f"{self.cfg}: fault {kind} could not be applied: {e}")
                continue
            if applied is None:
                plan.append(kind)
                continue
            target, heal = applied
            log(f"{self.cfg}: {kind} {target} for {hold:.1f} s")
            time.sleep(hold)
            try:
                heal()
            except Exception as e:
                self.note({"ev": "fault-error", "fault": kind, "error": f"heal: {e}"})
                log(f"{self.cfg}: healing {kind} failed: {e}")
            self.note({"ev": "fault", "fault": kind, "target": target, "start": start,
                       "heal": time.monotonic_ns()})
        if plan:
            self.note({"ev": "faults-missed", "faults": plan})

    # --- the whole run ----------------------------------------------------------------

    def go(self):
        os.makedirs(self.path("reports"), exist_ok=True)
        faults = FAULTS[self.cfg]
        if self.args.faults:
            faults = [f for f in faults if f in self.args.faults]
        if self.plant:
            faults = PLANTS[self.plant]["faults"]
        self.faults = faults
        try:
            self.setup()
            threads = [threading.Thread(target=self.wrapper_loop, args=(n,), daemon=True)
                       for n in range(4)]
            threads.append(threading.Thread(target=self.submit_loop, daemon=True))
            threads.append(threading.Thread(target=self.snapshot_loop, daemon=True))
            for t in threads:
                t.start()
            log(f"{self.cfg}: workload running; faults for {self.args.duration:.0f} s: "
                f"{', '.join(faults) if faults else 'none'}")
            self.nemesis(time.monotonic() + self.args.duration)
            self.note({"ev": "faults-stopped"})
            log(f"{self.cfg}: faults stopped; draining")
            self.stop.set()
            for t in threads:
                t.join(timeout=200)
            self.drain()
        finally:
            self.teardown()

    def drain(self):
        end = time.monotonic() + 90
        active = None
        while time.monotonic() < end:
            try:
                status, v = self.api.call("GET", "/v1/jobs?active=true&limit=1000")
                if status == 200:
                    active = len(v["jobs"])
                    if active == 0:
                        break
            except ConnectionError:
                pass
            time.sleep(1)
        jobs = wait_until("a final job list", 60, self.api.all_jobs, step=1)
        with open(self.path("final.json"), "w") as f:
            json.dump({"t": time.monotonic_ns(), "jobs": jobs}, f)
        log(f"{self.cfg}: drained ({active} active at the end); {len(jobs)} jobs on record")

    def teardown(self):
        for name, p in list(self.procs.items()):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        with self.lock:
            for p, _ in self.wrappers.values():
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if getattr(self, "fenced", None):
            self.fenced.kill()
            self.fenced.wait()
        if self.pg_dir:
            shutil.rmtree(self.pg_dir, ignore_errors=True)
        if getattr(self, "tmpfs", None):
            sh("umount", "-l", self.tmpfs, check=False, quiet=True)
        self.net.down()


def main():
    p = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=parse_duration, default=parse_duration("3m"),
                   help="time under faults for each configuration (90s, 3m, 1h)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", choices=["postgres", "sqlite", "both"], default="both")
    p.add_argument("--faults", help="comma-separated fault kinds (default: all of the "
                   "configuration's)")
    p.add_argument("--plant", help="run with a planted bug the checker must report: "
                   + "; ".join(f"{k}: {v['about']}" for k, v in PLANTS.items()))
    p.add_argument("--net", type=int, default=0, choices=range(10), metavar="N",
                   help="the network to make: the bridge lgcbrN on 10.231.(77+N).0/24 "
                   "(0 to 9; runs on different networks can go at once)")
    p.add_argument("--out", help="where the evidence goes (default: a new directory "
                   "under /tmp, kept)")
    p.add_argument("--bin", default=os.path.join(HERE, "..", "..", "target", "debug",
                                                 "lockgate"))
    args = p.parse_args()
    if args.plant and args.plant not in PLANTS:
        p.error(f"unknown plant {args.plant!r}: known are {', '.join(PLANTS)}")
    configs = ["postgres", "sqlite"] if args.config == "both" else [args.config]
    if args.plant:
        runs_on = PLANTS[args.plant]["configs"]
        if args.config == "both":
            configs = runs_on
        elif args.config not in runs_on:
            p.error(f"--plant {args.plant} runs on the {' and '.join(runs_on)} "
                    f"configuration only, not {args.config}")
    if args.faults:
        wanted = [f.strip() for f in args.faults.split(",") if f.strip()]
        known = sorted({f for c in configs for f in FAULTS[c]})
        unknown = [f for f in wanted if f not in known]
        if unknown:
            p.error(f"unknown fault kind(s) {', '.join(unknown)}: known for "
                    f"{args.config} are {', '.join(known)}")
        args.faults = wanted
    for c in configs:
        n = len(args.faults and [f for f in FAULTS[c] if f in args.faults] or FAULTS[c])
        if args.plant:
            n = len(PLANTS[args.plant]["faults"])  # the plant runs its own fault kinds
        need = n * CYCLE_S
        if args.duration < need:
            p.error(f"--duration {args.duration:.0f}s cannot meet every fault kind of the "
                    f"{c} configuration once: {n} kind{'s' if n > 1 else ''} take{'' if n > 1 else 's'} up to {CYCLE_S:.0f} s each, "
                    f"so give at least {need:.0f}s")
    if any("clock-jump" in (args.faults or FAULTS[c]) for c in configs) and not args.plant \
            and libfaketime() is None:
        p.error("the clock-jump fault needs libfaketime (Debian's faketime): install it, "
                "or leave the fault out with --faults")
    if os.geteuid() != 0:
        p.error("the harness makes network namespaces and mounts a tmpfs: run it as root")
    if not os.access(args.bin, os.X_OK):
        p.error(f"{args.bin} is not an executable lockgate: build it (cargo build) or "
                "give --bin")
    args.bin = os.path.abspath(args.bin)
    out = args.out or tempfile.mkdtemp(prefix="lockgate-chaos-")
    os.makedirs(out, exist_ok=True)
    log(f"evidence in {out}; seed {args.seed}")
    status = 0
    for c in configs:
        d = os.path.join(out, c)
        os.makedirs(d, exist_ok=False)
        os.chmod(d, 0o755)
        try:
            Run(c, args, d).go()
        except Exception as e:  # the harness failed, not lockgate: say so, exit 3
            log(f"{c}: the harness failed: {e!r}; evidence in {d}")
            sys.exit(3)
        r = subprocess.run(["python3", os.path.join(HERE, "check.py"), d])
        status = status or r.returncode
    sys.exit(status)


if __name__ == "__main__":
    main()
