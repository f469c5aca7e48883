//! The artifact: the JSON form a trained model is written, reviewed and validated in.
//!
//! These types are the file's schema (field order is the order in the file). They are
//! re-exported from [`crate::model`], which validates an artifact and serves it.

use crate::actions::NUM_ACTIONS;
use crate::features::{Features, ENCODER_VERSION};
use crate::state::State;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Version of the artifact layout understood by this build.
pub const FORMAT_VERSION: u32 = 1;

/// Most units a hidden layer may have (the compact form counts them in a byte).
pub const MAX_HIDDEN: usize = 255;

/// Why an artifact was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ArtifactError {
    /// Not parseable as an artifact (bad JSON, missing key, wrong type).
    #[error("artifact is not valid: {0}")]
    Json(String),
    /// A number that does not fit an f64 (JSON has no NaN; `1e999` is how infinity sneaks in).
    #[error("artifact holds a non-finite number at {0}")]
    NonFinite(String),
    /// Another artifact layout.
    #[error("artifact format_version is {got}, this build reads {FORMAT_VERSION}")]
    FormatVersion {
        /// Version found.
        got: u32,
    },
    /// The action list differs from [`crate::actions::ACTIONS`].
    #[error("artifact action list {got:?} differs from this build's actions {expected:?} (order matters)")]
    Actions {
        /// Actions found in the artifact.
        got: Vec<String>,
        /// This build's actions.
        expected: Vec<String>,
    },
    /// The encoder version differs from [`ENCODER_VERSION`].
    #[error(
        "artifact encoder_version is {got}, this build's encoder is version {ENCODER_VERSION}"
    )]
    EncoderVersion {
        /// Version found.
        got: u32,
    },
    /// Shapes or indices are inconsistent.
    #[error("artifact shape error: {0}")]
    Shape(String),
    /// Bytes that are not a compact model of this build's layout (see [`crate::compact`]).
    #[error("compact model is not valid: {0}")]
    Compact(String),
    /// A compact form that carries the build-time refusal of its artifact, and why.
    #[error("{0}")]
    Refused(String),
    /// A calibration or threshold value out of its range.
    #[error("artifact {field} must be {range}, got {got}")]
    Range {
        /// Field name.
        field: &'static str,
        /// Valid range.
        range: &'static str,
        /// Value found.
        got: f64,
    },
}

/// The serialised artifact. Field order here is the order in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// Artifact layout version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// Identifies the trained model; logged with every decision.
    pub model_version: String,
    /// Encoder the model was trained with.
    pub encoder_version: u32,
    /// Action names in model output order.
    pub actions: Vec<String>,
    /// Feature vector length.
    pub feature_dim: usize,
    /// Model weights.
    pub model: Ensemble,
    /// Confidence calibration.
    pub calibration: Calibration,
    /// Confidence at or above which the model's action is used.
    pub threshold: f64,
    /// Range of each raw state field seen in training (out-of-distribution check).
    pub feature_ranges: FeatureRanges,
    /// Training record: data hash, rows, parameters, metrics. Free-form, not used in serving.
    pub training: serde_json::Value,
}

/// Gradient-boosted trees, softmax over per-action margins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ensemble {
    /// Model family; `"gbdt"`.
    pub kind: String,
    /// Initial margin per action.
    pub base_score: Vec<f64>,
    /// A linear base, when the model was trained with one: before the trees, the margin of
    /// action `k` gains `x[f] * linear[f][k]` for every feature `f`, in feature order. One
    /// row per feature. Trees cut the feature space parallel to its axes, so a boundary
    /// that mixes features (load against queue depth, say) costs them a staircase of
    /// splits; a linear base draws it in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<Vec<[f64; NUM_ACTIONS]>>,
    /// A hidden layer, when the model was trained with a network base: after the linear
    /// base, the margin of action `k` gains `tanh(weights[j] · x + bias[j]) * output[j][k]`
    /// for every unit `j`, in unit order. It bends the boundaries a linear base draws
    /// straight (a reject that overrides the clusters' scores, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
    /// Trees; each leaf adds one value to the margin of every action.
    pub trees: Vec<Tree>,
}

/// One multi-output regression tree in struct-of-arrays form. Node 0 is the root. A node
/// with `feature[i] < 0` is a leaf adding `value[i][k]` to the margin of action `k`;
/// otherwise go to `left[i]` when `x[feature[i]] <= threshold[i]`, else to `right[i]`.
/// Children come after their parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tree {
    /// Split feature per node, -1 for leaves.
    pub feature: Vec<i32>,
    /// Split threshold per node (0 for leaves).
    pub threshold: Vec<f64>,
    /// Left child per node (0 for leaves).
    pub left: Vec<u32>,
    /// Right child per node (0 for leaves).
    pub right: Vec<u32>,
    /// Leaf values per node, one per action in action order (zeros for internal nodes).
    pub value: Vec<[f64; NUM_ACTIONS]>,
}

/// Adds a linear base to margins `m`: `x[f] * rows[f][k]` to action `k`, in feature order
/// (the order that defines the model's numbers). Not inlined: most models have no linear
/// base, and the served wasm should not carry a copy per caller of `Model::margins`.
#[inline(never)]
pub fn add_linear(m: &mut [f64; NUM_ACTIONS], rows: &[[f64; NUM_ACTIONS]], x: &Features) {
    for (xf, row) in x.iter().zip(rows) {
        m.iter_mut().zip(row).for_each(|(a, w)| *a += xf * w);
    }
}

/// A hidden unit's activation: tanh, from the `libm` crate on every target, so that a
/// hidden layer's margins are bit-identical in the CLI and in the Worker's wasm.
pub fn activation(z: f64) -> f64 {
    libm::tanh(z)
}

/// A layer of tanh units over the features (see [`Ensemble::hidden`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hidden {
    /// Per unit: its weight on each feature.
    pub weights: Vec<[f64; crate::features::FEATURE_DIM]>,
    /// Per unit: its bias.
    pub bias: Vec<f64>,
    /// Per unit: what its activation adds to each action's margin.
    pub output: Vec<[f64; NUM_ACTIONS]>,
}

impl Hidden {
    /// Adds the layer's contribution to margins `m` (in unit order). Not inlined, like
    /// [`add_linear`].
    #[inline(never)]
    pub fn add(&self, m: &mut [f64; NUM_ACTIONS], x: &Features) {
        for ((w, b), out) in self.weights.iter().zip(&self.bias).zip(&self.output) {
            let z = w.iter().zip(x).fold(*b, |acc, (wf, xf)| acc + wf * xf);
            let h = activation(z);
            m.iter_mut().zip(out).for_each(|(a, o)| *a += h * o);
        }
    }
}

impl Ensemble {
    /// The margins of `x` as defined above, in f64: base score, linear base, hidden layer,
    /// trees, in that order. The reference the trainer and the reward models compute with (the served
    /// model walks a faster layout, with leaves as the compact form stores them).
    ///
    /// # Panics
    /// On an ensemble that does not validate, as [`Tree::leaf`].
    pub fn margins(&self, x: &Features) -> [f64; NUM_ACTIONS] {
        let mut m = [0.0; NUM_ACTIONS];
        m.iter_mut()
            .zip(&self.base_score)
            .for_each(|(a, b)| *a = *b);
        if let Some(rows) = &self.linear {
            add_linear(&mut m, rows, x);
        }
        if let Some(h) = &self.hidden {
            h.add(&mut m, x);
        }
        for t in &self.trees {
            m.iter_mut().zip(t.leaf(x)).for_each(|(a, b)| *a += b);
        }
        m
    }
}

impl Tree {
    /// The leaf values `x` reaches, walked node by node as defined above: the reference
    /// definition of a tree (the served model walks a faster layout of the same trees).
    ///
    /// # Panics
    /// On a tree that does not validate (a child index or feature out of range); every
    /// loaded artifact has been validated.
    pub fn leaf(&self, x: &Features) -> &[f64; NUM_ACTIONS] {
        let mut i = 0;
        while self.feature[i] >= 0 {
            i = if x[self.feature[i] as usize] <= self.threshold[i] {
                self.left[i] as usize
            } else {
                self.right[i] as usize
            };
        }
        &self.value[i]
    }
}

/// Confidence calibration: probabilities are `softmax(margin / temperature)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// `"temperature"`.
    pub method: CalibrationMethod,
    /// Temperature, > 0. 1 means uncalibrated.
    pub temperature: f64,
}

/// Calibration methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationMethod {
    /// Temperature scaling fitted on validation data.
    Temperature,
}

/// `[min, max]` of each raw state field in the training data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureRanges {
    /// Range of `request_type`.
    pub request_type: [f64; 2],
    /// Range of `region_id`.
    pub region_id: [f64; 2],
    /// Range of `current_load`.
    pub current_load: [f64; 2],
    /// Range of `recent_success_rate`.
    pub recent_success_rate: [f64; 2],
    /// Range of `queue_depth`.
    pub queue_depth: [f64; 2],
    /// Range of `hour`.
    pub hour: [f64; 2],
}

impl FeatureRanges {
    /// Ranges that admit nothing; widen with [`FeatureRanges::include`].
    pub fn empty() -> FeatureRanges {
        let e = [f64::INFINITY, f64::NEG_INFINITY];
        FeatureRanges {
            request_type: e,
            region_id: e,
            current_load: e,
            recent_success_rate: e,
            queue_depth: e,
            hour: e,
        }
    }

    /// Each field's name and range, in field order.
    pub(crate) fn pairs(&self) -> [(&'static str, [f64; 2]); 6] {
        [
            ("request_type", self.request_type),
            ("region_id", self.region_id),
            ("current_load", self.current_load),
            ("recent_success_rate", self.recent_success_rate),
            ("queue_depth", self.queue_depth),
            ("hour", self.hour),
        ]
    }

    /// Widens the ranges to include `s`.
    pub fn include(&mut self, s: &State) {
        let grow = |r: &mut [f64; 2], v: f64| {
            r[0] = r[0].min(v);
            r[1] = r[1].max(v);
        };
        grow(&mut self.request_type, f64::from(s.request_type));
        grow(&mut self.region_id, f64::from(s.region_id));
        grow(&mut self.current_load, s.current_load);
        grow(&mut self.recent_success_rate, s.recent_success_rate);
        grow(&mut self.queue_depth, s.queue_depth);
        grow(&mut self.hour, f64::from(s.hour));
    }

    /// The first raw field of `s` outside its training range, if any.
    pub fn outlier(&self, s: &State) -> Option<&'static str> {
        self.pairs().into_iter().find_map(|(name, [lo, hi])| {
            let v = s.field(name).unwrap_or(f64::NAN);
            (!(lo..=hi).contains(&v)).then_some(name)
        })
    }
}

impl Artifact {
    /// Whether every leaf value rounds to a finite f32: then the compact form stores (and
    /// every model serves) leaf values as f32, else as f64. Values of splits are never
    /// served and do not count.
    pub fn leaves_fit_f32(&self) -> bool {
        self.model.trees.iter().all(|t| {
            t.feature
                .iter()
                .zip(&t.value)
                .filter(|(f, _)| **f < 0)
                .all(|(_, v)| v.iter().all(|x| (*x as f32).is_finite()))
        })
    }
}
