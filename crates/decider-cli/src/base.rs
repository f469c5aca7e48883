//! What the boosted trees start from, when not from the class priors: a softmax regression
//! on the features (`linear`), or that and a layer of tanh units (`network`).
//!
//! Trees cut the feature space parallel to its axes. A policy whose boundaries mix features
//! (each cluster's score from load, queue depth and hour; a reject that overrides them) costs
//! them a staircase of splits, which stops where the training data stops; a base that draws
//! such boundaries directly carries them into traffic that has shifted. The trees then fit
//! what the base leaves. Both fits are deterministic (a fixed seed, fixed order).

use crate::rng::Rng;
use decider_core::model::{activation, add_linear, softmax, Hidden};
use decider_core::{Features, FEATURE_DIM, NUM_ACTIONS};

/// What the trees boost from. The default, for `decider train` and `decider train --logs`
/// alike, is [`Base::Network`]: on policies whose boundaries mix features it is far ahead of
/// the trees alone, in shifted traffic most; on an axis-aligned policy (the simulator's) a
/// little behind (`model/peers.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    /// The log class priors: the trees alone.
    Priors,
    /// A softmax regression on the features.
    Linear,
    /// A softmax regression and a layer of 16 tanh units; the default.
    #[default]
    Network,
}

impl Base {
    /// Whether this is [`Base::Priors`], which an artifact's `training.params` leaves out (an
    /// artifact without `base` was boosted from the priors).
    pub fn is_priors(&self) -> bool {
        *self == Base::Priors
    }
}

/// Hidden units of the network base.
pub const UNITS: usize = 16;
/// Passes over the training rows.
const EPOCHS: usize = 200;
/// Rows per Adam step.
const BATCH: usize = 512;
/// Adam's first step size, decayed linearly to 0 over the run.
const STEP: f64 = 0.02;
/// L2 penalty on every weight (not the biases), per row of mean log-loss.
const L2: f64 = 1e-6;

/// A fitted base: per-action biases, one row of per-action weights per feature, and for
/// [`Base::Network`] the hidden layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// Per-action bias (the ensemble's `base_score`).
    pub bias: [f64; NUM_ACTIONS],
    /// The linear base, one row per feature.
    pub linear: Vec<[f64; NUM_ACTIONS]>,
    /// The hidden layer.
    pub hidden: Option<Hidden>,
}

/// The parameters as one flat vector, with their layout.
struct Layout {
    units: usize,
}

impl Layout {
    // [bias (A) | linear (F×A) | hidden weights (U×F) | hidden bias (U) | outputs (U×A)]
    fn len(&self) -> usize {
        NUM_ACTIONS + FEATURE_DIM * NUM_ACTIONS + self.units * (FEATURE_DIM + 1 + NUM_ACTIONS)
    }
    fn linear(&self) -> usize {
        NUM_ACTIONS
    }
    fn weights(&self) -> usize {
        self.linear() + FEATURE_DIM * NUM_ACTIONS
    }
    fn hbias(&self) -> usize {
        self.weights() + self.units * FEATURE_DIM
    }
    fn outputs(&self) -> usize {
        self.hbias() + self.units
    }
}

/// Fits `base` (not [`Base::Priors`]) on (x, y) by minibatch Adam from a seeded start.
pub fn fit(base: Base, x: &[Features], y: &[usize]) -> Fitted {
    let units = if base == Base::Network { UNITS } else { 0 };
    let l = Layout { units };
    let mut rng = Rng::new(0x5eed_ba5e);
    let mut w = vec![0.0; l.len()];
    // Hidden weights start small and random (all-zero units would stay identical); the
    // output and linear weights start at zero.
    let scale = 1.0 / (FEATURE_DIM as f64).sqrt();
    for v in &mut w[l.weights()..l.hbias()] {
        *v = rng.normal() * scale;
    }
    let (mut m1, mut m2) = (vec![0.0; l.len()], vec![0.0; l.len()]);
    let n = x.len();
    let mut order: Vec<usize> = (0..n).collect();
    let total = (EPOCHS * n.div_ceil(BATCH)).max(1) as f64;
    let mut t = 0usize;
    let mut g = vec![0.0; l.len()];
    let mut h = vec![0.0; units];
    for _ in 0..EPOCHS {
        // Fisher–Yates with the seeded generator.
        for i in (1..n).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for batch in order.chunks(BATCH) {
            t += 1;
            g.iter_mut().for_each(|v| *v = 0.0);
            for &i in batch {
                let row = &x[i];
                let mut m: [f64; NUM_ACTIONS] = std::array::from_fn(|k| w[k]);
                add_linear(&mut m, as_rows(&w[l.linear()..l.weights()]), row);
                for (j, hj) in h.iter_mut().enumerate() {
                    let ws = &w[l.weights() + j * FEATURE_DIM..][..FEATURE_DIM];
                    let z = ws
                        .iter()
                        .zip(row)
                        .fold(w[l.hbias() + j], |a, (p, q)| a + p * q);
                    *hj = activation(z);
                    let out = &w[l.outputs() + j * NUM_ACTIONS..][..NUM_ACTIONS];
                    m.iter_mut().zip(out).for_each(|(a, o)| *a += *hj * o);
                }
                let mut d = softmax(&m, 1.0);
                d[y[i]] -= 1.0;
                for k in 0..NUM_ACTIONS {
                    g[k] += d[k];
                    for f in 0..FEATURE_DIM {
                        g[l.linear() + f * NUM_ACTIONS + k] += d[k] * row[f];
                    }
                }
                for (j, hj) in h.iter().enumerate() {
                    let out = l.outputs() + j * NUM_ACTIONS;
                    let mut back = 0.0;
                    for k in 0..NUM_ACTIONS {
                        g[out + k] += d[k] * hj;
                        back += d[k] * w[out + k];
                    }
                    let dz = back * (1.0 - hj * hj);
                    g[l.hbias() + j] += dz;
                    for f in 0..FEATURE_DIM {
                        g[l.weights() + j * FEATURE_DIM + f] += dz * row[f];
                    }
                }
            }
            let rate = STEP * (1.0 - t as f64 / total);
            let (c1, c2) = (1.0 - 0.9f64.powi(t as i32), 1.0 - 0.999f64.powi(t as i32));
            let is_bias = |p: usize| p < l.linear() || (l.hbias()..l.outputs()).contains(&p);
            for p in 0..l.len() {
                let penalty = if is_bias(p) { 0.0 } else { L2 * w[p] };
                let d = g[p] / batch.len() as f64 + penalty;
                m1[p] = 0.9 * m1[p] + 0.1 * d;
                m2[p] = 0.999 * m2[p] + 0.001 * d * d;
                w[p] -= rate * (m1[p] / c1) / ((m2[p] / c2).sqrt() + 1e-8);
            }
        }
    }
    Fitted {
        bias: std::array::from_fn(|k| w[k]),
        linear: as_rows(&w[l.linear()..l.weights()]).to_vec(),
        hidden: (units > 0).then(|| Hidden {
            weights: (0..units)
                .map(|j| std::array::from_fn(|f| w[l.weights() + j * FEATURE_DIM + f]))
                .collect(),
            bias: w[l.hbias()..l.outputs()].to_vec(),
            output: (0..units)
                .map(|j| std::array::from_fn(|k| w[l.outputs() + j * NUM_ACTIONS + k]))
                .collect(),
        }),
    }
}

/// A flat slice of `FEATURE_DIM × NUM_ACTIONS` weights as per-feature rows.
fn as_rows(w: &[f64]) -> &[[f64; NUM_ACTIONS]] {
    let (rows, rest) = w.as_chunks::<NUM_ACTIONS>();
    debug_assert!(rest.is_empty());
    rows
}
