#!/usr/bin/env python3
"""Policies learned from logs, scored by their TRUE value (`make value`; on demand, not in CI).

For each seed, the world example (crates/decider-cli/src/world.rs: three origins, local hours,
a 300 ms SLO, a regime shift between the weeks) writes two weeks of logs from the shipped model
with 10% exploration, and the true success probability of every action in every logged state.
On week 1's logs three learners are trained:

- decider: `decider train --logs week1.log --slo-ms 300` (default flags unless --decider-args);
- LightGBM direct method: one LightGBM classifier of reward per action on the logged samples,
  the policy = argmax of the predicted rewards;
- OBP's IPWLearner (Open Bandit Pipeline 0.5.7) with a LightGBM base classifier;

and each is scored by its true expected value on week 2's states (the mean over week 2 of the
true success probability of the action it takes), beside the logger's and the oracle's.
`decider ope` estimates decider's policy on week 2's logs; the truth is printed beside its DR
interval and its support bounds.

Set-up (obp 0.5.7 declares Python < 3.11 and pins old versions; install it without its pins):

    python3 -m venv .tools/value-venv
    .tools/value-venv/bin/pip install numpy scipy scikit-learn==1.5.2 lightgbm==4.7.0 pandas tqdm pyyaml matplotlib seaborn
    .tools/value-venv/bin/pip install --no-deps --ignore-requires-python obp==0.5.7

obp imports torch at load for its neural learners; the IPW learner never uses it. Without torch
installed, a placeholder module stands in for it (installing torch works too).

    .tools/value-venv/bin/python bench/value_peers.py --decider target/release/decider \
        --world target/release/examples/world --seeds 1-6 --out bench/results/value.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

ACTIONS = ["route_a", "route_b", "route_c", "reject"]
FIELDS = ["request_type", "region_id", "current_load", "recent_success_rate", "queue_depth", "hour"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def import_obp():
    try:
        import torch  # noqa: F401
    except ImportError:
        # obp imports torch for its neural learners and type hints; IPWLearner never calls it.
        class Placeholder(types.ModuleType):
            def __getattr__(self, name):
                if name.startswith("__"):
                    raise AttributeError(name)
                return type(name, (), {})
        names = ["torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.utils",
                 "torch.utils.data"]
        mods = {n: Placeholder(n) for n in names}
        for n, m in mods.items():
            sys.modules[n] = m
            if "." in n:
                parent, child = n.rsplit(".", 1)
                setattr(mods[parent], child, m)
    from obp.policy import IPWLearner
    return IPWLearner


def read_truth(path):
    rows = [json.loads(line) for line in open(path)]
    x = np.array([[r["state"][f] for f in FIELDS] for r in rows], dtype=float)
    a = np.array([ACTIONS.index(r["action"]) for r in rows])
    p = np.array([r["propensity"] for r in rows])
    r = np.array([r["reward"] for r in rows])
    q = np.array([row["q"] for row in rows])
    states = [row["state"] for row in rows]
    return x, a, p, r, q, states


def lgbm(seed, **kw):
    import lightgbm
    params = dict(n_estimators=400, learning_rate=0.05, num_leaves=31, min_child_samples=20,
                  random_state=seed, verbose=-1)
    params.update(kw)
    return lightgbm.LGBMClassifier(**params)


def direct_method(x, a, r, seed):
    """One reward classifier per action (early-stopped on a 20% split); a constant where an
    action's rewards are all equal."""
    import lightgbm
    models = []
    rng = np.random.default_rng(seed)
    for k in range(len(ACTIONS)):
        m = a == k
        xk, rk = x[m], r[m]
        if len(rk) == 0 or rk.min() == rk.max():
            models.append(float(rk.mean()) if len(rk) else 0.0)
            continue
        idx = rng.permutation(len(rk))
        cut = len(rk) // 5
        va, tr = idx[:cut], idx[cut:]
        clf = lgbm(seed)
        clf.fit(xk[tr], rk[tr], eval_X=(xk[va],), eval_y=(rk[va],), categorical_feature=[0, 1],
                callbacks=[lightgbm.early_stopping(30, verbose=False)])
        models.append(clf)

    def policy(xs):
        cols = [np.full(len(xs), m) if isinstance(m, float) else m.predict_proba(xs)[:, 1]
                for m in models]
        return np.argmax(np.stack(cols, axis=1), axis=1)
    return policy


def ipw_learner(x, a, p, r, seed):
    IPWLearner = import_obp()
    learner = IPWLearner(n_actions=len(ACTIONS), base_classifier=lgbm(seed))
    learner.fit(context=x, action=a, reward=r, pscore=p)

    def policy(xs):
        return np.argmax(learner.predict(context=xs)[:, :, 0], axis=1)
    return policy


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, **kw)


def decider_actions(args, model, states, extra=()):
    lines = "".join(json.dumps({"state": s}) + "\n" for s in states)
    out = run([args.decider, "decide", "--model", model, *extra], input=lines).stdout
    return np.array([ACTIONS.index(json.loads(l)["action"]) for l in out.splitlines()])


def value(q, actions):
    return float(q[np.arange(len(q)), actions].mean())


def one_seed(args, seed, work):
    d = os.path.join(work, f"seed{seed}")
    world = [args.world, "--seed", str(seed), "--decisions", str(args.decisions), "--out", d]
    if args.no_shift:
        world.append("--no-shift")
    summary = json.loads(run(world).stdout)
    x1, a1, p1, r1, _, _ = read_truth(os.path.join(d, "week1.truth.jsonl"))
    x2, _, _, _, q2, states2 = read_truth(os.path.join(d, "week2.truth.jsonl"))
    res = {"seed": seed, "logger": summary["week2"]["logger_value"],
           "oracle": summary["week2"]["oracle_value"]}
    model = os.path.join(d, "decider.json")
    t0 = time.monotonic()
    run([args.decider, "train", "--logs", os.path.join(d, "week1.log"), "--slo-ms", "300",
         "--out", model, "--quiet", *args.decider_args.split()])
    res["decider_train_s"] = time.monotonic() - t0
    res["decider"] = value(q2, decider_actions(args, model, states2))
    res["decider_model_alone"] = value(
        q2, decider_actions(args, model, states2, ["--threshold", "0", "--no-ood"]))
    art = json.load(open(model))
    res["threshold"] = art["threshold"]
    ope = json.loads(run([args.decider, "ope", "--logs", os.path.join(d, "week2.log"), "--model",
                          model, "--slo-ms", "300", "--json", "--quiet"]).stdout)
    dr = ope["dr"]
    res["ope"] = {"dr": dr["value"], "ci95": dr["ci95"], "bounds": ope["dr_bounds"] or dr["ci95"],
                  "unsupported_mass": ope["support"]["unsupported_mass"], "truth": res["decider"]}
    if not args.no_peers:
        t0 = time.monotonic()
        res["lightgbm_dm"] = value(q2, direct_method(x1, a1, r1, seed)(x2))
        res["lightgbm_dm_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        res["obp_ipw"] = value(q2, ipw_learner(x1, a1, p1, r1, seed)(x2))
        res["obp_ipw_s"] = time.monotonic() - t0
    return res


def seeds(spec):
    if "-" in spec:
        lo, hi = spec.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in spec.split(",")]


def covered(o, key):
    iv = o.get(key)
    return iv is not None and iv[0] <= o["truth"] <= iv[1]


def summary(results):
    """What the seeds say together: the mean of each score, decider's margin over the best
    peer in points (mean, min, max), on how many seeds the truth lies inside DR's 95% interval
    and inside the support bounds, and the training time's range. Written into the JSON beside
    the results; the markdown table's last row and BENCHMARKS.md's section read it."""
    keys = ["logger", "decider", "decider_model_alone", "lightgbm_dm", "obp_ipw", "oracle",
            "decider_train_s"]
    out = {"mean": {k: float(np.mean([r[k] for r in results])) for k in keys if k in results[0]},
           "covered": {"dr": sum(covered(r["ope"], "ci95") for r in results),
                       "bounds": sum(covered(r["ope"], "bounds") for r in results)},
           "train_s": [min(r["decider_train_s"] for r in results),
                       max(r["decider_train_s"] for r in results)]}
    if "lightgbm_dm" in results[0]:
        margins = [100 * (r["decider"] - max(r["lightgbm_dm"], r["obp_ipw"])) for r in results]
        out["margin_pt"] = {"mean": float(np.mean(margins)), "min": min(margins),
                            "max": max(margins)}
    return out


def table(results):
    peers = "lightgbm_dm" in results[0]
    head = "| seed | logger | decider | model alone | " + (
        "LightGBM DM | OBP IPW | decider − best peer | " if peers else "") + \
        "oracle | threshold | DR [95%] | support bounds | truth in DR / bounds | train s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        o = r["ope"]
        cells = [str(r["seed"]), f"{r['logger']:.4f}", f"{r['decider']:.4f}",
                 f"{r['decider_model_alone']:.4f}"]
        if peers:
            best = max(r["lightgbm_dm"], r["obp_ipw"])
            cells += [f"{r['lightgbm_dm']:.4f}", f"{r['obp_ipw']:.4f}",
                      f"{100 * (r['decider'] - best):+.2f} pt"]
        b = o["bounds"]
        cells += [f"{r['oracle']:.4f}", f"{r['threshold']:.3f}",
                  f"{o['dr']:.4f} [{o['ci95'][0]:.4f}, {o['ci95'][1]:.4f}]",
                  f"[{b[0]:.4f}, {b[1]:.4f}]" if b else "-",
                  f"{'yes' if covered(o, 'ci95') else 'no'} / {'yes' if covered(o, 'bounds') else 'no'}",
                  f"{r['decider_train_s']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    m = summary(results)
    mean = m["mean"]
    cells = ["mean", f"{mean['logger']:.4f}", f"{mean['decider']:.4f}",
             f"{mean['decider_model_alone']:.4f}"]
    if peers:
        cells += [f"{mean['lightgbm_dm']:.4f}", f"{mean['obp_ipw']:.4f}",
                  f"{m['margin_pt']['mean']:+.2f} pt"]
    n = len(results)
    cells += [f"{mean['oracle']:.4f}", "", "", "",
              f"{m['covered']['dr']}/{n} / {m['covered']['bounds']}/{n}",
              f"{mean['decider_train_s']:.1f}"]
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decider", default=os.path.join(ROOT, "target/release/decider"))
    ap.add_argument("--world", default=os.path.join(ROOT, "target/release/examples/world"))
    ap.add_argument("--seeds", default="1-6")
    ap.add_argument("--decisions", type=int, default=20000)
    ap.add_argument("--decider-args", default="", help="extra flags for decider train --logs")
    ap.add_argument("--no-shift", action="store_true", help="week 2 in week 1's regime")
    ap.add_argument("--no-peers", action="store_true", help="decider only")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--markdown", help="write the table (markdown) here")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as work:
        for s in seeds(args.seeds):
            r = one_seed(args, s, work)
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    md = table(results)
    print(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"decider_args": args.decider_args, "no_shift": args.no_shift,
                       "decisions": args.decisions, "results": results,
                       "summary": summary(results)}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
