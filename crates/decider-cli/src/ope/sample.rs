//! Logged samples, and the per-sample rows the estimators work on.

use decider_core::{Action, State, NUM_ACTIONS};
use serde::Serialize;
use std::io::Write;

/// One logged decision with its reward.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// The state the decision was made on.
    pub state: State,
    /// The action taken.
    pub action: Action,
    /// Probability that the serving policy took `action` in `state`, in `(0, 1]`.
    pub propensity: f64,
    /// Reward in `[0, 1]`.
    pub reward: f64,
}

/// Samples refused before estimation, by reason (a sample is counted once, under the first
/// reason that applies, in this order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// Propensity not a number in `(0, 1]`.
    pub propensity: usize,
    /// Reward not a number in `[0, 1]`.
    pub reward: usize,
    /// The target policy returned no valid distribution (negative or non-finite entries, or
    /// not summing to 1 within 1e-6).
    pub target: usize,
}

impl Refused {
    /// Total refused.
    pub fn total(&self) -> usize {
        self.propensity + self.reward + self.target
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused: {} propensity not in (0, 1], {} reward not in [0, 1], {} invalid target distribution",
            self.propensity, self.reward, self.target
        )
    }
}

/// The samples with a propensity in `(0, 1]` and a reward in `[0, 1]`, and the refused counts.
pub(super) fn usable(samples: &[Sample]) -> (Vec<Sample>, Refused) {
    let mut refused = Refused::default();
    let mut kept = Vec::with_capacity(samples.len());
    for s in samples {
        if !(s.propensity > 0.0 && s.propensity <= 1.0) {
            refused.propensity += 1;
        } else if !(0.0..=1.0).contains(&s.reward) {
            refused.reward += 1;
        } else {
            kept.push(*s);
        }
    }
    (kept, refused)
}

/// One usable sample with everything the estimators use: the dump format of
/// [`write_dump`], one JSON object per line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Row {
    /// The logged state.
    pub state: State,
    /// The logged action.
    pub action: Action,
    /// Its propensity.
    pub propensity: f64,
    /// Its reward.
    pub reward: f64,
    /// The target's distribution in this state.
    pub target: [f64; NUM_ACTIONS],
    /// Cross-fitted reward predictions `q̂(x, a)` for every action.
    pub q_hat: [f64; NUM_ACTIONS],
    /// The cross-fitting fold the sample was held out in.
    pub fold: usize,
}

impl Row {
    /// Importance weight `π(a_i|x_i) / p_i`.
    pub fn weight(&self) -> f64 {
        self.target[self.action.index()] / self.propensity
    }
}

/// Writes rows as JSON lines (the dump read by `bench/ope_peers.py`).
///
/// # Errors
/// The writer's I/O error.
pub fn write_dump(mut w: impl Write, rows: &[Row]) -> std::io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}
