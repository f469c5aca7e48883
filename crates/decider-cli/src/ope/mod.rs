//! Off-policy evaluation: what a candidate policy would have earned on logged traffic.
//!
//! Every decision the Worker logs carries its state, the action taken, the *propensity* (the
//! probability with which the serving policy took that action) and, once joined with its
//! outcome, a reward in `[0, 1]`. That is bandit feedback: the reward of the actions *not*
//! taken is never seen. [`evaluate`] estimates the value `V(π) = E_x[Σ_a π(a|x) r(x, a)]` of a
//! target policy `π` (a [`TargetPolicy`]) from such samples.
//!
//! # Estimators
//! With `w_i = π(a_i|x_i) / p_i` the importance weight of sample `i` (logged action `a_i`,
//! propensity `p_i`, reward `r_i`) and `q̂(x, a)` a reward model:
//!
//! | name | per-sample term / formula | interval (95%) |
//! |---|---|---|
//! | logged value | `r_i` | normal, on the terms |
//! | IPS | `w_i r_i` | normal, on the terms |
//! | SNIPS | `Σ w_i r_i / Σ w_i` | delta method: terms `w_i (r_i − V̂) / w̄` |
//! | DM | `Σ_a π(a|x_i) q̂(x_i, a)` | normal, on the terms (ignores the model's own error) |
//! | DR | `Σ_a π(a|x_i) q̂(x_i, a) + w_i (r_i − q̂(x_i, a_i))` | normal, on the terms |
//!
//! "Normal, on the terms" is `mean ± 1.96 · sd / √n` with the sample standard deviation of the
//! per-sample terms; no bootstrap. Intervals are not clipped to `[0, 1]`: an interval that
//! leaves it says the sample is too small for the estimator. The effective sample size is
//! `(Σ w)² / Σ w²`.
//!
//! The reward model is fitted with K-fold cross-fitting ([`reward_model`]): the prediction for
//! a sample comes from a model that never saw it, so DR's correction term is not biased by
//! the model memorising the sample's own reward.
//!
//! # Assumptions
//! - **Correct propensities**: `p_i` is the exact probability the serving policy took `a_i`
//!   given `x_i`, and the policy depended on nothing but the logged state (no unmeasured
//!   confounding). A wrong propensity biases IPS/SNIPS/DR; the mean weight (≈ 1 when
//!   propensities are right and the logger covers the target) is reported as a check.
//! - **Overlap**: wherever `π(a|x) > 0`, the logging policy had `μ(a|x) > 0`. Where it did not
//!   (deterministic decisions, or `reject`, never explored), IPS and SNIPS silently count the
//!   target's action as worth 0 or as average, and DR falls back to the reward model's
//!   extrapolation; [`support`] counts those samples and [`evaluate`] warns.
//! - **i.i.d. samples, stationarity**: decisions do not change the states of later requests,
//!   and the reward function did not drift during the logging window.
//!
//! # Use
//! A serving configuration is deterministic, so the candidate is a one-hot target:
//! `evaluate(&samples, &|s: &State| one_hot(decider.decide(s).action), &OpeOptions::default())`
//! with [`decider_core::Decider`] built from the candidate model and rule table; the report
//! serialises to the JSON `decider ope --json` prints.
//!
//! # Layout
//! - [`estimators`]: the formulas above on per-sample rows.
//! - [`reward_model`]: the per-action reward models and cross-fitting.
//! - [`reward_trees`]: the boosted-tree reward model.
//! - [`support`]: overlap diagnostics.
//! - [`learn`]: how training from logs works, and the labelling step.
//! - [`synthetic`]: a bandit environment with known answers, for tests and the peer check.

pub mod estimators;
pub mod learn;
pub mod reward_model;
pub mod reward_trees;
pub mod support;
pub mod synthetic;

use decider_core::{Action, State, NUM_ACTIONS};
use serde::Serialize;
use std::io::Write;
use thiserror::Error;

pub use estimators::Estimate;
pub use learn::policy_labels;
pub use reward_model::RewardModelKind;
pub use support::Support;

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

/// Options for [`evaluate`] and [`policy_labels`] (checked by [`OpeOptions::check`]).
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

/// Importance-weight summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Weights {
    /// Mean weight (≈ 1 with correct propensities and full overlap).
    pub mean: Estimate,
    /// Largest weight.
    pub max: f64,
    /// Samples whose logged action the target can take (weight > 0).
    pub matched: usize,
}

/// Held-out quality of the reward model on the logged actions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RewardModelFit {
    /// The family used.
    pub kind: RewardModelKind,
    /// Cross-fitting folds.
    pub folds: usize,
    /// Mean squared error of `q̂(x_i, a_i)` against `r_i`, out of fold.
    pub mse: f64,
    /// The same for the per-action mean reward of the training folds (the baseline).
    pub mse_action_mean: f64,
}

/// Result of [`evaluate`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpeReport {
    /// Usable samples.
    pub n: usize,
    /// Samples refused, by reason.
    pub refused: Refused,
    /// Mean observed reward of the logging policy.
    pub logged_value: Estimate,
    /// Inverse propensity scoring.
    pub ips: Estimate,
    /// Self-normalised IPS; `None` when no logged action has target probability > 0.
    pub snips: Option<Estimate>,
    /// Doubly robust.
    pub dr: Estimate,
    /// Direct method (reward model only).
    pub dm: Estimate,
    /// Effective sample size `(Σ w)² / Σ w²`.
    pub ess: f64,
    /// Importance-weight summary.
    pub weights: Weights,
    /// Overlap diagnostics.
    pub support: Support,
    /// Reward model quality.
    pub reward_model: RewardModelFit,
    /// Everything that limits what the numbers mean, in words.
    pub warnings: Vec<String>,
}

/// Estimates the value of `target` on `samples`; see the module docs.
///
/// # Errors
/// An option out of range, or fewer than two usable samples.
pub fn evaluate(
    samples: &[Sample],
    target: &dyn TargetPolicy,
    opts: &OpeOptions,
) -> Result<OpeReport, OpeError> {
    evaluate_rows(samples, target, opts).map(|(report, _)| report)
}

/// [`evaluate`], also returning the per-sample rows (for [`write_dump`]).
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_rows(
    samples: &[Sample],
    target: &dyn TargetPolicy,
    opts: &OpeOptions,
) -> Result<(OpeReport, Vec<Row>), OpeError> {
    opts.check()?;
    let (usable, targets, refused) = validate(samples, target);
    if usable.len() < 2 {
        return Err(OpeError::TooFewSamples {
            usable: usable.len(),
            total: samples.len(),
            refused,
        });
    }
    let fitted = reward_model::cross_fit(&usable, opts);
    let rows: Vec<Row> = usable
        .iter()
        .zip(&targets)
        .zip(fitted.q_hat.iter().zip(&fitted.fold))
        .map(|((s, &t), (&q, &fold))| Row {
            state: s.state,
            action: s.action,
            propensity: s.propensity,
            reward: s.reward,
            target: t,
            q_hat: q,
            fold,
        })
        .collect();
    let support = support::analyse(&rows, opts.min_cell_support);
    let report = OpeReport {
        n: rows.len(),
        refused,
        logged_value: estimators::logged(&rows),
        ips: estimators::ips(&rows),
        snips: estimators::snips(&rows),
        dr: estimators::dr(&rows),
        dm: estimators::dm(&rows),
        ess: estimators::ess(&rows),
        weights: estimators::weights(&rows),
        support,
        reward_model: RewardModelFit {
            kind: opts.reward_model,
            folds: opts.folds,
            mse: fitted.mse,
            mse_action_mean: fitted.mse_action_mean,
        },
        warnings: Vec::new(),
    };
    let warnings = support::warnings(&report, opts);
    Ok((OpeReport { warnings, ..report }, rows))
}

/// Splits samples into usable ones (with the target's distribution) and refused counts.
fn validate(
    samples: &[Sample],
    target: &dyn TargetPolicy,
) -> (Vec<Sample>, Vec<[f64; NUM_ACTIONS]>, Refused) {
    let (logged, mut refused) = usable(samples);
    let mut kept = Vec::with_capacity(logged.len());
    let mut targets = Vec::with_capacity(logged.len());
    for s in logged {
        let t = target.distribution(&s.state);
        if is_distribution(&t) {
            kept.push(s);
            targets.push(t);
        } else {
            refused.target += 1;
        }
    }
    (kept, targets, refused)
}

/// The samples with a propensity in `(0, 1]` and a reward in `[0, 1]`, and the refused counts.
fn usable(samples: &[Sample]) -> (Vec<Sample>, Refused) {
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

/// Whether `p` is a distribution: finite, non-negative, summing to 1 within 1e-6. It is used
/// as given, not renormalised, so a target equal to the logging policy reproduces the logged
/// propensities bit for bit (weight exactly 1).
fn is_distribution(p: &[f64; NUM_ACTIONS]) -> bool {
    p.iter().all(|v| v.is_finite() && *v >= 0.0) && (p.iter().sum::<f64>() - 1.0).abs() <= 1e-6
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

#[cfg(test)]
mod tests;
