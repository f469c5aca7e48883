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
//!   (deterministic decisions: rules, default, holdout), IPS and SNIPS silently count the
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
//! - `sample`: [`Sample`] (a logged decision with its reward), [`Row`] (a usable sample with
//!   its estimation terms, the `--dump` format), [`Refused`].
//! - `target`: the policy under evaluation, [`TargetPolicy`] and [`one_hot`].
//! - `options`: [`OpeOptions`], checked once, and [`OpeError`].
//! - `evaluate`: [`evaluate`] itself and its [`OpeReport`] with the warnings.
//! - [`estimators`]: the formulas above on per-sample rows.
//! - [`reward_model`]: the per-action reward models and cross-fitting.
//! - [`reward_trees`]: the boosted-tree reward model.
//! - [`support`]: overlap diagnostics.
//! - [`learn`]: how training from logs works, and the labelling step.
//! - [`synthetic`]: a bandit environment with known answers, for tests and the peer check.

pub mod estimators;
mod evaluate;
pub mod gate;
pub mod learn;
mod options;
pub mod reward_model;
pub mod reward_trees;
mod sample;
pub mod support;
pub mod synthetic;
mod target;

pub use estimators::{Estimate, Weights};
pub use evaluate::{evaluate, evaluate_rows, OpeReport, RewardModelFit};
pub use learn::{label, policy_labels, LabelOptions, Labels};
pub use options::{OpeError, OpeOptions, RewardModelKind};
pub use sample::{write_dump, Refused, Row, Sample};
pub use support::Support;
pub use target::{one_hot, TargetPolicy};

#[cfg(test)]
mod tests;
