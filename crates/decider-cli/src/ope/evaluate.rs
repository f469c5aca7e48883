//! The evaluation: cross-fitted reward predictions, the estimates, the overlap diagnostics
//! and the warnings, in one report.

use super::estimators::{self, Estimate, Weights};
use super::options::{OpeError, OpeOptions, RewardModelKind};
use super::reward_model;
use super::sample::{usable, Refused, Row, Sample};
use super::support::{self, Support};
use super::target::{is_distribution, TargetPolicy};
use decider_core::NUM_ACTIONS;
use serde::Serialize;

/// Two-sided 99.9% standard-normal quantile.
const Z999: f64 = 3.290_526_731_491_926;

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
    /// DR's interval without the reward model's extrapolation to actions the logger could
    /// not take ([`estimators::dr_bounds`]); `None` when the target takes none.
    pub dr_bounds: Option<[f64; 2]>,
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

/// [`evaluate`], also returning the per-sample rows (for [`super::write_dump`]).
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
        dr_bounds: estimators::dr_bounds(&rows),
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
    let warnings = warnings(&report, opts);
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

fn pct(k: usize, n: usize) -> f64 {
    100.0 * k as f64 / n.max(1) as f64
}

/// The warnings for a report (everything else in it already computed).
fn warnings(r: &OpeReport, opts: &OpeOptions) -> Vec<String> {
    let mut w = Vec::new();
    let n = r.n;
    let s = &r.support;
    if r.refused.total() > 0 {
        w.push(format!(
            "{} of {} samples refused ({})",
            r.refused.total(),
            n + r.refused.total(),
            r.refused
        ));
    }
    let all_deterministic = s.deterministic == n;
    if all_deterministic {
        w.push(format!(
            "no exploration: every propensity is 1, so the candidate is only observed where it \
             agrees with the logged action ({} of {n} samples, {:.1}%); IPS counts the other \
             samples as reward 0, SNIPS assumes they pay like the matched ones, DR fills them in \
             with the reward model: all three are 'matched only' estimates, valid only where the \
             candidate agrees with the logged policy",
            r.weights.matched,
            pct(r.weights.matched, n)
        ));
    } else if s.unsupported_samples > 0 {
        w.push(format!(
            "no support: on {} of {n} samples ({:.1}%) the logged action had propensity 1 but \
             the candidate puts probability on another action ({:.1}% of its mass overall); \
             IPS/SNIPS cannot see those actions and DR extrapolates them with the reward model",
            s.unsupported_samples,
            pct(s.unsupported_samples, n),
            100.0 * s.unsupported_mass
        ));
    }
    if s.unlogged_cell_samples > 0 {
        w.push(format!(
            "unlogged actions: on {} of {n} samples ({:.1}%) the candidate puts probability on \
             an action logged fewer than {} time(s) in that request_type × region cell \
             ({:.1}% of its mass overall); estimates there rest on extrapolation",
            s.unlogged_cell_samples,
            pct(s.unlogged_cell_samples, n),
            opts.min_cell_support,
            100.0 * s.unlogged_cell_mass
        ));
    }
    if r.snips.is_none() {
        w.push(
            "the candidate never takes a logged action (all weights 0): IPS is 0 by \
             construction, SNIPS is undefined, DR equals the direct method"
                .into(),
        );
    } else if r.ess < opts.min_ess || r.ess < opts.min_ess_fraction * n as f64 {
        w.push(format!(
            "small effective sample size: {:.1} of {n} samples ({:.2}%, largest weight {:.1}); \
             IPS and SNIPS rest on few samples, prefer DR and read the intervals as optimistic",
            r.ess,
            100.0 * r.ess / n as f64,
            r.weights.max
        ));
    }
    // With overlap and correct propensities E[w] = 1; a mean weight clearly away from 1 points
    // at wrong propensities or missing support (skipped when exploration is off: then the
    // mean weight is just the share of matched samples, already reported).
    // A 99.9% band keeps false alarms rare on healthy logs.
    let m = r.weights.mean;
    if !all_deterministic && (m.value - 1.0).abs() > Z999 * m.se {
        w.push(format!(
            "mean importance weight {:.3} (standard error {:.3}) is not 1: propensities may be \
             wrong, or the logging policy does not cover the candidate",
            m.value, m.se
        ));
    }
    if r.reward_model.mse > r.reward_model.mse_action_mean {
        w.push(format!(
            "the reward model predicts held-out rewards no better than the per-action mean \
             (MSE {:.4} vs {:.4}): DM is unreliable and DR gains little over IPS",
            r.reward_model.mse, r.reward_model.mse_action_mean
        ));
    }
    w
}
