//! The fallback-rate alarm: a sudden rise in the share of decisions that fell back to rules
//! (low confidence, out-of-distribution states, a failing model backend, stale signals).
//!
//! One implementation for `decider report` (over its time buckets) and for the rollout
//! judge at the edge (over the counters' windows). The last [`RECENT`] non-empty bins' pooled
//! fallback rate is compared with the median of the earlier bins' rates; the alarm fires
//! when the recent rate is at least twice the median, at least 5 points above it, and the
//! lower end of its 95% Wilson interval is above it too, with at least [`MIN_RECENT_N`]
//! recent decisions. Holdout traffic (rules by design) is counted in no bin.

use decider_core::FallbackReason;
use serde::{Deserialize, Serialize};

/// Fallback reasons counted over time, in bin order (holdout traffic is kept out of the
/// fallback rate); `(none)` is a fallback that recorded no reason.
pub const REASONS: [&str; 7] = {
    // FallbackReason::ALL without its last, `holdout`.
    let mut names = ["(none)"; 7];
    let mut i = 0;
    while i < 6 {
        names[i] = FallbackReason::ALL[i].name();
        i += 1;
    }
    names
};

/// Index of `out_of_distribution` in [`REASONS`].
pub const OOD: usize = 4;

/// Bins at the end of the series compared with the rest.
pub const RECENT: usize = 3;

/// Fewest non-empty bins for the alarm to be judged.
pub const MIN_BUCKETS: usize = 2 * RECENT;

/// Fewest decisions in the recent bins for an alarm.
pub const MIN_RECENT_N: u64 = 20;

/// The two-sided 95% normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// Decisions and fallbacks in one time bin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bin {
    /// Decisions outside the holdout arm.
    pub n: u64,
    /// Fallbacks by reason, in [`REASONS`] order.
    pub by_reason: [u64; 7],
}

impl Bin {
    /// All fallbacks.
    pub fn fallbacks(&self) -> u64 {
        self.by_reason.iter().sum()
    }

    /// Adds another bin's counts to this one.
    pub fn merge(&mut self, o: &Bin) {
        self.n += o.n;
        for (a, b) in self.by_reason.iter_mut().zip(o.by_reason) {
            *a += b;
        }
    }
}

/// The index in [`REASONS`] of a fallback with this reason (`(none)` without one); None
/// for `holdout`, which is no fallback.
pub fn reason_index(reason: Option<FallbackReason>) -> Option<usize> {
    match reason {
        Some(FallbackReason::Holdout) => None,
        Some(r) => Some(
            REASONS
                .iter()
                .position(|n| *n == r.name())
                .unwrap_or(REASONS.len() - 1),
        ),
        None => Some(REASONS.len() - 1),
    }
}

/// The numbers behind a judged alarm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Decisions in the recent bins.
    pub recent_n: u64,
    /// Their pooled fallback rate.
    pub recent_rate: f64,
    /// The lower end of its 95% Wilson interval.
    pub recent_rate_lo: f64,
    /// The median fallback rate of the earlier bins.
    pub median_rate: f64,
    /// Pooled `out_of_distribution` rate of the recent bins.
    pub recent_ood_rate: f64,
    /// Median `out_of_distribution` rate of the earlier bins.
    pub median_ood_rate: f64,
    /// The reason whose rate rose most (recent minus median), as an index in [`REASONS`].
    pub rose_most: usize,
    /// That reason's pooled recent rate.
    pub rose_most_recent: f64,
    /// That reason's median rate in the earlier bins.
    pub rose_most_median: f64,
}

/// What the alarm says about a series of bins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FallbackAlarm {
    /// Fewer than [`MIN_BUCKETS`] non-empty bins: nothing to compare.
    TooFewBins {
        /// Non-empty bins seen.
        used: usize,
    },
    /// The fallback rate is steady.
    Steady(Evidence),
    /// The fallback rate rose sharply.
    Alarm(Evidence),
}

impl FallbackAlarm {
    /// Whether the alarm fires.
    pub fn firing(&self) -> bool {
        matches!(self, FallbackAlarm::Alarm(_))
    }

    /// The evidence, when the series was judged.
    pub fn evidence(&self) -> Option<&Evidence> {
        match self {
            FallbackAlarm::TooFewBins { .. } => None,
            FallbackAlarm::Steady(e) | FallbackAlarm::Alarm(e) => Some(e),
        }
    }
}

/// The median of `v` (the mean of the middle two for an even count; 0 for none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Wilson score interval for `successes` out of `n` at normal quantile `z` (the whole of
/// `[0, 1]` without data).
pub fn wilson(successes: f64, n: f64, z: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let p = successes / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Judges a series of bins, oldest first (empty bins are skipped).
pub fn fallback_alarm<'a>(bins: impl IntoIterator<Item = &'a Bin>) -> FallbackAlarm {
    let used: Vec<&Bin> = bins.into_iter().filter(|b| b.n > 0).collect();
    if used.len() < MIN_BUCKETS {
        return FallbackAlarm::TooFewBins { used: used.len() };
    }
    let (early, recent) = used.split_at(used.len() - RECENT);
    let share =
        |b: &Bin, r: Option<usize>| r.map_or(b.fallbacks(), |r| b.by_reason[r]) as f64 / b.n as f64;
    let base = median(early.iter().map(|b| share(b, None)).collect());
    let rn: u64 = recent.iter().map(|b| b.n).sum();
    let pooled = |r: Option<usize>| {
        recent
            .iter()
            .map(|b| r.map_or(b.fallbacks(), |r| b.by_reason[r]))
            .sum::<u64>() as f64
            / rn as f64
    };
    let now = pooled(None);
    let lower = wilson(now * rn as f64, rn as f64, Z95).0;
    let rose: Vec<(usize, f64, f64)> = (0..REASONS.len())
        .map(|r| {
            (
                r,
                pooled(Some(r)),
                median(early.iter().map(|b| share(b, Some(r))).collect()),
            )
        })
        .collect();
    let top = rose
        .iter()
        .copied()
        .max_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2)))
        .unwrap_or((OOD, 0.0, 0.0));
    let ood = rose[OOD];
    let evidence = Evidence {
        recent_n: rn,
        recent_rate: now,
        recent_rate_lo: lower,
        median_rate: base,
        recent_ood_rate: ood.1,
        median_ood_rate: ood.2,
        rose_most: top.0,
        rose_most_recent: top.1,
        rose_most_median: top.2,
    };
    let alarm = rn >= MIN_RECENT_N && now >= 2.0 * base && now - base >= 0.05 && lower > base;
    if alarm {
        FallbackAlarm::Alarm(evidence)
    } else {
        FallbackAlarm::Steady(evidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(n: u64, low: u64, ood: u64) -> Bin {
        let mut by_reason = [0; 7];
        by_reason[0] = low;
        by_reason[OOD] = ood;
        Bin { n, by_reason }
    }

    #[test]
    fn too_few_bins_are_not_judged() {
        assert_eq!(fallback_alarm(&[]), FallbackAlarm::TooFewBins { used: 0 });
        let bins = vec![bin(50, 2, 0); 5];
        assert_eq!(fallback_alarm(&bins), FallbackAlarm::TooFewBins { used: 5 });
        // Empty bins do not count.
        let mut bins = vec![bin(50, 2, 0); 5];
        bins.push(Bin::default());
        assert!(!fallback_alarm(&bins).firing());
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn a_jump_in_the_last_bins_fires_and_names_the_reason() {
        let mut bins = vec![bin(50, 3, 0); 20];
        bins.extend([bin(50, 3, 20); 3]);
        let a = fallback_alarm(&bins);
        assert!(a.firing(), "{a:?}");
        let e = a.evidence().unwrap();
        assert_eq!(e.rose_most, OOD);
        assert_eq!(e.recent_n, 150);
        assert!((e.recent_rate - 23.0 / 50.0).abs() < 1e-12);
        assert!((e.median_rate - 0.06).abs() < 1e-12);
        assert!((e.recent_ood_rate - 0.4).abs() < 1e-12);
        assert_eq!(e.median_ood_rate, 0.0);
        assert!(e.recent_rate_lo > e.median_rate);
    }

    #[test]
    fn steady_small_or_slight_rises_do_not_fire() {
        // Steady.
        assert!(!fallback_alarm(&vec![bin(50, 3, 0); 20]).firing());
        // Twice the median but under 5 points more.
        let mut bins = vec![bin(100, 2, 0); 10];
        bins.extend([bin(100, 5, 0); 3]);
        assert!(!fallback_alarm(&bins).firing());
        // A big rise on too few recent decisions.
        let mut bins = vec![bin(50, 1, 0); 10];
        bins.extend([bin(5, 0, 4); 3]);
        assert!(!fallback_alarm(&bins).firing());
    }

    #[test]
    fn reasons_map_to_their_bin_and_holdout_to_none() {
        assert_eq!(reason_index(Some(FallbackReason::LowConfidence)), Some(0));
        assert_eq!(
            reason_index(Some(FallbackReason::OutOfDistribution)),
            Some(OOD)
        );
        assert_eq!(reason_index(Some(FallbackReason::StaleSignals)), Some(5));
        assert_eq!(reason_index(None), Some(6));
        assert_eq!(reason_index(Some(FallbackReason::Holdout)), None);
    }
}
