//! The two-sample test: an e-process for "the treatment's mean reward is above (or below)
//! the baseline's", from each arm's outcomes and sum of rewards, given how traffic is
//! allocated between the two arms.
//!
//! # Construction
//! Each outcome belongs to the treatment with probability π (the allocation: the arms'
//! sticky-bucket shares, known to the control plane) and has a reward in `[0, 1]`. For a
//! pair of means (θ_T, θ_B) of the alternative, the per-outcome factor
//!
//! ```text
//! e = θ_a^r (1 − θ_a)^(1 − r) / (θ₀^r (1 − θ₀)^(1 − r)),   θ₀ = π·θ_T + (1 − π)·θ_B
//! ```
//!
//! (a = the outcome's arm, r its reward) has expectation at most 1 whenever the treatment's
//! mean μ_T is at most the baseline's μ_B, whatever the rewards' distributions: for 0/1
//! rewards with equal means it is exactly
//! `π·[μθ_T/θ₀ + (1−μ)(1−θ_T)/(1−θ₀)] + (1−π)·[μθ_B/θ₀ + (1−μ)(1−θ_B)/(1−θ₀)] = 1`; the
//! treatment's bracket grows with μ_T and the baseline's shrinks with μ_B when θ_T > θ_B, so a
//! treatment that is no better keeps it at most 1; and a reward in `[0, 1]` of mean μ gives at
//! most what a 0/1 reward of mean μ gives (r ↦ a^r·b^(1−r) is convex). θ₀ is the reverse
//! information projection of the alternative on the null (Turner, Ly & Grünwald, *Generic
//! e-variables for exact sequential k-sample tests that allow for optional stopping*, 2024),
//! here with the arm as part of each outcome: the null is "the arm says nothing about the
//! reward".
//!
//! The product over the outcomes is a nonnegative supermartingale under the null, and so is
//! its mixture over a fixed prior on (θ_T, θ_B); the product depends on each arm's n and sum
//! only, so the mixture is computed from the counts. By Ville's inequality it ever reaches
//! 2/α with probability at most α/2: [`Evidence::better`] is this e-process for θ_T above θ_B,
//! [`Evidence::worse`] for θ_T below, each judged at 2/α. The prior: 40 baseline levels evenly
//! spaced in log-odds over [0.05, 0.999] times 30 log-odds ratios geometric over [0.05, 2],
//! equal weights (a reward rate below 0.05 still gets a valid test, with less power).
//!
//! # Why this one
//! - Exact at every n and every share, with no plug-in variance: its guarantee is Ville's
//!   inequality on a supermartingale, not an approximation.
//! - It spends nothing on the arms' common level, which the union of two per-arm sequences
//!   ([`crate::sequential`]) estimates twice: on 0.97 against 0.93 at a 50% share it needs
//!   about the outcomes an mSPRT (which is not valid at small shares) needs (`tests/power.rs`).
//! - A drift that moves both arms alike (a daily pattern) leaves it valid: each outcome's
//!   arm still says nothing about its reward.
//!
//! It needs the allocation: each outcome must be the treatment's with probability π whatever
//! came before (sticky buckets of routing keys, independent of the request). The counts must
//! all be made at that allocation; the control plane judges each step on the windows that
//! began after the step did.

use crate::sample::Sample;

/// Baseline levels of the prior, as log-odds.
const LEVELS: usize = 40;
const LEVEL_LO: f64 = 0.05;
const LEVEL_HI: f64 = 0.999;
/// Log-odds ratios of the prior.
const RATIOS: usize = 30;
const RATIO_LO: f64 = 0.05;
const RATIO_HI: f64 = 2.0;

fn logit(p: f64) -> f64 {
    libm::log(p / (1.0 - p))
}

fn expit(x: f64) -> f64 {
    1.0 / (1.0 + libm::exp(-x))
}

/// The two e-processes of one comparison, as natural logarithms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// ln of the e-process for "the treatment's mean is above the baseline's".
    pub better: f64,
    /// ln of the e-process for "below".
    pub worse: f64,
}

/// The prior's points at one allocation, as the logarithms each e-value needs:
/// ln θ_T, ln(1 − θ_T), ln θ_B, ln(1 − θ_B), ln θ₀, ln(1 − θ₀); "better" points first.
#[derive(Debug, Clone)]
pub struct Prior {
    allocation: f64,
    points: Vec<[f64; 6]>,
}

impl Prior {
    /// The prior at allocation π, in (0, 1); None outside.
    pub fn at(allocation: f64) -> Option<Prior> {
        if !(allocation > 0.0 && allocation < 1.0) {
            return None;
        }
        let pi = allocation;
        let mut points = Vec::with_capacity(2 * LEVELS * RATIOS);
        let (llo, lhi) = (logit(LEVEL_LO), logit(LEVEL_HI));
        let step = libm::pow(RATIO_HI / RATIO_LO, 1.0 / (RATIOS - 1) as f64);
        for sign in [1.0, -1.0] {
            for i in 0..LEVELS {
                let level = llo + (lhi - llo) * i as f64 / (LEVELS - 1) as f64;
                let tb = expit(level);
                let mut ratio = RATIO_LO;
                for _ in 0..RATIOS {
                    let tt = expit(level + sign * ratio);
                    let t0 = pi * tt + (1.0 - pi) * tb;
                    let ln = libm::log;
                    points.push([
                        ln(tt),
                        ln(1.0 - tt),
                        ln(tb),
                        ln(1.0 - tb),
                        ln(t0),
                        ln(1.0 - t0),
                    ]);
                    ratio *= step;
                }
            }
        }
        Some(Prior { allocation, points })
    }

    /// The allocation the prior was built at.
    pub fn allocation(&self) -> f64 {
        self.allocation
    }
}

impl Evidence {
    /// Both e-processes for the counts `treatment` and `baseline`, the treatment receiving a
    /// share `allocation` of the two arms' outcomes (in (0, 1); None outside). Rewards are
    /// clamped into `[0, 1]`; arms without outcomes give ln e = 0.
    pub fn of(treatment: &Sample, baseline: &Sample, allocation: f64) -> Option<Evidence> {
        Prior::at(allocation).map(|p| Evidence::with(&p, treatment, baseline))
    }

    /// As [`Evidence::of`], with the prior already built (a simulation judges many looks at
    /// one allocation).
    pub fn with(prior: &Prior, treatment: &Sample, baseline: &Sample) -> Evidence {
        let counts = |s: &Sample| {
            let n = s.n as f64;
            let sum = s.sum.clamp(0.0, n);
            (sum, n - sum)
        };
        let (st, ft) = counts(treatment);
        let (sb, fb) = counts(baseline);
        let (s0, f0) = (st + sb, ft + fb);
        // x·ln p with 0·ln 0 = 0 (a level of 0 or 1 never occurs: the prior is inside).
        let logs: Vec<f64> = prior
            .points
            .iter()
            .map(|[a, b, c, d, e, f]| st * a + ft * b + sb * c + fb * d - s0 * e - f0 * f)
            .collect();
        let half = logs.len() / 2;
        Evidence {
            better: log_mean_exp(&logs[..half]),
            worse: log_mean_exp(&logs[half..]),
        }
    }
}

/// ln of the mean of the exponentials, without overflow.
fn log_mean_exp(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = xs.iter().map(|x| libm::exp(x - max)).sum();
    max + libm::log(sum / xs.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ln(p)·x, 0 when x is 0 (so that ln 0 never meets a zero count).
    fn xlog(x: f64, p: f64) -> f64 {
        if x > 0.0 {
            x * libm::log(p)
        } else {
            0.0
        }
    }

    fn ln_choose(n: u64, k: u64) -> f64 {
        libm::lgamma(n as f64 + 1.0)
            - libm::lgamma(k as f64 + 1.0)
            - libm::lgamma((n - k) as f64 + 1.0)
    }

    /// E[e] over every way `n` outcomes can fall: the arm of each with probability π, the
    /// reward 0/1 with means `mt` and `mb`. The e-values depend on the counts only, so the
    /// sum runs over (n_T, s_T, s_B) with their multinomial probabilities.
    fn expectation(n: u64, pi: f64, mt: f64, mb: f64, judge_pi: f64) -> (f64, f64) {
        let prior = Prior::at(judge_pi).unwrap();
        let (mut better, mut worse) = (0.0, 0.0);
        for nt in 0..=n {
            let nb = n - nt;
            let p_arms = ln_choose(n, nt) + xlog(nt as f64, pi) + xlog(nb as f64, 1.0 - pi);
            for st in 0..=nt {
                let p_t =
                    ln_choose(nt, st) + xlog(st as f64, mt) + xlog((nt - st) as f64, 1.0 - mt);
                for sb in 0..=nb {
                    let p_b =
                        ln_choose(nb, sb) + xlog(sb as f64, mb) + xlog((nb - sb) as f64, 1.0 - mb);
                    let p = libm::exp(p_arms + p_t + p_b);
                    if p == 0.0 {
                        continue;
                    }
                    let s = |n: u64, k: u64| Sample {
                        n,
                        sum: k as f64,
                        sum_sq: k as f64,
                    };
                    let e = Evidence::with(&prior, &s(nt, st), &s(nb, sb));
                    better += p * libm::exp(e.better);
                    worse += p * libm::exp(e.worse);
                }
            }
        }
        (better, worse)
    }

    /// The null holds its level exactly: E[e] ≤ 1 at every n, share and mean, for a treatment
    /// no better (better) and no worse (worse) than the baseline.
    #[test]
    fn under_the_null_the_expectation_is_at_most_one() {
        for n in [1u64, 2, 5, 10, 20] {
            for pi in [0.05, 0.3, 0.5, 0.9] {
                for m in [0.2, 0.6, 0.97] {
                    let (b, w) = expectation(n, pi, m, m, pi);
                    assert!(
                        b <= 1.0 + 1e-9 && w <= 1.0 + 1e-9,
                        "n {n} π {pi} μ {m}: {b} {w}"
                    );
                }
                // A worse treatment keeps "better" below 1, a better one keeps "worse".
                let (b, _) = expectation(n, pi, 0.85, 0.95, pi);
                let (_, w) = expectation(n, pi, 0.95, 0.85, pi);
                assert!(b <= 1.0 + 1e-9 && w <= 1.0 + 1e-9, "n {n} π {pi}: {b} {w}");
            }
        }
    }

    /// The allocation matters: judged at a share other than the true one, the same null
    /// data gives an expectation above 1 (which is why the control plane keeps the shares
    /// the counts were made at).
    #[test]
    fn a_wrong_allocation_breaks_the_level() {
        let (b, w) = expectation(24, 0.3, 0.5, 0.5, 0.6);
        assert!(b.max(w) > 1.05, "{b} {w}");
    }

    #[test]
    fn evidence_grows_with_a_real_difference_and_not_without() {
        let s = |n: u64, k: u64| Sample {
            n,
            sum: k as f64,
            sum_sq: k as f64,
        };
        let e = Evidence::of(&s(2_000, 1_940), &s(2_000, 1_860), 0.5).unwrap();
        assert!(e.better > (2.0f64 / 0.05).ln(), "{e:?}");
        assert!(e.worse < 0.0, "{e:?}");
        let e = Evidence::of(&s(2_000, 1_860), &s(2_000, 1_860), 0.5).unwrap();
        assert!(e.better < 0.0 && e.worse < 0.0, "{e:?}");
        // No outcomes: no evidence. A share outside (0, 1): no test.
        let e = Evidence::of(&Sample::default(), &Sample::default(), 0.5).unwrap();
        assert!(e.better.abs() < 1e-12 && e.worse.abs() < 1e-12, "{e:?}");
        assert!(Evidence::of(&s(10, 5), &s(10, 5), 1.0).is_none());
        assert!(Evidence::of(&s(10, 5), &s(10, 5), f64::NAN).is_none());
        // Fractional rewards count as their sums.
        let frac = Sample {
            n: 2_000,
            sum: 1_940.0,
            sum_sq: 1_900.0,
        };
        let e2 = Evidence::of(&frac, &s(2_000, 1_860), 0.5).unwrap();
        let e1 = Evidence::of(&s(2_000, 1_940), &s(2_000, 1_860), 0.5).unwrap();
        assert_eq!(e1, e2);
    }
}
