//! Overlap diagnostics: where the logs cannot say anything about the target policy.
//!
//! The logs give the propensity of the logged action only, so the logging policy's support
//! is known exactly in one case and estimated in another:
//! - **exact**: a propensity of 1 means every other action had probability 0 in that state;
//!   target mass on another action there is unsupported for certain;
//! - **by cell**: an action logged fewer than `min_cell_support` times in the state's
//!   (request_type, region) cell is taken as never tried in states like this one.

use super::sample::Row;
use decider_core::{Action, State, NUM_ACTIONS};
use serde::Serialize;

/// Propensities at least this close to 1 are deterministic decisions.
pub const DETERMINISTIC: f64 = 1.0 - 1e-9;
/// Target probabilities below this count as no mass.
const MASS: f64 = 1e-12;
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

/// The target's mass on actions the logger could not take in this row: every action but the
/// logged one when the logged propensity was 1, else none.
pub fn unsupported_mass(r: &Row) -> f64 {
    if r.propensity < DETERMINISTIC {
        return 0.0;
    }
    let logged = r.action.index();
    (0..NUM_ACTIONS)
        .filter(|&a| a != logged)
        .map(|a| r.target[a])
        .sum()
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
        if r.propensity >= DETERMINISTIC {
            s.deterministic += 1;
            let off = unsupported_mass(r);
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
