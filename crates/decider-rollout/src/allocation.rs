//! How traffic is allocated between the arms a comparison weighs, which the two-sample test
//! ([`crate::evidence`]) needs: the share of the two arms' outcomes that are the treatment's.
//!
//! A routing key's sticky bucket (0..100) puts it in the challenger's arm below the
//! challenger's share, in the champion's below `CANARY_PERCENT`, and in the holdout arm above
//! (`decider_core::rollout::arm`). The control plane sets the share; the canary share is the
//! serving Worker's variable, which each isolate names in its flush batches. The control
//! plane keeps what it heard ([`CanaryHeard`]) and trusts it for a step only when it has not
//! changed since the step began: counts made at two allocations have neither.

use decider_core::rollout::Arm;
use serde::{Deserialize, Serialize};

/// The serving isolates' `CANARY_PERCENT`, as the control plane last heard it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryHeard {
    /// The percent.
    pub percent: u8,
    /// When a batch last named another value than the one before, ms since the epoch;
    /// None while every batch has named this one.
    pub changed_ms: Option<i64>,
}

/// Keeps the canary share a batch named (`None`: the isolate did not say). True when the
/// kept value changed.
pub fn hear(kept: &mut Option<CanaryHeard>, named: Option<u8>, now_ms: i64) -> bool {
    let Some(percent) = named else { return false };
    match kept {
        Some(k) if k.percent == percent => false,
        Some(k) => {
            *k = CanaryHeard {
                percent,
                changed_ms: Some(now_ms),
            };
            true
        }
        None => {
            *kept = Some(CanaryHeard {
                percent,
                changed_ms: None,
            });
            true
        }
    }
}

/// The buckets (percent of routing keys) of each arm, in [`Arm::ALL`] order, at a
/// challenger share and a canary share.
pub fn buckets(share: u8, canary: u8) -> [u8; 3] {
    let canary = canary.min(100);
    let challenger = share.min(canary);
    [canary - challenger, challenger, 100 - canary]
}

/// The treatment's share of the traffic of `treatment` and `baseline` (in (0, 1)), at a
/// challenger share, with the canary share heard; None when the canary share is unknown,
/// changed after `since_ms` (the counts may mix two allocations), or an arm has no bucket.
pub fn between(
    treatment: Arm,
    baseline: Arm,
    share: u8,
    canary: Option<CanaryHeard>,
    since_ms: i64,
) -> Option<f64> {
    let c = canary.filter(|c| c.changed_ms.is_none_or(|t| t <= since_ms))?;
    let b = buckets(share, c.percent);
    let (t, o) = (b[treatment.index()], b[baseline.index()]);
    (t > 0 && o > 0).then(|| f64::from(t) / f64::from(t + o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_shares() {
        assert_eq!(buckets(5, 100), [95, 5, 0]);
        assert_eq!(buckets(5, 90), [85, 5, 10]);
        assert_eq!(buckets(100, 90), [0, 90, 10]);
        assert_eq!(buckets(0, 100), [100, 0, 0]);
        let heard = Some(CanaryHeard {
            percent: 90,
            changed_ms: None,
        });
        let pi = |t, b, share| between(t, b, share, heard, 0);
        assert_eq!(pi(Arm::Challenger, Arm::Champion, 5), Some(5.0 / 90.0));
        assert_eq!(pi(Arm::Champion, Arm::Holdout, 5), Some(85.0 / 95.0));
        assert_eq!(pi(Arm::Challenger, Arm::Holdout, 100), Some(0.9));
        // An arm without buckets: nothing to compare.
        assert_eq!(pi(Arm::Challenger, Arm::Champion, 100), None);
        assert_eq!(
            between(
                Arm::Champion,
                Arm::Holdout,
                5,
                Some(CanaryHeard {
                    percent: 100,
                    changed_ms: None
                }),
                0
            ),
            None
        );
        // Unknown, or changed after the step began: no allocation.
        assert_eq!(between(Arm::Challenger, Arm::Champion, 5, None, 0), None);
        let changed = Some(CanaryHeard {
            percent: 90,
            changed_ms: Some(1_000),
        });
        assert_eq!(
            between(Arm::Challenger, Arm::Champion, 5, changed, 999),
            None
        );
        assert!(between(Arm::Challenger, Arm::Champion, 5, changed, 1_000).is_some());
    }

    #[test]
    fn hearing_keeps_the_time_of_a_change() {
        let mut kept = None;
        assert!(!hear(&mut kept, None, 1));
        assert!(hear(&mut kept, Some(100), 2));
        assert_eq!(
            kept,
            Some(CanaryHeard {
                percent: 100,
                changed_ms: None
            })
        );
        assert!(!hear(&mut kept, Some(100), 3));
        assert!(hear(&mut kept, Some(90), 4));
        assert_eq!(
            kept,
            Some(CanaryHeard {
                percent: 90,
                changed_ms: Some(4)
            })
        );
        assert!(!hear(&mut kept, None, 5));
    }
}
