//! The policy under evaluation.

use decider_core::{Action, State, NUM_ACTIONS};

/// A policy to evaluate: state → probability of each action, in [`decider_core::ACTIONS`]
/// order. A deterministic policy returns a one-hot vector ([`one_hot`]).
pub trait TargetPolicy {
    /// The action distribution in `state` (non-negative, summing to 1).
    fn distribution(&self, state: &State) -> [f64; NUM_ACTIONS];
}

impl<F> TargetPolicy for F
where
    F: Fn(&State) -> [f64; NUM_ACTIONS],
{
    fn distribution(&self, state: &State) -> [f64; NUM_ACTIONS] {
        self(state)
    }
}

/// The distribution that picks `a` with probability 1.
pub fn one_hot(a: Action) -> [f64; NUM_ACTIONS] {
    let mut p = [0.0; NUM_ACTIONS];
    p[a.index()] = 1.0;
    p
}

/// Whether `p` is a distribution: finite, non-negative, summing to 1 within 1e-6. It is used
/// as given, not renormalised, so a target equal to the logging policy reproduces the logged
/// propensities bit for bit (weight exactly 1).
pub(super) fn is_distribution(p: &[f64; NUM_ACTIONS]) -> bool {
    p.iter().all(|v| v.is_finite() && *v >= 0.0) && (p.iter().sum::<f64>() - 1.0).abs() <= 1e-6
}
