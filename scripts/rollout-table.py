#!/usr/bin/env python3
"""The judge's two tables in docs/rollout.md, from `decider rollout plan --json`.

Wrong verdicts: A/A rollouts (both arms 0.95) at a 5% and a 50% share, with and without a
daily drift of ±4 points in both arms, 2,000 each, a look every 500 outcomes (5 minutes) for
up to 400 looks.

Traffic: each row simulated with both judges (the two-sample e-process, the default, and the
union of two per-arm confidence sequences it replaced), the judge alone deciding when a step
ends (--min-step-s 0, no bake), a look every 500 requests, α = 0.05.

    make rollout-table            # or: scripts/rollout-table.py [path/to/decider]

About ten minutes on two cores.
"""
import json
import subprocess
import sys

DECIDER = sys.argv[1] if len(sys.argv) > 1 else "target/release/decider"
ROWS = [
    ("0.97", "0.93"),
    ("0.97", "0.95"),
    ("0.97", "0.85"),
    ("0.93", "0.97"),
    ("0.85", "0.97"),
    ("0.95", "0.95"),
]


def plan(**flags):
    o = {"steps": "5,20,50,100", "look": "500", "runs": "200", "max-looks": "1000",
         "min-step-s": "0", "bake-percent": "0", "judge": "two-sample"}
    o.update(flags)
    args = [DECIDER, "rollout", "plan", "--quiet", "--json"]
    for k, v in o.items():
        args += [f"--{k}", v]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def pct(x):
    return f"{100 * x:.2f}%"


print("| share | daily drift | rollouts | wrong promotions | wrong rollbacks | wrong verdicts |")
print("|---|---|---|---|---|---|")
for steps in ("5,100", "50,100"):
    for drift in ("0", "0.04"):
        p = plan(challenger="0.95", champion="0.95", steps=steps, runs="2000",
                 **{"max-looks": "400", "per-minute": "100", "drift": drift})
        print(f"| {steps.split(',')[0]}% | {'±' + drift if drift != '0' else 'none'} "
              f"| {p['runs']:,} | {pct(p['promoted'])} | {pct(p['rolled_back'])} "
              f"| {pct(p['false_decision_rate'])} |")
print()


def cell(p):
    e = p["to_end"]
    if e["median_outcomes"] is None or e["runs"] * 2 < p["runs"]:
        return f"undecided in {100 * p['undecided']:.0f}% after 500,000"
    how = "promoted" if p["promoted"] >= p["rolled_back"] else "rolled back"
    return f"{e['median_outcomes']:,} [{e['p90_outcomes']:,}] {how}"


print("| challenger vs champion | two-sample judge: requests to the end, median [p90] "
      "| the union judge | wrong verdicts (two-sample, union) |")
print("|---|---|---|---|")
for challenger, champion in ROWS:
    two, union = (plan(challenger=challenger, champion=champion, judge=j)
                  for j in ("two-sample", "union"))
    wrong = f"{pct(two['false_decision_rate'])}, {pct(union['false_decision_rate'])}"
    print(f"| {challenger} vs {champion} | {cell(two)} | {cell(union)} | {wrong} |")
