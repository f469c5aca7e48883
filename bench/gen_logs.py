#!/usr/bin/env python3
"""Deterministic synthetic Worker logs (decision records, log_version 1) for `decider report`.

Writes N lines mixing decision lines (both endpoints, every source, fallback reason and arm;
routed decisions carry their outcome), outcome lines for /v1/decide decisions (late,
duplicated, a few orphans) and the noise `wrangler dev` prints around them (request lines,
start-up banners, blank lines, a truncated line, a record with a bad field).

Same arguments, same bytes. Python 3 standard library only.

  python3 bench/gen_logs.py --lines 1000000 --seed 1 --out /tmp/dev.log
  python3 bench/gen_logs.py --lines 20000 --scenario ood-spike --out /tmp/spike.log.gz
  python3 bench/gen_logs.py --lines 5000 --format tail --out /tmp/tail.json

Scenarios: steady (default), rules-better (the holdout arm beats the model),
challenger-worse (the challenger fails more), ood-spike (out-of-distribution fallbacks
jump over the last tenth of the run).
Formats: dev (raw lines), tail (wrangler tail --format json, pretty-printed events),
logpush (workers_trace_events NDJSON), workers-logs (a JSON array of Workers Logs events).
"""

import argparse
import gzip
import heapq
import io
import json
import random
import sys
from datetime import datetime, timedelta, timezone

ACTIONS = ["route_a", "route_b", "route_c", "reject"]
CHAMPION = "m-2026-11-20"
CHALLENGER = "m-2026-12-01"
RULES = "rules-2026-11-01"
REASONS = [  # (reason, share of champion/challenger decisions)
    ("low_confidence", 0.050),
    ("out_of_distribution", 0.012),
    ("stale_signals", 0.008),
    ("model_error", 0.004),
    ("model_timeout", 0.004),
    ("model_unavailable", 0.002),
]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


class Gen:
    def __init__(self, args):
        self.r = random.Random(args.seed)
        self.args = args
        self.t = datetime(2026, 12, 2, 10, 0, 0, tzinfo=timezone.utc)
        self.step = timedelta(seconds=1.0 / args.rate)
        self.late = []  # heap of (due time, seq, line): outcome lines not yet written
        self.seq = 0

    def push_late(self, due, line):
        self.seq += 1
        heapq.heappush(self.late, (due, self.seq, line))

    def hexid(self, n):
        return "%0*x" % (n, self.r.getrandbits(4 * n))

    def state(self, ood):
        r = self.r
        return {
            "request_type": r.randrange(6),
            "region_id": r.randrange(10),
            "current_load": round(r.uniform(1.6, 3.0) if ood else r.betavariate(2, 3), 4),
            "recent_success_rate": round(r.uniform(0.2, 0.6) if ood else r.uniform(0.85, 1.0), 4),
            "queue_depth": r.randrange(400, 2000) if ood else r.randrange(0, 120),
            "hour": self.t.hour,
        }

    def decision(self, frac):
        r, a = self.r, self.args
        endpoint = "route" if r.random() < 0.7 else "decide"
        u = r.random()
        if endpoint == "route" and u < 0.05:
            arm = "holdout"
        elif u < 0.15:
            arm = "challenger"
        else:
            arm = "champion"
        spike = a.scenario == "ood-spike" and frac > 0.9
        reason = None
        if arm == "holdout":
            reason = "holdout"
        else:
            v, acc = r.random(), 0.0
            for name, share in REASONS:
                if name == "stale_signals" and endpoint == "decide":
                    continue
                acc += share * (12 if spike and name == "out_of_distribution" else 1)
                if v < acc:
                    reason = name
                    break
        source = "model" if reason is None else ("default" if r.random() < 0.02 else "rules")
        probs = [r.random() + 0.01 for _ in ACTIONS]
        probs[r.randrange(3)] += 4.0
        total = sum(probs)
        probs = [round(p / total, 4) for p in probs]
        best = max(range(4), key=lambda i: probs[i])
        action = ACTIONS[best] if r.random() > 0.03 else "reject"
        explored = arm != "holdout" and source == "model" and r.random() < 0.05
        if explored:
            action = ACTIONS[r.randrange(4)]
        model_out = source == "model" or reason == "low_confidence"
        rec = {
            "log_version": 1,
            "event": "decision",
            "ts": iso(self.t),
            "decision_id": self.hexid(32),
            "request_id": self.hexid(16) + "-AMS" if endpoint == "route" else None,
            "endpoint": endpoint,
            "state": self.state(reason == "out_of_distribution"),
            "action": action,
            "source": source,
            "fallback_reason": reason,
            "rule": None if source == "model" else "r%d" % r.randrange(1, 12),
            "confidence": max(probs) if model_out else None,
            "probabilities": dict(zip(ACTIONS, probs)) if model_out else None,
            "propensity": round(0.05 / 4, 4) if explored else 1,
            "explored": explored,
            "model_version": CHALLENGER if arm == "challenger" else CHAMPION,
            "rules_version": RULES,
            "encoder_version": 1,
            "backend": "embedded",
            "arm": arm,
            "decision_us": r.randrange(3, 60),
        }
        p = self.p_success(arm, source)
        if endpoint == "route":
            rec["outcome"] = self.route_outcome(action, p)
        else:
            if r.random() < 0.8:
                due = self.t + timedelta(seconds=r.uniform(0.05, 5.0))
                self.push_late(due, self.outcome_line(rec["decision_id"], p, due))
                if r.random() < 0.01:  # a caller retrying its POST /v1/outcome
                    self.push_late(due, self.outcome_line(rec["decision_id"], p, due))
        return json.dumps(rec, separators=(",", ":"))

    def p_success(self, arm, source):
        s = self.args.scenario
        if arm == "holdout":
            return 0.975 if s == "rules-better" else 0.955
        if arm == "challenger" and s == "challenger-worse":
            return 0.90
        return 0.93 if source != "model" else 0.965

    def route_outcome(self, action, p):
        r = self.r
        if action == "reject":
            return {"origin": None, "status": 503, "latency_ms": 0, "failover": None, "error": None}
        latency = round(r.lognormvariate(3.7, 0.6), 2)
        if r.random() < p:
            failover = "route_b" if r.random() < 0.02 and action != "route_b" else None
            origin = failover or action
            status = 200 if r.random() < 0.97 else 404
            return {"origin": origin, "status": status, "latency_ms": latency, "failover": failover, "error": None}
        kind = r.choice(["upstream_status", "timeout", "connect"])
        status = r.choice([502, 503, 504]) if kind == "upstream_status" else None
        return {"origin": action, "status": status, "latency_ms": latency if status else None,
                "failover": None, "error": kind}

    def outcome_line(self, did, p, due):
        r = self.r
        rec = {"log_version": 1, "event": "outcome", "ts": iso(due), "decision_id": did}
        u = r.random()
        if u < 0.5:
            rec.update(reward=1.0 if r.random() < p else 0.0, status=None, latency_ms=None)
        elif u < 0.6:
            rec.update(reward=round(min(1.0, max(0.0, r.gauss(p, 0.1))), 3), status=None, latency_ms=None)
        else:
            ok = r.random() < p
            rec.update(reward=None, status=200 if ok else 502, latency_ms=round(r.lognormvariate(3.7, 0.6), 2))
        return json.dumps(rec, separators=(",", ":"))

    def noise(self):
        r = self.r
        u = r.random()
        if u < 0.5:
            path = r.choice(["/v1/decide", "/v1/outcome", "/api/items", "/v1/health"])
            return "[wrangler:info] %s %s 200 OK (%dms)" % (r.choice(["GET", "POST"]), path, r.randrange(1, 40))
        if u < 0.65:
            return ""
        if u < 0.75:
            return r.choice(["⎔ Starting local server...", "[wrangler:info] Ready on http://127.0.0.1:8787",
                             "\x1b[2m[wrangler:info]\x1b[0m Reloading local server..."])
        if u < 0.85:  # an orphan: an outcome for a decision these logs do not hold
            return self.outcome_line(self.hexid(32), 0.9, self.t)
        if u < 0.95:  # a line cut short (a crashed process, a full disk)
            return self.decision(0.0)[: r.randrange(10, 200)]
        rec = json.loads(self.decision(0.0))  # a record with a bad field
        rec["state"]["hour"] = 24
        return json.dumps(rec, separators=(",", ":"))

    def lines(self):
        n, count = self.args.lines, 0
        while count < n:
            if self.late and self.late[0][0] <= self.t:
                line = heapq.heappop(self.late)[2]
            elif self.r.random() < self.args.noise:
                line = self.noise()
            else:
                line = self.decision(count / max(1, n - 1))
                self.t += self.step
            yield line
            count += 1


def wrap(fmt, lines, r):
    """Puts each line into the envelope of a log source."""
    if fmt == "dev":
        for line in lines:
            yield line + "\n"
        return
    if fmt == "workers-logs":
        yield "[\n"
        first = True
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        ms = 1796205600000 + r.randrange(10**9)
        if fmt == "tail":
            ev = {"outcome": "ok", "scriptName": "edge-decider", "diagnosticsChannelEvents": [],
                  "exceptions": [], "logs": [{"message": [line], "level": "log", "timestamp": ms}],
                  "eventTimestamp": ms, "event": {"request": {"url": "https://edge.example/v1/decide",
                                                              "method": "POST", "headers": {}}}}
            yield json.dumps(ev, indent=2) + "\n"
        elif fmt == "logpush":
            ev = {"DispatchNamespace": "", "Event": {"RayID": "%016x" % r.getrandbits(64)},
                  "EventTimestampMs": ms, "EventType": "fetch", "Exceptions": [],
                  "Logs": [{"Level": "log", "Message": [line], "TimestampMs": ms}],
                  "Outcome": "ok", "ScriptName": "edge-decider", "ScriptTags": []}
            yield json.dumps(ev, separators=(",", ":")) + "\n"
        else:
            ev = {"source": rec if isinstance(rec, dict) else line, "dataset": "cloudflare-workers",
                  "timestamp": ms, "$workers": {"scriptName": "edge-decider", "outcome": "ok", "eventType": "fetch"},
                  "$metadata": {"id": "%032x" % r.getrandbits(128), "message": line, "type": "cf-worker-log"}}
            yield ("  " if first else ",\n  ") + json.dumps(ev, separators=(",", ":"))
            first = False
    if fmt == "workers-logs":
        yield "\n]\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, required=True, help="log lines (records and noise) to write")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="-", help="output file (.gz: gzip); - for stdout")
    p.add_argument("--rate", type=float, default=200.0, help="decisions per second of log time")
    p.add_argument("--noise", type=float, default=0.08, help="share of noise lines")
    p.add_argument("--scenario", default="steady", choices=["steady", "rules-better", "challenger-worse", "ood-spike"])
    p.add_argument("--format", default="dev", choices=["dev", "tail", "logpush", "workers-logs"])
    a = p.parse_args()
    if a.lines < 1 or a.rate <= 0 or not 0 <= a.noise < 1:
        p.error("--lines must be ≥ 1, --rate > 0, --noise in [0, 1)")
    g = Gen(a)
    chunks = wrap(a.format, g.lines(), random.Random(a.seed + 1))
    if a.out == "-":
        out = sys.stdout
    elif a.out.endswith(".gz"):
        # mtime 0: the same arguments give the same bytes.
        out = io.TextIOWrapper(gzip.GzipFile(a.out, "wb", mtime=0), encoding="utf-8")
    else:
        out = open(a.out, "w", encoding="utf-8")
    with out:
        buf = []
        for c in chunks:
            buf.append(c)
            if len(buf) >= 4096:
                out.write("".join(buf))
                buf.clear()
        out.write("".join(buf))


if __name__ == "__main__":
    main()
