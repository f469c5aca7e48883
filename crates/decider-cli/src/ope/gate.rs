//! The value gate of a policy learned from logs (`decider train --logs`): which confidence
//! threshold, and which out-of-distribution bounds, make the *whole* served policy — the model
//! where it is confident and in range, the rules elsewhere — pay the most, estimated on
//! held-out logs.
//!
//! # The threshold
//! On the held-out samples (never seen by the reward model that scores them, nor by the
//! policy model's fit), every action gets a doubly robust score
//! `φ(a) = q̂(x, a) + 1[a = a_logged] (r − q̂(x, a)) / p` ([`dr_score`]), except that an
//! action the logger **could not take** there (the logged decision had propensity 1 and was
//! another action) scores 0: no threshold may rest on the reward model's extrapolation.
//! Serving the model on the `k` most confident samples and the rules on the rest is worth
//! `V(k) = mean(φ(model) on those k, φ(rules) on the rest)`, for every `k` from all samples
//! (coverage 100%) to none (0%: the rules' value), on a grid of coverages 2% apart. The best
//! `V(k*)` is noisy and, as the best of 51, biased upward, so the gate takes the **highest
//! coverage whose value is within 3.09 paired standard errors of the best** (the standard
//! error of the per-sample difference between the two policies, which differ only on the
//! samples between them; 3.09 makes a one-sided 5% test family-wise over the 50 steps): it
//! falls back only where the rules are shown to pay more, not where the noise says so.
//!
//! # Out of distribution
//! A supervised model's ranges are its training data's min and max. Here a bound moves to
//! the field's domain (`current_load` and `queue_depth` up to any value, down to 0;
//! `recent_success_rate` to `[0, 1]`) where the evidence says the policy does not lose there:
//! on the outer 5% of held-out samples on that side of the field, the gated policy's
//! estimated value is not below the rules'. Where it is, the bound stays the data's.

use super::support::DETERMINISTIC;
use decider_core::model::FeatureRanges;
use decider_core::{Action, State, NUM_ACTIONS};
use serde::Serialize;

/// Coverage steps the gate chooses among: 50 (every 2%), plus coverage 0.
const GRID: usize = 50;

/// How far below the best a coverage may be and still be chosen, in paired standard errors:
/// `Φ⁻¹(1 − 0.05 / 50)`, a one-sided 5% test made family-wise over the 50 coverages
/// (Bonferroni). The best of 50 noisy values is biased upward by its selection; falling back
/// on less evidence than this follows the noise (one standard error did, on the world's
/// logs: a fallback estimated to gain 2.6 points that truly lost 0.15).
const Z_FAMILY: f64 = 3.090_232_306_167_813;

/// A held-out sample as the gate sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateSample {
    /// The logged state.
    pub state: State,
    /// The logged action.
    pub action: Action,
    /// Its propensity.
    pub propensity: f64,
    /// Its reward.
    pub reward: f64,
    /// Reward-model predictions for every action, from a model that did not see the sample.
    pub q_hat: [f64; NUM_ACTIONS],
}

/// Doubly robust score of action `a` on `s`; 0 for an action the logger could not take.
pub fn dr_score(s: &GateSample, a: Action) -> f64 {
    let logged = a == s.action;
    if s.propensity >= DETERMINISTIC && !logged {
        return 0.0;
    }
    let q = s.q_hat[a.index()];
    if logged {
        q + (s.reward - q) / s.propensity
    } else {
        q
    }
}

/// One point of the value–coverage curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ValuePoint {
    /// Share of held-out samples the model decides.
    pub coverage: f64,
    /// Confidence threshold giving that coverage.
    pub threshold: f64,
    /// Estimated value of the whole policy.
    pub value: f64,
}

/// A value with its standard error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Valued {
    /// Estimated value (DR, held-out).
    pub value: f64,
    /// Its standard error.
    pub se: f64,
}

/// What the gate chose, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueGate {
    /// The threshold in the artifact.
    pub threshold: f64,
    /// Held-out coverage at that threshold.
    pub coverage: f64,
    /// The whole policy's value there.
    pub value: Valued,
    /// The best value on the curve, and where.
    pub best: ValuePoint,
    /// Standard error of the paired difference between the chosen and the best point.
    pub paired_se: f64,
    /// The model alone (coverage 100%).
    pub model_value: Valued,
    /// The rules alone (coverage 0%).
    pub rules_value: Valued,
    /// Held-out samples scored.
    pub n: usize,
    /// Held-out samples where the model's action is one the logger could not take.
    pub unsupported: usize,
    /// The curve, 51 points from coverage 0% to 100%, for the card's picture.
    pub curve: Vec<ValuePoint>,
}

fn valued(terms: impl Iterator<Item = f64> + Clone) -> Valued {
    let n = terms.clone().count() as f64;
    if n < 1.0 {
        return Valued {
            value: 0.0,
            se: 0.0,
        };
    }
    let mean = terms.clone().sum::<f64>() / n;
    let ss: f64 = terms.map(|t| (t - mean) * (t - mean)).sum();
    Valued {
        value: mean,
        se: if n > 1.0 {
            (ss / (n - 1.0) / n).sqrt()
        } else {
            0.0
        },
    }
}

/// Chooses the threshold (module docs) from each held-out sample's model action, calibrated
/// confidence and rules action. `None` without samples.
pub fn choose_threshold(
    samples: &[GateSample],
    model: &[Action],
    confidence: &[f64],
    rules: &[Action],
) -> Option<ValueGate> {
    let n = samples.len();
    if n == 0 || model.len() != n || confidence.len() != n || rules.len() != n {
        return None;
    }
    let fr: Vec<f64> = samples
        .iter()
        .zip(rules)
        .map(|(s, &a)| dr_score(s, a))
        .collect();
    let fm: Vec<f64> = samples
        .iter()
        .zip(model)
        .map(|(s, &a)| dr_score(s, a))
        .collect();
    // Most confident first; ties in sample order.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| confidence[b].total_cmp(&confidence[a]).then(a.cmp(&b)));
    // Prefix sums of the per-sample gain d = φ(model) − φ(rules), in rank order.
    let mut p1 = vec![0.0; n + 1];
    let mut p2 = vec![0.0; n + 1];
    for (k, &i) in order.iter().enumerate() {
        let d = fm[i] - fr[i];
        p1[k + 1] = p1[k] + d;
        p2[k + 1] = p2[k] + d * d;
    }
    let rules_sum: f64 = fr.iter().sum();
    let nf = n as f64;
    let value = |k: usize| (rules_sum + p1[k]) / nf;
    // Cut points: serve the top k, k at every change of confidence (a threshold cannot split
    // a tie), 0 and n included.
    let cuts: Vec<usize> = (0..=n)
        .filter(|&k| k == 0 || k == n || confidence[order[k - 1]] != confidence[order[k]])
        .collect();
    // The candidates: the cut nearest each coverage step of 2%, 0 and n included.
    let grid: Vec<usize> = {
        let mut g: Vec<usize> = (0..=GRID)
            .map(|j| {
                cuts[cuts
                    .partition_point(|&c| (c as f64) < nf * j as f64 / GRID as f64)
                    .min(cuts.len() - 1)]
            })
            .collect();
        g.dedup();
        g
    };
    let best = *grid
        .iter()
        .max_by(|&&a, &&b| value(a).total_cmp(&value(b)).then(a.cmp(&b)))?;
    // Paired standard error between cut k and the best: the two differ on ranks between.
    let paired = |k: usize| {
        let (lo, hi) = (k.min(best), k.max(best));
        let s1 = p1[hi] - p1[lo];
        let s2 = p2[hi] - p2[lo];
        let mean = s1 / nf;
        let var = ((s2 - nf * mean * mean) / (nf - 1.0).max(1.0)).max(0.0);
        (var / nf).sqrt()
    };
    let chosen = *grid
        .iter()
        .rev()
        .find(|&&k| value(k) >= value(best) - Z_FAMILY * paired(k))?;
    // Coverage 100% serves every confidence, also lower ones than the held-out samples had.
    let threshold_at = |k: usize| {
        if k == 0 {
            1.0
        } else if k == n {
            0.0
        } else {
            confidence[order[k - 1]]
        }
    };
    let served: Vec<bool> = {
        let mut s = vec![false; n];
        order[..chosen].iter().for_each(|&i| s[i] = true);
        s
    };
    let policy_terms = (0..n).map(|i| if served[i] { fm[i] } else { fr[i] });
    let curve = grid
        .iter()
        .map(|&k| ValuePoint {
            coverage: k as f64 / nf,
            threshold: threshold_at(k),
            value: value(k),
        })
        .collect();
    Some(ValueGate {
        threshold: threshold_at(chosen),
        coverage: chosen as f64 / nf,
        value: valued(policy_terms),
        best: ValuePoint {
            coverage: best as f64 / nf,
            threshold: threshold_at(best),
            value: value(best),
        },
        paired_se: paired(chosen),
        model_value: valued(fm.iter().copied()),
        rules_value: valued(fr.iter().copied()),
        n,
        unsupported: samples
            .iter()
            .zip(model)
            .filter(|(s, &a)| s.propensity >= DETERMINISTIC && a != s.action)
            .count(),
        curve,
    })
}

/// One bound of the out-of-distribution check, and the evidence for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BoundEvidence {
    /// The state field.
    pub field: &'static str,
    /// `min` or `max`.
    pub side: &'static str,
    /// The training data's bound.
    pub data: f64,
    /// The bound in the artifact (the data's, or the field's domain).
    pub bound: f64,
    /// Held-out samples on this side (the outer 5%).
    pub samples: usize,
    /// Gated policy's value minus the rules' there (DR, held-out).
    pub gain: f64,
}

/// The numeric fields' domains: where a bound opens to.
const DOMAINS: [(&str, f64, f64); 3] = [
    ("current_load", 0.0, f64::MAX),
    ("recent_success_rate", 0.0, 1.0),
    ("queue_depth", 0.0, f64::MAX),
];

fn field(s: &State, name: &str) -> f64 {
    s.field(name).unwrap_or(f64::NAN)
}

/// Opens the numeric fields' bounds of `ranges` where the held-out evidence allows (module
/// docs). `served[i]` says whether the gated policy takes the model's action on sample `i`
/// (`model[i]`) rather than the rules' (`rules[i]`).
pub fn evidence_ranges(
    ranges: &FeatureRanges,
    samples: &[GateSample],
    served: &[bool],
    model: &[Action],
    rules: &[Action],
) -> (FeatureRanges, Vec<BoundEvidence>) {
    let mut out = *ranges;
    let mut evidence = Vec::new();
    let gain: Vec<f64> = (0..samples.len())
        .map(|i| {
            let policy = if served[i] { model[i] } else { rules[i] };
            dr_score(&samples[i], policy) - dr_score(&samples[i], rules[i])
        })
        .collect();
    for (name, lo_domain, hi_domain) in DOMAINS {
        let mut values: Vec<f64> = samples.iter().map(|s| field(&s.state, name)).collect();
        values.sort_by(f64::total_cmp);
        if values.is_empty() {
            continue;
        }
        let tail = (values.len() / 20).max(1);
        let lo_cut = values[tail - 1];
        let hi_cut = values[values.len() - tail];
        let slot = match name {
            "current_load" => &mut out.current_load,
            "recent_success_rate" => &mut out.recent_success_rate,
            _ => &mut out.queue_depth,
        };
        for (side, cut, domain) in [("min", lo_cut, lo_domain), ("max", hi_cut, hi_domain)] {
            let on_side: Vec<usize> = (0..samples.len())
                .filter(|&i| {
                    let v = field(&samples[i].state, name);
                    if side == "min" {
                        v <= cut
                    } else {
                        v >= cut
                    }
                })
                .collect();
            let g = on_side.iter().map(|&i| gain[i]).sum::<f64>() / on_side.len().max(1) as f64;
            let k = usize::from(side == "max");
            let data = slot[k];
            let open = !on_side.is_empty() && g >= 0.0;
            if open {
                slot[k] = domain;
            }
            evidence.push(BoundEvidence {
                field: name,
                side,
                data,
                bound: slot[k],
                samples: on_side.len(),
                gain: g,
            });
        }
    }
    (out, evidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(action: Action, propensity: f64, reward: f64, q: [f64; 4]) -> GateSample {
        GateSample {
            state: State {
                request_type: 0,
                region_id: 0,
                current_load: 0.5,
                recent_success_rate: 0.99,
                queue_depth: 3.0,
                hour: 10,
            },
            action,
            propensity,
            reward,
            q_hat: q,
        }
    }

    #[test]
    fn dr_scores_zero_what_the_logger_could_not_take() {
        let s = sample(Action::RouteA, 1.0, 1.0, [0.6, 0.9, 0.5, 0.0]);
        assert_eq!(dr_score(&s, Action::RouteA), 1.0);
        assert_eq!(dr_score(&s, Action::RouteB), 0.0);
        let e = sample(Action::RouteA, 0.5, 1.0, [0.6, 0.9, 0.5, 0.0]);
        assert!((dr_score(&e, Action::RouteA) - (0.6 + 0.4 / 0.5)).abs() < 1e-12);
        assert_eq!(dr_score(&e, Action::RouteB), 0.9);
    }

    #[test]
    fn the_gate_falls_back_only_where_the_rules_pay_more() {
        // 400 samples: the model pays 0.9 where confident (conf > 0.5) and 0.2 elsewhere;
        // the rules pay 0.5 everywhere. The best threshold serves the confident half.
        let mut samples = Vec::new();
        let mut conf = Vec::new();
        for i in 0..400 {
            let c = f64::from(i) / 400.0;
            let good = c > 0.5;
            let q = if good {
                [0.9, 0.5, 0.0, 0.0]
            } else {
                [0.2, 0.5, 0.0, 0.0]
            };
            samples.push(sample(Action::RouteC, 1.0 / 3.0, 0.0, q));
            conf.push(c);
        }
        let model = vec![Action::RouteA; 400];
        let rules = vec![Action::RouteB; 400];
        let g = choose_threshold(&samples, &model, &conf, &rules).unwrap();
        // On the 2% grid the best serves c >= 0.5 (200 samples, one of them a loss). The next
        // step serves 8 more at a loss of 0.3 each: 0.006 in all, 2.85 paired standard
        // errors, inside the family-wise 3.09, so the gate takes that step; the one after
        // (16 more, 0.012, about 4 standard errors) it does not.
        assert_eq!(g.best.coverage, 0.5, "{:?}", g.best);
        assert_eq!(g.best.threshold, 0.5);
        assert_eq!(g.coverage, 0.52, "{g:?}");
        assert_eq!(g.threshold, 0.48);
        assert!(g.paired_se > 0.0 && 0.006 / g.paired_se < Z_FAMILY, "{g:?}");
        assert!((g.rules_value.value - 0.5).abs() < 1e-12);
        assert!((g.model_value.value - (0.9 * 199.0 + 0.2 * 201.0) / 400.0).abs() < 1e-12);
        assert!(g.value.value > g.rules_value.value && g.value.value > g.model_value.value);
        assert_eq!(g.curve.len(), 51);
        // Where the rules never pay more, the model serves everything.
        let rules_worse = vec![Action::Reject; 400];
        let g = choose_threshold(&samples, &model, &conf, &rules_worse).unwrap();
        assert_eq!(g.coverage, 1.0);
    }

    #[test]
    fn a_bound_opens_only_where_the_policy_does_not_lose() {
        let mut samples = Vec::new();
        for i in 0..200 {
            let mut s = sample(Action::RouteC, 1.0 / 3.0, 0.0, [0.5, 0.5, 0.0, 0.0]);
            s.state.queue_depth = f64::from(i);
            // At deep queues the model's route_a pays less than the rules' route_b.
            if i >= 190 {
                s.q_hat = [0.1, 0.6, 0.0, 0.0];
            }
            samples.push(s);
        }
        let mut ranges = FeatureRanges::empty();
        samples.iter().for_each(|s| ranges.include(&s.state));
        let model = vec![Action::RouteA; 200];
        let rules = vec![Action::RouteB; 200];
        let served = vec![true; 200];
        let (r, ev) = evidence_ranges(&ranges, &samples, &served, &model, &rules);
        // The shallow side opens to the domain; the deep side keeps the data's bound. (Every
        // sample has the same load, so its outer 5% is all of them, where the policy loses.)
        assert_eq!(r.queue_depth, [0.0, 199.0], "{ev:?}");
        assert_eq!(r.current_load, [0.5, 0.5]);
        let max_q = ev
            .iter()
            .find(|e| e.field == "queue_depth" && e.side == "max")
            .unwrap();
        assert_eq!(max_q.samples, 10);
        assert!((max_q.gain + 0.5).abs() < 1e-12, "{max_q:?}");
    }
}
