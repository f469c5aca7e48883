//! The sequential test: an always-valid confidence sequence for a difference of mean rewards,
//! computed from aggregate counts only, that may be looked at on every cron run.
//!
//! # Construction
//! **Per arm**, rewards X₁, X₂, … in `[0, 1]` with mean μ, S_n their sum. For any
//! p ∈ (0, 1), the likelihood ratio of a Bernoulli(p) against a Bernoulli(μ) reward,
//! `(p/μ)^X · ((1−p)/(1−μ))^(1−X)`, has expectation at most 1 for *any* [0, 1]-valued X with
//! mean μ (by convexity of x ↦ e^{λx}, E e^{λX} ≤ 1 − μ + μe^λ): the rewards are
//! sub-Bernoulli. The product over the rewards is a nonnegative supermartingale, and so is
//! its mixture over p ~ Beta(½, ½) (Robbins' mixture; Howard, Ramdas, McAuliffe & Sekhon,
//! *Time-uniform, nonparametric, nonasymptotic confidence sequences*, Ann. Statist. 2021,
//! the beta-binomial boundary):
//!
//! ```text
//! M_n(μ) = B(½ + S_n, ½ + n − S_n) / ( B(½, ½) · μ^S_n · (1 − μ)^(n − S_n) )
//! ```
//!
//! By Ville's inequality, P(∃n: M_n(μ) ≥ 1/a) ≤ a, so `C_n = {μ : M_n(μ) < 1/a}` covers the
//! true mean at every n at once with probability at least 1 − a. ln M_n is convex in μ
//! with its minimum (≤ 0) at S_n/n, so C_n is an interval around the mean, found by
//! bisection ([`confidence_sequence`]). It needs n and S_n only.
//!
//! **The difference** Δ = μ_treatment − μ_baseline: each arm's sequence at level a = α/2;
//! by the union bound both cover at every n with probability ≥ 1 − α, and then Δ lies in
//! `[L_t − U_b, U_t − L_b]` ([`compare`]).
//!
//! **Verdict**: [`Verdict::Better`] when the lower end is above 0; [`Verdict::Worse`] when
//! the upper end is below −`max_loss` (the largest tolerated loss, ≥ 0); else
//! [`Verdict::Undecided`]. The probability that a comparison *ever* declares a wrong sign —
//! Better when Δ ≤ 0, Worse when Δ ≥ −max_loss — is at most α, however often it is looked
//! at and whenever it stops. That is what lets the cron judge every minute.
//!
//! # Why this one, and α
//! - It is exact at every sample size, with no asymptotics and no minimum sample: at a 5%
//!   share the challenger has a handful of outcomes on the first runs, exactly when a
//!   normal-approximation bound (or an empirical variance of 0 after ten successes) would
//!   misfire.
//! - It is variance-adaptive for success rates: for 0/1 rewards it is the Chernoff (KL)
//!   boundary, of half-width ≈ √(2·μ(1−μ)·(ln(1/a) + ½·ln n + 1)/n). At μ = 0.97,
//!   μ(1−μ) = 0.029 where Hoeffding's bound assumes the worst case ¼: about 8.6× fewer
//!   outcomes for the same width.
//! - Fractional rewards (a caller's `reward`) get the bound of a Bernoulli of the same mean,
//!   the largest variance a [0, 1] reward with that mean can have: valid, conservative. The
//!   sums of squares are carried for reporting (the standard deviation); a bound using them
//!   from aggregate counts alone would be asymptotic, and the guarantee only approximate.
//! - The Beta(½, ½) mixture has no tuning constant; its cost over an oracle-tuned boundary
//!   is the ½·ln n term.
//!
//! α defaults to 0.05 (`ROLLOUT_ALPHA`). Its cost is logarithmic: the boundary grows with
//! ln(1/α). The rollout spends it over its periods (see [`crate::state`]), so that the whole
//! rollout, not each step, keeps the error rate.
//!
//! The guarantee assumes that an arm's outcomes within a judged period have one mean (each
//! is a draw with mean μ given everything before it). Arms are assigned by a sticky hash of
//! the routing key, independent of the request's state and of time.

use crate::evidence::Evidence;
pub use crate::sample::Sample;
use serde::{Deserialize, Serialize};

/// Default error rate of a comparison.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// A closed interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// ln Γ.
fn ln_gamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// ln M_n(μ) less its constant part `c` = ln B(½ + S, ½ + F) − ln B(½, ½).
fn log_mixture(c: f64, s: f64, f: f64, mu: f64) -> f64 {
    let a = if s > 0.0 { s * mu.ln() } else { 0.0 };
    let b = if f > 0.0 { f * (1.0 - mu).ln() } else { 0.0 };
    c - a - b
}

/// The arm's confidence sequence at level `a` (in (0, 1)): the interval of means μ with
/// M_n(μ) < 1/a (module docs). `[0, 1]` without outcomes. The ends are rounded outwards.
pub fn confidence_sequence(sample: &Sample, a: f64) -> Interval {
    if sample.n == 0 || !(a > 0.0 && a < 1.0) {
        return Interval { lo: 0.0, hi: 1.0 };
    }
    let n = sample.n as f64;
    let s = sample.sum.clamp(0.0, n);
    let f = n - s;
    let c = ln_gamma(0.5 + s) + ln_gamma(0.5 + f) - ln_gamma(1.0 + n) - std::f64::consts::PI.ln();
    let threshold = -a.ln();
    let p = s / n;
    let g = |mu: f64| log_mixture(c, s, f, mu);
    // g(p) ≤ 0 < threshold; g grows towards each end it does not reach.
    let lo = if s <= 0.0 || g(0.0) < threshold {
        0.0
    } else {
        boundary(&g, threshold, 0.0, p)
    };
    let hi = if f <= 0.0 || g(1.0) < threshold {
        1.0
    } else {
        boundary(&g, threshold, 1.0, p)
    };
    Interval { lo, hi }
}

/// Where `g` crosses `threshold` between `out` (at or above it) and `inside` (below it), by
/// bisection: the point nearest `out` still known to be at or above it.
fn boundary(g: &impl Fn(f64) -> f64, threshold: f64, mut out: f64, mut inside: f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (out + inside);
        if mid == out || mid == inside {
            break;
        }
        if g(mid) >= threshold {
            out = mid;
        } else {
            inside = mid;
        }
    }
    out
}

/// What a comparison says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The treatment is better: the lower end of Δ is above 0.
    Better,
    /// The treatment is worse by more than the tolerated loss: the upper end of Δ is below
    /// −max_loss.
    Worse,
    /// Neither, yet.
    Undecided,
}

impl Verdict {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Undecided => "undecided",
        }
    }
}

/// One arm in a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    /// Outcomes.
    pub n: u64,
    /// Mean reward, when there are outcomes.
    pub mean: Option<f64>,
    /// Standard deviation of the rewards, with two outcomes or more.
    pub sd: Option<f64>,
    /// The arm's confidence sequence (level α/2).
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
}

/// Which test decided a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Judge {
    /// The two-sample e-process ([`crate::evidence`]), when the allocation is known.
    TwoSample,
    /// The union of the two arms' confidence sequences, when it is not.
    #[default]
    Union,
}

/// A treatment against a baseline: the confidence sequence of the difference of their mean
/// rewards, the two-sample evidence when the allocation is known, and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The arm that may be better (the challenger; the model).
    pub treatment: ArmSummary,
    /// The arm it is compared with (the champion; the rules).
    pub baseline: ArmSummary,
    /// Observed difference of the means, when both have outcomes.
    pub delta: Option<f64>,
    /// Lower end of the difference's confidence sequence.
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
    /// The error rate this comparison was judged at.
    pub alpha: f64,
    /// The largest tolerated loss.
    pub max_loss: f64,
    /// The treatment's share of the two arms' traffic, when known.
    #[serde(default)]
    pub allocation: Option<f64>,
    /// The test that decided: the two-sample e-process with a known allocation, else the
    /// union of the confidence sequences.
    #[serde(default)]
    pub judge: Judge,
    /// ln of the two-sample e-processes (better, worse), judged at ln(2/α).
    #[serde(default)]
    pub evidence: Option<[f64; 2]>,
    /// What it says.
    pub verdict: Verdict,
}

/// "+4.0" (points of a difference of means).
fn points(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}

/// "97.0%".
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

impl Comparison {
    /// The comparison in words, the same in the control plane's records and in `decider
    /// report`: "99.0% vs 80.0%, +19.0 points (confidence sequence +16.1 … +21.7 at α
    /// 0.0250) on 1000 vs 5000 outcomes".
    pub fn describe(&self) -> String {
        let mean = |m: Option<f64>| m.map_or("–".into(), pct);
        let evidence = match self.evidence {
            Some([better, worse]) => format!(
                "; e-values {:.3} better, {:.3} worse against {:.0}",
                better.exp(),
                worse.exp(),
                2.0 / self.alpha
            ),
            None => String::new(),
        };
        format!(
            "{} vs {}, {} points (confidence sequence {} … {} at α {:.4}{evidence}) on {} vs {} outcomes",
            mean(self.treatment.mean),
            mean(self.baseline.mean),
            self.delta.map_or("–".into(), points),
            points(self.lo),
            points(self.hi),
            self.alpha,
            self.treatment.n,
            self.baseline.n
        )
    }
}

fn summary(s: &Sample, a: f64) -> ArmSummary {
    let cs = confidence_sequence(s, a);
    ArmSummary {
        n: s.n,
        mean: s.mean(),
        sd: s.sd(),
        lo: cs.lo,
        hi: cs.hi,
    }
}

// Here rather than in `evidence`, which knows nothing of verdicts (no module cycle).
impl Evidence {
    /// The verdict at error rate `alpha` (each direction at α/2, by Ville's inequality):
    /// Better when the "better" e-value reaches 2/α, else Worse when the "worse" one does.
    pub fn verdict(&self, alpha: f64) -> Verdict {
        let bar = (2.0 / alpha).ln();
        if self.better >= bar {
            Verdict::Better
        } else if self.worse >= bar {
            Verdict::Worse
        } else {
            Verdict::Undecided
        }
    }
}

/// Compares `treatment` with `baseline` at error rate `alpha` (clamped into (0, 1)) with
/// the largest tolerated loss `max_loss` (clamped into [0, 1]), the treatment receiving
/// `allocation` of the two arms' traffic (the share of outcomes that are the treatment's,
/// in (0, 1)) when known.
///
/// With the allocation, the verdict is the two-sample e-process's ([`crate::evidence`]):
/// Better when its "better" e-value reaches 2/α, Worse when its "worse" one does (and, with
/// a tolerated loss, the confidence sequence of the difference is below −`max_loss` too);
/// without it, the union of the confidence sequences decides (module docs). Either way the
/// probability of ever declaring a wrong sign is at most α.
pub fn compare(
    treatment: &Sample,
    baseline: &Sample,
    alpha: f64,
    max_loss: f64,
    allocation: Option<f64>,
) -> Comparison {
    let alpha = if alpha.is_nan() {
        DEFAULT_ALPHA
    } else {
        alpha.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON)
    };
    let max_loss = if max_loss.is_nan() {
        0.0
    } else {
        max_loss.clamp(0.0, 1.0)
    };
    let t = summary(treatment, alpha / 2.0);
    let b = summary(baseline, alpha / 2.0);
    let (lo, hi) = (t.lo - b.hi, t.hi - b.lo);
    let allocation = allocation.filter(|a| *a > 0.0 && *a < 1.0);
    let evidence = allocation.and_then(|a| Evidence::of(treatment, baseline, a));
    let verdict = match evidence {
        // With a tolerated loss, Worse also needs the difference's sequence below it.
        Some(e) => match e.verdict(alpha) {
            Verdict::Worse if !(max_loss == 0.0 || hi < -max_loss) => Verdict::Undecided,
            v => v,
        },
        None if lo > 0.0 => Verdict::Better,
        None if hi < -max_loss => Verdict::Worse,
        None => Verdict::Undecided,
    };
    Comparison {
        treatment: t,
        baseline: b,
        delta: t.mean.zip(b.mean).map(|(x, y)| x - y),
        lo,
        hi,
        alpha,
        max_loss,
        allocation,
        judge: if evidence.is_some() {
            Judge::TwoSample
        } else {
            Judge::Union
        },
        evidence: evidence.map(|e| [e.better, e.worse]),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bernoulli(n: u64, successes: u64) -> Sample {
        Sample {
            n,
            sum: successes as f64,
            sum_sq: successes as f64,
        }
    }

    #[test]
    fn the_sequence_holds_the_mean_and_narrows() {
        let mut last = 1.0;
        for n in [10u64, 100, 1_000, 10_000, 100_000, 1_000_000, 1_000_000_000] {
            let s = bernoulli(n, n * 97 / 100);
            let cs = confidence_sequence(&s, 0.025);
            let p = s.mean().unwrap();
            assert!(cs.lo < p && p < cs.hi, "{n}: {cs:?}");
            assert!(cs.hi - cs.lo < last, "{n}: {cs:?}");
            last = cs.hi - cs.lo;
            // The ends sit on the boundary: M_n = 1/a there.
            let c = ln_gamma(0.5 + s.sum) + ln_gamma(0.5 + n as f64 - s.sum)
                - ln_gamma(1.0 + n as f64)
                - std::f64::consts::PI.ln();
            for end in [cs.lo, cs.hi] {
                let g = log_mixture(c, s.sum, n as f64 - s.sum, end);
                assert!((g - (1.0f64 / 0.025).ln()).abs() < 1e-6, "{n}: {g}");
            }
        }
    }

    /// Half-widths at 1,000 outcomes of mean 0.97: the KL boundary against Hoeffding's
    /// mixture boundary of the same α; the ratio squared is the factor in outcomes.
    #[test]
    fn near_097_it_is_several_times_narrower_than_hoeffding() {
        let n: f64 = 1_000.0;
        let cs = confidence_sequence(&bernoulli(1_000, 970), 0.025);
        let half = (cs.hi - cs.lo) / 2.0;
        // Hoeffding normal mixture (sub-Gaussian σ² = ¼) at its best ρ for n.
        let rho: f64 = 0.25 * n;
        let v: f64 = 0.25 * n;
        let hoeffding = ((2.0 * (v + rho) * (((v + rho) / rho).sqrt() / 0.025).ln()).sqrt()) / n;
        assert!(half < 0.03, "{half}");
        let ratio = (hoeffding / half).powi(2);
        assert!(ratio > 5.0, "{hoeffding} vs {half}: {ratio}");
    }

    #[test]
    fn edge_cases() {
        assert_eq!(
            confidence_sequence(&Sample::default(), 0.05),
            Interval { lo: 0.0, hi: 1.0 }
        );
        let all = confidence_sequence(&bernoulli(50, 50), 0.05);
        assert_eq!(all.hi, 1.0);
        assert!(all.lo > 0.8 && all.lo < 1.0, "{all:?}");
        let none = confidence_sequence(&bernoulli(50, 0), 0.05);
        assert_eq!(none.lo, 0.0);
        assert!(none.hi < 0.2, "{none:?}");
        // One outcome: it cannot decide anything on its own.
        let one = confidence_sequence(&bernoulli(1, 1), 0.025);
        assert!(one.lo < 0.1, "{one:?}");
        // Fractional rewards: the same bound as 0/1 rewards of the same sum.
        let frac = Sample {
            n: 100,
            sum: 50.0,
            sum_sq: 25.0,
        };
        assert_eq!(
            confidence_sequence(&frac, 0.05),
            confidence_sequence(&bernoulli(100, 50), 0.05)
        );
        assert!((frac.sd().unwrap()).abs() < 1e-12);
        assert!((bernoulli(4, 2).sd().unwrap() - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn verdicts() {
        let champ = bernoulli(20_000, 18_600); // 0.93
        let better = bernoulli(2_000, 1_940); // 0.97
        let worse = bernoulli(2_000, 1_700); // 0.85
        let same = bernoulli(2_000, 1_860);
        assert_eq!(
            compare(&better, &champ, 0.05, 0.0, None).verdict,
            Verdict::Better
        );
        assert_eq!(
            compare(&worse, &champ, 0.05, 0.0, None).verdict,
            Verdict::Worse
        );
        assert_eq!(
            compare(&same, &champ, 0.05, 0.0, None).verdict,
            Verdict::Undecided
        );
        // A tolerated loss larger than the observed one is no rollback.
        assert_eq!(
            compare(&worse, &champ, 0.05, 0.2, None).verdict,
            Verdict::Undecided
        );
        let c = compare(&better, &champ, 0.05, 0.0, None);
        assert!((c.delta.unwrap() - 0.04).abs() < 1e-12);
        assert!(c.lo > 0.0 && c.hi > c.lo);
        assert_eq!(c.treatment.n, 2_000);
        assert_eq!(
            compare(&Sample::default(), &champ, 0.05, 0.0, None).verdict,
            Verdict::Undecided
        );
        // Nonsense parameters are clamped, never a panic.
        let c = compare(&better, &champ, f64::NAN, f64::NAN, None);
        assert_eq!((c.alpha, c.max_loss), (DEFAULT_ALPHA, 0.0));
        let c = compare(&better, &champ, 7.0, -1.0, None);
        assert!(c.alpha < 1.0 && c.max_loss == 0.0);
    }
}
