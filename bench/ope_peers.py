#!/usr/bin/env python3
"""Peer check of the off-policy estimators (run on demand, not in CI).

Open Bandit Pipeline's InverseProbabilityWeighting, SelfNormalizedInverseProbabilityWeighting,
DoublyRobust and DirectMethod run on the SAME logged samples, target probabilities and
cross-fitted reward predictions as `decider_cli::ope::evaluate`, and the point estimates are
compared (target: agreement within 1%). The samples come from the `ope_dump` example, which
simulates logs from a known logging policy, evaluates a known target and dumps every sample.

Intervals are compared too, but they are not the same method: ours are normal approximations
on per-sample terms (delta method for SNIPS); obp's are percentile bootstraps of the mean of
its per-sample terms. For SNIPS obp bootstraps `w r / mean(w)` with the denominator fixed at
the full-sample value, which ignores the denominator's own noise, so its interval is not the
ratio's; the script therefore adds a pairs bootstrap of the ratio itself (`snips boot`).

Set-up (obp 0.5.7 declares Python < 3.11 and pins old scikit-learn/torch; its estimators run
with current versions, so install it without its pins):

    python3 -m venv /tmp/ope-venv
    /tmp/ope-venv/bin/pip install numpy scipy scikit-learn pandas tqdm pyyaml matplotlib seaborn torch
    /tmp/ope-venv/bin/pip install --no-deps --ignore-requires-python obp==0.5.7
    /tmp/ope-venv/bin/python bench/ope_peers.py            # builds the example with cargo

`--bin PATH` uses an already built `ope_dump` instead of `cargo run`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ACTIONS = ["route_a", "route_b", "route_c", "reject"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# (logging policy, target policy, seed): every target is covered by its logger.
SCENARIOS = [
    ("uniform", "best", 1),
    ("uniform", "soft", 2),
    ("eps:0.1", "best_or_reject", 3),
    ("eps:0.2", "soft_or_reject", 4),
]


def run_example(args, logging, target, seed, dump):
    cmd_args = ["--logging", logging, "--target", target, "--rows", str(args.rows),
                "--seed", str(seed), "--reward-model", args.reward_model, "--dump", dump]
    if args.bin:
        cmd = [args.bin] + cmd_args
    else:
        cmd = ["cargo", "run", "--quiet", "-p", "decider-cli", "--example", "ope_dump", "--"] + cmd_args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)


def load_dump(path):
    action, pscore, reward, target, q_hat = [], [], [], [], []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            action.append(ACTIONS.index(row["action"]))
            pscore.append(row["propensity"])
            reward.append(row["reward"])
            target.append(row["target"])
            q_hat.append(row["q_hat"])
    return (np.array(action), np.array(pscore), np.array(reward),
            np.array(target)[:, :, None], np.array(q_hat)[:, :, None])


def ratio_bootstrap(w, r, n_boot, seed):
    """Percentile interval of sum(w r) / sum(w) over resampled pairs."""
    rng = np.random.default_rng(seed)
    n = len(w)
    stats = np.empty(n_boot)
    for b in range(n_boot):
        i = rng.integers(0, n, n)
        stats[b] = (w[i] * r[i]).sum() / w[i].sum()
    return np.percentile(stats, [2.5, 97.5])


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", help="path to a built ope_dump example (default: cargo run)")
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--reward-model", default="trees", choices=["trees", "logistic", "action_mean"])
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    args = p.parse_args()

    from obp.ope import (DirectMethod, DoublyRobust, InverseProbabilityWeighting,
                         SelfNormalizedInverseProbabilityWeighting)
    import obp

    print(f"obp {obp.__version__}, numpy {np.__version__}, rows {args.rows}, "
          f"reward model {args.reward_model}, bootstrap {args.bootstrap}\n")
    print("| logging | target | truth | estimator | ours | obp | rel. diff | ours 95% CI | obp 95% CI (bootstrap) |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for logging, target, seed in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "dump.jsonl")
            ours = run_example(args, logging, target, seed, dump)
            action, pscore, reward, action_dist, q_hat = load_dump(dump)
        assert len(action) == ours["n"], (len(action), ours["n"])
        common = dict(reward=reward, action=action, action_dist=action_dist)
        ci = dict(alpha=0.05, n_bootstrap_samples=args.bootstrap, random_state=seed)
        peers = {
            "ips": (InverseProbabilityWeighting(), dict(pscore=pscore)),
            "snips": (SelfNormalizedInverseProbabilityWeighting(), dict(pscore=pscore)),
            "dr": (DoublyRobust(), dict(pscore=pscore, estimated_rewards_by_reg_model=q_hat)),
            "dm": (DirectMethod(), dict(estimated_rewards_by_reg_model=q_hat)),
        }
        for name, (est, extra) in peers.items():
            value = est.estimate_policy_value(**common, **extra)
            interval = est.estimate_interval(**common, **extra, **ci)
            lo, hi = interval["95.0% CI (lower)"], interval["95.0% CI (upper)"]
            mine = ours[name]
            d = rel(mine["value"], value)
            worst = max(worst, d)
            print(f"| {logging} | {target} | {ours['true_value']:.4f} | {name} | {mine['value']:.6f} | "
                  f"{value:.6f} | {d:.2e} | {mine['ci95'][0]:.4f}..{mine['ci95'][1]:.4f} | {lo:.4f}..{hi:.4f} |")
        w = action_dist[np.arange(len(action)), action, 0] / pscore
        blo, bhi = ratio_bootstrap(w, reward, args.bootstrap, seed)
        s = ours["snips"]
        print(f"| {logging} | {target} | | snips boot | {s['value']:.6f} | | | "
              f"{s['ci95'][0]:.4f}..{s['ci95'][1]:.4f} | {blo:.4f}..{bhi:.4f} (pairs) |")
        ess = w.sum() ** 2 / (w ** 2).sum()
        d = rel(ours["ess"], ess)
        worst = max(worst, d)
        print(f"| {logging} | {target} | | ess | {ours['ess']:.2f} | {ess:.2f} (numpy) | {d:.2e} | | |")
    print(f"\nlargest relative difference of point estimates: {worst:.2e} (target < 1e-2)")
    return 0 if worst < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
