#!/usr/bin/env python3
"""Acceptance check on routing policies the simulator never produced.

Writes datasets (the dataset format of crates/decider-cli/README.md) from independent policies written here, not by the
simulator: 20,000 training rows, 10,000 test rows and 10,000 shifted test rows (loads above 1,
deep queues, low success rates), with 0.5% label noise; then runs `decider train` and
`decider eval --json` and prints the numbers next to the targets.

    python3 bench/unseen_policy.py --decider target/release/decider
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ACTIONS = ["route_a", "route_b", "route_c", "reject"]


def policy_tiers(s):
    """Tiered capacity: premium types 0/1 stay on c unless it degrades, region pairs share a cluster."""
    if s["recent_success_rate"] < 0.3 and s["current_load"] > 0.9:
        return "reject"
    if s["queue_depth"] > 80:
        return "reject"
    if s["request_type"] in (0, 1):
        base = "route_c"
    elif s["region_id"] % 2 == 0:
        base = "route_a"
    else:
        base = "route_b"
    limit = 0.75 if 9 <= s["hour"] <= 17 else 0.9
    if s["current_load"] > limit or s["recent_success_rate"] < 0.7:
        return {"route_a": "route_b", "route_b": "route_a", "route_c": "route_a"}[base]
    return base


def policy_bands(s):
    """Load bands with region groups and an hour-dependent batch window."""
    load, ok, q = s["current_load"], s["recent_success_rate"], s["queue_depth"]
    if (load >= 0.97 and ok < 0.6) or q >= 90 or ok < 0.1:
        return "reject"
    if s["hour"] >= 20 and s["request_type"] >= 3:
        return "route_c"
    group = "route_a" if s["region_id"] < 5 else "route_b"
    if load > 0.6 + 0.05 * s["request_type"]:
        return "route_c" if q < 40 else ("route_b" if group == "route_a" else "route_a")
    return group


def state(rng, shifted):
    hour = rng.randrange(24)
    load = rng.uniform(0, 1.0) if rng.random() > (0.4 if shifted else 0.05) else rng.uniform(0.9, 2.5 if shifted else 1.3)
    ok = 1 - abs(rng.gauss(0, 0.05)) if rng.random() > (0.4 if shifted else 0.1) else rng.uniform(0, 1)
    q = rng.expovariate(1 / 20) if rng.random() > (0.3 if shifted else 0.05) else rng.uniform(50, 3000 if shifted else 300)
    return {
        "request_type": rng.randrange(6),
        "region_id": rng.randrange(10),
        "current_load": round(load, 4),
        "recent_success_rate": round(min(max(ok, 0), 1), 4),
        "queue_depth": round(q, 1),
        "hour": hour,
    }


def write(path, n, seed, policy, shifted):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            s = state(rng, shifted)
            a = policy(s)
            if rng.random() < 0.005:
                a = rng.choice(ACTIONS)
            f.write(json.dumps({"state": s, "action": a}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decider", default="target/release/decider")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    ok_all = True
    for name, policy in [("tiers", policy_tiers), ("bands", policy_bands)]:
        d = tempfile.mkdtemp(prefix=f"unseen-{name}-")
        paths = {k: os.path.join(d, f"{k}.jsonl") for k in ["train", "test", "shifted"]}
        write(paths["train"], 20000, args.seed, policy, False)
        write(paths["test"], 10000, args.seed + 1, policy, False)
        write(paths["shifted"], 10000, args.seed + 2, policy, True)
        model = os.path.join(d, "model.json")
        t0 = time.perf_counter()
        subprocess.run([args.decider, "train", "--data", paths["train"], "--out", model, "--quiet"] + os.environ.get("TRAIN_ARGS", "").split(), check=True, stdout=subprocess.DEVNULL)
        secs = time.perf_counter() - t0
        ev = lambda p: json.loads(subprocess.run([args.decider, "eval", "--model", model, "--data", p, "--json"], check=True, capture_output=True, text=True).stdout)
        t, s = ev(paths["test"]), ev(paths["shifted"])
        checks = [
            ("accuracy", t["accuracy"], 0.993),
            ("coverage", t["coverage"], 0.97),
            ("accuracy_at_threshold", t["accuracy_at_threshold"], 0.994),
            ("shifted accuracy", s["accuracy"], 0.97),
            ("training seconds (≤)", secs, 30.0),
        ]
        print(f"policy {name}: threshold {t['threshold']:.3f}")
        for label, value, target in checks:
            good = value <= target if "≤" in label else value >= target
            ok_all &= good
            print(f"  {label:<24} {value:.4f}  target {target}  {'ok' if good else 'MISSED'}")
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
