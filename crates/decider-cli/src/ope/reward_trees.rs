//! The boosted-tree reward model: for one action, the shipped tree family ([`crate::gbdt`])
//! trained as a binary classifier of "reward 1" on encoder v1's features.
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
use decider_core::{encode, Features};

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

/// Fits one action's reward classifier on `rows` (all of that action, at least
/// [`MIN_ROWS`]).
pub fn fit(rows: &[&Sample], seed: u64) -> Ensemble {
    let mut rng = Rng::new(seed);
    let labelled: Vec<(Features, usize)> = rows
        .iter()
        .map(|s| (encode(&s.state), usize::from(rng.chance(s.reward))))
        .collect();
    let mut order: Vec<usize> = (0..labelled.len()).collect();
    rng.shuffle(&mut order);
    let cut = labelled.len() / 5;
    let pick =
        |idx: &[usize]| -> (Vec<Features>, Vec<usize>) { idx.iter().map(|&i| labelled[i]).unzip() };
    let (vx, vy) = pick(&order[..cut]);
    let (x, y) = pick(&order[cut..]);
    // The parameters above are in range by construction.
    let valid = params().check().unwrap_or_else(|e| unreachable!("{e}"));
    gbdt::fit(&x, &y, Some((&vx, &vy)), &valid, |_| {}).ensemble
}

/// Predicted probability of reward 1.
pub fn predict(e: &Ensemble, x: &Features) -> f64 {
    let p = softmax(&e.margins(x), 1.0);
    let s = p[0] + p[1];
    if s > 0.0 {
        p[1] / s
    } else {
        0.5
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
        let e = fit(&refs, 1);
        assert_eq!(e, fit(&refs, 1), "deterministic");
        let mut rng = Rng::new(6);
        let test: Vec<State> = (0..2000).map(|_| sample_state(&mut rng, false)).collect();
        let mae = test
            .iter()
            .map(|s| (predict(&e, &encode(s)) - truth(s)).abs())
            .sum::<f64>()
            / test.len() as f64;
        assert!(mae < 0.06, "mean absolute error {mae}");
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
        let e = fit(&refs, 2);
        let q = predict(&e, &encode(&samples[0].state));
        assert!((q - 0.3).abs() < 0.05, "{q}");
    }
}
