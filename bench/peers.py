#!/usr/bin/env python3
"""Peer comparison: `decider train` against scikit-learn's HistGradientBoosting and MLP and
LightGBM, in one run, on the same data (run on demand, not in CI: `make peers`).

    python3 bench/peers.py --decider target/release/decider --out model/peers.md

Two datasets, each with train/test/shifted sets:
- `simulator`: `decider simulate` (axis-aligned policy thresholds, the shipped model's data);
- `oblique`: made here (`oblique_label`): each cluster has a score that mixes load, queue depth,
  hour and request type, the region's home cluster gets a bonus, the highest score wins, and a
  rare reject (about 1%) fires on a mix of load, queue and success rate. Boundaries that are
  not parallel to any feature axis are where boosted trees are weakest, and where a policy
  learned from real logs lives. Shifted rows come from the same support drawn toward high
  load, deep queues and low success rates.
Every model is trained on the same rows, evaluated on the same rows with the same encoder
(encoder v1, re-implemented here and checked against tests/fixtures/golden_features.json
before anything is trained), and the table gives accuracy, accuracy on shifted traffic, and
training time measured in this run. `decider train` runs once per base of `--decider-bases`
(default: `network,priors`, the CLI's default and the trees alone), each named explicitly;
the first is the row every training time is compared with.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import random

import lightgbm
import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.neural_network import MLPClassifier

ACTIONS = ["route_a", "route_b", "route_c", "reject"]
HERE = os.path.dirname(os.path.abspath(__file__))


def encode(s):
    x = [0.0] * 16
    x[0] = s["request_type"] / 5.0
    x[1] = min(max(s["current_load"], 0.0), 1.0)
    x[2] = min(max(s["recent_success_rate"], 0.0), 1.0)
    x[3] = min(max(s["queue_depth"] / 100.0, 0.0), 1.0)
    a = 2.0 * math.pi * s["hour"] / 24.0
    x[4], x[5] = math.sin(a), math.cos(a)
    x[6 + s["region_id"]] = 1.0
    return x


def check_golden():
    path = os.path.join(HERE, "..", "tests", "fixtures", "golden_features.json")
    for case in json.load(open(path))["cases"]:
        got = encode(case["state"])
        if max(abs(g - w) for g, w in zip(got, case["features"])) > 1e-12:
            sys.exit(f"encoder drift on golden case {case['state']}")


def load(path):
    xs, ys = [], []
    for line in open(path):
        row = json.loads(line)
        xs.append(encode(row["state"]))
        ys.append(ACTIONS.index(row["action"]))
    return np.array(xs), np.array(ys)


# The oblique dataset's ground truth: region -> home cluster, cluster scores, reject rule.
HOME = [0, 0, 1, 1, 2, 2, 0, 1, 2, 0]


def oblique_state(rng, shifted):
    load = (rng.betavariate(3, 2) if shifted else rng.betavariate(2, 3)) * 1.3
    queue = rng.expovariate(1 / (60 if shifted else 25))
    succ = 1 - (rng.betavariate(2, 4) if shifted else rng.betavariate(1, 8)) * 0.7
    return {"request_type": rng.randrange(6), "region_id": rng.randrange(10),
            "current_load": round(load, 4), "recent_success_rate": round(succ, 4),
            "queue_depth": round(queue, 2), "hour": rng.randrange(24)}


def oblique_label(s):
    load, queue = min(s["current_load"], 1.0), min(s["queue_depth"] / 100, 1.0)
    a = 2 * math.pi * s["hour"] / 24
    sin_h, cos_h, t = math.sin(a), math.cos(a), s["request_type"] / 5
    if 1.4 * load + 0.8 * queue - 0.9 * s["recent_success_rate"] > 1.05:
        return 3
    score = [0.6 - 1.1 * load + 0.5 * queue + 0.4 * sin_h - 0.3 * t,
             0.2 + 0.8 * load - 0.9 * queue + 0.5 * cos_h + 0.2 * t,
             -0.1 + 0.3 * load + 0.6 * queue - 0.5 * sin_h - 0.4 * cos_h + 0.5 * t]
    score[HOME[s["region_id"]]] += 0.35
    return max(range(3), key=lambda i: score[i])


def write_oblique(path, rows, seed, shifted, noise=0.005):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            s = oblique_state(rng, shifted)
            y = rng.randrange(4) if rng.random() < noise else oblique_label(s)
            f.write(json.dumps({"state": s, "action": ACTIONS[y]}) + "\n")


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


# What each `decider train --base` boosts from, for the table.
BASES = {"network": "trees on a small network", "linear": "trees on a softmax regression", "priors": "trees alone"}


def default_base(decider):
    """The CLI's default `--base`, as its help states it."""
    m = re.search(r"--base <BASE>.*?\[default: (\w+)\]", run([decider, "train", "--help"]), re.S)
    if not m:
        sys.exit("decider train --help names no default --base")
    return m.group(1)


def compare(args, tmp, dataset):
    paths = {k: os.path.join(tmp, f"{dataset}-{k}.jsonl") for k in ["train", "test", "shifted"]}
    for i, k in enumerate(["train", "test", "shifted"]):
        rows = args.rows if k == "train" else args.test_rows
        if dataset == "simulator":
            extra = ["--shifted"] if k == "shifted" else []
            run([args.decider, "simulate", "--rows", str(rows), "--seed", str(args.seed + i), *extra, "--out", paths[k]])
        else:
            write_oblique(paths[k], rows, args.seed + i, k == "shifted")
    x, y = load(paths["train"])
    sets = {k: load(paths[k]) for k in ["test", "shifted"]}
    results = []

    default = default_base(args.decider)
    for base in args.decider_bases.split(","):
        name = f"decider train --base {base} ({BASES[base]}{', the default' if base == default else ''})"
        model = os.path.join(tmp, f"{dataset}-decider-{base}.json")
        t0 = time.perf_counter()
        run([args.decider, "train", "--data", paths["train"], "--out", model, "--quiet", "--base", base])
        secs = time.perf_counter() - t0
        acc = {k: json.loads(run([args.decider, "eval", "--model", model, "--data", paths[k], "--json"]))["accuracy"] for k in sets}
        results.append((name, acc, secs))

    for name, clf in [
        ("scikit-learn HistGradientBoosting (defaults)", HistGradientBoostingClassifier(random_state=0)),
        ("LightGBM (defaults)", lightgbm.LGBMClassifier(random_state=0, verbose=-1)),
        ("scikit-learn MLP (64-64, adam, early stopping)", MLPClassifier(hidden_layer_sizes=(64, 64), max_iter=500, early_stopping=True, random_state=0)),
    ]:
        t0 = time.perf_counter()
        clf.fit(x, y)
        secs = time.perf_counter() - t0
        acc = {k: float((clf.predict(sx) == sy).mean()) for k, (sx, sy) in sets.items()}
        results.append((name, acc, secs))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decider", default="target/release/decider")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--test-rows", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--datasets", default="simulator,oblique")
    ap.add_argument("--decider-bases", default="network,priors",
                    help="comma-separated `decider train --base` values, one table row each")
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    bases = args.decider_bases.split(",")
    if not bases or any(b not in BASES for b in bases):
        sys.exit(f"--decider-bases: each of {', '.join(BASES)}, got {args.decider_bases!r}")
    check_golden()
    tmp = tempfile.mkdtemp(prefix="peers-")
    lines = [
        "",
        "## Peer comparison (measured by `bench/peers.py` in one run)",
        "",
        f"{args.rows} training rows, {args.test_rows} test rows and {args.test_rows} shifted rows per dataset "
        f"(seeds {args.seed}, {args.seed + 1}, {args.seed + 2}); label noise 0.5%. Accuracy is argmax accuracy on all rows; "
        "± is the 95% interval of a proportion on that many rows. The datasets are described in `bench/peers.py`.",
    ]
    for dataset in args.datasets.split(","):
        results = compare(args, tmp, dataset)
        lines += ["", f"### {dataset}", "", "| model | test accuracy | shifted accuracy | training time | time vs decider |", "|---|---|---|---|---|"]
        base = results[0][2]
        for name, acc, secs in results:
            ci = {k: 196 * math.sqrt(v * (1 - v) / args.test_rows) for k, v in acc.items()}
            lines.append(f"| {name} | {acc['test'] * 100:.2f}% ± {ci['test']:.2f} | {acc['shifted'] * 100:.2f}% ± {ci['shifted']:.2f} "
                         f"| {secs:.1f} s | {secs / base:.2f}× |")
        best = {k: max(r[1][k] for r in results[len(bases):]) for k in ["test", "shifted"]}
        for name, acc, _ in results[:len(bases)]:
            gap = ", ".join(f"{k} {(acc[k] - best[k]) * 100:+.2f} points" for k in best)
            lines += ["", f"{name.split(' (')[0]} against the best peer: {gap}."]
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        open(args.out, "w").write(text)
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
