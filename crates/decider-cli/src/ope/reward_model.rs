//! The reward model `q̂(x, a)` of the direct method and of DR, and its cross-fitting.
//!
//! # Models
//! One model per action, fitted on the samples that logged that action
//! ([`RewardModelKind`]):
//! - **trees** (the default): the shipped boosted-tree family as a binary classifier of
//!   reward 1 on encoder v1's 16 features ([`super::reward_trees`]). It learns interactions
//!   (a load threshold that matters for one region only), which is what labels for training
//!   from logs need, and on simulated logs it gives DR the smallest standard error.
//! - **logistic**: regularised logistic regression (cross-entropy against rewards in
//!   `[0, 1]`), fitted by Newton's method with an L2 penalty on every coefficient but the
//!   intercept, on [`features`]: encoder v1's 16 features plus step indicators — load ≥ 0.1,
//!   0.2, … 1.0; success rate below 0.1, … 0.9, 0.95, 0.98; queue ≥ 10, 20, … 100 — one-hots
//!   of the request type, night (hours 0–5) and afternoon peak (14–20), and request class
//!   (light 0–2, batch 3, heavy 4–5) × region. Additive in the logit over piecewise-constant
//!   effects: convex, fast, and blind to most interactions.
//! - **action mean**: the mean reward of the action. DR then reduces to IPS with a control
//!   variate, close to SNIPS.
//!
//! DR stays consistent when the reward model is wrong (only its variance grows), and the
//! direct method does not; the held-out MSE against the per-action mean is reported so a poor
//! fit is visible.
//!
//! Degenerate cases: an action whose training rewards are all equal (e.g. `reject`, always 0)
//! is predicted as that constant; an action with too few rows for trees
//! ([`super::reward_trees::MIN_ROWS`]) as its mean; an action absent from the training folds
//! as the training folds' mean reward over all actions (pure extrapolation, flagged by the
//! overlap diagnostics when the target uses it).
//!
//! # Cross-fitting
//! Samples are shuffled with the options' seed into K folds; for each fold, the models are
//! fitted on the other K − 1 and predict the held-out fold. Every sample's `q̂` therefore comes
//! from a model that never saw its reward.

use super::options::{OpeOptions, RewardModelKind};
use super::reward_trees;
use super::sample::Sample;
use crate::rng::Rng;
use decider_core::{encode, State, FEATURE_DIM, NUM_ACTIONS};

const LOAD_STEPS: [f64; 10] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const SUCCESS_STEPS: [f64; 11] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98];
const QUEUE_STEPS: [f64; 10] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
const TYPES: usize = 6;
const CLASSES: usize = 3;
const REGIONS: usize = 10;

/// Length of [`features`]: intercept, encoder v1, steps, one-hots, class × region.
pub const DIM: usize = 1
    + FEATURE_DIM
    + LOAD_STEPS.len()
    + SUCCESS_STEPS.len()
    + QUEUE_STEPS.len()
    + TYPES
    + 2
    + CLASSES * REGIONS;

/// The reward model's inputs for a state (index 0 is the intercept, 1).
pub fn features(s: &State) -> [f64; DIM] {
    let mut x = [0.0; DIM];
    x[0] = 1.0;
    x[1..=FEATURE_DIM].copy_from_slice(&encode(s));
    let mut i = 1 + FEATURE_DIM;
    let mut step = |on: bool| {
        x[i] = f64::from(u8::from(on));
        i += 1;
    };
    LOAD_STEPS.iter().for_each(|&t| step(s.current_load >= t));
    SUCCESS_STEPS
        .iter()
        .for_each(|&t| step(s.recent_success_rate < t));
    QUEUE_STEPS.iter().for_each(|&t| step(s.queue_depth >= t));
    (0..TYPES).for_each(|t| step(usize::from(s.request_type) == t));
    step(s.hour <= 5);
    step((14..=20).contains(&s.hour));
    let class = match s.request_type {
        0..=2 => 0,
        3 => 1,
        _ => 2,
    };
    let region = usize::from(s.region_id).min(REGIONS - 1);
    x[i + class * REGIONS + region] = 1.0;
    x
}

/// A fitted model for one action.
#[derive(Debug, Clone, PartialEq)]
enum ActionModel {
    Constant(f64),
    Logistic(Vec<f64>),
    Trees(Box<reward_trees::TreeModel>),
}

/// One model per action.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardModel {
    per_action: Vec<ActionModel>,
}

impl RewardModel {
    /// Fits the per-action models on `samples` (any subset; see the module docs for the
    /// degenerate cases). `seed` drives the trees' validation split.
    pub fn fit(samples: &[&Sample], kind: RewardModelKind, l2: f64, seed: u64) -> RewardModel {
        let pooled = if samples.is_empty() {
            0.0
        } else {
            samples.iter().map(|s| s.reward).sum::<f64>() / samples.len() as f64
        };
        let per_action = (0..NUM_ACTIONS)
            .map(|a| {
                let mine: Vec<&Sample> = samples
                    .iter()
                    .copied()
                    .filter(|s| s.action.index() == a)
                    .collect();
                let Some(first) = mine.first() else {
                    return ActionModel::Constant(pooled);
                };
                if mine.iter().all(|s| s.reward == first.reward) {
                    return ActionModel::Constant(first.reward);
                }
                let mean = mine.iter().map(|s| s.reward).sum::<f64>() / mine.len() as f64;
                match kind {
                    RewardModelKind::ActionMean => ActionModel::Constant(mean),
                    RewardModelKind::Trees if mine.len() < reward_trees::MIN_ROWS => {
                        ActionModel::Constant(mean)
                    }
                    RewardModelKind::Trees => ActionModel::Trees(Box::new(
                        reward_trees::TreeModel::fit(&mine, seed.wrapping_add(a as u64)),
                    )),
                    RewardModelKind::Logistic => {
                        let x: Vec<[f64; DIM]> = mine.iter().map(|s| features(&s.state)).collect();
                        let y: Vec<f64> = mine.iter().map(|s| s.reward).collect();
                        ActionModel::Logistic(fit_logistic(&x, &y, l2))
                    }
                }
            })
            .collect();
        RewardModel { per_action }
    }

    /// Predicted reward of every action in `s`.
    pub fn predict(&self, s: &State) -> [f64; NUM_ACTIONS] {
        let x = features(s);
        std::array::from_fn(|a| match &self.per_action[a] {
            ActionModel::Constant(c) => *c,
            ActionModel::Logistic(beta) => sigmoid(dot(beta, &x)),
            ActionModel::Trees(t) => t.predict(s),
        })
    }
}

/// The mean of the K reward models cross-fitting fits ([`cross_fit`]: the same folds and
/// seeds), each on all samples but one fold. Averaging them (bagging) cuts the variance of
/// the trees' `q̂` wherever the logs are thin, which is where an `argmax q̂` label flips.
#[derive(Debug, Clone, PartialEq)]
pub struct Bagged {
    members: Vec<RewardModel>,
}

impl Bagged {
    /// Fits the `opts.folds` members on `samples`.
    pub fn fit(samples: &[&Sample], opts: &OpeOptions) -> Bagged {
        let fold = assign_folds(samples.len(), opts.folds, opts.seed);
        Bagged {
            members: fit_folds(samples, &fold, opts, opts.reward_model),
        }
    }

    /// The members' mean predicted reward of every action in `s`.
    pub fn predict(&self, s: &State) -> [f64; NUM_ACTIONS] {
        let mut q = [0.0; NUM_ACTIONS];
        for m in &self.members {
            for (sum, p) in q.iter_mut().zip(m.predict(s)) {
                *sum += p;
            }
        }
        q.map(|sum| sum / self.members.len().max(1) as f64)
    }
}

/// Out-of-fold predictions for every sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossFit {
    /// `q̂(x_i, a)` for every action, from the model that held sample `i` out.
    pub q_hat: Vec<[f64; NUM_ACTIONS]>,
    /// The fold each sample was held out in.
    pub fold: Vec<usize>,
    /// Out-of-fold mean squared error of `q̂(x_i, a_i)`.
    pub mse: f64,
    /// The same for the training folds' per-action mean reward.
    pub mse_action_mean: f64,
}

/// Fold of each of `n` samples: a seeded shuffle dealt round-robin, so fold sizes differ by
/// at most one. With fewer samples than folds, some folds are empty.
pub fn assign_folds(n: usize, folds: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    Rng::new(seed).shuffle(&mut order);
    let mut fold = vec![0; n];
    for (k, &i) in order.iter().enumerate() {
        fold[i] = k % folds;
    }
    fold
}

/// One model of `kind` per fold, fitted on the samples of every other fold (seeded by the
/// fold), in fold order.
fn fit_folds(
    samples: &[&Sample],
    fold: &[usize],
    opts: &OpeOptions,
    kind: RewardModelKind,
) -> Vec<RewardModel> {
    (0..opts.folds)
        .map(|k| {
            let train: Vec<&Sample> = samples
                .iter()
                .zip(fold)
                .filter(|(_, &f)| f != k)
                .map(|(s, _)| *s)
                .collect();
            let seed = opts.seed.wrapping_add(1000 * k as u64);
            RewardModel::fit(&train, kind, opts.l2, seed)
        })
        .collect()
}

/// Cross-fits the reward model (module docs).
pub fn cross_fit(samples: &[Sample], opts: &OpeOptions) -> CrossFit {
    let n = samples.len();
    let fold = assign_folds(n, opts.folds, opts.seed);
    let refs: Vec<&Sample> = samples.iter().collect();
    let models = fit_folds(&refs, &fold, opts, opts.reward_model);
    let means = fit_folds(&refs, &fold, opts, RewardModelKind::ActionMean);
    let q_hat: Vec<[f64; NUM_ACTIONS]> = samples
        .iter()
        .zip(&fold)
        .map(|(s, &k)| models[k].predict(&s.state))
        .collect();
    let base: Vec<f64> = samples
        .iter()
        .zip(&fold)
        .map(|(s, &k)| means[k].predict(&s.state)[s.action.index()])
        .collect();
    let mse_of = |pred: &dyn Fn(usize) -> f64| {
        (0..n)
            .map(|i| (pred(i) - samples[i].reward).powi(2))
            .sum::<f64>()
            / n as f64
    };
    let mse = mse_of(&|i| q_hat[i][samples[i].action.index()]);
    let mse_action_mean = mse_of(&|i| base[i]);
    CrossFit {
        q_hat,
        fold,
        mse,
        mse_action_mean,
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// `log(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// Penalised objective: summed cross-entropy plus `l2/2 · |β[1..]|²`.
fn objective(x: &[[f64; DIM]], y: &[f64], beta: &[f64], l2: f64) -> f64 {
    let ce: f64 = x
        .iter()
        .zip(y)
        .map(|(xi, &yi)| {
            let z = dot(beta, xi);
            softplus(z) - yi * z
        })
        .sum();
    ce + 0.5 * l2 * beta[1..].iter().map(|b| b * b).sum::<f64>()
}

/// Newton's method with step halving; the problem is strictly convex (`l2 > 0`, plus a tiny
/// ridge on the intercept), so it converges to the unique optimum from any start.
fn fit_logistic(x: &[[f64; DIM]], y: &[f64], l2: f64) -> Vec<f64> {
    let mean = (y.iter().sum::<f64>() / y.len() as f64).clamp(1e-6, 1.0 - 1e-6);
    let mut beta = vec![0.0; DIM];
    beta[0] = (mean / (1.0 - mean)).ln();
    let mut obj = objective(x, y, &beta, l2);
    for _ in 0..100 {
        let mut g = vec![0.0; DIM];
        let mut h = vec![0.0; DIM * DIM];
        for (xi, &yi) in x.iter().zip(y) {
            let p = sigmoid(dot(&beta, xi));
            let (r, w) = (p - yi, (p * (1.0 - p)).max(1e-12));
            for j in 0..DIM {
                if xi[j] == 0.0 {
                    continue;
                }
                g[j] += r * xi[j];
                let wj = w * xi[j];
                // Lower triangle only; mirrored below.
                for k in 0..=j {
                    h[j * DIM + k] += wj * xi[k];
                }
            }
        }
        for j in 0..DIM {
            let pen = if j == 0 { 1e-9 } else { l2 };
            g[j] += if j == 0 { 0.0 } else { l2 * beta[j] };
            h[j * DIM + j] += pen;
            for k in 0..j {
                h[k * DIM + j] = h[j * DIM + k];
            }
        }
        let Some(step) = cholesky_solve(&mut h, &g) else {
            break;
        };
        let mut t = 1.0;
        let mut improved = false;
        for _ in 0..40 {
            let cand: Vec<f64> = beta.iter().zip(&step).map(|(b, s)| b - t * s).collect();
            let c = objective(x, y, &cand, l2);
            if c <= obj {
                let gain = obj - c;
                beta = cand;
                obj = c;
                improved = gain > 1e-10 * (1.0 + obj.abs());
                break;
            }
            t *= 0.5;
        }
        if !improved {
            break;
        }
    }
    beta
}

/// Solves `H s = g` for symmetric positive definite `H` (overwritten by its Cholesky factor);
/// `None` if `H` is not numerically positive definite.
fn cholesky_solve(h: &mut [f64], g: &[f64]) -> Option<Vec<f64>> {
    let n = g.len();
    for j in 0..n {
        let mut d = h[j * n + j];
        for k in 0..j {
            d -= h[j * n + k] * h[j * n + k];
        }
        if d.is_nan() || d <= 0.0 {
            return None;
        }
        let d = d.sqrt();
        h[j * n + j] = d;
        for i in j + 1..n {
            let mut s = h[i * n + j];
            for k in 0..j {
                s -= h[i * n + k] * h[j * n + k];
            }
            h[i * n + j] = s / d;
        }
    }
    let mut z = vec![0.0; n];
    for i in 0..n {
        let s = g[i] - (0..i).map(|k| h[i * n + k] * z[k]).sum::<f64>();
        z[i] = s / h[i * n + i];
    }
    let mut s = vec![0.0; n];
    for i in (0..n).rev() {
        let t = z[i] - (i + 1..n).map(|k| h[k * n + i] * s[k]).sum::<f64>();
        s[i] = t / h[i * n + i];
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::sample_state;
    use decider_core::Action;

    fn states(n: usize, seed: u64) -> Vec<State> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| sample_state(&mut rng, false)).collect()
    }

    #[test]
    fn features_have_the_documented_layout() {
        let s = State {
            request_type: 4,
            region_id: 7,
            current_load: 0.86,
            recent_success_rate: 0.93,
            queue_depth: 55.0,
            hour: 15,
        };
        let x = features(&s);
        assert_eq!(x[0], 1.0);
        assert_eq!(&x[1..=FEATURE_DIM], &encode(&s)[..]);
        let steps = &x[1 + FEATURE_DIM..];
        // Load ≥ 0.1..0.8 (8 on), success < 0.95 and 0.98 (2 on), queue ≥ 10..50 (5 on).
        assert_eq!(steps[..10].iter().sum::<f64>(), 8.0);
        assert_eq!(steps[10..21].iter().sum::<f64>(), 2.0);
        assert_eq!(steps[21..31].iter().sum::<f64>(), 5.0);
        assert_eq!(steps[31 + 4], 1.0, "type 4 one-hot");
        assert_eq!((steps[37], steps[38]), (0.0, 1.0), "not night, peak");
        assert_eq!(steps[39 + 2 * REGIONS + 7], 1.0, "heavy × region 7");
        assert_eq!(
            x.iter().sum::<f64>(),
            1.0 + encode(&s).iter().sum::<f64>() + 18.0
        );
    }

    #[test]
    fn logistic_recovers_a_logistic_reward() {
        // Reward probability linear in the logit of two features: the fit should match it.
        let xs = states(20_000, 1);
        let truth = |s: &State| {
            sigmoid(
                -1.0 + 2.5 * s.recent_success_rate.min(1.0)
                    - 1.5 * f64::from(u8::from(s.current_load >= 0.7)),
            )
        };
        let mut rng = Rng::new(2);
        let samples: Vec<Sample> = xs
            .iter()
            .map(|s| Sample {
                state: *s,
                action: Action::RouteB,
                propensity: 1.0,
                reward: f64::from(u8::from(rng.chance(truth(s)))),
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = RewardModel::fit(&refs, RewardModelKind::Logistic, 1.0, 0);
        let test = states(2000, 3);
        let mae = test
            .iter()
            .map(|s| (m.predict(s)[1] - truth(s)).abs())
            .sum::<f64>()
            / test.len() as f64;
        assert!(mae < 0.03, "mean absolute error {mae}");
        // No route_a / route_c / reject samples: the pooled mean.
        let pooled = refs.iter().map(|s| s.reward).sum::<f64>() / refs.len() as f64;
        assert_eq!(m.predict(&test[0])[0], pooled);
    }

    #[test]
    fn constant_rewards_give_a_constant_model_and_fractional_rewards_fit() {
        let xs = states(300, 4);
        let samples: Vec<Sample> = xs
            .iter()
            .enumerate()
            .map(|(i, s)| Sample {
                state: *s,
                action: if i % 2 == 0 {
                    Action::Reject
                } else {
                    Action::RouteA
                },
                propensity: 1.0,
                reward: if i % 2 == 0 {
                    0.0
                } else {
                    0.25 + 0.5 * s.recent_success_rate.min(1.0)
                },
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = RewardModel::fit(&refs, RewardModelKind::Logistic, 1.0, 0);
        for s in &xs[..20] {
            let q = m.predict(s);
            assert_eq!(q[3], 0.0);
            let want = 0.25 + 0.5 * s.recent_success_rate.min(1.0);
            assert!((q[0] - want).abs() < 0.05, "{} vs {want}", q[0]);
        }
    }

    #[test]
    fn folds_are_balanced_and_deterministic() {
        let f = assign_folds(103, 5, 9);
        assert_eq!(f, assign_folds(103, 5, 9));
        assert_ne!(f, assign_folds(103, 5, 10));
        let mut counts = [0; 5];
        f.iter().for_each(|&k| counts[k] += 1);
        assert_eq!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap(),
            1
        );
    }

    #[test]
    fn cholesky_solves_a_known_system() {
        let mut h = vec![4.0, 2.0, 2.0, 3.0];
        let s = cholesky_solve(&mut h, &[2.0, 1.0]).unwrap();
        assert!((s[0] - 0.5).abs() < 1e-12 && s[1].abs() < 1e-12, "{s:?}");
        assert_eq!(cholesky_solve(&mut [0.0, 0.0, 0.0, 0.0], &[1.0, 1.0]), None);
    }
}
