#!/usr/bin/env python3
"""Peer comparison: scikit-learn's MLP and HistGradientBoosting vs `decider train`, in one run,
on the same simulated data (run on demand, not in CI: `make peers`).

    python3 bench/peers.py --decider target/release/decider --out model/peers.md

Generates train/test/shifted sets with `decider simulate`, trains the three models, evaluates
them on the same rows with the same encoder (encoder v1, re-implemented here and checked
against tests/fixtures/golden_features.json before anything is trained), and writes a markdown
table with accuracy, accuracy on shifted traffic, and training time measured in this run.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

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


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decider", default="target/release/decider")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--test-rows", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    check_golden()
    tmp = tempfile.mkdtemp(prefix="peers-")
    paths = {k: os.path.join(tmp, f"{k}.jsonl") for k in ["train", "test", "shifted"]}
    run([args.decider, "simulate", "--rows", str(args.rows), "--seed", str(args.seed), "--out", paths["train"]])
    run([args.decider, "simulate", "--rows", str(args.test_rows), "--seed", str(args.seed + 1), "--out", paths["test"]])
    run([args.decider, "simulate", "--rows", str(args.test_rows), "--seed", str(args.seed + 2), "--shifted", "--out", paths["shifted"]])
    x, y = load(paths["train"])
    sets = {k: load(paths[k]) for k in ["test", "shifted"]}
    results = []

    model = os.path.join(tmp, "decider.json")
    t0 = time.perf_counter()
    run([args.decider, "train", "--data", paths["train"], "--out", model, "--quiet"])
    secs = time.perf_counter() - t0
    acc = {k: json.loads(run([args.decider, "eval", "--model", model, "--data", paths[k], "--json"]))["accuracy"] for k in sets}
    results.append(("decider train (boosted trees, Rust)", acc, secs))

    for name, clf in [
        ("scikit-learn HistGradientBoosting (defaults)", HistGradientBoostingClassifier(random_state=0)),
        ("scikit-learn MLP (64-64, adam, early stopping)", MLPClassifier(hidden_layer_sizes=(64, 64), max_iter=500, early_stopping=True, random_state=0)),
    ]:
        t0 = time.perf_counter()
        clf.fit(x, y)
        secs = time.perf_counter() - t0
        acc = {k: float((clf.predict(sx) == sy).mean()) for k, (sx, sy) in sets.items()}
        results.append((name, acc, secs))

    lines = [
        "",
        "## Peer comparison (measured by `bench/peers.py` in one run)",
        "",
        f"Same simulated data for all: {args.rows} training rows (seed {args.seed}), {args.test_rows} test rows, "
        f"{args.test_rows} shifted rows; label noise 0.5%. Accuracy is argmax accuracy on all rows.",
        "",
        "| model | test accuracy | shifted accuracy | training time | time vs decider |",
        "|---|---|---|---|---|",
    ]
    base = results[0][2]
    for name, acc, secs in results:
        lines.append(f"| {name} | {acc['test'] * 100:.2f}% | {acc['shifted'] * 100:.2f}% | {secs:.1f} s | {secs / base:.2f}× |")
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        open(args.out, "w").write(text)
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
