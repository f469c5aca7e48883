#!/usr/bin/env python3
"""Writes tests/fixtures/judge_cases.json: counts of two arms and the verdict the rollout's
comparison must give them, computed here by an implementation of its own (Python's math,
not the Rust code), so that the table is an oracle for both judges that read it: the
control plane's (`decider_rollout::step`) and `decider report`'s.

The comparison (crates/decider-rollout/src/sequential.rs): each arm's Beta(1/2, 1/2)-mixture
confidence sequence at level alpha/2, the difference bounded by the two, Better when its
lower end is above 0, Worse when its upper end is below -max_loss.

    python3 scripts/gen-judge-cases.py > tests/fixtures/judge_cases.json
"""
import json
import math


def cs(n, s, a):
    """The arm's interval at level a (n outcomes summing to s)."""
    if n == 0:
        return 0.0, 1.0
    f = n - s
    c = math.lgamma(0.5 + s) + math.lgamma(0.5 + f) - math.lgamma(1.0 + n) - math.log(math.pi)
    t = -math.log(a)
    p = s / n

    def ln(x):
        return math.log(x) if x > 0 else -math.inf

    def g(mu):
        x = c
        if s > 0:
            x -= s * ln(mu)
        if f > 0:
            x -= f * ln(1.0 - mu)
        return x

    def edge(out, inside):
        for _ in range(200):
            mid = 0.5 * (out + inside)
            if mid in (out, inside):
                break
            if g(mid) >= t:
                out = mid
            else:
                inside = mid
        return out

    lo = 0.0 if (s <= 0 or g(0.0) < t) else edge(0.0, p)
    hi = 1.0 if (f <= 0 or g(1.0) < t) else edge(1.0, p)
    return lo, hi


def verdict(t, b, alpha, max_loss):
    tl, th = cs(t[0], t[1], alpha / 2)
    bl, bh = cs(b[0], b[1], alpha / 2)
    lo, hi = tl - bh, th - bl
    margin = min(abs(lo), abs(hi + max_loss))
    if lo > 0:
        return "better", margin
    if hi < -max_loss:
        return "worse", margin
    return "undecided", margin


def first_n(pt, pb, alpha, want):
    """The smallest n per arm at which the rates pt vs pb give `want`."""
    n = 1
    while n < 10_000_000:
        if verdict((n, pt * n), (n, pb * n), alpha, 0.0)[0] == want:
            return n
        n = int(n * 1.05) + 1
    return None


cases = []


def add(name, t, b, alpha=0.05, max_loss=0.0):
    v, margin = verdict(t, b, alpha, max_loss)
    # A case so close to the boundary that rounding could flip it would test floats, not
    # the judges: every case keeps a margin.
    assert margin > 1e-9, (name, margin)
    cases.append({"name": name, "treatment": {"n": t[0], "sum": t[1]},
                  "baseline": {"n": b[0], "sum": b[1]}, "alpha": alpha, "max_loss": max_loss,
                  "verdict": v})


# Tiny samples: nothing is decided on a handful of outcomes.
for n in [0, 1, 2, 3, 5, 8, 13]:
    add(f"tiny: {n} all-success vs {n} all-failure", (n, n), (n, 0))
add("tiny: no outcomes on the baseline", (50, 50), (0, 0))
add("tiny: no outcomes on the treatment", (0, 0), (50, 0))
# Clear differences at growing sizes, both ways.
for n in [20, 50, 100, 200, 500, 1000, 5000]:
    add(f"{n} each: 100% vs 50%", (n, n), (n, n // 2))
    add(f"{n} each: 50% vs 100%", (n, n // 2), (n, n))
# Success rates near 97%, the regime of a rollout.
for n in [1000, 3000, 10000, 30000, 100000]:
    add(f"{n} each: 97% vs 93%", (n, round(0.97 * n)), (n, round(0.93 * n)))
    add(f"{n} each: 97% vs 95%", (n, round(0.97 * n)), (n, round(0.95 * n)))
# The boundary: the first size (on a 5% grid) each comparison decides at, about 5% below
# and above it.
for pt, pb, want in [(0.97, 0.93, "better"), (0.93, 0.97, "worse"), (0.99, 0.90, "better"),
                     (0.80, 0.95, "worse")]:
    n = first_n(pt, pb, 0.05, want)
    for k, tag in [(int(n / 1.05) - 1, "5% below"), (n, "at"), (int(n * 1.05) + 1, "5% above")]:
        add(f"boundary {pt} vs {pb}: {tag} the first decided size ({k} each)", (k, pt * k), (k, pb * k))
# Uneven shares (a 5% step: the treatment has a twentieth of the baseline's outcomes).
for n in [100, 400, 1000, 4000]:
    add(f"5% share: {n} vs {19 * n} at 99% vs 90%", (n, round(0.99 * n)), (19 * n, round(0.90 * 19 * n)))
    add(f"5% share: {n} vs {19 * n} at 85% vs 97%", (n, round(0.85 * n)), (19 * n, round(0.97 * 19 * n)))
# Identical arms never decide.
for n in [10, 1000, 100000]:
    add(f"A/A at 95%, {n} each", (n, 0.95 * n), (n, 0.95 * n))
# Fractional rewards (a caller's reward).
add("fractional: 0.8 vs 0.6 mean on 500 each", (500, 400.25), (500, 300.5))
add("fractional: 0.6 vs 0.62 mean on 500 each", (500, 300.0), (500, 310.0))
# The error rate and the tolerated loss.
for alpha in [1e-6, 0.001, 0.05, 0.5]:
    add(f"alpha {alpha}: 6000 each, 96% vs 94%", (6000, 5760), (6000, 5640), alpha=alpha)
for max_loss in [0.0, 0.01, 0.05]:
    add(f"max loss {max_loss}: 20000 each, 95% vs 97%", (20000, 19000), (20000, 19400), max_loss=max_loss)
# Extremes of the rates.
add("0% vs 0%", (1000, 0), (1000, 0))
add("100% vs 100%", (1000, 1000), (1000, 1000))
add("100% vs 99.5% on 20000 each", (20000, 20000), (20000, 19900))
add("a million each, 95.1% vs 95.0%", (1_000_000, 951_000), (1_000_000, 950_000))

print(json.dumps({
    "comment": "Two arms' outcomes (n, sum of rewards) and the verdict of the rollout's comparison at alpha and max_loss; written by scripts/gen-judge-cases.py, whose own implementation is the oracle. Read by decider-rollout (the control plane's judge) and decider-cli (decider report).",
    "cases": cases,
}, indent=1))
