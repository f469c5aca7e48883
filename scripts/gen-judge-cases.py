#!/usr/bin/env python3
"""Writes tests/fixtures/judge_cases.json: counts of two arms and the verdict the rollout's
comparison must give them, computed here by an implementation of its own (Python's math,
not the Rust code), so that the table is an oracle for both judges that read it: the
control plane's (`decider_rollout::step`) and `decider report`'s.

The comparison (crates/decider-rollout/src/sequential.rs). Without a known allocation (no
"share" in a case): each arm's Beta(1/2, 1/2)-mixture confidence sequence at level alpha/2,
the difference bounded by the two, Better when its lower end is above 0, Worse when its upper
end is below -max_loss. With one (a case's "share": the treatment's percent of the traffic,
the rest the baseline's): the two-sample e-process of crates/decider-rollout/src/evidence.rs,
Better when its "better" e-value reaches 2/alpha, Worse when its "worse" one does (and, with
max_loss > 0, the sequences' upper end is below -max_loss). Such a case also carries
"union_verdict", what the sequences alone say (decider report judges a champion and a
challenger outside a rollout, whose allocation the log does not hold, that way).

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


# The two-sample e-process's prior: 40 levels evenly in log-odds over [0.05, 0.999], times 30
# log-odds ratios geometric over [0.05, 2].
LEVELS = [math.log(0.05 / 0.95) + (math.log(0.999 / 0.001) - math.log(0.05 / 0.95)) * i / 39 for i in range(40)]
RATIOS = [0.05 * (2.0 / 0.05) ** (j / 29) for j in range(30)]


def expit(x):
    return 1.0 / (1.0 + math.exp(-x))


def xlog(x, p):
    return x * math.log(p) if x > 0 else 0.0


def log_mean_exp(xs):
    m = max(xs)
    return m + math.log(math.fsum(math.exp(x - m) for x in xs) / len(xs))


def evidence(t, b, pi):
    """ln of the 'better' and 'worse' e-processes for counts t, b at allocation pi."""
    st, ft = t[1], t[0] - t[1]
    sb, fb = b[1], b[0] - b[1]
    out = []
    for sign in (1.0, -1.0):
        logs = []
        for level in LEVELS:
            tb = expit(level)
            for r in RATIOS:
                tt = expit(level + sign * r)
                t0 = pi * tt + (1 - pi) * tb
                logs.append(xlog(st, tt) + xlog(ft, 1 - tt) + xlog(sb, tb) + xlog(fb, 1 - tb)
                            - xlog(st + sb, t0) - xlog(ft + fb, 1 - t0))
        out.append(log_mean_exp(logs))
    return out


def verdict_two_sample(t, b, alpha, max_loss, pi):
    better, worse = evidence(t, b, pi)
    bar = math.log(2 / alpha)
    tl, th = cs(t[0], t[1], alpha / 2)
    bl, bh = cs(b[0], b[1], alpha / 2)
    hi = th - bl
    margin = min(abs(better - bar), abs(worse - bar))
    if max_loss > 0:
        margin = min(margin, abs(hi + max_loss))
    if better >= bar:
        return "better", margin
    if worse >= bar and (max_loss == 0 or hi < -max_loss):
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


def add(name, t, b, alpha=0.05, max_loss=0.0, share=None):
    v, margin = verdict(t, b, alpha, max_loss)
    # A case so close to the boundary that rounding could flip it would test floats, not
    # the judges: every case keeps a margin.
    assert margin > 1e-9, (name, margin)
    case = {"name": name, "treatment": {"n": t[0], "sum": t[1]},
            "baseline": {"n": b[0], "sum": b[1]}, "alpha": alpha, "max_loss": max_loss}
    if share is None:
        case["verdict"] = v
    else:
        two, margin2 = verdict_two_sample(t, b, alpha, max_loss, share / 100)
        assert margin2 > 1e-6, (name, margin2)
        case.update({"share": share, "verdict": two, "union_verdict": v})
    cases.append(case)


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

# The two-sample e-process, at the allocation of a step (the treatment's share of the two
# arms' traffic), on counts in that proportion.
for share in [5, 20, 50, 90]:
    for n in [0, 3, 20]:
        add(f"two-sample {share}%: tiny, {n} outcomes all-success vs all-failure", (n, n), (n, 0), share=share)
    for total in [2000, 4000, 10000, 40000]:
        nt = total * share // 100
        nb = total - nt
        add(f"two-sample {share}%: {total} outcomes, 97% vs 93%", (nt, round(0.97 * nt)), (nb, round(0.93 * nb)), share=share)
        add(f"two-sample {share}%: {total} outcomes, 93% vs 97%", (nt, round(0.93 * nt)), (nb, round(0.97 * nb)), share=share)
        add(f"two-sample {share}%: {total} outcomes, A/A at 95%", (nt, 0.95 * nt), (nb, 0.95 * nb), share=share)
# Where the union of the sequences is undecided and the two-sample test is not.
for n in [1500, 2500, 4000]:
    add(f"two-sample 50%: {n} each, 97% vs 95%", (n, round(0.97 * n)), (n, round(0.95 * n)), share=50)
add("two-sample 50%: fractional, 0.8 vs 0.6 mean on 500 each", (500, 400.25), (500, 300.5), share=50)
add("two-sample 50%: fractional, 0.6 vs 0.62 mean on 500 each", (500, 300.0), (500, 310.0), share=50)
for alpha in [1e-6, 0.001, 0.05, 0.5]:
    add(f"two-sample 50%: alpha {alpha}, 6000 each, 96% vs 94%", (6000, 5760), (6000, 5640), alpha=alpha, share=50)
for max_loss in [0.0, 0.01, 0.05]:
    add(f"two-sample 50%: max loss {max_loss}, 20000 each, 95% vs 97%", (20000, 19000), (20000, 19400), max_loss=max_loss, share=50)

print(json.dumps({
    "comment": "Two arms' outcomes (n, sum of rewards) and the verdict of the rollout's comparison at alpha and max_loss; with a share (the treatment's percent of the two arms' traffic), the two-sample test's verdict and the union of the sequences' (union_verdict). Written by scripts/gen-judge-cases.py, whose own implementation is the oracle. Read by decider-rollout (the control plane's judge) and decider-cli (decider report).",
    "cases": cases,
}, indent=1))
