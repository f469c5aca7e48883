//! Fallbacks over time, in constant memory.
//!
//! Decisions are binned as they stream by, at a fine width that grows (1 s → 1 min → 1 h
//! → 1 d) whenever there would be more than [`FINE_CAP`] bins; at the end the fine bins are
//! summed into report buckets of a round width giving at most 60 buckets (so about 24–60 for
//! any span), or into the width given with `--bucket`. Every width in the round list is a
//! multiple of every finer ladder step it can follow, so the final sums are exact.

use std::collections::BTreeMap;

/// The fallback reasons counted over time, their order, and the bin: the same as the
/// rollout judge's fallback alarm at the edge.
pub use decider_rollout::alarm::{Bin, OOD, REASONS};

/// Most fine bins kept before they are merged into wider ones.
pub const FINE_CAP: usize = 50_000;

const LADDER_MS: [i64; 4] = [1_000, 60_000, 3_600_000, 86_400_000];
const ROUND_S: [i64; 20] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400,
    172_800, 604_800,
];
const MAX_AUTO_BUCKETS: i64 = 60;
/// Most report buckets from `--bucket`: beyond this its width is doubled until they fit.
pub const MAX_BUCKETS: i64 = 10_000;

/// One report bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Start, ms since the epoch.
    pub start_ms: i64,
    /// Counts.
    pub bin: Bin,
}

/// The streaming binner.
#[derive(Debug, Clone)]
pub struct Timeline {
    width_ms: i64,
    explicit: bool,
    rung: usize,
    bins: BTreeMap<i64, Bin>,
    widened: bool,
}

impl Timeline {
    /// A binner with automatic width, or with `bucket_ms` (from `--bucket`).
    pub fn new(bucket_ms: Option<i64>) -> Timeline {
        Timeline {
            width_ms: bucket_ms.unwrap_or(LADDER_MS[0]),
            explicit: bucket_ms.is_some(),
            rung: 0,
            bins: BTreeMap::new(),
            widened: false,
        }
    }

    /// Counts one decision at `ts_ms`; `reason` is its index in [`REASONS`] if it fell back.
    pub fn add(&mut self, ts_ms: i64, reason: Option<usize>) {
        let bin = self
            .bins
            .entry(ts_ms.div_euclid(self.width_ms))
            .or_default();
        bin.n += 1;
        if let Some(r) = reason {
            bin.by_reason[r] += 1;
        }
        if self.bins.len() > FINE_CAP * if self.explicit { 4 } else { 1 } {
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        let factor = if self.explicit {
            self.widened = true;
            2
        } else if self.rung + 1 < LADDER_MS.len() {
            self.rung += 1;
            LADDER_MS[self.rung] / LADDER_MS[self.rung - 1]
        } else {
            2
        };
        self.width_ms *= factor;
        let old = std::mem::take(&mut self.bins);
        for (k, b) in old {
            self.bins.entry(k.div_euclid(factor)).or_default().merge(&b);
        }
    }

    /// True when `--bucket` was too fine for the span and had to be doubled.
    pub fn widened(&self) -> bool {
        self.widened || (self.explicit && self.report_width() != self.width_ms)
    }

    fn span_ms(&self) -> Option<(i64, i64)> {
        let (first, _) = self.bins.first_key_value()?;
        let (last, _) = self.bins.last_key_value()?;
        Some((first * self.width_ms, last * self.width_ms))
    }

    /// Width of the report buckets: the round automatic one, or `--bucket` doubled while
    /// it would give more than [`MAX_BUCKETS`] (empty buckets are listed too, so two
    /// decisions a year apart at `--bucket 1s` must not ask for 31 million).
    fn report_width(&self) -> i64 {
        let Some((lo_ms, hi_ms)) = self.span_ms() else {
            return self.width_ms;
        };
        if !self.explicit {
            return self.round_width(lo_ms, hi_ms);
        }
        let mut w = self.width_ms;
        while hi_ms.div_euclid(w) - lo_ms.div_euclid(w) >= MAX_BUCKETS {
            w *= 2;
        }
        w
    }

    /// The report buckets, every one from the first decision's to the last's (empty ones
    /// included), and their width in ms.
    pub fn buckets(&self) -> (i64, Vec<Bucket>) {
        let Some((lo_ms, hi_ms)) = self.span_ms() else {
            return (self.width_ms, Vec::new());
        };
        let width = self.report_width();
        let first_b = lo_ms.div_euclid(width);
        let count = hi_ms.div_euclid(width) - first_b + 1;
        let mut out: Vec<Bucket> = (0..count)
            .map(|i| Bucket {
                start_ms: (first_b + i) * width,
                bin: Bin::default(),
            })
            .collect();
        for (&k, b) in &self.bins {
            let i = (k * self.width_ms).div_euclid(width) - first_b;
            out[i as usize].bin.merge(b);
        }
        (width, out)
    }

    fn round_width(&self, lo_ms: i64, hi_ms: i64) -> i64 {
        let fits = |w: i64| hi_ms.div_euclid(w) - lo_ms.div_euclid(w) < MAX_AUTO_BUCKETS;
        for s in ROUND_S {
            let w = s * 1000;
            if w % self.width_ms == 0 && fits(w) {
                return w;
            }
        }
        let week = 604_800_000i64;
        let mut k = 2;
        while !fits(week * k) || (week * k) % self.width_ms != 0 {
            k += 1;
        }
        week * k
    }
}

/// Parses `--bucket`: a whole number followed by s, m, h or d (`30s`, `5m`, `1h`, `1d`).
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| format!("expected a duration like 30s, 5m, 1h or 1d, got {s:?}"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "expected a duration like 30s, 5m, 1h or 1d, got {s:?}"
            ))
        }
    };
    if n <= 0 || n > 3650 * 86_400 {
        return Err(format!(
            "duration must be positive and at most 10 years, got {s:?}"
        ));
    }
    Ok(n * unit_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_796_205_600_000; // 2026-12-02T10:00:00Z

    #[test]
    fn auto_width_gives_between_20_and_60_buckets() {
        for span_s in [
            1i64,
            59,
            600,
            3_599,
            7_200,
            86_400,
            3 * 86_400,
            40 * 86_400,
            400 * 86_400,
        ] {
            let mut t = Timeline::new(None);
            t.add(T0, None);
            t.add(T0 + span_s * 1000, Some(0));
            let (w, b) = t.buckets();
            assert!(
                b.len() <= 60,
                "span {span_s}s: {} buckets of {w} ms",
                b.len()
            );
            if span_s >= 60 {
                assert!(
                    b.len() >= 20,
                    "span {span_s}s: {} buckets of {w} ms",
                    b.len()
                );
            }
            assert_eq!(b.iter().map(|x| x.bin.n).sum::<u64>(), 2);
            assert_eq!(b.last().unwrap().bin.by_reason[0], 1);
        }
    }

    #[test]
    fn coarsening_keeps_every_count() {
        let mut t = Timeline::new(None);
        // Two days at one decision every 2 s: more fine bins than the cap at 1 s.
        let n = 2 * 86_400 / 2;
        for i in 0..n {
            t.add(T0 + i * 2000, if i % 10 == 0 { Some(OOD) } else { None });
        }
        let (w, b) = t.buckets();
        assert_eq!(w, 3_600_000, "two days in 1 h buckets");
        assert_eq!(b.len(), 48);
        assert_eq!(b.iter().map(|x| x.bin.n).sum::<u64>(), n as u64);
        assert_eq!(
            b.iter().map(|x| x.bin.by_reason[OOD]).sum::<u64>(),
            n as u64 / 10
        );
    }

    #[test]
    fn explicit_bucket_is_used_as_given() {
        let mut t = Timeline::new(Some(300_000));
        for i in 0..31 {
            t.add(T0 + i * 60_000, None);
        }
        let (w, b) = t.buckets();
        assert_eq!(w, 300_000);
        assert_eq!(b.len(), 7);
        assert_eq!(b[0].bin.n, 5);
        assert_eq!(b[6].bin.n, 1);
        assert!(!t.widened());
    }

    #[test]
    fn a_fine_bucket_over_a_long_span_is_widened_not_allocated() {
        let mut t = Timeline::new(Some(1000));
        t.add(T0, None);
        t.add(T0 + 365 * 86_400_000, Some(1));
        let (w, b) = t.buckets();
        assert!(b.len() as i64 <= MAX_BUCKETS, "{} buckets", b.len());
        assert!(w > 1000 && w % 1000 == 0);
        assert!(t.widened());
        assert_eq!(b.iter().map(|x| x.bin.n).sum::<u64>(), 2);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        for bad in [
            "",
            "5",
            "m",
            "0m",
            "-5m",
            "5 minutes",
            "1.5h",
            "99999999999999999999s",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }
}
