//! A bandit environment with known answers, for the estimators' tests and the peer check:
//! states from [`crate::simulate::sample_state`], a known Bernoulli reward per (state, action),
//! known logging policies with exact propensities, and exact policy values.
//!
//! Reward: `reject` pays 0 (the product's default). A route pays with probability
//! `0.15 + 0.45 · success_rate`, plus 0.3 on the state's [`preferred_route`], minus 0.25 with
//! a full queue (≥ 100) and minus 0.1 at load ≥ 0.95, clamped to `[0.02, 0.98]`.

use super::sample::Sample;
use super::target::{one_hot, TargetPolicy};
use crate::rng::Rng;
use crate::simulate::{home_action, label, sample_state};
use decider_core::{Action, State, NUM_ACTIONS};

/// The route that pays best: the simulator's label, or the home cluster where the simulator
/// would reject.
pub fn preferred_route(s: &State) -> Action {
    match label(s) {
        Action::Reject => home_action(s),
        a => a,
    }
}

/// Probability that action `a` in state `s` earns reward 1 (module docs).
pub fn reward_probability(s: &State, a: Action) -> f64 {
    if a == Action::Reject {
        return 0.0;
    }
    let mut p = 0.15 + 0.45 * s.recent_success_rate.clamp(0.0, 1.0);
    if a == preferred_route(s) {
        p += 0.3;
    }
    if s.queue_depth >= 100.0 {
        p -= 0.25;
    }
    if s.current_load >= 0.95 {
        p -= 0.1;
    }
    p.clamp(0.02, 0.98)
}

/// The greedy policy of the ε-greedy logger: reject where the simulator rejects, otherwise
/// the home cluster (no spill-over: it is the policy a better one should beat).
pub fn greedy(s: &State) -> Action {
    match label(s) {
        Action::Reject => Action::Reject,
        _ => home_action(s),
    }
}

/// A logging policy with exact propensities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Logging {
    /// Uniform over the three routes, everywhere.
    UniformRoutes,
    /// [`greedy`], with probability ε replaced by a uniform route; never explores into or
    /// out of `reject`: a logger with a support gap wherever greedy rejects (the Worker
    /// explores out of a model's `reject`; this one does not, to test what a gap does).
    EpsilonGreedy(f64),
    /// [`greedy`] always (no exploration: every propensity is 1).
    Greedy,
}

impl TargetPolicy for Logging {
    fn distribution(&self, s: &State) -> [f64; NUM_ACTIONS] {
        match *self {
            Logging::UniformRoutes => [1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0],
            Logging::Greedy => one_hot(greedy(s)),
            Logging::EpsilonGreedy(eps) => match greedy(s) {
                Action::Reject => one_hot(Action::Reject),
                g => {
                    let mut p = [eps / 3.0, eps / 3.0, eps / 3.0, 0.0];
                    p[g.index()] += 1.0 - eps;
                    p
                }
            },
        }
    }
}

/// `n` logged decisions: states, actions drawn from `logging` with their exact propensities,
/// Bernoulli rewards. Same seed, same samples.
pub fn simulate_logs(n: usize, seed: u64, logging: Logging) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let state = sample_state(&mut rng, false);
            let dist = logging.distribution(&state);
            let action = Action::ALL[rng.weighted(&dist)];
            let reward = f64::from(u8::from(rng.chance(reward_probability(&state, action))));
            Sample {
                state,
                action,
                propensity: dist[action.index()],
                reward,
            }
        })
        .collect()
}

/// Exact value of `target` on these states: the mean over states of
/// `Σ_a π(a|x) · P(reward 1 | x, a)`.
pub fn true_value(samples: &[Sample], target: &dyn TargetPolicy) -> f64 {
    samples
        .iter()
        .map(|s| {
            let p = target.distribution(&s.state);
            Action::ALL
                .iter()
                .map(|&a| p[a.index()] * reward_probability(&s.state, a))
                .sum::<f64>()
        })
        .sum::<f64>()
        / samples.len() as f64
}

/// Test target: [`preferred_route`] always (routes only).
pub fn best(s: &State) -> [f64; NUM_ACTIONS] {
    one_hot(preferred_route(s))
}

/// Test target: [`preferred_route`] but `reject` where [`greedy`] rejects (so an ε-greedy
/// logger covers it).
pub fn best_or_reject(s: &State) -> [f64; NUM_ACTIONS] {
    match greedy(s) {
        Action::Reject => one_hot(Action::Reject),
        _ => best(s),
    }
}

/// Test target: 0.7 on [`preferred_route`], 0.15 on each other route (routes only).
pub fn soft(s: &State) -> [f64; NUM_ACTIONS] {
    let mut p = [0.15, 0.15, 0.15, 0.0];
    p[preferred_route(s).index()] = 0.7;
    p
}

/// Test target: [`soft`], but `reject` where [`greedy`] rejects.
pub fn soft_or_reject(s: &State) -> [f64; NUM_ACTIONS] {
    match greedy(s) {
        Action::Reject => one_hot(Action::Reject),
        _ => soft(s),
    }
}
