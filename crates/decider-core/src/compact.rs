//! The compact model: the form the Worker embeds and every caller serves from.
//!
//! The JSON artifact is the training output and the file people review; serving it means a
//! JSON parser and hundreds of KB of text in every isolate. [`compile`] validates an artifact and
//! writes it as a few tens of KB of little-endian binary; [`Model::from_compact`] reads that
//! back without a JSON parser and runs the same validation, so a Worker refuses what the CLI
//! refuses, with the same [`ArtifactError`]. `Model::from_json` goes through these bytes too:
//! the CLI and the Worker decide from the same numbers.
//!
//! What changes against the f64 artifact: leaf values are stored as f32 when every one of
//! them rounds to a finite f32 (else as f64). Split thresholds stay exact f64, stored once
//! each in a sorted table and referenced by index, so every split sends every input the way
//! the artifact defines. Header numbers and base scores stay f64.
//!
//! Layout (version [`LAYOUT_VERSION`]; integers unsigned little-endian; `str8`/`str16` are
//! UTF-8 bytes after a u8/u16 length):
//!
//! ```text
//! magic "EDMC", layout u16, status u8
//! status 1 (refused):  message len u32, message UTF-8            — nothing else
//! status 0 (model):
//!   format_version u32, encoder_version u32, feature_dim u32, model_version str16,
//!   actions: count u8, then str8 each,
//!   temperature f64, threshold f64, feature_ranges 6 × [min f64, max f64] (field order),
//!   base_score: count u8, then f64 each,
//!   linear: rows u8 (0: none, else feature_dim), then per row one f64 per action,
//!   hidden: units u8 (0: none), then per unit feature_dim weights, bias, one output per
//!     action (f64 each),
//!   leaf width u8 (4: f32, 8: f64),
//!   thresholds: count u32, then f64 each (sorted, distinct),
//!   trees: count u32, then per tree:
//!     n u16 (nodes),
//!     feature u8 × n (255: leaf),
//!     per split in node order: threshold index u16, left u16, right u16,
//!     per leaf in node order: one value per action (leaf width each)
//! ```
//!
//! Leaves store neither threshold nor children, and splits no values: they read back as 0,
//! as the JSON artifact writes them.

use crate::actions::NUM_ACTIONS;
use crate::features::FEATURE_DIM;
use crate::model::{
    parse_json, validate, Artifact, ArtifactError, Calibration, CalibrationMethod, Ensemble,
    FeatureRanges, Hidden, Model, Tree,
};

/// First bytes of every compact model.
pub const MAGIC: [u8; 4] = *b"EDMC";
/// Version of the layout written by [`compile_artifact`] and read by [`Model::from_compact`].
pub const LAYOUT_VERSION: u16 = 2;
/// Feature byte of a leaf.
const LEAF: u8 = 255;
/// Status byte: a model follows.
const STATUS_MODEL: u8 = 0;
/// Status byte: the artifact was refused at build time; the reason follows.
const STATUS_REFUSED: u8 = 1;

/// Validates an artifact's JSON text and compiles it.
///
/// # Errors
/// As `Model::from_json`.
pub fn compile(text: &str) -> Result<Vec<u8>, ArtifactError> {
    compile_artifact(&parse_json(text)?)
}

/// Validates an artifact and compiles it.
///
/// # Errors
/// As `Model::from_artifact`: the artifact's own refusal, or a size the layout cannot hold
/// (more than 65,535 nodes in a tree or distinct thresholds in the model).
pub fn compile_artifact(a: &Artifact) -> Result<Vec<u8>, ArtifactError> {
    validate(a)?;
    let limit = |what: &str, n: usize, max: usize| {
        if n > max {
            Err(ArtifactError::Shape(format!(
                "{what} is {n}; the compact form holds at most {max}"
            )))
        } else {
            Ok(())
        }
    };
    limit("model_version's length", a.model_version.len(), 0xFFFF)?;
    let mut thresholds: Vec<f64> = Vec::new();
    for t in &a.model.trees {
        limit("a tree's node count", t.feature.len(), 0xFFFF)?;
        let splits = t.feature.iter().zip(&t.threshold).filter(|(f, _)| **f >= 0);
        thresholds.extend(splits.map(|(_, th)| *th));
    }
    // Distinct by value: -0.0 and 0.0 compare alike and so split alike.
    thresholds.sort_by(f64::total_cmp);
    thresholds.dedup_by(|a, b| a == b);
    limit(
        "the number of distinct thresholds",
        thresholds.len(),
        0xFFFF,
    )?;
    let f32_leaves = a.leaves_fit_f32();

    let mut w = Vec::with_capacity(64 * 1024);
    w.extend_from_slice(&MAGIC);
    w.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
    w.push(STATUS_MODEL);
    w.extend_from_slice(&a.format_version.to_le_bytes());
    w.extend_from_slice(&a.encoder_version.to_le_bytes());
    // Validated: equal to FEATURE_DIM.
    w.extend_from_slice(&(a.feature_dim as u32).to_le_bytes());
    w.extend_from_slice(&(a.model_version.len() as u16).to_le_bytes());
    w.extend_from_slice(a.model_version.as_bytes());
    // Validated: the build's action names, few and short.
    w.push(a.actions.len() as u8);
    for name in &a.actions {
        w.push(name.len() as u8);
        w.extend_from_slice(name.as_bytes());
    }
    w.extend_from_slice(&a.calibration.temperature.to_le_bytes());
    w.extend_from_slice(&a.threshold.to_le_bytes());
    for (_, [lo, hi]) in a.feature_ranges.pairs() {
        w.extend_from_slice(&lo.to_le_bytes());
        w.extend_from_slice(&hi.to_le_bytes());
    }
    w.push(a.model.base_score.len() as u8);
    for v in &a.model.base_score {
        w.extend_from_slice(&v.to_le_bytes());
    }
    // Validated: none, or one row per feature.
    let rows = a.model.linear.as_deref().unwrap_or_default();
    w.push(rows.len() as u8);
    for v in rows.iter().flatten() {
        w.extend_from_slice(&v.to_le_bytes());
    }
    // Validated: 1 to MAX_HIDDEN units, each with its bias and output row.
    match &a.model.hidden {
        None => w.push(0),
        Some(h) => {
            w.push(h.weights.len() as u8);
            for ((ws, b), out) in h.weights.iter().zip(&h.bias).zip(&h.output) {
                for v in ws.iter().chain([b]).chain(out) {
                    w.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    w.push(if f32_leaves { 4 } else { 8 });
    w.extend_from_slice(&(thresholds.len() as u32).to_le_bytes());
    for v in &thresholds {
        w.extend_from_slice(&v.to_le_bytes());
    }
    w.extend_from_slice(&(a.model.trees.len() as u32).to_le_bytes());
    for t in &a.model.trees {
        w.extend_from_slice(&(t.feature.len() as u16).to_le_bytes());
        // Validated: features are -1 or below FEATURE_DIM.
        w.extend(
            t.feature
                .iter()
                .map(|&f| if f < 0 { LEAF } else { f as u8 }),
        );
        for i in (0..t.feature.len()).filter(|&i| t.feature[i] >= 0) {
            let at = thresholds.partition_point(|v| *v < t.threshold[i]);
            // Validated: children are node indices of this tree, below 65,536.
            for v in [at, t.left[i] as usize, t.right[i] as usize] {
                w.extend_from_slice(&(v as u16).to_le_bytes());
            }
        }
        for i in (0..t.feature.len()).filter(|&i| t.feature[i] < 0) {
            for &v in &t.value[i] {
                if f32_leaves {
                    w.extend_from_slice(&(v as f32).to_le_bytes());
                } else {
                    w.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    Ok(w)
}

/// What build-time embedding writes for `text`: the compiled model, or (when the artifact
/// is refused) a compact form that carries only the refusal, with the reason.
/// Loading the latter with [`Model::from_compact`] gives [`ArtifactError::Refused`] with the
/// same message, so a Worker built from a refused artifact serves from rules and says why.
pub fn compile_or_refusal(text: &str) -> (Vec<u8>, Option<ArtifactError>) {
    match compile(text) {
        Ok(bytes) => (bytes, None),
        Err(e) => (refusal(&e.to_string()), Some(e)),
    }
}

/// A compact form that carries only a refusal message.
pub fn refusal(message: &str) -> Vec<u8> {
    let mut w = Vec::with_capacity(11 + message.len());
    w.extend_from_slice(&MAGIC);
    w.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
    w.push(STATUS_REFUSED);
    w.extend_from_slice(&(message.len() as u32).to_le_bytes());
    w.extend_from_slice(message.as_bytes());
    w
}

/// The artifact a compact model stands for: what [`Model::from_compact`] validates and
/// serves. Its `training` record is null (not carried).
///
/// # Errors
/// [`ArtifactError::Compact`] for bytes that are not a compact model of this layout
/// (magic, version, truncation, a byte out of place), [`ArtifactError::Refused`] for a
/// compiled refusal. Content errors (actions, encoder, shapes, non-finite numbers) are
/// left to validation, which names them as JSON loading does.
pub fn decode(bytes: &[u8]) -> Result<Artifact, ArtifactError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(ArtifactError::Compact(
            "it does not start with the magic bytes EDMC".into(),
        ));
    }
    let layout = r.u16()?;
    if layout != LAYOUT_VERSION {
        return Err(ArtifactError::Compact(format!(
            "layout version is {layout}, this build reads {LAYOUT_VERSION}"
        )));
    }
    match r.u8()? {
        STATUS_MODEL => {}
        STATUS_REFUSED => {
            let n = r.u32()? as usize;
            let message = String::from_utf8_lossy(r.take(n)?).into_owned();
            r.end()?;
            return Err(ArtifactError::Refused(message));
        }
        s => {
            return Err(ArtifactError::Compact(format!(
                "status byte is {s}, expected {STATUS_MODEL} or {STATUS_REFUSED}"
            )))
        }
    }
    let format_version = r.u32()?;
    let encoder_version = r.u32()?;
    let feature_dim = r.u32()? as usize;
    let n = usize::from(r.u16()?);
    let model_version = r.text(n)?;
    let mut actions = Vec::new();
    for _ in 0..r.u8()? {
        let n = usize::from(r.u8()?);
        actions.push(r.text(n)?);
    }
    let temperature = r.f64()?;
    let threshold = r.f64()?;
    let mut range = || -> Result<[f64; 2], ArtifactError> { Ok([r.f64()?, r.f64()?]) };
    let feature_ranges = FeatureRanges {
        request_type: range()?,
        region_id: range()?,
        current_load: range()?,
        recent_success_rate: range()?,
        queue_depth: range()?,
        hour: range()?,
    };
    let base_score = (0..r.u8()?).map(|_| r.f64()).collect::<Result<_, _>>()?;
    let linear = match r.u8()? {
        0 => None,
        rows => Some(
            (0..rows)
                .map(|_| -> Result<[f64; NUM_ACTIONS], ArtifactError> {
                    let mut row = [0.0; NUM_ACTIONS];
                    for v in &mut row {
                        *v = r.f64()?;
                    }
                    Ok(row)
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let hidden = match usize::from(r.u8()?) {
        0 => None,
        units => {
            let mut h = Hidden {
                weights: Vec::with_capacity(units),
                bias: Vec::with_capacity(units),
                output: Vec::with_capacity(units),
            };
            for _ in 0..units {
                let mut w = [0.0; FEATURE_DIM];
                for v in &mut w {
                    *v = r.f64()?;
                }
                h.weights.push(w);
                h.bias.push(r.f64()?);
                let mut o = [0.0; NUM_ACTIONS];
                for v in &mut o {
                    *v = r.f64()?;
                }
                h.output.push(o);
            }
            Some(h)
        }
    };
    let width = r.u8()?;
    if width != 4 && width != 8 {
        return Err(ArtifactError::Compact(format!(
            "leaf width is {width} bytes, expected 4 or 8"
        )));
    }
    let n = r.u32()? as usize;
    let table = (0..n).map(|_| r.f64()).collect::<Result<Vec<_>, _>>()?;
    let n_trees = r.u32()? as usize;
    let mut trees = Vec::new();
    for ti in 0..n_trees {
        trees.push(r.tree(ti, &table, width)?);
    }
    r.end()?;
    Ok(Artifact {
        format_version,
        model_version,
        encoder_version,
        actions,
        feature_dim,
        model: Ensemble {
            kind: "gbdt".into(),
            base_score,
            linear,
            hidden,
            trees,
        },
        calibration: Calibration {
            method: CalibrationMethod::Temperature,
            temperature,
        },
        threshold,
        feature_ranges,
        training: serde_json::Value::Null,
    })
}

/// Reads the layout front to back; every read checks the length first.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ArtifactError> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(ArtifactError::Compact(format!(
                "truncated: {n} bytes needed at offset {}, {left} left",
                self.at
            )));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ArtifactError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ArtifactError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, ArtifactError> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, ArtifactError> {
        self.array().map(u32::from_le_bytes)
    }

    fn f64(&mut self) -> Result<f64, ArtifactError> {
        self.array().map(f64::from_le_bytes)
    }

    fn text(&mut self, n: usize) -> Result<String, ArtifactError> {
        let at = self.at;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| ArtifactError::Compact(format!("text at offset {at} is not UTF-8")))
    }

    fn end(&self) -> Result<(), ArtifactError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(ArtifactError::Compact(format!(
                "{n} bytes left over after the model at offset {}",
                self.at
            ))),
        }
    }

    /// One tree, with thresholds looked up in `table` and leaves `width` bytes a value.
    fn tree(&mut self, ti: usize, table: &[f64], width: u8) -> Result<Tree, ArtifactError> {
        let n = usize::from(self.u16()?);
        let feature: Vec<i32> = self
            .take(n)?
            .iter()
            .map(|&f| if f == LEAF { -1 } else { i32::from(f) })
            .collect();
        let mut t = Tree {
            threshold: vec![0.0; n],
            left: vec![0; n],
            right: vec![0; n],
            value: vec![[0.0; NUM_ACTIONS]; n],
            feature,
        };
        for i in 0..n {
            if t.feature[i] < 0 {
                continue;
            }
            let k = usize::from(self.u16()?);
            t.threshold[i] = *table.get(k).ok_or_else(|| {
                ArtifactError::Shape(format!(
                    "tree {ti}: node {i} uses threshold {k} of a table of {}",
                    table.len()
                ))
            })?;
            t.left[i] = u32::from(self.u16()?);
            t.right[i] = u32::from(self.u16()?);
        }
        for i in 0..n {
            if t.feature[i] >= 0 {
                continue;
            }
            for v in &mut t.value[i] {
                *v = if width == 4 {
                    f64::from(f32::from_le_bytes(self.array()?))
                } else {
                    self.f64()?
                };
            }
        }
        Ok(t)
    }
}

impl Model {
    /// Parses and validates an artifact, and serves it from its compact form.
    ///
    /// # Errors
    /// An [`ArtifactError`] naming what is wrong: action list, encoder version, format,
    /// shapes, a non-finite number, or an out-of-range threshold / temperature.
    ///
    /// ```
    /// use decider_core::{Model, State, features::encode};
    /// let model = Model::from_json(decider_core::model::tests_support::TINY_ARTIFACT).unwrap();
    /// let s = State { request_type: 1, region_id: 3, current_load: 0.4,
    ///                 recent_success_rate: 0.97, queue_depth: 12.0, hour: 14 };
    /// let p = model.predict(&encode(&s));
    /// assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    /// ```
    pub fn from_json(text: &str) -> Result<Model, ArtifactError> {
        Model::from_compact(&compile(text)?)
    }

    /// Validates an in-memory artifact (and serves it from its compact form).
    ///
    /// # Errors
    /// As [`Model::from_json`].
    pub fn from_artifact(artifact: Artifact) -> Result<Model, ArtifactError> {
        Model::from_compact(&compile_artifact(&artifact)?)
    }

    /// Reads and validates a compact model ([`compile`]'s output).
    ///
    /// # Errors
    /// [`ArtifactError::Compact`] for bytes of another layout or cut short,
    /// [`ArtifactError::Refused`] when the bytes carry a build-time refusal, and otherwise
    /// what `Model::from_json` would say of the artifact they stand for.
    pub fn from_compact(bytes: &[u8]) -> Result<Model, ArtifactError> {
        Model::build(&decode(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::encode;
    use crate::model::tests_support::{seeded_states, TINY_ARTIFACT};
    use crate::state::State;

    fn shipped_text() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../model/decision-model.json"
        );
        std::fs::read_to_string(path).unwrap()
    }

    fn tiny() -> (Artifact, Vec<u8>) {
        let a = parse_json(TINY_ARTIFACT).unwrap();
        let bytes = compile_artifact(&a).unwrap();
        (a, bytes)
    }

    /// `bytes` with the first occurrence of `from` replaced by `to` (same length).
    fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let at = bytes
            .windows(from.len())
            .position(|w| w == from)
            .expect("pattern present");
        let mut b = bytes.to_vec();
        b[at..at + to.len()].copy_from_slice(to);
        b
    }

    #[test]
    fn decoding_gives_back_the_artifact_with_leaves_as_served() {
        for text in [TINY_ARTIFACT, shipped_text().as_str()] {
            let a = parse_json(text).unwrap();
            assert!(a.leaves_fit_f32());
            let d = decode(&compile(text).unwrap()).unwrap();
            assert_eq!(
                (&d.model_version, d.format_version, d.encoder_version),
                (&a.model_version, a.format_version, a.encoder_version)
            );
            assert_eq!((&d.actions, d.feature_dim), (&a.actions, a.feature_dim));
            assert_eq!((d.calibration, d.threshold), (a.calibration, a.threshold));
            assert_eq!(
                (d.feature_ranges, &d.model.base_score),
                (a.feature_ranges, &a.model.base_score)
            );
            assert_eq!(d.model.trees.len(), a.model.trees.len());
            for (dt, at) in d.model.trees.iter().zip(&a.model.trees) {
                assert_eq!(dt.feature, at.feature);
                for i in 0..at.feature.len() {
                    if at.feature[i] >= 0 {
                        // Thresholds are exact: every split sends every input as before.
                        assert_eq!(dt.threshold[i].to_bits(), at.threshold[i].to_bits());
                        assert_eq!((dt.left[i], dt.right[i]), (at.left[i], at.right[i]));
                    } else {
                        let served = at.value[i].map(|v| f64::from(v as f32));
                        assert_eq!(dt.value[i], served);
                    }
                }
            }
        }
    }

    #[test]
    fn leaves_beyond_f32_are_stored_as_f64() {
        let mut a = parse_json(TINY_ARTIFACT).unwrap();
        a.model.trees[0].value[2] = [1e300, -1e300, 0.1, 0.0];
        assert!(!a.leaves_fit_f32());
        let d = decode(&compile_artifact(&a).unwrap()).unwrap();
        assert_eq!(d.model.trees[0].value[2], [1e300, -1e300, 0.1, 0.0]);
        assert_eq!(d.model.trees[1].value[2], a.model.trees[1].value[2]);
    }

    #[test]
    fn cut_or_padded_bytes_are_refused() {
        let (_, bytes) = tiny();
        for n in 0..bytes.len() {
            let e = Model::from_compact(&bytes[..n]).unwrap_err();
            assert!(
                matches!(&e, ArtifactError::Compact(m) if m.starts_with("truncated")),
                "{n}: {e}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        let e = Model::from_compact(&long).unwrap_err();
        assert!(e.to_string().contains("1 bytes left over"), "{e}");
        assert!(Model::from_compact(&bytes).is_ok());
    }

    #[test]
    fn a_network_base_round_trips_exactly() {
        let mut a = parse_json(TINY_ARTIFACT).unwrap();
        let rows: Vec<[f64; NUM_ACTIONS]> = (0..crate::FEATURE_DIM)
            .map(|f| std::array::from_fn(|k| (f as f64 + 0.1) * (k as f64 - 1.7) / 3.0))
            .collect();
        a.model.linear = Some(rows.clone());
        let hidden = Hidden {
            weights: (0..3)
                .map(|j| std::array::from_fn(|f| (j * 16 + f) as f64 / 7.0 - 3.3))
                .collect(),
            bias: vec![0.25, -1.5, 1e-9],
            output: (0..3)
                .map(|j| std::array::from_fn(|k| (j + k) as f64 * 0.6 - 1.1))
                .collect(),
        };
        a.model.hidden = Some(hidden.clone());
        let bytes = compile_artifact(&a).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.model.linear, Some(rows));
        assert_eq!(back.model.hidden, Some(hidden));
        // Cut short: refused as truncated, not misread.
        let at = bytes.len() - 100;
        let e = Model::from_compact(&bytes[..at]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        // A row count other than none or one per feature is the artifact's shape error, as
        // is a unit without its bias.
        let mut b = a.clone();
        b.model.linear = Some(vec![[0.0; NUM_ACTIONS]; 2]);
        assert!(compile_artifact(&b).is_err());
        a.model.hidden.as_mut().unwrap().bias.pop();
        let e = compile_artifact(&a).unwrap_err();
        assert!(
            e.to_string()
                .contains("model.hidden has 3 weight rows, 2 biases"),
            "{e}"
        );
    }

    #[test]
    fn other_magic_layout_status_or_leaf_width_is_refused() {
        let (_, bytes) = tiny();
        let e = Model::from_compact(&patched(&bytes, b"EDMC", b"EDMX")).unwrap_err();
        assert!(e.to_string().contains("magic bytes EDMC"), "{e}");
        let e = Model::from_compact(TINY_ARTIFACT.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        let e =
            Model::from_compact(&patched(&bytes, b"EDMC\x02\x00", b"EDMC\x01\x00")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "compact model is not valid: layout version is 1, this build reads 2"
        );
        let e = Model::from_compact(&patched(&bytes, b"EDMC\x02\x00\x00", b"EDMC\x02\x00\x07"))
            .unwrap_err();
        assert!(e.to_string().contains("status byte is 7"), "{e}");
        // The leaf width byte follows the fourth base score (all 0.0 in the tiny artifact),
        // the linear base's row count and the hidden layer's unit count (0: none).
        let width = [[0u8; 8].as_slice(), &[0, 0, 4]].concat();
        let bad = [[0u8; 8].as_slice(), &[0, 0, 5]].concat();
        let e = Model::from_compact(&patched(&bytes, &width, &bad)).unwrap_err();
        assert!(e.to_string().contains("leaf width is 5"), "{e}");
    }

    /// The refusals of JSON loading, made on the compact bytes, give the same errors.
    #[test]
    fn content_errors_match_json_loading() {
        let (a, bytes) = tiny();
        let json_error = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(TINY_ARTIFACT).unwrap();
            f(&mut v);
            Model::from_json(&v.to_string()).unwrap_err()
        };

        let swapped = patched(&bytes, b"\x07route_a\x07route_b", b"\x07route_b\x07route_a");
        let e = Model::from_compact(&swapped).unwrap_err();
        assert!(matches!(e, ArtifactError::Actions { .. }), "{e}");
        assert_eq!(
            e,
            json_error(
                &|v| v["actions"] = serde_json::json!(["route_b", "route_a", "route_c", "reject"])
            )
        );

        // format 1, encoder 1 → encoder 2.
        let enc = patched(&bytes, &[1, 0, 0, 0, 1, 0, 0, 0], &[1, 0, 0, 0, 2, 0, 0, 0]);
        let e = Model::from_compact(&enc).unwrap_err();
        assert_eq!(e, ArtifactError::EncoderVersion { got: 2 });
        assert_eq!(e, json_error(&|v| v["encoder_version"] = 2.into()));

        // Tree 0: 3 nodes, features [9, leaf, leaf], then node 0's threshold index (0.5 is
        // the first of the table [0.5, 0.95]), left child 1 and right child 2.
        let tree0 = [3, 0, 9, 255, 255];
        let root = |t: u8, l: u8, r: u8| [&tree0[..], &[t, 0, l, 0, r, 0]].concat();
        let back = patched(&bytes, &root(0, 1, 2), &root(0, 0, 2));
        let e = Model::from_compact(&back).unwrap_err();
        assert!(e.to_string().contains("children 0,2"), "{e}");
        assert_eq!(
            e,
            json_error(&|v| v["model"]["trees"][0]["left"][0] = 0.into())
        );
        let far = patched(&bytes, &root(0, 1, 2), &root(0, 1, 9));
        let e = Model::from_compact(&far).unwrap_err();
        assert!(e.to_string().contains("children 1,9 outside 1..3"), "{e}");
        let shared = patched(&bytes, &root(0, 1, 2), &root(0, 1, 1));
        assert!(Model::from_compact(&shared).is_err());
        let table = patched(&bytes, &root(0, 1, 2), &root(7, 1, 2));
        let e = Model::from_compact(&table).unwrap_err();
        assert!(
            e.to_string().contains("uses threshold 7 of a table of 2"),
            "{e}"
        );
        let feature = patched(&bytes, &tree0, &[3, 0, 16, 255, 255]);
        let e = Model::from_compact(&feature).unwrap_err();
        assert_eq!(
            e,
            json_error(&|v| v["model"]["trees"][0]["feature"][0] = 16.into())
        );

        // Tree 0's right leaf adds 4.0 to route_b: make it NaN.
        let leaf = [0f32, 4.0, 0.0, 0.0].map(f32::to_le_bytes).concat();
        let nan = [0f32, f32::NAN, 0.0, 0.0].map(f32::to_le_bytes).concat();
        let e = Model::from_compact(&patched(&bytes, &leaf, &nan)).unwrap_err();
        assert_eq!(e, ArtifactError::NonFinite("tree 0 node 2".into()));
        let mut with_nan = a.clone();
        with_nan.model.trees[0].value[2][1] = f64::NAN;
        assert_eq!(Model::from_artifact(with_nan).unwrap_err(), e);

        // Threshold 0.6 → 1.5 (the header's f64, right after the temperature 1.0).
        let th = [1f64.to_le_bytes(), 0.6f64.to_le_bytes()].concat();
        let high = [1f64.to_le_bytes(), 1.5f64.to_le_bytes()].concat();
        let e = Model::from_compact(&patched(&bytes, &th, &high)).unwrap_err();
        assert_eq!(e, json_error(&|v| v["threshold"] = 1.5.into()));
    }

    #[test]
    fn a_compiled_refusal_reads_back_as_that_refusal() {
        let mut v: serde_json::Value = serde_json::from_str(TINY_ARTIFACT).unwrap();
        v["encoder_version"] = 9.into();
        let (bytes, refused) = compile_or_refusal(&v.to_string());
        let why = refused.unwrap();
        let e = Model::from_compact(&bytes).unwrap_err();
        assert_eq!(e, ArtifactError::Refused(why.to_string()));
        assert_eq!(e.to_string(), why.to_string());
        assert!(e.to_string().contains("encoder_version is 9"), "{e}");
        let e = Model::from_compact(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let (bytes, refused) = compile_or_refusal(TINY_ARTIFACT);
        assert!(refused.is_none() && Model::from_compact(&bytes).is_ok());
    }

    #[test]
    fn too_many_nodes_for_the_layout_are_refused_at_compile_time() {
        let mut a = parse_json(TINY_ARTIFACT).unwrap();
        let t = &mut a.model.trees[0];
        // A chain of 65,536 nodes: node i splits into leaf i+1 and node i+2.
        let n = 65_537;
        t.feature = (0..n)
            .map(|i| if i % 2 == 0 && i + 2 < n { 1 } else { -1 })
            .collect();
        t.threshold = vec![0.5; n];
        t.left = (0..n as u32)
            .map(|i| {
                if i % 2 == 0 && i + 2 < n as u32 {
                    i + 1
                } else {
                    0
                }
            })
            .collect();
        t.right = (0..n as u32)
            .map(|i| {
                if i % 2 == 0 && i + 2 < n as u32 {
                    i + 2
                } else {
                    0
                }
            })
            .collect();
        t.value = vec![[0.0; NUM_ACTIONS]; n];
        validate(&a).unwrap();
        let e = compile_artifact(&a).unwrap_err();
        assert!(e.to_string().contains("node count is 65537"), "{e}");
    }

    /// Served from f32 leaf values, the shipped model decides as the f64 artifact does:
    /// same argmax on the golden and skew states and 100,000 seeded ones, probabilities
    /// within a bound far below any threshold's resolution.
    #[test]
    fn shipped_model_decides_as_the_f64_artifact() {
        let text = shipped_text();
        let exact = Model::build(&parse_json(&text).unwrap()).unwrap();
        let served = Model::from_json(&text).unwrap();
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");
        let golden: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{fixtures}golden_features.json")).unwrap(),
        )
        .unwrap();
        let golden: Vec<State> = golden["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| State::parse_json(&c["state"].to_string(), 0).unwrap())
            .collect();
        let skew: Vec<State> = std::fs::read_to_string(format!("{fixtures}skew_states.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| State::parse_json(l, 0).unwrap())
            .collect();
        assert!(golden.len() >= 10 && skew.len() >= 100);
        for (name, states) in [
            ("golden", golden),
            ("skew", skew),
            ("seeded", seeded_states(100_000)),
        ] {
            let mut worst: f64 = 0.0;
            for s in &states {
                let x = encode(s);
                let (p, q) = (exact.predict(&x), served.predict(&x));
                assert_eq!(exact.top(&x).0, served.top(&x).0, "{name}: {s:?}");
                for k in 0..NUM_ACTIONS {
                    worst = worst.max((p[k] - q[k]).abs());
                }
            }
            println!(
                "{name}: {} states, same argmax, max |Δp| {worst:.3e}",
                states.len()
            );
            assert!(worst < 1e-6, "{name}: max |Δp| {worst:e}");
        }
    }
}
