//! An arm's counts as the tests read them: outcomes, the sum of their rewards and of their
//! squares.

use decider_core::rollout::{Counts, REWARD_SCALE};
use serde::{Deserialize, Serialize};

/// An arm's aggregate: outcomes, the sum of their rewards and of their squares.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Outcomes.
    pub n: u64,
    /// Sum of the rewards.
    pub sum: f64,
    /// Sum of the squared rewards.
    pub sum_sq: f64,
}

impl Sample {
    /// The sample of a tally's counts.
    pub fn from_counts(c: &Counts) -> Sample {
        let k = REWARD_SCALE as f64;
        Sample {
            n: c.outcomes,
            sum: c.reward_sum as f64 / k,
            sum_sq: c.reward_sq_sum as f64 / k,
        }
    }

    /// The mean reward, when there are outcomes.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| (self.sum / self.n as f64).clamp(0.0, 1.0))
    }

    /// The sample standard deviation, with at least two outcomes.
    pub fn sd(&self) -> Option<f64> {
        (self.n > 1).then(|| {
            let n = self.n as f64;
            let mean = self.sum / n;
            ((self.sum_sq - n * mean * mean) / (n - 1.0))
                .max(0.0)
                .sqrt()
        })
    }
}
