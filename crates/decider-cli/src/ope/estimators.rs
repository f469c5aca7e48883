//! The estimators on per-sample rows (formulas and interval methods in the parent module's
//! docs). Pure arithmetic: the rows already carry the target's distribution and the
//! cross-fitted reward predictions.

use super::sample::Row;
use super::support::unsupported_mass;
use serde::Serialize;

/// Two-sided 95% standard-normal quantile.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A point estimate with its standard error and 95% interval `value ± 1.96 · se`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The estimate.
    pub value: f64,
    /// Its standard error.
    pub se: f64,
    /// 95% interval (normal approximation; not clipped to `[0, 1]`).
    pub ci95: [f64; 2],
}

impl Estimate {
    /// The estimate with its normal 95% interval.
    pub fn new(value: f64, se: f64) -> Estimate {
        Estimate {
            value,
            se,
            ci95: [value - Z95 * se, value + Z95 * se],
        }
    }

    /// Whether `v` lies in the interval (inclusive).
    pub fn covers(&self, v: f64) -> bool {
        self.ci95[0] <= v && v <= self.ci95[1]
    }

    /// Width of the interval.
    pub fn width(&self) -> f64 {
        self.ci95[1] - self.ci95[0]
    }
}

/// Importance-weight summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Weights {
    /// Mean weight (≈ 1 with correct propensities and full overlap).
    pub mean: Estimate,
    /// Largest weight.
    pub max: f64,
    /// Samples whose logged action the target can take (weight > 0).
    pub matched: usize,
}

/// Mean of per-sample terms with the standard error `sd / √n` (sample sd, `n − 1`).
///
/// `terms` must hold at least two values (the caller guarantees it).
pub fn mean_of(terms: impl Iterator<Item = f64> + Clone) -> Estimate {
    let (n, sum) = terms
        .clone()
        .fold((0usize, 0.0), |(n, s), t| (n + 1, s + t));
    let n = n as f64;
    let mean = sum / n;
    // Two-pass variance: the one-pass formula loses every digit when the terms are large
    // importance-weighted rewards with a small spread.
    let ss: f64 = terms.map(|t| (t - mean) * (t - mean)).sum();
    Estimate::new(mean, (ss / (n - 1.0) / n).sqrt())
}

/// Mean observed reward of the logging policy.
pub fn logged(rows: &[Row]) -> Estimate {
    mean_of(rows.iter().map(|r| r.reward))
}

/// Inverse propensity scoring: mean of `w_i r_i`.
pub fn ips(rows: &[Row]) -> Estimate {
    mean_of(rows.iter().map(|r| r.weight() * r.reward))
}

/// Self-normalised IPS, `Σ w_i r_i / Σ w_i`, with its delta-method standard error: the
/// linearisation of a ratio of means `Ȳ / W̄` has per-sample terms `(Y_i − V̂ W_i) / W̄`.
/// `None` when every weight is 0 (the target never takes a logged action).
pub fn snips(rows: &[Row]) -> Option<Estimate> {
    let sw: f64 = rows.iter().map(Row::weight).sum();
    if sw <= 0.0 {
        return None;
    }
    let v = rows.iter().map(|r| r.weight() * r.reward).sum::<f64>() / sw;
    let n = rows.len() as f64;
    let w_bar = sw / n;
    let ss: f64 = rows
        .iter()
        .map(|r| {
            let psi = r.weight() * (r.reward - v) / w_bar;
            psi * psi
        })
        .sum();
    // The terms have mean exactly 0 at V̂, so their sum of squares is the centred one.
    Some(Estimate::new(v, (ss / (n - 1.0) / n).sqrt()))
}

/// The reward model's value of the target in one row: `Σ_a π(a|x) q̂(x, a)`.
fn model_value(r: &Row) -> f64 {
    r.target.iter().zip(&r.q_hat).map(|(p, q)| p * q).sum()
}

/// Direct method: mean of `Σ_a π(a|x_i) q̂(x_i, a)`. Its interval covers the sampling of
/// states only, not the reward model's bias.
pub fn dm(rows: &[Row]) -> Estimate {
    mean_of(rows.iter().map(model_value))
}

/// DR's 95% interval with nothing resting on the reward model where the logs cannot check
/// it: on a sample whose logged action had propensity 1, the target's mass on the other
/// actions is valued at the reward's range (0 for the low end, 1 for the high end) instead
/// of `q̂`. Returns `[low − 1.96 se, high + 1.96 se]` — the union of the two ends' intervals,
/// which covers the value with at least 95% whatever those unseen actions pay (Manski's
/// bounds) — or `None` when no such mass exists (the interval is DR's own).
pub fn dr_bounds(rows: &[Row]) -> Option<[f64; 2]> {
    if !rows.iter().any(|r| unsupported_mass(r) > 0.0) {
        return None;
    }
    // DR's term with the unsupported mass's q̂ replaced by `fill`.
    let end = |fill: f64| {
        mean_of(rows.iter().map(|r| {
            let off = unsupported_mass(r);
            let seen: f64 = if off > 0.0 {
                r.target[r.action.index()] * r.q_hat[r.action.index()] + off * fill
            } else {
                model_value(r)
            };
            seen + correction(r)
        }))
    };
    let (low, high) = (end(0.0), end(1.0));
    Some([low.ci95[0], high.ci95[1]])
}

/// Doubly robust: the direct method plus the importance-weighted residual of the logged
/// action, `Σ_a π(a|x_i) q̂(x_i, a) + w_i (r_i − q̂(x_i, a_i))`.
pub fn dr(rows: &[Row]) -> Estimate {
    mean_of(rows.iter().map(|r| model_value(r) + correction(r)))
}

/// DR's correction in one row: the importance-weighted residual of the logged action,
/// `w (r − q̂(x, a))`.
fn correction(r: &Row) -> f64 {
    r.weight() * (r.reward - r.q_hat[r.action.index()])
}

/// Effective sample size `(Σ w)² / Σ w²` (0 when every weight is 0).
pub fn ess(rows: &[Row]) -> f64 {
    let (s, s2) = rows.iter().fold((0.0, 0.0), |(s, s2), r| {
        let w = r.weight();
        (s + w, s2 + w * w)
    });
    if s2 > 0.0 {
        s * s / s2
    } else {
        0.0
    }
}

/// Mean, maximum and count of positive importance weights.
pub fn weights(rows: &[Row]) -> Weights {
    Weights {
        mean: mean_of(rows.iter().map(Row::weight)),
        max: rows.iter().map(Row::weight).fold(0.0, f64::max),
        matched: rows.iter().filter(|r| r.weight() > 0.0).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use decider_core::{Action, State};

    fn row(action: Action, propensity: f64, reward: f64, target: [f64; 4], q: [f64; 4]) -> Row {
        Row {
            state: State {
                request_type: 0,
                region_id: 0,
                current_load: 0.5,
                recent_success_rate: 1.0,
                queue_depth: 0.0,
                hour: 0,
            },
            action,
            propensity,
            reward,
            target,
            q_hat: q,
            fold: 0,
        }
    }

    /// Three hand-computed rows.
    fn rows() -> Vec<Row> {
        let t = [0.5, 0.5, 0.0, 0.0];
        vec![
            // w = 0.5 / 0.25 = 2
            row(Action::RouteA, 0.25, 1.0, t, [0.8, 0.4, 0.0, 0.0]),
            // w = 0.5 / 0.5 = 1
            row(Action::RouteB, 0.5, 0.0, t, [0.6, 0.2, 0.5, 0.0]),
            // w = 0 / 0.25 = 0
            row(Action::RouteC, 0.25, 1.0, t, [0.2, 0.2, 0.9, 0.0]),
        ]
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn dr_bounds_value_what_the_logger_could_not_take_from_0_to_1() {
        let mut r = rows();
        assert_eq!(dr_bounds(&r), None, "every row explored: DR's own interval");
        // A fourth row the logger could only reject (propensity 1); the target routes half
        // of it to route_a and half to route_b, whose q̂ (0.9, 0.7) nothing in the logs checks.
        r.push(row(
            Action::Reject,
            1.0,
            0.0,
            [0.5, 0.5, 0.0, 0.0],
            [0.9, 0.7, 0.0, 0.0],
        ));
        let [lo, hi] = dr_bounds(&r).unwrap();
        // DR terms 1.0, 0.2, 0.2 as below, then 0 + 1·(0 − 0) plus the unsupported mass
        // (1.0) at 0 or at 1; DR itself fills in 0.8.
        let low = mean_of([1.0, 0.2, 0.2, 0.0].into_iter());
        let high = mean_of([1.0, 0.2, 0.2, 1.0].into_iter());
        close(lo, low.ci95[0]);
        close(hi, high.ci95[1]);
        let d = dr(&r);
        close(d.value, (1.0 + 0.2 + 0.2 + 0.8) / 4.0);
        assert!(lo < d.ci95[0] && d.ci95[1] < hi, "{lo} {hi} {d:?}");
    }

    #[test]
    fn formulas_on_hand_computed_rows() {
        let r = rows();
        // IPS terms 2, 0, 0.
        close(ips(&r).value, 2.0 / 3.0);
        let sd = ((2.0f64 - 2.0 / 3.0).powi(2) + 2.0 * (2.0f64 / 3.0).powi(2)) / 2.0;
        close(ips(&r).se, (sd / 3.0).sqrt());
        // SNIPS = 2 / (2 + 1 + 0).
        let s = snips(&r).unwrap();
        close(s.value, 2.0 / 3.0);
        // Delta terms w (r − V) / w̄ with w̄ = 1: 2/3, −2/3, 0.
        let ss = 2.0 * (2.0f64 / 3.0).powi(2);
        close(s.se, (ss / 2.0 / 3.0).sqrt());
        // DM terms 0.6, 0.4, 0.2; DR adds 2·(1 − 0.8), 1·(0 − 0.2), 0.
        close(dm(&r).value, 0.4);
        close(dr(&r).value, (1.0 + 0.2 + 0.2) / 3.0);
        // ESS (2 + 1)² / (4 + 1).
        close(ess(&r), 9.0 / 5.0);
        let w = weights(&r);
        close(w.mean.value, 1.0);
        assert_eq!((w.max, w.matched), (2.0, 2));
        close(logged(&r).value, 2.0 / 3.0);
    }

    #[test]
    fn snips_is_none_without_any_matching_action() {
        let r: Vec<Row> = rows()
            .into_iter()
            .map(|mut r| {
                r.target = [0.0, 0.0, 0.0, 1.0];
                r
            })
            .collect();
        assert_eq!(snips(&r), None);
        assert_eq!(ess(&r), 0.0);
        assert_eq!(ips(&r).value, 0.0);
    }

    #[test]
    fn interval_is_symmetric_and_normal() {
        let e = Estimate::new(0.5, 0.1);
        close(e.ci95[0], 0.5 - 0.1959963984540054);
        close(e.width(), 2.0 * 0.1959963984540054);
        assert!(e.covers(0.3041) && !e.covers(0.3039));
    }

    #[test]
    fn variance_survives_large_offsets() {
        let e = mean_of([1e9 + 1.0, 1e9 - 1.0, 1e9 + 1.0, 1e9 - 1.0].into_iter());
        close(e.se, (4.0f64 / 3.0 / 4.0).sqrt());
    }
}
