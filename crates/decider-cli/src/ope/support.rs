//! Overlap diagnostics: where the logs cannot say anything about the target policy, and the
//! warnings [`super::evaluate`] attaches to its numbers.
//!
//! The logs give the propensity of the logged action only, so the logging policy's support
//! is known exactly in one case and estimated in another:
//! - **exact**: a propensity of 1 means every other action had probability 0 in that state;
//!   target mass on another action there is unsupported for certain;
//! - **by cell**: an action logged fewer than `min_cell_support` times in the state's
//!   (request_type, region) cell is taken as never tried in states like this one.

use super::{OpeOptions, OpeReport, Row};
use decider_core::{Action, State, NUM_ACTIONS};
use serde::Serialize;

/// Propensities at least this close to 1 are deterministic decisions.
pub const DETERMINISTIC: f64 = 1.0 - 1e-9;
/// Target probabilities below this count as no mass.
const MASS: f64 = 1e-12;
/// Two-sided 99.9% standard-normal quantile.
const Z999: f64 = 3.290_526_731_491_926;
const TYPES: usize = 6;
const REGIONS: usize = 10;

/// What the logs support of the target policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Support {
    /// Samples with propensity 1.
    pub deterministic: usize,
    /// Samples where the target puts mass on an action other than the logged one although
    /// the logged propensity was 1.
    pub unsupported_samples: usize,
    /// Mean target mass on such actions (share of the target's value the logs cannot see).
    pub unsupported_mass: f64,
    /// Samples where the target puts mass on an action logged fewer than
    /// `min_cell_support` times in the state's (request_type, region) cell.
    pub unlogged_cell_samples: usize,
    /// Mean target mass on such actions.
    pub unlogged_cell_mass: f64,
}

fn cell(s: &State) -> usize {
    usize::from(s.request_type).min(TYPES - 1) * REGIONS + usize::from(s.region_id).min(REGIONS - 1)
}

/// Logged count of each action in each (request_type, region) cell.
pub fn cell_counts<'a>(
    logged: impl Iterator<Item = (&'a State, Action)>,
) -> Vec<[usize; NUM_ACTIONS]> {
    let mut counts = vec![[0usize; NUM_ACTIONS]; TYPES * REGIONS];
    for (s, a) in logged {
        counts[cell(s)][a.index()] += 1;
    }
    counts
}

/// Whether action index `a` was logged at least `min` times in `s`'s cell.
pub fn cell_supports(counts: &[[usize; NUM_ACTIONS]], s: &State, a: usize, min: usize) -> bool {
    counts[cell(s)][a] >= min
}

/// Computes the overlap diagnostics.
pub fn analyse(rows: &[Row], min_cell_support: usize) -> Support {
    let counts = cell_counts(rows.iter().map(|r| (&r.state, r.action)));
    let mut s = Support {
        deterministic: 0,
        unsupported_samples: 0,
        unsupported_mass: 0.0,
        unlogged_cell_samples: 0,
        unlogged_cell_mass: 0.0,
    };
    for r in rows {
        let logged = r.action.index();
        if r.propensity >= DETERMINISTIC {
            s.deterministic += 1;
            let off: f64 = (0..NUM_ACTIONS)
                .filter(|&a| a != logged)
                .map(|a| r.target[a])
                .sum();
            if off > MASS {
                s.unsupported_samples += 1;
                s.unsupported_mass += off;
            }
        }
        let unseen: f64 = (0..NUM_ACTIONS)
            .filter(|&a| !cell_supports(&counts, &r.state, a, min_cell_support))
            .map(|a| r.target[a])
            .sum();
        if unseen > MASS {
            s.unlogged_cell_samples += 1;
            s.unlogged_cell_mass += unseen;
        }
    }
    let n = rows.len().max(1) as f64;
    s.unsupported_mass /= n;
    s.unlogged_cell_mass /= n;
    s
}

fn pct(k: usize, n: usize) -> f64 {
    100.0 * k as f64 / n.max(1) as f64
}

/// The warnings for a report (everything else in it already computed).
pub fn warnings(r: &OpeReport, opts: &OpeOptions) -> Vec<String> {
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
