#!/usr/bin/env python3
"""The chaos run's checker. It shares no code with lockgate: it reads only the evidence.

    check.py DIR

DIR holds what one configuration's run left:

- spec.json      the policy's limits as counts of commands at once, the lease TTL;
- fenced.jsonl   the fenced resource's log: every command's connection (open and close, on
                 one process's monotonic clock) and every write it accepted or refused;
- records.jsonl  the commands' own start and end lines;
- harness.jsonl  the clients' acknowledgements (submits answered 200/201, wrappers' final
                 reports), the nemesis's faults with start and heal, snapshots of the job
                 list taken every 2 s;
- final.json     the job list after the faults stopped and the queue drained.

It prints a table and exits 1 on any violation (2 when the evidence is unreadable).
"""

import collections
import json
import os
import sys

TERMINAL = {"succeeded", "failed", "cancelled", "lost", "expired"}
FINAL_FOR_GOOD = {"succeeded", "cancelled", "expired"}
ACTIVE = {"queued", "preparing", "prepared", "running"}


def read_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                # A line cut by a crash at the very end is not evidence of anything.
                print(f"check: {os.path.basename(path)}:{n}: unreadable line skipped")
    return out


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Checker:
    def __init__(self, d):
        self.d = d
        self.spec = json.load(open(os.path.join(d, "spec.json")))
        self.fenced = read_jsonl(os.path.join(d, "fenced.jsonl"))
        self.records = read_jsonl(os.path.join(d, "records.jsonl"))
        self.harness = read_jsonl(os.path.join(d, "harness.jsonl"))
        self.final = json.load(open(os.path.join(d, "final.json")))
        self.violations = collections.defaultdict(list)
        self.spans = self.connections()

    def violate(self, what, detail):
        self.violations[what].append(detail)

    def connections(self):
        """Every command's span: its connection's open and close on the resource's clock."""
        spans, by_conn = [], {}
        last = max((e["t"] for e in self.fenced), default=0)
        for e in self.fenced:
            if e["ev"] == "open":
                s = dict(e, start=e["t"], end=None)
                by_conn[e["conn"]] = s
                spans.append(s)
            elif e["ev"] == "close" and e["conn"] in by_conn:
                by_conn[e["conn"]]["end"] = e["t"]
        for s in spans:
            if s["end"] is None:
                s["end"] = last
        return spans

    # --- at no instant more commands in a scope than its limit ----------------------

    @staticmethod
    def value(span, key):
        if key in ("kind", "node", "stage"):
            return span.get(key)
        return span.get("attrs", {}).get(key)

    def limits(self):
        worst = {}
        for rule in self.spec["limits"]:
            groups = collections.defaultdict(list)
            for s in self.spans:
                if rule.get("agents_only") and s.get("node") in (None, "-"):
                    continue
                if rule.get("stage") and s.get("stage") != rule["stage"]:
                    continue
                key = tuple(self.value(s, k) for k in rule["per"])
                if any(v is None for v in key):
                    continue
                groups[key].append(s)
            top = 0
            for key, spans in groups.items():
                cap = rule.get("max")
                if "values" in rule and len(key) == 1 and key[0] in rule["values"]:
                    cap = rule["values"][key[0]]
                n, at, who = self.most_at_once(spans)
                top = max(top, n)
                if cap is not None and n > cap:
                    scope = ",".join(f"{k}={v}" for k, v in zip(rule["per"], key)) or "all"
                    self.violate("limit exceeded",
                                 f"{rule['name']}[{scope}]: {n} commands at once (limit "
                                 f"{cap}) at t={at}: jobs {who}")
            worst[rule["name"]] = top
        return worst

    @staticmethod
    def most_at_once(spans):
        """The most spans open at once; a span ending at t does not overlap one starting at t."""
        edges = []
        for s in spans:
            edges.append((s["start"], 1, s))
            edges.append((s["end"], -1, s))
        edges.sort(key=lambda e: (e[0], e[1]))
        open_, best, at, who = set(), 0, None, []
        for t, d, s in edges:
            if d == 1:
                open_.add(id(s))
                if len(open_) > best:
                    best, at = len(open_), t
                    who = sorted({x["job"] for x in spans if id(x) in open_})
            else:
                open_.discard(id(s))
        return best, at, who

    def exclusive(self):
        for rule in self.spec["exclusive"]:
            by_value = collections.defaultdict(list)
            for s in self.spans:
                if s.get("kind") in rule["kinds"]:
                    v = self.value(s, rule["key"])
                    if v is not None:
                        by_value[v].append(s)
            for v, spans in by_value.items():
                for a in spans:
                    if a["kind"] not in rule["exclusive_kinds"]:
                        continue
                    for b in spans:
                        if b is a or b["job"] == a["job"]:
                            continue
                        if a["start"] < b["end"] and b["start"] < a["end"]:
                            self.violate("exclusive key shared",
                                         f"{rule['name']}[{rule['key']}={v}]: job {a['job']} "
                                         f"({a['kind']}) ran beside job {b['job']} "
                                         f"({b['kind']})")

    # --- the fenced resource ---------------------------------------------------------

    def fencing(self):
        newest = {}
        accepted = refused = 0
        who = {e["conn"]: e for e in self.fenced if e["ev"] == "open"}
        for e in self.fenced:
            if e["ev"] != "write":
                continue
            scope, token = e["scope"], e["token"]
            stale = token < newest.get(scope, 0)
            if e["ok"]:
                accepted += 1
                if stale:
                    self.violate("write accepted under a stale token",
                                 f"{scope}: token {token} after {newest[scope]}")
                newest[scope] = max(newest.get(scope, 0), token)
            else:
                refused += 1
                w = who.get(e["conn"], {})
                self.violate("a holder wrote after its slot was given away",
                             f"{scope}: job {w.get('job')} attempt {w.get('attempt')} token "
                             f"{token} refused, the newest accepted was {e['newest']}")
        return accepted, refused

    # --- acknowledgements, terminal states, re-runs ----------------------------------

    def acknowledged(self):
        final = {j["id"]: j for j in self.final["jobs"]}
        acks = [e for e in self.harness if e["ev"] == "submit-ack"]
        started = {s["job"] for s in self.spans}
        for e in acks:
            j = final.get(e["id"])
            if j is None:
                self.violate("acknowledged submit lost",
                             f"job {e['id']} (key {e['key']}) is not in the final list")
        for job in started:
            if job not in final:
                self.violate("acknowledged submit lost",
                             f"job {job} ran a command but is not in the final list")
        keys = collections.defaultdict(set)
        for e in acks:
            keys[e["key"]].add(e["id"])
        for k, ids in keys.items():
            if len(ids) > 1:
                self.violate("idempotent submit duplicated", f"key {k}: jobs {sorted(ids)}")
        finishes = 0
        for e in self.harness:
            if e["ev"] != "wrapper-exit" or not e.get("report"):
                continue
            rep = e["report"]
            if rep.get("state") not in TERMINAL:
                continue
            finishes += 1
            j = final.get(rep["id"])
            if j is None:
                self.violate("acknowledged finish lost", f"job {rep['id']} is gone")
            elif (j["state"], j["attempt"]) != (rep["state"], rep["attempt"]) and not (
                    rep["state"] in ("failed", "lost")
                    and j["kind"] in self.spec["retried_kinds"]
                    and j["attempt"] > rep["attempt"]):
                self.violate("acknowledged finish lost",
                             f"job {rep['id']}: the wrapper was told {rep['state']} (attempt "
                             f"{rep['attempt']}), the server ends with {j['state']} (attempt "
                             f"{j['attempt']})")
        return len(acks), finishes

    def terminal_states(self):
        seen = {}
        snaps = [e["jobs"] for e in self.harness if e["ev"] == "snapshot"]
        snaps.append(self.final["jobs"])
        kinds = {j["id"]: j["kind"] for j in self.final["jobs"]}
        for jobs in snaps:
            for j in jobs:
                now = (j["state"], j["attempt"])
                before = seen.get(j["id"])
                if before and before != now:
                    if j["attempt"] < before[1]:
                        self.violate("a job went back", f"job {j['id']}: {before} then {now}")
                    elif before[0] in FINAL_FOR_GOOD:
                        self.violate("a terminal state changed",
                                     f"job {j['id']}: {before} then {now}")
                    elif before[0] in ("failed", "lost") and (
                            kinds.get(j["id"]) not in self.spec["retried_kinds"]
                            or j["attempt"] == before[1]):
                        self.violate("a terminal state changed",
                                     f"job {j['id']}: {before} then {now}")
                seen[j["id"]] = now
        for j in self.final["jobs"]:
            if j["state"] in ACTIVE:
                self.violate("a job did not end once the faults stopped",
                             f"job {j['id']} ({j['kind']}) is {j['state']} after the drain")

    def reruns(self):
        by_job = collections.defaultdict(list)
        for s in self.spans:
            by_job[s["job"]].append(s)
        reruns = 0
        for job, spans in by_job.items():
            seen = collections.Counter((s["attempt"], s["stage"]) for s in spans)
            for (attempt, stage), n in seen.items():
                if n > 1:
                    self.violate("an attempt ran twice",
                                 f"job {job} attempt {attempt} {stage}: {n} commands")
            spans.sort(key=lambda s: s["start"])
            for a, b in zip(spans, spans[1:]):
                if b["attempt"] == a["attempt"]:
                    continue
                reruns += 1
                if b["attempt"] < a["attempt"] or b["token"] <= a["token"]:
                    self.violate("a re-run without a newer lease",
                                 f"job {job}: attempt {b['attempt']} token {b['token']} after "
                                 f"attempt {a['attempt']} token {a['token']}")
                if b["start"] < a["end"]:
                    self.violate("a re-run beside its earlier attempt",
                                 f"job {job}: attempt {b['attempt']} started "
                                 f"{(a['end'] - b['start']) / 1e6:.0f} ms before attempt "
                                 f"{a['attempt']} ended")
        return reruns

    # --- after each heal, the cluster admits again ------------------------------------

    def heals(self):
        faults = [e for e in self.harness if e["ev"] == "fault"]
        starts = sorted(s["start"] for s in self.spans)
        delays = []
        for f in faults:
            after = [t for t in starts if t >= f["heal"]]
            if not after:
                continue
            d = (after[0] - f["heal"]) / 1e9
            delays.append(d)
            if d > self.spec["heal_bound_s"]:
                self.violate("no admission after a heal",
                             f"{f['fault']} {f['target']}: the next command started {d:.1f} s "
                             f"after the heal (bound {self.spec['heal_bound_s']:.0f} s)")
        per_kind = collections.Counter(f["fault"] for f in faults)
        for e in self.harness:
            if e["ev"] == "faults-missed":
                self.violate("a fault kind never ran", ", ".join(e["faults"]))
        return per_kind, delays

    def run(self):
        worst = self.limits()
        self.exclusive()
        accepted, refused = self.fencing()
        acks, finishes = self.acknowledged()
        self.terminal_states()
        reruns = self.reruns()
        per_kind, delays = self.heals()
        final = collections.Counter(j["state"] for j in self.final["jobs"])
        cfg = self.spec.get("config", "?")
        plant = self.spec.get("plant")
        rows = [
            ("configuration", cfg + (f" (planted: {plant})" if plant else "")),
            ("commands run", str(len(self.spans))),
            ("jobs on record", f"{len(self.final['jobs'])}: " + ", ".join(
                f"{n} {s}" for s, n in sorted(final.items()))),
            ("acknowledged submits", str(acks)),
            ("acknowledged finishes", str(finishes)),
            ("re-runs (new attempt)", str(reruns)),
            ("fenced writes", f"{accepted} accepted, {refused} refused"),
            ("faults", f"{sum(per_kind.values())}: " + ", ".join(
                f"{k} {n}" for k, n in sorted(per_kind.items()))),
        ]
        if delays:
            rows.append(("heal to next admission", f"p50 {pct(delays, 0.5):.2f} s, p99 "
                         f"{pct(delays, 0.99):.2f} s, max {max(delays):.2f} s "
                         f"({len(delays)} heals)"))
        rows.append(("most at once", ", ".join(f"{k} {v}" for k, v in worst.items())))
        total = sum(len(v) for v in self.violations.values())
        for what, details in sorted(self.violations.items()):
            for d in details[:5]:
                print(f"VIOLATION {what}: {d}")
            if len(details) > 5:
                print(f"VIOLATION {what}: ... and {len(details) - 5} more")
        rows.append(("violations", str(total) + (": " + ", ".join(
            f"{k} {len(v)}" for k, v in sorted(self.violations.items())) if total else "")))
        width = max(len(k) for k, _ in rows)
        print("-" * 78)
        for k, v in rows:
            print(f"{k.ljust(width)}  {v}")
        print("-" * 78)
        return 1 if total else 0


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check.py DIR")
    try:
        c = Checker(sys.argv[1])
    except (OSError, ValueError, KeyError) as e:
        print(f"check: cannot read the evidence in {sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(2)
    sys.exit(c.run())


if __name__ == "__main__":
    main()
