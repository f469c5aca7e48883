//! The options of an evaluation, checked once, and why an evaluation cannot run.

use super::sample::Refused;
use serde::Serialize;
use thiserror::Error;

/// Options for [`super::evaluate`] and [`super::policy_labels`] (checked by
/// [`OpeOptions::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OpeOptions {
    /// Cross-fitting folds for the reward model (2..=100).
    pub folds: usize,
    /// Seed of the fold assignment.
    pub seed: u64,
    /// Reward model family.
    pub reward_model: RewardModelKind,
    /// L2 penalty of the logistic reward model (on the summed log-loss; unused by the others).
    pub l2: f64,
    /// Warn when the effective sample size is below this many samples.
    pub min_ess: f64,
    /// Warn when the effective sample size is below this share of `n`.
    pub min_ess_fraction: f64,
    /// An action counts as logged in a (request_type, region) cell when it occurs at least
    /// this many times there.
    pub min_cell_support: usize,
}

impl Default for OpeOptions {
    fn default() -> Self {
        OpeOptions {
            folds: 5,
            seed: 42,
            reward_model: RewardModelKind::Trees,
            l2: 1.0,
            min_ess: 100.0,
            min_ess_fraction: 0.01,
            min_cell_support: 1,
        }
    }
}

impl OpeOptions {
    /// Checks ranges once, before any work.
    ///
    /// # Errors
    /// [`OpeError::Option`] naming the option.
    pub fn check(&self) -> Result<(), OpeError> {
        let bad = |name: &'static str, message: String| Err(OpeError::Option { name, message });
        if !(2..=100).contains(&self.folds) {
            return bad("folds", format!("must be 2..=100, got {}", self.folds));
        }
        if !(self.l2.is_finite() && self.l2 > 0.0) {
            return bad("l2", format!("must be finite and > 0, got {}", self.l2));
        }
        if !(self.min_ess.is_finite() && self.min_ess >= 0.0) {
            return bad("min_ess", format!("must be >= 0, got {}", self.min_ess));
        }
        if !(0.0..=1.0).contains(&self.min_ess_fraction) {
            return bad(
                "min_ess_fraction",
                format!("must be in [0, 1], got {}", self.min_ess_fraction),
            );
        }
        if self.min_cell_support == 0 {
            return bad("min_cell_support", "must be at least 1".into());
        }
        Ok(())
    }
}

/// Why an evaluation could not run.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OpeError {
    /// An option is out of range.
    #[error("{name} {message}")]
    Option {
        /// The option's name.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// Fewer than two samples survived validation.
    #[error("need at least 2 usable samples, got {usable} of {total} ({refused})")]
    TooFewSamples {
        /// Samples that passed validation.
        usable: usize,
        /// Samples given.
        total: usize,
        /// Why the others were refused.
        refused: Refused,
    },
}

/// Reward model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardModelKind {
    /// Per-action boosted trees ([`super::reward_trees`]).
    Trees,
    /// Per-action regularised logistic regression on [`super::reward_model::features`].
    Logistic,
    /// Per-action mean reward (a baseline; DR then only gains a control variate).
    ActionMean,
}
