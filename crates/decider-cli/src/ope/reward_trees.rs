//! The boosted-tree reward model: for one action, the shipped tree family ([`crate::gbdt`])
//! trained as a binary classifier of "reward 1" on encoder v1's features, with the hour as
//! itself and the region ranked by its mean reward in place of the hour's sine and cosine
//! ([`TreeModel`]). A reward model is never served, so its inputs need not be the encoder's.
//!
//! The booster is a softmax over the four action slots; here only slots 0 (reward 0) and 1
//! (reward 1) ever occur as labels, slots 2 and 3 keep a vanishing prior, and the predicted
//! reward is `p₁ / (p₀ + p₁)`. Trees learn interactions the additive logistic model cannot
//! (a load threshold that matters for one region's traffic only), which is what training
//! from logs needs. Rewards strictly between 0 and 1 are rounded to a label at random with
//! probability equal to the reward (seeded), which keeps the expected label equal to the
//! reward. Early stopping uses a seeded 20% split of the action's rows.

use super::sample::Sample;
use crate::gbdt::{self, GbdtParams};
use crate::rng::Rng;
use decider_core::model::{softmax, Ensemble};
use decider_core::state::NUM_REGIONS;
use decider_core::{encode, Features, State};

/// Fewer rows than this for an action: too few to split and stop early; the caller uses the
/// mean reward instead.
pub const MIN_ROWS: usize = 100;

/// Booster settings for reward models: smaller trees and stronger leaves than the policy
/// model's, since a reward is a noisy 0/1 signal rather than a near-deterministic label.
fn params() -> GbdtParams {
    GbdtParams {
        learning_rate: 0.1,
        max_rounds: 300,
        max_leaves: 15,
        max_depth: 6,
        min_samples_leaf: 20,
        l2: 1.0,
        patience: 15,
        max_bins: 255,
        base: gbdt::Base::Priors,
    }
}

/// One action's reward model: the ensemble and the category orders its features use.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeModel {
    ensemble: Ensemble,
    /// Each region's rank by its mean reward in the training rows (0 = lowest), scaled to
    /// `[0, 1]`.
    region_rank: [f64; NUM_REGIONS],
}

/// Each category's rank by its smoothed mean reward in `rows`, scaled to `[0, 1]`; ties and
/// unseen categories by id. Sorting categories by their mean target and splitting on the
/// order finds the best binary partition of them in one split (Fisher 1958; LightGBM's
/// categorical splits), which one-hot columns reach only one category at a time.
fn rank_by_mean<const N: usize>(rows: &[&Sample], of: impl Fn(&Sample) -> usize) -> [f64; N] {
    let prior = rows.iter().map(|s| s.reward).sum::<f64>() / rows.len().max(1) as f64;
    let mut sum = [0.0; N];
    let mut n = [0.0; N];
    for s in rows {
        let c = of(s).min(N - 1);
        sum[c] += s.reward;
        n[c] += 1.0;
    }
    // Ten pseudo-rows at the overall mean keep a rare category from jumping to an end.
    let mean: [f64; N] = std::array::from_fn(|c| (sum[c] + 10.0 * prior) / (n[c] + 10.0));
    let mut order: [usize; N] = std::array::from_fn(|c| c);
    order.sort_by(|&a, &b| mean[a].total_cmp(&mean[b]).then(a.cmp(&b)));
    let mut rank = [0.0; N];
    for (r, &c) in order.iter().enumerate() {
        rank[c] = r as f64 / (N - 1) as f64;
    }
    rank
}

/// A reward model's inputs for a state: encoder v1's features, except that the hour's sine
/// and cosine give way to the hour itself (one split isolates a block of hours) and to the
/// region's rank in `region_rank` ([`rank_by_mean`]).
fn features(s: &State, region_rank: &[f64; NUM_REGIONS]) -> Features {
    let mut x = encode(s);
    x[4] = f64::from(s.hour) / 23.0;
    x[5] = region_rank[usize::from(s.region_id).min(NUM_REGIONS - 1)];
    x
}

impl TreeModel {
    /// Fits one action's reward classifier on `rows` (all of that action, at least
    /// [`MIN_ROWS`]).
    pub fn fit(rows: &[&Sample], seed: u64) -> TreeModel {
        let region_rank = rank_by_mean(rows, |s| usize::from(s.state.region_id));
        let mut rng = Rng::new(seed);
        let labelled: Vec<(Features, usize)> = rows
            .iter()
            .map(|s| {
                (
                    features(&s.state, &region_rank),
                    usize::from(rng.chance(s.reward)),
                )
            })
            .collect();
        let mut order: Vec<usize> = (0..labelled.len()).collect();
        rng.shuffle(&mut order);
        let cut = labelled.len() / 5;
        let pick = |idx: &[usize]| -> (Vec<Features>, Vec<usize>) {
            idx.iter().map(|&i| labelled[i]).unzip()
        };
        let (vx, vy) = pick(&order[..cut]);
        let (x, y) = pick(&order[cut..]);
        // The parameters above are in range by construction.
        let valid = params().check().unwrap_or_else(|e| unreachable!("{e}"));
        let ensemble = gbdt::fit(&x, &y, Some((&vx, &vy)), &valid, |_| {}).ensemble;
        TreeModel {
            ensemble,
            region_rank,
        }
    }

    /// Predicted probability of reward 1 in `s`.
    pub fn predict(&self, s: &State) -> f64 {
        let p = softmax(&self.ensemble.margins(&features(s, &self.region_rank)), 1.0);
        let sum = p[0] + p[1];
        if sum > 0.0 {
            p[1] / sum
        } else {
            0.5
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::sample_state;
    use decider_core::{Action, State};

    #[test]
    fn trees_learn_an_interaction() {
        // Reward high for regions 0–3 at low load and for the others at high load: an
        // interaction no additive model represents.
        let truth = |s: &State| {
            let low = s.current_load < 0.6;
            if (s.region_id <= 3) == low {
                0.85
            } else {
                0.2
            }
        };
        let mut rng = Rng::new(5);
        let samples: Vec<Sample> = (0..8000)
            .map(|_| {
                let state = sample_state(&mut rng, false);
                let reward = f64::from(u8::from(rng.chance(truth(&state))));
                Sample {
                    state,
                    action: Action::RouteA,
                    propensity: 1.0,
                    reward,
                }
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let e = TreeModel::fit(&refs, 1);
        assert_eq!(e, TreeModel::fit(&refs, 1), "deterministic");
        let mut rng = Rng::new(6);
        let test: Vec<State> = (0..2000).map(|_| sample_state(&mut rng, false)).collect();
        let mae = test
            .iter()
            .map(|s| (e.predict(s) - truth(s)).abs())
            .sum::<f64>()
            / test.len() as f64;
        assert!(mae < 0.06, "mean absolute error {mae}");
    }

    #[test]
    fn regions_rank_by_their_mean_reward() {
        // Regions 2, 5 and 9 pay; the rank puts them together at the top, whatever their ids.
        let mut rng = Rng::new(8);
        let samples: Vec<Sample> = (0..3000)
            .map(|_| {
                let state = sample_state(&mut rng, false);
                let p = if [2, 5, 9].contains(&state.region_id) {
                    0.9
                } else {
                    0.3
                };
                Sample {
                    state,
                    action: Action::RouteC,
                    propensity: 1.0,
                    reward: f64::from(u8::from(rng.chance(p))),
                }
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let rank: [f64; NUM_REGIONS] = rank_by_mean(&refs, |s| usize::from(s.state.region_id));
        let mut top: Vec<usize> = (0..NUM_REGIONS).filter(|&r| rank[r] >= 7.0 / 9.0).collect();
        top.sort_unstable();
        assert_eq!(top, vec![2, 5, 9], "{rank:?}");
        // A region no row came from sits at the overall mean, between the two groups.
        let few: Vec<&Sample> = refs
            .iter()
            .copied()
            .filter(|s| s.state.region_id != 0)
            .collect();
        let rank: [f64; NUM_REGIONS] = rank_by_mean(&few, |s| usize::from(s.state.region_id));
        assert!(rank[0] > 0.0 && rank[0] < 7.0 / 9.0, "{rank:?}");
    }

    #[test]
    fn fractional_rewards_keep_their_mean() {
        let mut rng = Rng::new(7);
        let samples: Vec<Sample> = (0..2000)
            .map(|_| Sample {
                state: sample_state(&mut rng, false),
                action: Action::RouteB,
                propensity: 1.0,
                reward: 0.3,
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let e = TreeModel::fit(&refs, 2);
        let q = e.predict(&samples[0].state);
        assert!((q - 0.3).abs() < 0.05, "{q}");
    }
}
