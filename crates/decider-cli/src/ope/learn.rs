//! Training from logs (`decider train --logs`): turning bandit feedback into labels the
//! existing trainer ([`crate::train`]) can fit.
//!
//! # How
//! 1. Join decisions and outcomes into [`Sample`]s (state, action, propensity, reward).
//!    Split them by time: the older part teaches, the newer part is kept for step 5.
//! 2. Fit the per-action reward model `q̂(x, a)` ([`super::reward_model`]) on the teaching part.
//! 3. Label each logged state with the best *supported* action ([`policy_labels`]):
//!    `argmax_a q̂(x, a)` over the actions the logs actually tried in states like it (logged
//!    in its request_type × region cell), and the logged action itself wherever the decision
//!    was deterministic (propensity 1: nothing else was ever tried in that state).
//! 4. Train the boosted trees on these labels exactly as on simulated data (split, early stop,
//!    calibrate, pick the threshold): the trees compress `argmax q̂` into the shipped model
//!    family, and the calibrated confidence still gates them to the rules.
//! 5. Before it serves anything, estimate the new model with `decider ope` on the held-out,
//!    newer logs (never the teaching part): DR and SNIPS against the logged value.
//!
//! Why direct-method labels and not importance-weighted classification (label `a_i`, weight
//! `r_i / p_i`) or DR pseudo-rewards: the trainer takes unweighted hard labels, and with
//! ε = 0.1 exploration the weights reach 30, so per-sample DR scores are too noisy to argmax.
//! The price is the reward model's bias, which step 5 measures with an estimator (DR) that
//! does not share it. Both cost-sensitive alternatives were tried on the project's world and
//! lost or tied (docs/learning.md): argmax of per-action DR scores, and rows weighted by
//! their regret gap.
//!
//! # Assumptions
//! - **Overlap (positivity)**: only explored traffic teaches anything new; where the logger
//!   was deterministic the labels stay what it did. Exploration must run long enough to
//!   cover each region × type cell.
//! - **No unmeasured confounding**: the logged action depended on the logged state only (and
//!   the propensity says how). Overrides, failovers or holdout arms that looked at anything
//!   else bias `q̂` and every estimate.
//! - **Stationarity and no interference**: the reward of an action in a state does not drift
//!   between logging and serving, and routing decisions do not change later states. Routing
//!   *all* traffic to the cluster that paid best at ε-share load can overload it: ship through
//!   a challenger rollout, not at once.
//! - **Reject pays 0** by default, so `argmax q̂` never rejects unless every route pays 0;
//!   overload protection must stay with the rule table (or reject needs a reward).

use super::options::{OpeError, OpeOptions};
use super::reward_model::Bagged;
use super::sample::{usable, Sample};
use super::support::{cell_counts, cell_supports, DETERMINISTIC};
use decider_core::{Action, State, NUM_ACTIONS};

/// Labels each usable sample's state with its best supported action (module docs, step 3),
/// using a reward model fitted on all usable samples.
///
/// # Errors
/// An option out of range, or fewer than two usable samples.
pub fn policy_labels(
    samples: &[Sample],
    opts: &OpeOptions,
) -> Result<Vec<(State, Action)>, OpeError> {
    label(samples, opts, &LabelOptions::default()).map(|l| l.rows)
}

/// How [`label`] labels.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LabelOptions {
    /// Hold out this share of the usable samples, chosen as the trainer chooses its
    /// validation rows ([`crate::train::split_indices`] with this seed), from the reward
    /// model's fit: their predictions then come from a model that never saw them.
    pub holdout: Option<(f64, u64)>,
    /// Label deterministic decisions (propensity 1) by the reward model like the others,
    /// instead of keeping the logged action.
    pub relabel_deterministic: bool,
}

/// What [`label`] gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    /// One labelled row per usable sample, in order.
    pub rows: Vec<(State, Action)>,
    /// The usable samples themselves, in the same order.
    pub samples: Vec<Sample>,
    /// The reward model's predictions for every usable sample.
    pub q_hat: Vec<[f64; NUM_ACTIONS]>,
    /// Indices of the held-out samples (empty without a hold-out).
    pub holdout: Vec<usize>,
}

/// Labels each usable sample with its best supported action (module docs, step 3), the
/// reward model fitted on the samples not held out.
///
/// # Errors
/// An option out of range, or fewer than two usable samples.
pub fn label(
    samples: &[Sample],
    opts: &OpeOptions,
    how: &LabelOptions,
) -> Result<Labels, OpeError> {
    opts.check()?;
    let (kept, refused) = usable(samples);
    if kept.len() < 2 {
        return Err(OpeError::TooFewSamples {
            usable: kept.len(),
            total: samples.len(),
            refused,
        });
    }
    let (teach, holdout) = match how.holdout {
        Some((fraction, seed)) => crate::train::split_indices(kept.len(), fraction, seed),
        None => ((0..kept.len()).collect(), Vec::new()),
    };
    let refs: Vec<&Sample> = teach.iter().map(|&i| &kept[i]).collect();
    let model = Bagged::fit(&refs, opts);
    let counts = cell_counts(kept.iter().map(|s| (&s.state, s.action)));
    let q_hat: Vec<[f64; NUM_ACTIONS]> = kept.iter().map(|s| model.predict(&s.state)).collect();
    let rows = kept
        .iter()
        .zip(&q_hat)
        .map(|(s, q)| {
            if s.propensity >= DETERMINISTIC && !how.relabel_deterministic {
                return (s.state, s.action);
            }
            // Ties keep the logged action: no evidence, no change.
            let mut best = s.action.index();
            for a in 0..NUM_ACTIONS {
                if q[a] > q[best] && cell_supports(&counts, &s.state, a, opts.min_cell_support) {
                    best = a;
                }
            }
            (s.state, Action::ALL[best])
        })
        .collect();
    Ok(Labels {
        rows,
        samples: kept,
        q_hat,
        holdout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ope::synthetic::{greedy, preferred_route, simulate_logs, Logging};

    #[test]
    fn labels_find_the_best_route_where_the_logs_explored() {
        let samples = simulate_logs(20_000, 31, Logging::UniformRoutes);
        let labels = policy_labels(&samples, &OpeOptions::default()).unwrap();
        assert_eq!(labels.len(), samples.len());
        let right = labels
            .iter()
            .filter(|(s, a)| *a == preferred_route(s))
            .count();
        let share = right as f64 / labels.len() as f64;
        // The logged action alone is right a third of the time.
        assert!(share > 0.85, "{share}");
        assert!(labels.iter().all(|(_, a)| *a != Action::Reject));
    }

    #[test]
    fn deterministic_decisions_keep_their_label() {
        let samples = simulate_logs(20_000, 32, Logging::EpsilonGreedy(0.2));
        let labels = policy_labels(&samples, &OpeOptions::default()).unwrap();
        let mut rejects = 0;
        for (s, (state, a)) in samples.iter().zip(&labels) {
            assert_eq!(s.state, *state);
            if s.propensity == 1.0 {
                assert_eq!(*a, s.action);
                rejects += usize::from(greedy(state) == Action::Reject);
            }
        }
        assert!(rejects > 100, "{rejects}");
        // Where it explored, the labels move towards the preferred route (the greedy logger
        // alone is right only where no spill-over applies).
        let explored: Vec<_> = samples
            .iter()
            .zip(&labels)
            .filter(|(s, _)| s.propensity < 1.0)
            .collect();
        let logged_right = explored
            .iter()
            .filter(|(s, _)| s.action == preferred_route(&s.state))
            .count();
        let labels_right = explored
            .iter()
            .filter(|(s, (_, a))| *a == preferred_route(&s.state))
            .count();
        assert!(
            labels_right > logged_right,
            "{labels_right} vs {logged_right}"
        );
    }

    #[test]
    fn bad_rows_are_refused_not_labelled() {
        let mut samples = simulate_logs(50, 33, Logging::UniformRoutes);
        samples[0].propensity = 0.0;
        samples[1].reward = f64::NAN;
        assert_eq!(
            policy_labels(&samples, &OpeOptions::default())
                .unwrap()
                .len(),
            48
        );
        let err = policy_labels(&samples[..2], &OpeOptions::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("need at least 2 usable samples, got 0 of 2"),
            "{err}"
        );
    }
}
