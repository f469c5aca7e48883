//! The decision model: artifact format, validation at load, and inference.
//!
//! The artifact is JSON. It records the action list and encoder version it
//! was trained with; [`Model::from_json`] refuses one whose action list (order included)
//! or encoder version differs from this build's, whose shapes are inconsistent, or that
//! holds a non-finite number. Every model is served from its compact form
//! ([`crate::compact`]): loading JSON compiles the artifact and reads the bytes back, as
//! the Worker reads the bytes embedded at build time. Inference is a gradient-boosted tree
//! ensemble (one tree per action per round, softmax over the summed margins),
//! temperature-calibrated: no dependency beyond serde, deterministic, and small enough to
//! run in the Worker's wasm in microseconds.

use crate::actions::{Action, ACTIONS, NUM_ACTIONS};
use crate::features::{Features, ENCODER_VERSION, FEATURE_DIM};

pub use crate::artifact::{
    activation, add_linear, Artifact, ArtifactError, Calibration, CalibrationMethod, Ensemble,
    FeatureRanges, Hidden, Tree, FORMAT_VERSION, MAX_HIDDEN,
};

/// A probability per action, in [`ACTIONS`] order.
pub type Probabilities = [f64; NUM_ACTIONS];

/// Flattened tree node for fast traversal.
#[derive(Debug, Clone, Copy)]
///
/// Laid out for speed: 16 bytes, and the two children of a split are adjacent, right child
/// first, so the next node is `first + (x <= threshold)` — no branch per level, and NaN
/// (for which `x <= threshold` is false) goes right as the artifact defines. A leaf loops
/// onto itself (it tests the always-zero padding feature [`PAD_FEATURE`] against −∞ and
/// stays at `first`, its own index), so trees can be walked a fixed number of steps,
/// several at once, without asking whether each has arrived: independent walks overlap in
/// the CPU instead of waiting on one another's loads.
struct Node {
    /// Split threshold; −∞ for leaves.
    threshold: f64,
    /// Split feature; [`PAD_FEATURE`] for leaves.
    feature: u16,
    /// Splits: index of the right child (`!(x <= threshold)`); the left child follows it.
    /// Leaves: the leaf's own index.
    first: u32,
}

/// Width of the padded feature vector walked by [`Model::margins`] (a power of two, so a
/// mask instead of a bounds check keeps feature indices in range).
const PADDED: usize = 2 * FEATURE_DIM;
/// A feature index that is always 0 in the padded vector; leaves test it.
const PAD_FEATURE: u16 = FEATURE_DIM as u16;
/// Trees walked together in [`Model::margins`].
const LANES: usize = 16;
/// Trees walked together in the groups that follow the last full group of [`LANES`].
const SMALL_LANES: usize = 4;

/// Trees `start..start + len` walked together, `steps` steps (the depth of the deepest).
#[derive(Debug, Clone, Copy)]
struct Group {
    start: usize,
    len: usize,
    steps: u32,
}

const _: () = assert!(PADDED.is_power_of_two() && (PAD_FEATURE as usize) < PADDED);

/// A validated, ready-to-run model.
#[derive(Debug, Clone)]
pub struct Model {
    /// The artifact's `model_version`.
    version: String,
    /// The artifact's calibrated threshold.
    threshold: f64,
    /// The artifact's calibration temperature.
    temperature: f64,
    /// The artifact's training ranges.
    ranges: FeatureRanges,
    /// The artifact's base scores.
    base_score: [f64; NUM_ACTIONS],
    /// The artifact's linear base, one row per feature.
    linear: Option<Box<[[f64; NUM_ACTIONS]; FEATURE_DIM]>>,
    /// The artifact's hidden layer.
    hidden: Option<Hidden>,
    /// All trees' nodes, flattened.
    nodes: Vec<Node>,
    /// Per node: its leaf values for leaves, zeros for splits. Indexed by node, so that a
    /// walk's last node gives its values with one load instead of two (in a running Worker
    /// every load of the model is likely a cache miss: every tree, every decision).
    leaves: Vec<[f64; NUM_ACTIONS]>,
    /// Root node index per tree.
    roots: Vec<u32>,
    /// The trees in walking groups, in tree order: [`LANES`] at a time, and the remainder
    /// [`SMALL_LANES`] at a time, so that a last group of a few trees does not walk 16 lanes.
    groups: Vec<Group>,
}

impl Model {
    /// Validates `a` and lays it out for inference, as it is (no compaction): the one
    /// validation of every loading path.
    pub(crate) fn build(a: &Artifact) -> Result<Model, ArtifactError> {
        if a.format_version != FORMAT_VERSION {
            return Err(ArtifactError::FormatVersion {
                got: a.format_version,
            });
        }
        if a.actions
            .iter()
            .map(String::as_str)
            .ne(ACTIONS.iter().copied())
        {
            return Err(ArtifactError::Actions {
                got: a.actions.clone(),
                expected: ACTIONS.iter().map(|s| s.to_string()).collect(),
            });
        }
        if a.encoder_version != ENCODER_VERSION {
            return Err(ArtifactError::EncoderVersion {
                got: a.encoder_version,
            });
        }
        if a.feature_dim != FEATURE_DIM {
            return Err(ArtifactError::Shape(format!(
                "feature_dim is {}, the encoder produces {FEATURE_DIM}",
                a.feature_dim
            )));
        }
        if a.model.kind != "gbdt" {
            return Err(ArtifactError::Shape(format!(
                "unknown model kind {:?}",
                a.model.kind
            )));
        }
        // The name is built only for a value that is not finite: a network base has hundreds
        // of weights, and this runs at every isolate's start.
        fn finite(v: f64, what: impl FnOnce() -> String) -> Result<(), ArtifactError> {
            if v.is_finite() {
                Ok(())
            } else {
                Err(ArtifactError::NonFinite(what()))
            }
        }
        let t = a.calibration.temperature;
        finite(t, || "calibration.temperature".into())?;
        if !(t > 0.0 && t <= 100.0) {
            return Err(ArtifactError::Range {
                field: "calibration.temperature",
                range: "in (0, 100]",
                got: t,
            });
        }
        finite(a.threshold, || "threshold".into())?;
        if !(0.0..=1.0).contains(&a.threshold) {
            return Err(ArtifactError::Range {
                field: "threshold",
                range: "in [0, 1]",
                got: a.threshold,
            });
        }
        for (name, [lo, hi]) in a.feature_ranges.pairs() {
            finite(lo, || name.into())?;
            finite(hi, || name.into())?;
            if lo > hi {
                return Err(ArtifactError::Shape(format!(
                    "feature_ranges.{name} has min {lo} > max {hi}"
                )));
            }
        }
        if a.model.base_score.len() != NUM_ACTIONS {
            return Err(ArtifactError::Shape(format!(
                "model.base_score has {} values, expected {NUM_ACTIONS}",
                a.model.base_score.len()
            )));
        }
        for (k, v) in a.model.base_score.iter().enumerate() {
            finite(*v, || format!("model.base_score[{k}]"))?;
        }
        let linear = match &a.model.linear {
            None => None,
            Some(rows) => {
                let rows: &[[f64; NUM_ACTIONS]; FEATURE_DIM] =
                    rows.as_slice().try_into().map_err(|_| {
                        ArtifactError::Shape(format!(
                            "model.linear has {} rows, expected one per feature ({FEATURE_DIM})",
                            rows.len()
                        ))
                    })?;
                for (f, row) in rows.iter().enumerate() {
                    for (k, v) in row.iter().enumerate() {
                        finite(*v, || format!("model.linear[{f}][{k}]"))?;
                    }
                }
                Some(Box::new(*rows))
            }
        };
        if let Some(h) = &a.model.hidden {
            let units = h.weights.len();
            if !(1..=MAX_HIDDEN).contains(&units)
                || h.bias.len() != units
                || h.output.len() != units
            {
                return Err(ArtifactError::Shape(format!(
                    "model.hidden has {units} weight rows, {} biases and {} output rows; \
                     expected the same number, 1 to {MAX_HIDDEN}",
                    h.bias.len(),
                    h.output.len()
                )));
            }
            for j in 0..units {
                for (f, v) in h.weights[j].iter().enumerate() {
                    finite(*v, || format!("model.hidden.weights[{j}][{f}]"))?;
                }
                finite(h.bias[j], || format!("model.hidden.bias[{j}]"))?;
                for (k, v) in h.output[j].iter().enumerate() {
                    finite(*v, || format!("model.hidden.output[{j}][{k}]"))?;
                }
            }
        }
        // Every node is placed once: reserving them all spares the copies (and in wasm the
        // memory growth) of growing by doubling.
        let total: usize = a.model.trees.iter().map(|t| t.feature.len()).sum();
        let mut nodes = Vec::with_capacity(total);
        let mut leaves = Vec::with_capacity(total);
        let mut roots = Vec::with_capacity(a.model.trees.len());
        let mut depths = Vec::with_capacity(a.model.trees.len());
        for (ti, tree) in a.model.trees.iter().enumerate() {
            roots.push(nodes.len() as u32);
            depths.push(check_tree(ti, tree, &mut nodes, &mut leaves)?);
        }
        let mut groups = Vec::new();
        let full = depths.len() / LANES * LANES;
        for (start, width) in (0..full).step_by(LANES).map(|s| (s, LANES)).chain(
            (full..depths.len())
                .step_by(SMALL_LANES)
                .map(|s| (s, SMALL_LANES)),
        ) {
            let len = width.min(depths.len() - start);
            let steps = depths[start..start + len]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            groups.push(Group { start, len, steps });
        }
        // Every number is finite, but a sum of them need not be: bound each action's margin
        // by |base score| plus the largest |leaf| of each of its trees, added in inference
        // order (rounding is monotonic, so the real margin never exceeds this bound). A
        // finite bound means inference never overflows to inf and softmax never yields NaN.
        let mut bound: [f64; NUM_ACTIONS] = std::array::from_fn(|c| a.model.base_score[c].abs());
        // Every encoded feature is in [-1, 1] and every tanh too, so the linear base and
        // the hidden layer add at most their |output weights|.
        let outputs = a.model.hidden.iter().flat_map(|h| h.output.iter());
        for row in linear.iter().flat_map(|rows| rows.iter()).chain(outputs) {
            for (b, w) in bound.iter_mut().zip(row) {
                *b += w.abs();
            }
        }
        for t in &a.model.trees {
            for (k, b) in bound.iter_mut().enumerate() {
                let biggest = t
                    .feature
                    .iter()
                    .zip(&t.value)
                    .filter(|(f, _)| **f < 0)
                    .fold(0.0, |acc: f64, (_, v)| acc.max(v[k].abs()));
                *b += biggest;
            }
        }
        if let Some(c) = bound.iter().position(|b| !b.is_finite()) {
            return Err(ArtifactError::NonFinite(format!(
                "the margin of {} (base_score, linear weights and leaf values overflow f64)",
                ACTIONS[c]
            )));
        }
        Ok(Model {
            version: a.model_version.clone(),
            threshold: a.threshold,
            temperature: t,
            ranges: a.feature_ranges,
            base_score: std::array::from_fn(|k| a.model.base_score[k]),
            linear,
            hidden: a.model.hidden.clone(),
            nodes,
            leaves,
            roots,
            groups,
        })
    }

    /// The model version string.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The calibrated threshold recorded in the artifact.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The calibration temperature recorded in the artifact.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Training ranges of the raw state fields.
    pub fn ranges(&self) -> &FeatureRanges {
        &self.ranges
    }

    /// Raw (uncalibrated) margins per action.
    pub fn margins(&self, x: &Features) -> [f64; NUM_ACTIONS] {
        let mut m = self.base_score;
        if let Some(rows) = &self.linear {
            add_linear(&mut m, rows.as_slice(), x);
        }
        if let Some(h) = &self.hidden {
            h.add(&mut m, x);
        }
        let mut xs = [0.0; PADDED];
        xs[..FEATURE_DIM].copy_from_slice(x);
        for g in &self.groups {
            let group = &self.roots[g.start..g.start + g.len];
            if g.len > SMALL_LANES {
                self.walk::<LANES>(&xs, group, g.steps, &mut m);
            } else {
                self.walk::<SMALL_LANES>(&xs, group, g.steps, &mut m);
            }
        }
        m
    }

    /// Walks up to `L` trees (roots `group`) `steps` steps in lockstep and adds their leaf
    /// values to `m`, in tree order.
    #[inline(always)]
    fn walk<const L: usize>(
        &self,
        xs: &[f64; PADDED],
        group: &[u32],
        steps: u32,
        m: &mut [f64; NUM_ACTIONS],
    ) {
        // Spare lanes re-walk the group's first tree and are not added.
        let mut cur = [group[0]; L];
        cur[..group.len()].copy_from_slice(group);
        for _ in 0..steps {
            for c in &mut cur {
                // The mask is a no-op (features are validated) that spares a bounds check.
                let n = &self.nodes[*c as usize];
                let left = xs[usize::from(n.feature) & (PADDED - 1)] <= n.threshold;
                *c = n.first + u32::from(left);
            }
        }
        for &c in &cur[..group.len()] {
            let v = &self.leaves[c as usize];
            m.iter_mut().zip(v).for_each(|(a, b)| *a += b);
        }
    }

    /// Calibrated probabilities per action (they sum to 1).
    pub fn predict(&self, x: &Features) -> Probabilities {
        served_softmax(&self.margins(x), self.temperature)
    }

    /// The most probable action and its calibrated probability.
    pub fn top(&self, x: &Features) -> (Action, f64) {
        argmax(&self.predict(x))
    }
}

/// Parses an artifact's JSON text (no validation beyond its types).
pub fn parse_json(text: &str) -> Result<Artifact, ArtifactError> {
    serde_json::from_slice(text.as_bytes()).map_err(|e| {
        let msg = e.to_string();
        if msg.starts_with("number out of range") {
            ArtifactError::NonFinite(format!("line {} column {}", e.line(), e.column()))
        } else {
            ArtifactError::Json(msg)
        }
    })
}

/// Everything [`Model::from_artifact`] refuses, on the artifact as it is.
///
/// # Errors
/// As [`Model::from_json`].
pub fn validate(a: &Artifact) -> Result<(), ArtifactError> {
    Model::build(a).map(|_| ())
}

/// Validates one tree and appends its nodes (with absolute child indices) to `nodes`, and
/// per node its leaf values (zeros for splits) to `leaves`.
/// Returns the tree's depth (edges on its longest root-to-leaf path).
fn check_tree(
    ti: usize,
    t: &Tree,
    nodes: &mut Vec<Node>,
    leaves: &mut Vec<[f64; NUM_ACTIONS]>,
) -> Result<u32, ArtifactError> {
    let n = t.feature.len();
    let shape = |m: String| ArtifactError::Shape(format!("tree {ti}: {m}"));
    if n == 0 {
        return Err(shape("has no nodes".into()));
    }
    if [
        t.threshold.len(),
        t.left.len(),
        t.right.len(),
        t.value.len(),
    ]
    .iter()
    .any(|&l| l != n)
    {
        return Err(shape(
            "feature, threshold, left, right and value differ in length".into(),
        ));
    }
    let mut parents = vec![0u8; n];
    for i in 0..n {
        let (f, th, v) = (t.feature[i], t.threshold[i], t.value[i]);
        if !th.is_finite() || v.iter().any(|x| !x.is_finite()) {
            return Err(ArtifactError::NonFinite(format!("tree {ti} node {i}")));
        }
        if f < 0 {
            continue;
        }
        if f as usize >= FEATURE_DIM {
            return Err(shape(format!(
                "node {i} splits on feature {f}, beyond {FEATURE_DIM}"
            )));
        }
        let (l, r) = (t.left[i] as usize, t.right[i] as usize);
        // Children strictly after their parent: no cycles, traversal always ends.
        if l <= i || r <= i || l >= n || r >= n {
            return Err(shape(format!(
                "node {i} has children {l},{r} outside {}..{n}",
                i + 1
            )));
        }
        for c in [l, r] {
            parents[c] += 1;
            if parents[c] > 1 || l == r {
                return Err(shape(format!("node {c} has more than one parent")));
            }
        }
    }
    // Re-lay the tree breadth-first so that siblings are adjacent (see `Node`).
    let base = nodes.len();
    let placeholder = Node {
        threshold: f64::NEG_INFINITY,
        feature: PAD_FEATURE,
        first: 0,
    };
    let mut order = vec![(0usize, 0u32)];
    nodes.push(placeholder);
    leaves.push([0.0; NUM_ACTIONS]);
    let mut depth = 0;
    let mut k = 0;
    while k < order.len() {
        let ((i, d), at) = (order[k], base + k);
        depth = depth.max(d);
        if t.feature[i] < 0 {
            nodes[at].first = at as u32;
            leaves[at] = t.value[i];
        } else {
            nodes[at] = Node {
                threshold: t.threshold[i],
                feature: t.feature[i] as u16,
                first: (base + order.len()) as u32,
            };
            for c in [t.right[i], t.left[i]] {
                order.push((c as usize, d + 1));
                nodes.push(placeholder);
                leaves.push([0.0; NUM_ACTIONS]);
            }
        }
        k += 1;
    }
    Ok(depth)
}

/// Softmax of `m / temperature`, numerically stable, with std's `exp`: what the trainer fits
/// and calibrates with (the shipped artifact is reproduced with it byte for byte). A served
/// model's probabilities come from [`served_softmax`].
pub fn softmax(m: &[f64; NUM_ACTIONS], temperature: f64) -> Probabilities {
    softmax_by(m, temperature, f64::exp)
}

/// Softmax of `m / temperature` as a served model computes it ([`Model::predict`]): `exp`
/// from the `libm` crate on every target, so that the CLI and the Worker's wasm give
/// bit-identical probabilities (std's `exp` is the platform's natively, libm's in wasm).
pub fn served_softmax(m: &[f64; NUM_ACTIONS], temperature: f64) -> Probabilities {
    softmax_by(m, temperature, libm::exp)
}

fn softmax_by(m: &[f64; NUM_ACTIONS], temperature: f64, exp: impl Fn(f64) -> f64) -> Probabilities {
    let max = m.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut p = [0.0; NUM_ACTIONS];
    let mut sum = 0.0;
    for (pi, mi) in p.iter_mut().zip(m) {
        *pi = exp((mi - max) / temperature);
        sum += *pi;
    }
    for pi in &mut p {
        *pi /= sum;
    }
    p
}

/// Index of the largest probability (first on ties) as an action, and the probability.
pub fn argmax(p: &Probabilities) -> (Action, f64) {
    let mut best = 0;
    for i in 1..NUM_ACTIONS {
        if p[i] > p[best] {
            best = i;
        }
    }
    (Action::ALL[best], p[best])
}

#[doc(hidden)]
/// Small artifacts for doctests and unit tests.
pub mod tests_support {
    use super::{Artifact, Features, NUM_ACTIONS};
    use crate::state::State;

    /// `n` seeded states covering every region, request type and hour, loads above 1
    /// included: the inputs of the criterion benches and the wasm micro-benchmark, so their
    /// numbers are for the same decisions.
    pub fn seeded_states(n: usize) -> Vec<State> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            // xorshift64*: deterministic, no dependency.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|i| State {
                request_type: (i % 6) as u8,
                region_id: (i % 10) as u8,
                current_load: next() * 1.2,
                recent_success_rate: next(),
                queue_depth: (next() * 150.0).floor(),
                hour: (i % 24) as u8,
            })
            .collect()
    }

    /// The artifact's definition of its trees, walked node by node (no re-layout), with
    /// leaf values as its compact form serves them (rounded to f32 when they all fit, see
    /// [`crate::compact`]): the reference the fast walk is tested against.
    pub fn reference_margins(a: &Artifact, x: &Features) -> [f64; NUM_ACTIONS] {
        let f32_leaves = a.leaves_fit_f32();
        let served = |v: f64| if f32_leaves { f64::from(v as f32) } else { v };
        let mut m = [0.0; NUM_ACTIONS];
        m.copy_from_slice(&a.model.base_score);
        if let Some(rows) = &a.model.linear {
            super::add_linear(&mut m, rows, x);
        }
        if let Some(h) = &a.model.hidden {
            h.add(&mut m, x);
        }
        for t in &a.model.trees {
            m.iter_mut()
                .zip(t.leaf(x))
                .for_each(|(a, b)| *a += served(*b));
        }
        m
    }

    /// A valid two-tree artifact: region 3 leans to route_b.
    pub const TINY_ARTIFACT: &str = r#"{
      "format_version": 1, "model_version": "tiny-test", "encoder_version": 1,
      "actions": ["route_a", "route_b", "route_c", "reject"], "feature_dim": 16,
      "model": {"kind": "gbdt", "base_score": [0.0, 0.0, 0.0, 0.0], "trees": [
        {"feature": [9, -1, -1], "threshold": [0.5, 0, 0], "left": [1, 0, 0], "right": [2, 0, 0],
         "value": [[0, 0, 0, 0], [0, -1.0, 0, 0], [0, 4.0, 0, 0]]},
        {"feature": [1, -1, -1], "threshold": [0.95, 0, 0], "left": [1, 0, 0], "right": [2, 0, 0],
         "value": [[0, 0, 0, 0], [0, 0, 0, -1.0], [0, 0, 0, 6.0]]}
      ]},
      "calibration": {"method": "temperature", "temperature": 1.0},
      "threshold": 0.6,
      "feature_ranges": {"request_type": [0, 5], "region_id": [0, 9], "current_load": [0, 1],
                         "recent_success_rate": [0, 1], "queue_depth": [0, 500], "hour": [0, 23]},
      "training": {}
    }"#;
}

#[cfg(test)]
mod tests {
    use super::tests_support::{reference_margins, TINY_ARTIFACT};
    use super::*;
    use crate::features::encode;
    use crate::state::State;

    fn state(region: u8, load: f64) -> State {
        State {
            request_type: 1,
            region_id: region,
            current_load: load,
            recent_success_rate: 0.9,
            queue_depth: 10.0,
            hour: 3,
        }
    }

    fn edit(f: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value = serde_json::from_str(TINY_ARTIFACT).unwrap();
        f(&mut v);
        v.to_string()
    }

    #[test]
    fn tiny_model_predicts_its_trees() {
        let m = Model::from_json(TINY_ARTIFACT).unwrap();
        let (a, c) = m.top(&encode(&state(3, 0.2)));
        assert_eq!(a, Action::RouteB);
        // margins [0, 4, 0, -1] → softmax
        let e = [1.0, 4f64.exp(), 1.0, (-1f64).exp()];
        assert!((c - e[1] / e.iter().sum::<f64>()).abs() < 1e-12);
        assert_eq!(m.top(&encode(&state(0, 0.99))).0, Action::Reject);
    }

    #[test]
    fn swapped_actions_are_refused_naming_the_action_list() {
        let text =
            edit(|v| v["actions"] = serde_json::json!(["route_b", "route_a", "route_c", "reject"]));
        let e = Model::from_json(&text).unwrap_err();
        assert!(matches!(e, ArtifactError::Actions { .. }));
        assert!(e.to_string().contains("action list"), "{e}");
    }

    #[test]
    fn other_encoder_version_is_refused() {
        let e = Model::from_json(&edit(|v| v["encoder_version"] = 2.into())).unwrap_err();
        assert_eq!(e, ArtifactError::EncoderVersion { got: 2 });
        assert!(e.to_string().contains("encoder"));
    }

    #[test]
    fn bad_shapes_are_refused() {
        type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "base_score",
                Box::new(|v| v["model"]["base_score"] = serde_json::json!([0.0, 0.0])),
            ),
            (
                "differ in length",
                Box::new(|v| {
                    v["model"]["trees"][0]["value"] = serde_json::json!([[0.0, 0.0, 0.0, 0.0]])
                }),
            ),
            (
                "beyond 16",
                Box::new(|v| v["model"]["trees"][0]["feature"][0] = 16.into()),
            ),
            (
                "children",
                Box::new(|v| v["model"]["trees"][0]["left"][0] = 0.into()),
            ),
            (
                "length 4",
                Box::new(|v| {
                    v["model"]["trees"][1]["value"][1] = serde_json::json!([1.0, 2.0, 3.0])
                }),
            ),
            (
                "one per feature",
                Box::new(|v| v["model"]["linear"] = serde_json::json!(vec![[0.0; NUM_ACTIONS]; 3])),
            ),
            ("feature_dim", Box::new(|v| v["feature_dim"] = 15.into())),
            ("threshold", Box::new(|v| v["threshold"] = 1.5.into())),
            (
                "temperature",
                Box::new(|v| v["calibration"]["temperature"] = 0.0.into()),
            ),
        ];
        for (needle, f) in cases {
            let e = Model::from_json(&edit(f)).unwrap_err();
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        }
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let text = TINY_ARTIFACT.replace("\"threshold\": 0.6", "\"threshold\": 1e999");
        assert!(matches!(
            Model::from_json(&text),
            Err(ArtifactError::NonFinite(_))
        ));
        let text = TINY_ARTIFACT.replace("[0, 0, 0, 6.0]", "[0, 0, 0, -1e400]");
        assert!(matches!(
            Model::from_json(&text),
            Err(ArtifactError::NonFinite(_))
        ));
        let mut rows = serde_json::json!(vec![[0.0; NUM_ACTIONS]; FEATURE_DIM]);
        rows[3][1] = 1e300.into();
        let e = Model::from_json(&edit(|v| v["model"]["linear"] = rows.clone())).unwrap();
        assert!(e.margins(&[0.0; FEATURE_DIM]).iter().all(|m| m.is_finite()));
        let text = edit(|v| v["model"]["linear"] = rows).replace("1e+300", "1e999");
        assert!(
            matches!(Model::from_json(&text), Err(ArtifactError::NonFinite(_))),
            "{text}"
        );
    }

    /// TINY_ARTIFACT with a linear base and a hidden layer whose weights mix every feature
    /// into every action.
    fn tiny_network() -> String {
        edit(|v| {
            let rows: Vec<[f64; NUM_ACTIONS]> = (0..FEATURE_DIM)
                .map(|f| std::array::from_fn(|k| ((f * 7 + k * 3) % 11) as f64 / 5.0 - 1.0))
                .collect();
            v["model"]["linear"] = serde_json::json!(rows);
            let weights: Vec<[f64; FEATURE_DIM]> = (0..5)
                .map(|j| std::array::from_fn(|f| ((j * 5 + f * 3) % 7) as f64 / 2.0 - 1.5))
                .collect();
            v["model"]["hidden"] = serde_json::json!({
                "weights": weights,
                "bias": [0.1, -0.2, 0.3, -0.4, 0.5],
                "output": [[1.0, -1.0, 0.5, 0.0], [0.3, 0.3, -2.0, 1.0], [0.0, 0.0, 0.0, 4.0],
                           [-1.5, 2.5, 0.0, 0.1], [0.7, -0.7, 0.7, -0.7]],
            });
        })
    }

    #[test]
    fn a_hidden_layer_is_checked() {
        let e = Model::from_json(&edit(|v| {
            v["model"]["hidden"] = serde_json::json!({"weights": [], "bias": [], "output": []});
        }))
        .unwrap_err();
        assert!(e.to_string().contains("1 to 255"), "{e}");
        let text = tiny_network().replace("-0.4", "1e999");
        assert!(matches!(
            Model::from_json(&text),
            Err(ArtifactError::NonFinite(_))
        ));
        // A network's margins stay finite whatever the input: |tanh| <= 1.
        let m = Model::from_json(&tiny_network()).unwrap();
        assert!(m.margins(&[1.0; FEATURE_DIM]).iter().all(|v| v.is_finite()));
    }

    #[test]
    fn fast_layout_matches_the_artifact_definition() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../model/decision-model.json"
        );
        let shipped = std::fs::read_to_string(path).unwrap();
        let network = tiny_network();
        for text in [TINY_ARTIFACT, shipped.as_str(), network.as_str()] {
            let m = Model::from_json(text).unwrap();
            let a = parse_json(text).unwrap();
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 11) as f64 / (1u64 << 53) as f64
            };
            for _ in 0..2000 {
                let s = State {
                    request_type: (next() * 6.0) as u8,
                    region_id: (next() * 10.0) as u8,
                    current_load: next() * 1.3,
                    recent_success_rate: next(),
                    queue_depth: next() * 150.0,
                    hour: (next() * 24.0) as u8,
                };
                let mut x = encode(&s);
                assert_eq!(m.margins(&x), reference_margins(&a, &x));
                if a.model.linear.is_some() {
                    // A network base has no NaN rule (the encoder never writes NaN).
                    continue;
                }
                // NaN goes right in both (never from a validated state, but defined).
                x[(next() * FEATURE_DIM as f64) as usize] = f64::NAN;
                assert_eq!(m.margins(&x), reference_margins(&a, &x));
            }
        }
    }

    #[test]
    fn shared_children_are_refused() {
        let e = Model::from_json(&edit(|v| {
            v["model"]["trees"][0]["right"][0] = 1.into();
        }))
        .unwrap_err();
        assert!(e.to_string().contains("more than one parent"), "{e}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = Model::from_json(&edit(|v| v["extra"] = 1.into())).unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
    }

    #[test]
    fn ranges_flag_outliers() {
        let m = Model::from_json(TINY_ARTIFACT).unwrap();
        assert_eq!(m.ranges().outlier(&state(3, 0.5)), None);
        assert_eq!(m.ranges().outlier(&state(3, 1.5)), Some("current_load"));
    }
}
