//! Per-group tallies: success rate with a 95% interval, latency percentiles.
//!
//! Intervals: when every reward in a group is 0 or 1 the rate is a binomial proportion and
//! gets the Wilson score interval (sound near 0% and 100%, where the normal approximation
//! collapses to a zero-width interval). Once a group holds a fractional reward (a caller's
//! reward, or `--reject-reward 0.5`) the rate is a mean of bounded values and gets the
//! normal interval mean ± 1.96·s/√n (sample standard deviation), clipped to [0, 1].

use hdrhistogram::Histogram;
use serde::Serialize;

/// The two-sided 95% normal quantile.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Latency histogram range: 1 µs to 1 h, 3 significant digits (≤ 0.1% relative error).
const LATENCY_MAX_US: u64 = 3_600_000_000;

/// Which interval a rate carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Wilson score interval (0/1 outcomes).
    Wilson,
    /// Normal interval on the mean, clipped to [0, 1] (fractional rewards).
    Normal,
}

/// A success rate and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    /// Point estimate (mean reward).
    pub p: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end of the 95% interval.
    pub hi: f64,
    /// Decisions with an outcome behind it.
    pub n: u64,
    /// Interval method.
    pub method: Method,
}

impl Rate {
    /// Half the interval's width, for "97.1% ± 0.4".
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// True when the two 95% intervals share no point.
    pub fn separated_from(&self, other: &Rate) -> bool {
        self.lo > other.hi || other.lo > self.hi
    }

    /// "97.1% ± 0.4" (points).
    pub fn pm(&self) -> String {
        format!("{:.1}% ± {:.1}", self.p * 100.0, self.half_width() * 100.0)
    }
}

pub use decider_rollout::alarm::wilson;

/// Normal interval on a mean from its sum and sum of squares, clipped to [0, 1].
/// A single value has no spread to estimate: its interval is the whole of [0, 1].
pub fn normal_mean(sum: f64, sum_sq: f64, n: f64, z: f64) -> (f64, f64) {
    if n < 2.0 {
        return (0.0, 1.0);
    }
    let mean = sum / n;
    let var = ((sum_sq - n * mean * mean) / (n - 1.0)).max(0.0);
    let half = z * (var / n).sqrt();
    ((mean - half).clamp(0.0, 1.0), (mean + half).clamp(0.0, 1.0))
}

/// Tally of one group (a source, an arm, a model version, …).
#[derive(Debug, Clone)]
pub struct GroupStats {
    /// Decisions.
    pub n: u64,
    /// Decisions with an outcome (a reward).
    pub with_outcome: u64,
    /// Sum of rewards (the count of successes when rewards are 0/1).
    pub successes: f64,
    sum_sq: f64,
    binary: bool,
    /// Rejected requests among `with_outcome` (their reward is `--reject-reward`).
    pub rejected: u64,
    latency: Option<Box<Histogram<u64>>>,
}

impl Default for GroupStats {
    fn default() -> Self {
        GroupStats {
            n: 0,
            with_outcome: 0,
            successes: 0.0,
            sum_sq: 0.0,
            binary: true,
            rejected: 0,
            latency: None,
        }
    }
}

impl GroupStats {
    /// Adds one decision: its reward (None without an outcome), the latency of its served
    /// request if known, and whether it was a rejection.
    pub fn add(&mut self, reward: Option<f64>, latency_ms: Option<f64>, rejected: bool) {
        self.n += 1;
        if let Some(r) = reward {
            self.with_outcome += 1;
            self.successes += r;
            self.sum_sq += r * r;
            if r != 0.0 && r != 1.0 {
                self.binary = false;
            }
            if rejected {
                self.rejected += 1;
            }
        }
        if let Some(l) = latency_ms {
            if self.latency.is_none() {
                // Constant, valid bounds: this cannot fail.
                self.latency = Histogram::new_with_bounds(1, LATENCY_MAX_US, 3)
                    .ok()
                    .map(Box::new);
            }
            if let Some(h) = &mut self.latency {
                h.saturating_record((l * 1000.0).round() as u64);
            }
        }
    }

    /// Sum of the squared rewards.
    pub fn sum_sq(&self) -> f64 {
        self.sum_sq
    }

    /// Folds another group into this one.
    pub fn merge(&mut self, o: &GroupStats) {
        self.n += o.n;
        self.with_outcome += o.with_outcome;
        self.successes += o.successes;
        self.sum_sq += o.sum_sq;
        self.binary &= o.binary;
        self.rejected += o.rejected;
        if let Some(h) = &o.latency {
            match &mut self.latency {
                Some(mine) => {
                    // Same bounds on both sides: adding cannot fail.
                    let _ = mine.add(h.as_ref());
                }
                None => self.latency = Some(h.clone()),
            }
        }
    }

    /// The success rate with its 95% interval; None without outcomes.
    pub fn rate(&self) -> Option<Rate> {
        if self.with_outcome == 0 {
            return None;
        }
        let n = self.with_outcome as f64;
        let (lo, hi, method) = if self.binary {
            let (lo, hi) = wilson(self.successes, n, Z95);
            (lo, hi, Method::Wilson)
        } else {
            let (lo, hi) = normal_mean(self.successes, self.sum_sq, n, Z95);
            (lo, hi, Method::Normal)
        };
        Some(Rate {
            p: self.successes / n,
            lo,
            hi,
            n: self.with_outcome,
            method,
        })
    }

    /// Latency quantile in ms (`q` in 0..=1); None without latencies.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        self.latency
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| h.value_at_quantile(q) as f64 / 1000.0)
    }

    /// Outcomes that carried a latency.
    pub fn latency_count(&self) -> u64 {
        self.latency.as_ref().map_or(0, |h| h.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn wilson_matches_published_values() {
        // The standard worked examples of the score interval, to four decimals.
        for (s, n, want_lo, want_hi) in [
            (81.0, 263.0, 0.2553, 0.3662),
            (15.0, 148.0, 0.0624, 0.1605),
            (0.0, 20.0, 0.0, 0.1611),
            (1.0, 29.0, 0.0061, 0.1718),
        ] {
            let (lo, hi) = wilson(s, n, Z95);
            assert!(
                close(lo, want_lo, 6e-5) && close(hi, want_hi, 6e-5),
                "{s}/{n}: {lo} {hi}"
            );
            // The interval of the failures mirrors the interval of the successes.
            let (flo, fhi) = wilson(n - s, n, Z95);
            assert!(close(flo, 1.0 - hi, 1e-12) && close(fhi, 1.0 - lo, 1e-12));
        }
    }

    #[test]
    fn normal_interval_on_a_mean() {
        // 0.2, 0.4, 0.6, 0.8: mean 0.5, s = 0.258199, se = 0.129099, ± 1.96·se = 0.253030.
        let v = [0.2, 0.4, 0.6, 0.8];
        let sum: f64 = v.iter().sum();
        let sq: f64 = v.iter().map(|x| x * x).sum();
        let (lo, hi) = normal_mean(sum, sq, 4.0, Z95);
        assert!(
            close(lo, 0.246970, 1e-5) && close(hi, 0.753030, 1e-5),
            "{lo} {hi}"
        );
        // Clipped to [0, 1].
        let (lo, hi) = normal_mean(0.05 + 0.0 + 0.1, 0.0025 + 0.01, 3.0, Z95);
        assert_eq!(lo, 0.0);
        assert!(hi < 1.0);
    }

    #[test]
    fn a_fractional_reward_switches_the_group_to_the_normal_interval() {
        let mut g = GroupStats::default();
        for _ in 0..50 {
            g.add(Some(1.0), Some(10.0), false);
            g.add(Some(0.0), None, false);
        }
        assert_eq!(g.rate().unwrap().method, Method::Wilson);
        g.add(Some(0.5), None, false);
        let r = g.rate().unwrap();
        assert_eq!(r.method, Method::Normal);
        assert_eq!((g.n, g.with_outcome), (101, 101));
        assert!(close(r.p, 50.5 / 101.0, 1e-12));
    }

    #[test]
    fn latency_percentiles_within_a_tenth_of_a_percent() {
        let mut g = GroupStats::default();
        for i in 1..=1000 {
            g.add(Some(1.0), Some(f64::from(i) * 0.5), false);
        }
        let p50 = g.latency_ms(0.5).unwrap();
        let p99 = g.latency_ms(0.99).unwrap();
        assert!(close(p50, 250.0, 0.25), "{p50}");
        assert!(close(p99, 495.0, 0.5), "{p99}");
        assert_eq!(g.latency_count(), 1000);
        let mut other = GroupStats::default();
        other.add(None, None, false);
        other.merge(&g);
        assert_eq!((other.n, other.with_outcome), (1001, 1000));
        assert_eq!(other.latency_ms(0.5), g.latency_ms(0.5));
        assert_eq!(GroupStats::default().rate(), None);
        assert_eq!(GroupStats::default().latency_ms(0.5), None);
    }

    #[test]
    fn separation_is_strict_non_overlap() {
        let a = Rate {
            p: 0.9,
            lo: 0.88,
            hi: 0.92,
            n: 100,
            method: Method::Wilson,
        };
        let b = Rate {
            p: 0.95,
            lo: 0.93,
            hi: 0.97,
            n: 100,
            method: Method::Wilson,
        };
        let c = Rate {
            p: 0.93,
            lo: 0.91,
            hi: 0.95,
            n: 100,
            method: Method::Wilson,
        };
        assert!(a.separated_from(&b) && b.separated_from(&a));
        assert!(!a.separated_from(&c));
        assert_eq!(b.pm(), "95.0% ± 2.0");
    }
}
